// The `loom` command end to end (no GPU): compile at every IR level, the -vv diff
// markers, -o, and the error paths with their exit codes and messages.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <stdlib.h>

#include "loom/loom.h"

namespace {

struct Result {
  int rc;
  std::string out;  // stdout and stderr together
};

Result loom_cmd(const std::string& args) {
  std::string cmd = std::string(LOOM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Cli, CompilesAtEveryLevel) {
  const std::string e = "-c 'relu(matmul(A[64,32]:f32, B[32,48]:f32))'";
  auto loop = loom_cmd("compile " + e + " --ir loop");
  EXPECT_EQ(loop.rc, 0) << loop.out;
  EXPECT_TRUE(has(loop.out, "matmul_relu = LoopOp(A, B) -> out")) << loop.out;
  auto tile = loom_cmd("compile " + e + " --ir tile");
  EXPECT_TRUE(has(tile.out, "grid  # m")) << tile.out;
  auto kernel = loom_cmd("compile " + e + " --ir kernel");
  EXPECT_TRUE(has(kernel.out, "let m_t = threadIdx.x / ")) << kernel.out;
  auto cuda = loom_cmd("compile " + e + " --target sm_80");
  EXPECT_TRUE(has(cuda.out, "extern \"C\" __global__")) << cuda.out;
}

TEST(Cli, VeryVerbosePrintsEveryChangingPassAsADiff) {
  auto r = loom_cmd("compile -c 'matmul(A[64,32]:f32, B[32,48]:f32)' --ir tile -vv");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, ">>> t:010_partition_loops\n@@")) << r.out;
  EXPECT_TRUE(has(r.out, "+matmul = TileOp(A, B) -> out")) << r.out;
  EXPECT_TRUE(has(r.out, "<<< t:010_partition_loops")) << r.out;
  EXPECT_TRUE(has(r.out, ">>> k:020_select_atoms")) << r.out;
  // 64 rows fill a 64-row tile: the m guard is proven and removed, the n guard stays.
  EXPECT_TRUE(has(r.out, ">>> t:020_simplify_guards")) << r.out;
  EXPECT_TRUE(has(r.out, "+              if n_b * 64 + n_t * 4 + n_v < 48:")) << r.out;
  // A pass that changes nothing prints no diff: symbolic sizes prove no guard.
  auto sym = loom_cmd("compile -c 'matmul(A[M,K]:f32, B[K,N]:f32)' --ir tile -vv");
  EXPECT_FALSE(has(sym.out, ">>> t:020_simplify_guards")) << sym.out;
  EXPECT_TRUE(has(sym.out, "t:020_simplify_guards  unchanged")) << sym.out;
}

TEST(Cli, VerboseReportsResources) {
  auto r = loom_cmd("compile -c 'matmul(A[64,32]:f32, B[32,48]:f32)' -v");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "resource report for sm_90a")) << r.out;
  EXPECT_TRUE(has(r.out, "spill st")) << r.out;
}

TEST(Cli, WritesOutputFile) {
  std::string path = testing::TempDir() + "/loom_cli_kernel.cu";
  auto r = loom_cmd("compile -c 'matmul(A[8,8]:f16, B[8,8]:f16)' -o " + path);
  EXPECT_EQ(r.rc, 0) << r.out;
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_TRUE(has(ss.str(), "loom::st_f16")) << ss.str();
}

TEST(Cli, ErrorsExitNonZeroWithAClearMessage) {
  auto parse = loom_cmd("compile -c 'matmul(A[4,4]:f32, B[4,4]:f99)'");
  EXPECT_EQ(parse.rc, 1);
  EXPECT_TRUE(has(parse.out, "column")) << parse.out;
  EXPECT_TRUE(has(parse.out, "^")) << parse.out;
  auto knob = loom_cmd("compile -c 'matmul(A[4,4]:f32, B[4,4]:f32)' --knobs BM=3,FM=2");
  EXPECT_EQ(knob.rc, 1);
  EXPECT_TRUE(has(knob.out, "BM=3 is not a multiple of FM=2")) << knob.out;
  auto env = loom_cmd("compile -c 'matmul(A[4,4]:f32, B[4,4]:f32)' --knobs BM=4 2>&1; "
                      "LOOM_KNOBS=NOPE=1 " + std::string(LOOM_BINARY) +
                      " compile -c 'matmul(A[4,4]:f32, B[4,4]:f32)'");
  EXPECT_TRUE(has(env.out, "in LOOM_KNOBS: unknown knob 'NOPE'")) << env.out;
  auto level = loom_cmd("compile -c 'matmul(A[4,4]:f32, B[4,4]:f32)' --ir ptx");
  EXPECT_EQ(level.rc, 1);
  EXPECT_TRUE(has(level.out, "--ir must be loop, tile, kernel or cuda")) << level.out;
  auto target = loom_cmd("compile -c 'matmul(A[4,4]:f32, B[4,4]:f32)' --target sm_75");
  EXPECT_EQ(target.rc, 1);
  EXPECT_TRUE(has(target.out, "unsupported target 'sm_75'")) << target.out;
  auto cmd = loom_cmd("frobnicate");
  EXPECT_EQ(cmd.rc, 1);
  EXPECT_TRUE(has(cmd.out, "unknown command 'frobnicate'")) << cmd.out;
  auto dims = loom_cmd("compile -c 'matmul(A[M,K]:f32, B[K,N]:f32)' --dims M=4,N=x");
  EXPECT_EQ(dims.rc, 1);
  EXPECT_TRUE(has(dims.out, "malformed --dims entry 'N=x'")) << dims.out;
}

// `loom compile` compiles what it prints with NVRTC with or without -v, so CUDA that NVRTC
// rejects is an error (exit 1) rather than a result: the cubin lands in the cache.
TEST(Cli, CompileRunsNvrtcWithoutVerbose) {
  std::string dir = testing::TempDir() + "/loom_cli_cache_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  // loom_cmd starts with the binary: `passes` is a no-op before the command under test.
  auto r = loom_cmd("passes > /dev/null && LOOM_CACHE_DIR=" + dir + " " + std::string(LOOM_BINARY) +
                    " compile -c 'matmul(A[24,40]:f32, B[40,56]:f32)' --target sm_80 --no-db");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(std::filesystem::is_empty(dir)) << "no cubin cached: NVRTC did not run";
  std::filesystem::remove_all(dir);
}

// The expression in the header comment is one comment line, whatever whitespace it holds:
// a newline used to end the comment and make the rest of the expression code.
TEST(Cli, NewlinesInTheExpressionStayInTheComment) {
  for (const char* v : {"", " -v"}) {
    auto r = loom_cmd("compile -c \"$(printf 'relu(matmul(A[64,32]:f32,\\nB[32,48]:f32))')\" "
                      "--target sm_80 --no-db" + std::string(v));
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(has(r.out, "A[64,32]:f32,\\nB[32,48]:f32)) | target sm_80")) << r.out;
    EXPECT_TRUE(has(r.out, "\n#include \"loom_device.cuh\"")) << r.out;
  }
}

// Explicit tiling knobs without ATOM leave the default wgmma atom for fma: legal, said on
// stderr (passes/defaults.h resolved_atom).
TEST(Cli, ExplicitTilingWithoutAtomNotesTheAtomChange) {
  const std::string e = "-c 'matmul(A[4096,4096]:f16, B[4096,4096]:f16)' --no-db --ir tile";
  auto r = loom_cmd("compile " + e + " --knobs BN=128,FM=2");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "loom: note: the explicit tiling knobs BN,FM without ATOM select the "
                         "SIMT schedule")) << r.out;
  EXPECT_TRUE(has(r.out, "add ATOM=wgmma_f16")) << r.out;
  auto kept = loom_cmd("compile " + e + " --knobs ATOM=wgmma_f16,BN=128");
  EXPECT_EQ(kept.rc, 0) << kept.out;
  EXPECT_FALSE(has(kept.out, "loom: note:")) << kept.out;
}

TEST(Cli, KnobsListsTheRegistryThenTheTunersSearch) {
  Result r = loom_cmd("knobs");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("t:025_rasterize"), std::string::npos) << r.out;
  size_t searched = r.out.find("searched by loom tune");
  ASSERT_NE(searched, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("WM                mma: 1|2|4", searched), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fma: tma, sm_90+", searched), std::string::npos) << r.out;
}

TEST(Cli, SymbolicSizesCanBeBoundAtCompileTime) {
  auto r = loom_cmd("compile -c 'matmul(A[M,K]:f32, B[K,N]:f32)' --dims M=64,N=64,K=8 --ir kernel");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "grid(1, 1, 1)")) << r.out;
}

TEST(Cli, BuilderAndExpressionGiveTheSameKernel) {
  loom::GraphBuilder b;
  auto a = b.input("A", {loom::dim(64), loom::dim(32)}, loom::DType::F16);
  auto w = b.input("W", {loom::dim(48), loom::dim(32)}, loom::DType::F16);
  auto bias = b.input("bias", {loom::dim(48)}, loom::DType::F16);
  auto built = loom::compile_graph(b.build(b.gelu(b.linear(a, w, bias))), {});
  auto parsed = loom::compile_expression("gelu(linear(A[64,32]:f16, W[48,32]:f16, bias[48]:f16))", {});
  EXPECT_EQ(print(built.state.kernel), print(parsed.state.kernel));
}

}  // namespace
