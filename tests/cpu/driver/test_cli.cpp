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

#include "ir/printable.h"
#include "loom/loom.h"

namespace {

struct Result {
  int rc;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line and collects what it prints. Every `loom` runs under
// timeout(1), so a regression that hangs (a FIFO, a loop on a huge size) fails the test
// with status 124 instead of stalling CI.
Result shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

const std::string kLoom = "timeout 120 " + std::string(LOOM_BINARY);

Result loom_cmd(const std::string& args) { return shell(kLoom + " " + args + " 2>&1"); }

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

TEST(Cli, VerboseListsTheKernelsOfARunTimeM) {
  // A run-time M's defaults hold a kernel per range of M; -v lists them, one line each.
  auto r = loom_cmd("compile -c 'matmul(A[M,4096]:bf16, B[4096,4096]:bf16)' -v --no-db -o /dev/null");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "kernels by run-time size")) << r.out;
  EXPECT_TRUE(has(r.out, "  M=1..16: ")) << r.out;
  EXPECT_TRUE(has(r.out, "  M=513..: ")) << r.out;
  EXPECT_TRUE(has(r.out, "class decode as if M = 16")) << r.out;
  auto bound = loom_cmd("compile -c 'matmul(A[64,4096]:bf16, B[4096,4096]:bf16)' -v --no-db -o /dev/null");
  EXPECT_FALSE(has(bound.out, "kernels by run-time size")) << bound.out;
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
                      "LOOM_KNOBS=NOPE=1 " + kLoom +
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

// ---- Sizes and integers: no option wraps, clamps or truncates; no size overflows.

const std::string kGemm = "-c 'matmul(A[64,32]:f32, B[32,48]:f32)'";
const std::string kSymbolic = "-c 'matmul(A[M,K]:f32, B[K,N]:f32)'";

TEST(Cli, IntegerOptionsAreCheckedNotWrapped) {
  // 2^31 wrapped to a negative int, 2^32 to 0 (GPU 0), beyond int64 was clamped.
  auto reps = loom_cmd("run " + kGemm + " --reps 2147483648");
  EXPECT_EQ(reps.rc, 1);
  EXPECT_TRUE(has(reps.out, "--reps 2147483648 is out of range: --reps takes an integer in [1, "))
      << reps.out;
  auto device = loom_cmd("run " + kGemm + " --device 4294967296");
  EXPECT_EQ(device.rc, 1);
  EXPECT_TRUE(has(device.out, "--device 4294967296 is out of range")) << device.out;
  auto seed = loom_cmd("run " + kGemm + " --seed 99999999999999999999");
  EXPECT_EQ(seed.rc, 1);
  EXPECT_TRUE(has(seed.out, "--seed 99999999999999999999 is out of range")) << seed.out;
  auto junk = loom_cmd("run " + kGemm + " --reps 12abc");
  EXPECT_EQ(junk.rc, 1);
  EXPECT_TRUE(has(junk.out, "--reps needs an integer in [1, ")) << junk.out;
  EXPECT_TRUE(has(junk.out, "(got '12abc')")) << junk.out;
  auto candidates = loom_cmd("tune " + kGemm + " --dry-run --candidates 4294967296");
  EXPECT_EQ(candidates.rc, 1);
  EXPECT_TRUE(has(candidates.out, "--candidates 4294967296 is out of range")) << candidates.out;
  auto devices = loom_cmd("tune " + kGemm + " --dry-run --devices 0,4294967296");
  EXPECT_EQ(devices.rc, 1);
  EXPECT_TRUE(has(devices.out, "--devices 4294967296 is out of range")) << devices.out;
}

TEST(Cli, SizesBeyondTheLimitAreRefusedNotClampedOrHung) {
  // Beyond int64: strtoll clamped it to INT64_MAX, which then hung t:010.
  auto dims = loom_cmd("compile " + kSymbolic + " --ir tile --dims M=99999999999999999999,N=4,K=4");
  EXPECT_EQ(dims.rc, 1) << dims.out;
  EXPECT_TRUE(has(dims.out, "--dims M 99999999999999999999 is out of range")) << dims.out;
  auto big = loom_cmd("compile " + kSymbolic + " --ir tile --dims M=4611686018427387905,N=4,K=4");
  EXPECT_EQ(big.rc, 1) << big.out;
  EXPECT_TRUE(has(big.out, "--dims M 4611686018427387905 is out of range")) << big.out;
  auto shape = loom_cmd("ladder sgemm --shape 99999999999999999999x64x64");
  EXPECT_EQ(shape.rc, 1) << shape.out;
  EXPECT_TRUE(has(shape.out, "--shape 99999999999999999999 is out of range")) << shape.out;
}

TEST(Cli, TensorsPastTheSizeLimitAreRefusedByName) {
  // 2^32 x 2^32 elements overflow int64: the loop bound came out negative, exit 0.
  auto wrap = loom_cmd("compile -c 'matmul(A[4294967296,4294967296]:f32, "
                       "B[4294967296,4294967296]:f32)' --ir loop");
  EXPECT_EQ(wrap.rc, 1) << wrap.out;
  EXPECT_TRUE(has(wrap.out, "tensor A[4294967296,4294967296] is too large")) << wrap.out;
  EXPECT_TRUE(has(wrap.out, "limit of 2^48 = 281474976710656 bytes")) << wrap.out;
  // Small inputs, an output of 2^48 f32 elements (2^50 bytes).
  auto result = loom_cmd("compile -c 'matmul(A[16777216,1]:f32, B[1,16777216]:f32)' --ir loop");
  EXPECT_EQ(result.rc, 1) << result.out;
  EXPECT_TRUE(has(result.out, "the result of matmul [16777216,16777216] is too large")) << result.out;
  // Through --dims too.
  auto bound = loom_cmd("compile " + kSymbolic + " --ir loop --dims M=16777216,N=16777216,K=1");
  EXPECT_EQ(bound.rc, 1) << bound.out;
  EXPECT_TRUE(has(bound.out, "is too large")) << bound.out;
}

TEST(Cli, RunRefusesAProblemLargerThanMemoryBeforeAllocating) {
  // 16 TB per operand: no host holds it, so the refusal comes before the GPU is needed.
  auto r = loom_cmd("run -c 'matmul(A[2000000,2000000]:f32, B[2000000,2000000]:f32)'");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(has(r.out, "loom run: the problem does not fit in host memory")) << r.out;
  EXPECT_TRUE(has(r.out, "bytes (")) << r.out;
  EXPECT_TRUE(has(r.out, "on the host (kernel tensors as f64")) << r.out;
  EXPECT_TRUE(has(r.out, "available")) << r.out;
  EXPECT_TRUE(has(r.out, "Nothing was allocated")) << r.out;
  // `loom tune` refuses it the same way before asking for the GPU; a dry run allocates
  // nothing and is not refused.
  auto tune = loom_cmd("tune -c 'matmul(A[2000000,2000000]:f32, B[2000000,2000000]:f32)' --no-record");
  EXPECT_EQ(tune.rc, 1) << tune.out;
  EXPECT_TRUE(has(tune.out, "loom tune: the problem does not fit in host memory")) << tune.out;
}

// ---- Every file Loom writes is checked.

TEST(Cli, WritesToAFullOrUnwritableTargetFail) {
  auto full = loom_cmd("compile " + kGemm + " -o /dev/full");
  EXPECT_EQ(full.rc, 1) << full.out;
  EXPECT_TRUE(has(full.out, "cannot write /dev/full (-o): write failed: No space left on device"))
      << full.out;
  auto cubin = loom_cmd("compile " + kGemm + " --cubin /dev/full");
  EXPECT_EQ(cubin.rc, 1) << cubin.out;
  EXPECT_TRUE(has(cubin.out, "cannot write /dev/full (--cubin)")) << cubin.out;
  // A directory, and a path under a regular file.
  auto dir = loom_cmd("compile " + kGemm + " -o " + testing::TempDir());
  EXPECT_EQ(dir.rc, 1) << dir.out;
  EXPECT_TRUE(has(dir.out, "Is a directory")) << dir.out;
  const std::string file = testing::TempDir() + "/loom_cli_plain_file";
  std::ofstream(file) << "x";
  auto under = loom_cmd("compile " + kGemm + " -o " + file + "/kernel.cu");
  EXPECT_EQ(under.rc, 1) << under.out;
  EXPECT_TRUE(has(under.out, "Not a directory")) << under.out;
  // Standard output too.
  auto out = shell(kLoom + " compile " + kGemm + " 2>&1 >/dev/full");
  EXPECT_EQ(out.rc, 1) << out.out;
  EXPECT_TRUE(has(out.out, "cannot write standard output: No space left on device")) << out.out;
  auto listing = shell(kLoom + " knobs 2>&1 >/dev/full");
  EXPECT_EQ(listing.rc, 1) << listing.out;
  EXPECT_TRUE(has(listing.out, "cannot write standard output")) << listing.out;
}

// ---- Repeats, unknown names and empty values are errors, not silently resolved.

TEST(Cli, RepeatedOptionsAndKnobsAreErrors) {
  auto knob = loom_cmd("compile " + kGemm + " --knobs BM=64,BM=128");
  EXPECT_EQ(knob.rc, 1) << knob.out;
  EXPECT_TRUE(has(knob.out, "in --knobs: knob BM is given twice (BM=64 and BM=128)")) << knob.out;
  auto env = shell("LOOM_KNOBS=FM=2,FM=4 " + kLoom + " compile " + kGemm + " 2>&1");
  EXPECT_EQ(env.rc, 1) << env.out;
  EXPECT_TRUE(has(env.out, "in LOOM_KNOBS: knob FM is given twice")) << env.out;
  // Across sources --knobs overrides LOOM_KNOBS: the documented precedence.
  auto over = shell("LOOM_KNOBS=BM=16 " + kLoom + " compile " + kGemm +
                    " --no-db --ir tile --knobs BM=32 2>&1");
  EXPECT_EQ(over.rc, 0) << over.out;
  auto expr = loom_cmd("compile " + kGemm + " --expr 'matmul(A[8,8]:f32, B[8,8]:f32)'");
  EXPECT_EQ(expr.rc, 1) << expr.out;
  EXPECT_TRUE(has(expr.out, "option --expr is given twice")) << expr.out;
  auto dims = loom_cmd("compile " + kSymbolic + " --dims M=4,N=4,K=4 --dims M=8");
  EXPECT_EQ(dims.rc, 1) << dims.out;
  EXPECT_TRUE(has(dims.out, "option --dims is given twice ('M=4,N=4,K=4' and 'M=8')")) << dims.out;
  auto inner = loom_cmd("compile " + kSymbolic + " --dims M=4,N=4,K=4,M=8");
  EXPECT_EQ(inner.rc, 1) << inner.out;
  EXPECT_TRUE(has(inner.out, "--dims gives M twice (M=4 and M=8)")) << inner.out;
  auto tune = loom_cmd("tune " + kGemm + " --dry-run --budget 5 --budget 9");
  EXPECT_EQ(tune.rc, 1) << tune.out;
  EXPECT_TRUE(has(tune.out, "option --budget is given twice")) << tune.out;
}

TEST(Cli, UnknownDimsAndEmptyTargetAreErrors) {
  auto dims = loom_cmd("compile " + kSymbolic + " --dims M=4,N=4,K=4,Q=5");
  EXPECT_EQ(dims.rc, 1) << dims.out;
  EXPECT_TRUE(has(dims.out, "--dims Q=5: the expression has no dimension Q; its symbols are M, K, N"))
      << dims.out;
  auto fixed = loom_cmd("compile " + kGemm + " --dims K=4");
  EXPECT_EQ(fixed.rc, 1) << fixed.out;
  EXPECT_TRUE(has(fixed.out, "its dimensions are all numbers")) << fixed.out;
  auto tune = loom_cmd("tune " + kSymbolic + " --dry-run --dims M=64,N=64,K=64,k=64");
  EXPECT_EQ(tune.rc, 1) << tune.out;
  EXPECT_TRUE(has(tune.out, "no expression has a dimension k")) << tune.out;
  auto target = loom_cmd("compile " + kGemm + " --target ''");
  EXPECT_EQ(target.rc, 1) << target.out;
  EXPECT_TRUE(has(target.out, "unsupported target '': Loom targets sm_80, sm_86")) << target.out;
}

// ---- What Loom echoes of its input is valid UTF-8 with control characters escaped.

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = loom::utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

TEST(Cli, DiagnosticsEchoInputAsValidUtf8WithControlsEscaped) {
  auto accent = loom_cmd("compile -c 'matmul(A\xc3\xa9[4,4]:f32, B[4,4]:f32)'");
  EXPECT_EQ(accent.rc, 1) << accent.out;
  EXPECT_TRUE(valid_utf8(accent.out)) << accent.out;
  EXPECT_TRUE(has(accent.out, "unexpected character '\xc3\xa9' (U+00E9)")) << accent.out;
  auto bad = loom_cmd("compile -c \"$(printf 'matmul(A[4,4]:f32, \\377B[4,4]:f32)')\"");
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_TRUE(valid_utf8(bad.out)) << bad.out;
  EXPECT_TRUE(has(bad.out, "byte 0xFF (the expression is not valid UTF-8)")) << bad.out;
  EXPECT_TRUE(has(bad.out, "A[4,4]:f32, \\xffB[4,4]")) << bad.out;
  auto ansi = loom_cmd("compile -c \"$(printf 'matmul(A[4,4]:f32, \\033[31mB[4,4]:f32)')\"");
  EXPECT_EQ(ansi.rc, 1) << ansi.out;
  EXPECT_FALSE(has(ansi.out, "\x1b")) << ansi.out;
  EXPECT_TRUE(has(ansi.out, "\\x1b[31mB")) << ansi.out;
  // Option values are quoted in errors too.
  auto option = loom_cmd("compile " + kSymbolic + " --dims \"$(printf 'M=\\033[2J')\"");
  EXPECT_EQ(option.rc, 1) << option.out;
  EXPECT_FALSE(has(option.out, "\x1b")) << option.out;
  EXPECT_TRUE(has(option.out, "\\x1b[2J")) << option.out;
}

}  // namespace
