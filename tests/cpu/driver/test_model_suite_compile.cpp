// The model-shape GEMM suite (bench/suites/models.txt: the shapes the Hopper GEMM bar is
// measured on) compiles with its sm_90a defaults through NVRTC without spills, each shape
// on a wgmma kernel except the few whose wgmma schedule is still slower than mma.sync
// (listed below with what they measured; bench/NOTES.md, 2026-11-27, the model-shape
// suite). A shape that leaves wgmma, or a default that starts to spill, fails here before
// the GPU measures it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "nvrtc_check.h"

namespace loom {
namespace {

std::vector<std::string> suite_expressions() {
  std::vector<std::string> out;
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/bench/suites/models.txt");
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// Every suite shape runs wgmma on sm_90a. The last one on mma.sync, 1000 x 333 x 777 f16
// (odd rows, 0.5 GFLOP), left it on 2026-11-28 for the threads' 64 x 64 wgmma form with
// BK = 64 and a 3-deep ring (bench/NOTES.md, GEMM defaults on the H200).

class ModelSuite : public testing::TestWithParam<std::string> {};

TEST_P(ModelSuite, DefaultCompilesOnWgmmaWithoutSpills) {
  const std::string& e = GetParam();
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  const CompiledProgram p = compile_expression(e, opt);
  const std::string atom = p.state.used_knobs.count("ATOM") ? p.state.used_knobs.at("ATOM") : "";
  EXPECT_EQ(atom.rfind("wgmma_", 0), 0u) << atom;
  const CompileResult r = nvrtc_check::compile_source(p.cuda, "sm_90a");
  ASSERT_FALSE(r.resources.empty()) << r.log;
  nvrtc_check::expect_no_spills(p, r);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelSuite, testing::ValuesIn(suite_expressions()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return "shape" + std::to_string(info.index);
                         });

// The sm_90a defaults (132 SMs): the medium class's persistent form fills 227 KB with as
// deep a ring as fits beside its 32 KB of strip buffers (6 slabs of 128 x 128) and pairs
// CTAs along M from K = 8192; the one-row form keeps its own depth; the LM head takes
// wgmma; the ragged bmm clusters (bench/NOTES.md, 2026-11-28).
TEST(ModelSuiteDefaults, MediumRingClustersAndTheLmHeadOnWgmma) {
  auto used = [](const std::string& e) {
    CompileOptions opt;
    opt.target = Target::for_arch("sm_90a");
    return compile_expression(e, opt).state.used_knobs;
  };
  auto k = used("linear(X[512,4096]:bf16, W[4096,4096]:bf16)");
  EXPECT_EQ(k.at("BN"), "128");
  EXPECT_EQ(k.at("STAGES"), "6");
  EXPECT_EQ(k.at("EPILOGUE"), "tma_store");
  EXPECT_EQ(k.at("CLUSTER_M"), "1") << "K = 4096: no cluster";
  k = used("linear(X[1024,8192]:bf16, W[2048,8192]:bf16)");
  EXPECT_EQ(k.at("BN"), "128");
  EXPECT_EQ(k.at("STAGES"), "6");
  EXPECT_EQ(k.at("CLUSTER_M"), "2") << "K >= 8192: 2-CTA clusters along M";
  // The large schedule's 224-wide tiles (4 rounds against 7 of 128 and 4 of 256).
  k = used("linear(X[512,4096]:bf16, W[28672,4096]:bf16)");
  EXPECT_EQ(k.at("BN"), "224");
  EXPECT_EQ(k.at("STAGES"), "4");
  EXPECT_EQ(k.at("CLUSTER_M"), "2");
  // Two rounds of 256 keep it (512 x 14336 x 4096: 224 unmeasured there).
  EXPECT_EQ(used("silu(linear(X[512,4096]:bf16, W[14336,4096]:bf16))").at("BN"), "256");
  // A batch through the TMA store clusters for a short K only (the ragged bmm), not the
  // experts' long K or Q.K^T's head dim.
  EXPECT_EQ(used("bmm(A[8,1000,776]:bf16, B[8,776,1000]:bf16)").at("CLUSTER_M"), "2");
  EXPECT_EQ(used("bmm(X[8,512,14336]:bf16, W[8,14336,4096]:bf16)").at("CLUSTER_M"), "1");
  EXPECT_EQ(used("bmm(Q[32,4096,128]:f16, K[32,128,4096]:f16)").at("CLUSTER_M"), "1");
  // Q.K^T's store-bound 128 x 128 tiles stream their stores through a ring of four tiles'
  // strips (k:053) beside a 2-slab mainloop ring; the ragged bmm's longer K keeps one tile's.
  for (const char* qk : {"bmm(Q[32,4096,128]:f16, K[32,128,4096]:f16)",
                         "bmm(Q[256,1024,64]:bf16, K[256,64,1024]:bf16)",
                         "bmm(Q[512,512,64]:f16, K[512,64,512]:f16)"}) {
    EXPECT_EQ(used(qk).at("EPI_BUFFERS"), "8") << qk;
    EXPECT_EQ(used(qk).at("STAGES"), "2") << qk;
  }
  EXPECT_EQ(used("bmm(A[8,1000,776]:bf16, B[8,776,1000]:bf16)").at("EPI_BUFFERS"), "2");
  k = used("linear(X[128,4096]:bf16, W[4096,4096]:bf16)");
  EXPECT_EQ(k.at("STAGES"), "8");
  EXPECT_EQ(k.at("PERSISTENT"), "0");
  k = used("linear(X[2048,768]:bf16, W[50257,768]:bf16)");
  EXPECT_EQ(k.at("ATOM"), "wgmma_bf16");
  EXPECT_EQ(k.at("BN"), "256");
  // Its 100514-byte rows take no tensor map: k:053's strips, copied out by the consumers
  // (H200 2026-11-30: 344 µs against the direct epilogue's 620).
  EXPECT_EQ(k.at("EPILOGUE"), "smem");
  EXPECT_EQ(k.at("EPI_BUFFERS"), "2");
  EXPECT_EQ(k.at("CLUSTER_M"), "2");
  // A grid too small for the large schedule keeps mma.sync.
  EXPECT_EQ(used("linear(X[128,768]:bf16, W[1001,768]:bf16)").at("ATOM").rfind("mma_", 0), 0u);
}

TEST(ModelSuiteFile, HoldsAtLeastSixtyShapes) { EXPECT_GE(suite_expressions().size(), 60u); }

}  // namespace
}  // namespace loom
