// The pool compiles candidates in parallel with the same results as one at a time, goes
// through the cubin cache, and isolates a candidate that fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "h100.h"
#include "tune/compile_pool.h"
#include "tune/prune.h"
#include "tune/space.h"

namespace loom::tune {
namespace {

using testing::gemm;
using testing::h100;

std::vector<Candidate> eight_candidates(const Graph& g) {
  SpaceOptions opt;
  opt.max_candidates = 8;
  Space s = generate_space(g, h100(), Target::for_arch("sm_90a"), opt);
  std::vector<Candidate> c(s.kept.begin(), s.kept.begin() + std::min<size_t>(8, s.kept.size()));
  EXPECT_EQ(c.size(), 8u);
  return c;
}

TEST(CompilePool, ParallelEqualsSerialAndTheCacheAnswersTheSecondTime) {
  Graph g = gemm(4096, 4096, 4096, "bf16");
  Target t = target_for(Target::for_arch("sm_90a"), h100());
  std::vector<Candidate> cands = eight_candidates(g);
  std::vector<CompiledCandidate> serial = compile_candidates(g, t, cands, 1, nullptr);
  std::vector<CompiledCandidate> parallel = compile_candidates(g, t, cands, 4, nullptr);
  ASSERT_EQ(serial.size(), cands.size());
  ASSERT_EQ(parallel.size(), cands.size());
  for (size_t i = 0; i < cands.size(); ++i) {
    SCOPED_TRACE(cands[i].knobs.str());
    ASSERT_TRUE(serial[i].ok()) << serial[i].error;
    ASSERT_TRUE(parallel[i].ok()) << parallel[i].error;
    EXPECT_EQ(serial[i].knobs.str(), cands[i].knobs.str());
    EXPECT_EQ(serial[i].cuda, parallel[i].cuda);
    EXPECT_EQ(serial[i].nvrtc.cubin, parallel[i].nvrtc.cubin);
    ASSERT_EQ(serial[i].kernels.size(), parallel[i].kernels.size());
    for (size_t k = 0; k < serial[i].kernels.size(); ++k) {
      EXPECT_GT(serial[i].kernels[k].report.registers, 0);
      EXPECT_EQ(serial[i].kernels[k].report, parallel[i].kernels[k].report);
      EXPECT_EQ(serial[i].kernels[k].block_threads, parallel[i].kernels[k].block_threads);
    }
    EXPECT_EQ(resource_violation(serial[i], h100()), resource_violation(parallel[i], h100()));
  }

  auto dir =
      std::filesystem::temp_directory_path() / ("loom_pool_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CubinCache cache(dir.string());
  std::vector<Candidate> four(cands.begin(), cands.begin() + 4);
  auto first = compile_candidates(g, t, four, 4, &cache);
  auto second = compile_candidates(g, t, four, 4, &cache);
  for (size_t i = 0; i < four.size(); ++i) {
    EXPECT_FALSE(first[i].nvrtc.from_cache);
    EXPECT_TRUE(second[i].nvrtc.from_cache);
    EXPECT_EQ(first[i].nvrtc.cubin, serial[i].nvrtc.cubin);
    EXPECT_EQ(second[i].nvrtc.cubin, serial[i].nvrtc.cubin);
    EXPECT_EQ(second[i].kernels[0].report, serial[i].kernels[0].report);
  }
  std::filesystem::remove_all(dir);
}

TEST(CompilePool, AFailingCandidateDoesNotStopTheOthers) {
  Graph g = gemm(256, 256, 256, "f32");
  Target t = target_for(Target::for_arch("sm_90a"), h100());
  std::vector<Candidate> cands(3);
  cands[0].knobs = Knobs::parse("BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=sync,STAGES=2");
  cands[1].knobs = Knobs::parse(
      "BM=64,BN=64,FM=4,FN=4,BK=16,STAGE=direct,SPLITK=2,SPLITK_MODE=atomic,EPILOGUE=smem");
  cands[2].knobs = Knobs::parse("BM=32,BN=32,FM=2,FN=2,BK=8,STAGE=sync,STAGES=1");
  auto out = compile_candidates(g, t, cands, 3, nullptr);
  EXPECT_TRUE(out[0].ok()) << out[0].error;
  EXPECT_FALSE(out[1].ok());
  EXPECT_NE(out[1].error.find("EPILOGUE=smem"), std::string::npos) << out[1].error;
  EXPECT_TRUE(out[2].ok()) << out[2].error;
}

TEST(CompilePool, ParallelForVisitsEveryIndexOnce) {
  std::vector<int> hits(1000, 0);
  parallel_for(hits.size(), 7, [&](size_t i) { hits[i]++; });
  for (int h : hits) ASSERT_EQ(h, 1);
  parallel_for(0, 4, [&](size_t) { ADD_FAILURE(); });
}

}  // namespace
}  // namespace loom::tune
