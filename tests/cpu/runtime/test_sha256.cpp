#include "runtime/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace loom {
namespace {

// FIPS 180-4 / NIST CSHA test vectors.
TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAcrossBlockBoundaries) {
  std::string s;
  for (int i = 0; i < 300; ++i) s.push_back(char(i * 7 + 1));
  for (size_t split : {0, 1, 55, 56, 63, 64, 65, 128, 299}) {
    Sha256 h;
    h.update(s.substr(0, split));
    h.update(s.substr(split));
    EXPECT_EQ(h.hex_digest(), sha256_hex(s)) << "split at " << split;
  }
}

TEST(Sha256, FieldsAreLengthDelimited) {
  Sha256 a, b;
  a.update_field("ab");
  a.update_field("c");
  b.update_field("a");
  b.update_field("bc");
  EXPECT_NE(a.hex_digest(), b.hex_digest());
}

}  // namespace
}  // namespace loom
