// The command line's integer parser and once-only options (driver/cli_args.h): bounds
// inclusive, nothing wrapped, clamped or half-read, errors naming option, value, range.
#include "driver/cli_args.h"

#include <gtest/gtest.h>

#include <limits>

#include "ir/error.h"

namespace loom {
namespace {

std::string error_of(const std::string& text, int64_t min, int64_t max) {
  try {
    parse_int_option("--n", text, min, max);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CliArgs, IntegersAreReadWholeWithinTheirRange) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(parse_int_option("--n", "1", 1, 10), 1);
  EXPECT_EQ(parse_int_option("--n", "10", 1, 10), 10);
  EXPECT_EQ(parse_int_option("--n", "-3", -5, 0), -3);
  EXPECT_EQ(parse_int_option("--n", "9223372036854775807", 0, kMax), kMax);
  EXPECT_EQ(error_of("11", 1, 10), "--n 11 is out of range: --n takes an integer in [1, 10]");
  EXPECT_EQ(error_of("0", 1, 10), "--n 0 is out of range: --n takes an integer in [1, 10]");
  // Beyond int64: an error, not INT64_MAX.
  EXPECT_EQ(error_of("9223372036854775808", 0, kMax),
            "--n 9223372036854775808 is out of range: --n takes an integer in [0, " +
                std::to_string(kMax) + "]");
  // 2^32 is not 0 and 2^31 not negative: the value is checked before any narrowing.
  EXPECT_NE(error_of("4294967296", 0, 1023).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("2147483648", 1, 1000000).find("out of range"), std::string::npos);
  for (const char* bad : {"", " 5", "5 ", "+5", "5x", "0x10", "1e3", "--5", "-"})
    EXPECT_EQ(error_of(bad, 0, 100), "--n needs an integer in [0, 100] (got '" + std::string(bad) + "')")
        << bad;
}

TEST(CliArgs, AnOptionGivenTwiceIsNamedWithBothValues) {
  OnceOptions once;
  once.see("-c", "-c", "matmul(A)");
  once.see("--dims", "--dims", "M=4");
  try {
    once.see("-c", "--expr", "matmul(B)");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "option --expr is given twice ('matmul(A)' and 'matmul(B)'): give it once");
  }
}

}  // namespace
}  // namespace loom
