// `loom tune` takes PyTorch code as it takes expressions: --code is -c's alias and, like
// -c, names one program of several (not an option given twice).
#include <gtest/gtest.h>

#include "tune/tune_cli.h"

namespace loom::tune {
namespace {

TEST(TuneCode, CodeIsRepeatableLikeC) {
  const std::string t = "torch.randn(64,64,dtype=torch.half)";
  TuneCommand c = parse_tune_args({"--code", "a=" + t + ";a@a", "-c", "matmul(A[64,64]:f16, B[64,64]:f16)",
                                   "--code", "torch.matmul(" + t + "," + t + ")"});
  ASSERT_EQ(c.expressions.size(), 3u);
  EXPECT_EQ(c.expressions[0], "a=" + t + ";a@a");
  EXPECT_EQ(c.expressions[2], "torch.matmul(" + t + "," + t + ")");
}

}  // namespace
}  // namespace loom::tune
