#include "ir/diff.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <vector>

namespace loom {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string text_of(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// Applies a unified diff to `before`, checking every context and removed line against
// it and every hunk header against the hunk body.
std::string patch(const std::string& before, const std::string& diff) {
  std::vector<std::string> a = lines_of(before), out;
  std::vector<std::string> d = lines_of(diff);
  size_t ai = 0;
  for (size_t i = 0; i < d.size();) {
    int as = 0, ac = 0, bs = 0, bc = 0;
    EXPECT_EQ(std::sscanf(d[i].c_str(), "@@ -%d,%d +%d,%d @@", &as, &ac, &bs, &bc), 4) << d[i];
    size_t start = ac ? size_t(as - 1) : size_t(as);
    EXPECT_GE(start, ai);
    while (ai < start) out.push_back(a[ai++]);
    EXPECT_EQ(bc ? size_t(bs - 1) : size_t(bs), out.size()) << d[i];
    int seen_a = 0, seen_b = 0;
    for (++i; i < d.size() && d[i].rfind("@@", 0) != 0; ++i) {
      char k = d[i][0];
      std::string body = d[i].substr(1);
      if (k == ' ' || k == '-') {
        EXPECT_LT(ai, a.size());
        EXPECT_EQ(a[ai], body);
        ++ai, ++seen_a;
      }
      if (k == ' ' || k == '+') out.push_back(body), ++seen_b;
    }
    EXPECT_EQ(seen_a, ac);
    EXPECT_EQ(seen_b, bc);
  }
  while (ai < a.size()) out.push_back(a[ai++]);
  return text_of(out);
}

TEST(Diff, EqualTextsGiveNothing) {
  EXPECT_EQ(unified_diff("", ""), "");
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n"), "");
}

TEST(Diff, OneChangedLineWithContext) {
  std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  std::string after = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(unified_diff(before, after),
            "@@ -2,7 +2,7 @@\n"
            " 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  EXPECT_EQ(unified_diff(before, after, 1), "@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n");
}

TEST(Diff, InsertionAtStartAndDeletionAtEnd) {
  EXPECT_EQ(unified_diff("a\nb\n", "x\na\nb\n"), "@@ -1,2 +1,3 @@\n+x\n a\n b\n");
  EXPECT_EQ(unified_diff("a\nb\nc\n", "a\nb\n", 0), "@@ -3,1 +2,0 @@\n-c\n");
  EXPECT_EQ(unified_diff("", "a\n"), "@@ -0,0 +1,1 @@\n+a\n");
}

TEST(Diff, DistantChangesMakeTwoHunksCloseOnesMerge) {
  std::vector<std::string> a;
  for (int i = 1; i <= 20; ++i) a.push_back(std::to_string(i));
  std::vector<std::string> far = a, near = a;
  far[1] = "two";
  far[17] = "eighteen";
  near[1] = "two";
  near[7] = "eight";  // 5 unchanged lines between: within 2 * 3, one hunk
  std::string d_far = unified_diff(text_of(a), text_of(far));
  std::string d_near = unified_diff(text_of(a), text_of(near));
  EXPECT_EQ(d_far,
            "@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"
            "@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+eighteen\n 19\n 20\n");
  EXPECT_EQ(d_near,
            "@@ -1,11 +1,11 @@\n 1\n-2\n+two\n 3\n 4\n 5\n 6\n 7\n-8\n+eight\n 9\n 10\n 11\n");
}

TEST(Diff, IsMinimalOnAMovedLoop) {
  // A pass that wraps a statement in a loop shows as the added lines only.
  std::string before = "op\n  x = load A[i]\n  A2[i] = x\n";
  std::string after = "op\n  for i in 0..4\n    x = load A[i]\n  A2[i] = x\n";
  EXPECT_EQ(unified_diff(before, after, 0),
            "@@ -2,1 +2,2 @@\n-  x = load A[i]\n+  for i in 0..4\n+    x = load A[i]\n");
}

TEST(Diff, RandomEditsRoundTrip) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> a;
    int n = int(rng() % 40);
    for (int i = 0; i < n; ++i) a.push_back("l" + std::to_string(rng() % 6));
    std::vector<std::string> b = a;
    int edits = int(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      size_t pos = b.empty() ? 0 : rng() % (b.size() + 1);
      switch (rng() % 3) {
        case 0: b.insert(b.begin() + long(pos), "n" + std::to_string(rng() % 4)); break;
        case 1: if (pos < b.size()) b.erase(b.begin() + long(pos)); break;
        default: if (pos < b.size()) b[pos] = "c" + std::to_string(rng() % 4); break;
      }
    }
    std::string before = text_of(a), after = text_of(b);
    int ctx = int(rng() % 4);
    std::string d = unified_diff(before, after, ctx);
    EXPECT_EQ(d.empty(), before == after);
    EXPECT_EQ(patch(before, d), after) << "trial " << trial << "\n" << d;
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace loom
