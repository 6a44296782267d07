// Warnings once per process (driver/warn_once.h): the primitive, from many threads, and
// the refused-record warning of compile_graph, which a long-running process (loom_py, the
// tuner) would otherwise print at every compile of the shape.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "driver/compile.h"
#include "driver/warn_once.h"
#include "ir/error.h"

namespace loom {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(WarnOnce, EachDistinctMessagePrintsOnce) {
  testing::internal::CaptureStderr();
  EXPECT_TRUE(warn_once("test: first"));
  EXPECT_FALSE(warn_once("test: first"));
  EXPECT_TRUE(warn_once("test: second"));
  EXPECT_FALSE(warn_once("test: second"));
  EXPECT_FALSE(warn_once("test: first"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "loom: warning: test: first\nloom: warning: test: second\n");
}

TEST(WarnOnce, ManyThreadsPrintOneLine) {
  // 8 threads race on 4 messages, 200 calls each: every message is printed by exactly one
  // call, whole (the line is written under the lock).
  std::atomic<int> printed{0};
  testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&printed] {
      for (int i = 0; i < 200; ++i)
        printed += warn_once("test: raced message " + std::to_string(i % 4));
    });
  for (auto& t : threads) t.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed.load(), 4);
  for (int m = 0; m < 4; ++m)
    EXPECT_EQ(count(err, "loom: warning: test: raced message " + std::to_string(m) + "\n"), 1u) << err;
  EXPECT_EQ(count(err, "\n"), 4u) << err;
}

// A tuning record the tiling pass refuses (FM=3 does not divide BM=64 over the thread
// grid), as a stale shipped record would be: the compile goes on from the defaults each
// time, and the warning is printed at the first compile only. Another refused record is
// another warning.
TEST(WarnOnce, ARefusedRecordWarnsOncePerProcess) {
  CompileOptions opt;
  opt.tuned = Knobs::parse("BM=64,BN=64,FM=3,FN=4");
  opt.tuned_source = "tuned: /warn-once-test/tuning.db";
  const std::string expr = "matmul(A[512,512]:f32, B[512,512]:f32)";
  ASSERT_THROW(compile_expression(expr, [&] {
                 CompileOptions e;
                 e.knobs = *opt.tuned;
                 return e;
               }()),
               Error) << "the record must be one the pipeline refuses";

  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    CompiledProgram c = compile_expression(expr, opt);
    EXPECT_NE(c.knob_source.find("was refused"), std::string::npos) << "every compile says so";
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "loom: warning: ignoring the tuning record in /warn-once-test/tuning.db"), 1u)
      << err;
  EXPECT_NE(err.find("BM=64,BN=64,FM=3,FN=4"), std::string::npos) << err;

  opt.tuned = Knobs::parse("BM=64,BN=64,FM=5,FN=4");
  testing::internal::CaptureStderr();
  compile_expression(expr, opt);
  compile_expression(expr, opt);
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "loom: warning: ignoring the tuning record"), 1u) << err;
  EXPECT_NE(err.find("FM=5"), std::string::npos) << err;
}

}  // namespace
}  // namespace loom
