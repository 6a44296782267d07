// The matmul article's walk-through (docs/cli.md, "PyTorch code"), every command with
// `loom` for its tool and LOOM_KNOBS for its knob variable. Each command either works
// as written, or stops at an error that says what to change: a knob list that gives
// BM/BN (threads in the article, rows in Loom) or an mma BK (k-atoms) next to the
// article's names comes back in Loom's names, and sm_70/sm_120 are not Loom targets.
// The test takes those fixes as a user would (the list the error prints; sm_80 and
// sm_90a) and checks where the command then lands: compiled, the clear no-GPU stop of
// `run` (and the same knobs compiled for sm_90a), or a named limit of Loom's.
// tests/gpu/test_torch_code.cpp runs the `run --bench --code` commands on a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Result {
  int rc;
  std::string out;  // stdout and stderr together
};

Result shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// `LOOM_KNOBS='<knobs>' loom <args>`; the article's programs quote with ' only.
Result loom(const std::string& knobs, const std::string& args) {
  return shell("LOOM_KNOBS='" + knobs + "' timeout 300 " + std::string(LOOM_BINARY) + " " + args +
               " 2>&1");
}

bool have_gpu() {
  static const bool gpu = shell(std::string(LOOM_BINARY) + " device >/dev/null 2>&1").rc == 0;
  return gpu;
}

const std::string kF32 = "\"torch.matmul(torch.randn(2048,2048),torch.randn(2048,2048))\"";
const std::string kF16Tensor = "torch.randn(2048,2048,dtype=torch.float16,device='cuda')";
const std::string kF16 = "\"a=" + kF16Tensor + ";b=" + kF16Tensor + ";torch.matmul(a,b)\"";
std::string square(int n) {
  const std::string t = "torch.randn(" + std::to_string(n) + "," + std::to_string(n) + ")";
  return "\"torch.matmul(" + t + "," + t + ")\"";
}

struct Step {
  std::string knobs;  // as the article writes DEPLODOCK_KNOBS
  std::string args;   // as the article writes the command's arguments
  // The article's command as written: "" when it works, else a part of its error.
  std::string article_error;
  // Where it lands after the errors' fixes: compile: a part of the output ("" = exit 0
  // is enough), or of a named limit's error (then exit 1); run: checked by the test.
  std::string lands;
  bool limit = false;  // `lands` is an error of Loom's (a feature it does not have)
};

const char* const kLoomNames = "In Loom's names the list reads ";
const char* const kNoTarget = "unsupported target";

// The article's commands, in its order.
std::vector<Step> walkthrough() {
  const std::string base = "BM=8,BN=32,FM=26,FN=4,BK=32,SPLITK=1";
  const std::string k16 = "TMA=1,ATOM_KIND=mma_m16n8k16_f16,BK=2";
  return {
      // Register tiling.
      {"FM=2,FN=2", "compile -c \"torch.matmul(torch.randn(64,32),torch.randn(32,64))\" --ir tile",
       "", "matmul = TileOp(A, B) -> out"},
      {"FM=2,FN=2", "compile -c " + square(32) + " --ir tile -vv", "",
       ">>> t:010_partition_loops\n"},
      // One cell per thread (FM=FN=1): the article's threads are Loom's rows, as written.
      {"BM=8,BN=32,FM=1,FN=1,BK=32,SPLITK=1,TMA=1,STAGE=11", "run -c " + kF32 + " --bench", "", ""},
      {base + ",TMA=1,STAGE=11", "run -c " + kF32 + " --bench", kLoomNames, ""},
      // Vectorized loads (Loom's vectorizer is k:040; k:050 is its pipeline).
      {"FM=2,FN=2", "compile -c " + square(32) + " --ir kernel -vv", "", ">>> k:040_vectorize\n"},
      // Load interleaving.
      {"BM=16,BN=16,FM=4,FN=4,BK=16,STAGE=11,INTERLEAVE_LOADS=0",
       "compile -c " + square(256) + " --ir cuda --target sm_70", kLoomNames, "__global__"},
      // Shared-memory staging, double buffering, async copy, TMA, pipelining.
      {"STAGE=11", "compile -c " + square(64) + " --ir tile -vv --target sm_70", kNoTarget,
       ">>> t:040_stage_inputs\n"},
      {"BM=16,BN=16,FM=2,FN=2,BK=16,STAGE=11,TMA=0,ASYNC_COPY=0",
       "compile -c " + square(128) + " --ir cuda --target sm_70", kLoomNames, "__syncthreads()"},
      {"BM=16,BN=16,FM=1,FN=1,BK=16,SPLITK=1,STAGE=11",
       "compile -c " + square(64) + " --ir tile -vv --target sm_70", kNoTarget,
       ">>> t:050_multibuffer\n"},
      {"BM=16,BN=16,FM=1,FN=1,BK=16,SPLITK=1,STAGE=11",
       "compile -c " + square(64) + " --ir tile -vv --target sm_80", "", ">>> t:050_multibuffer\n"},
      {base + ",STAGE=11,TMA=1", "compile -c " + kF32 + " --ir tile -vv --target sm_90", kLoomNames,
       "tma"},
      // The cp.async kernel of this shape keeps one buffer (STAGES=1): nothing to pipeline.
      {"BM=16,BN=16,FM=1,FN=1,BK=16,STAGE=11,TMA=0", "compile -c " + square(128) + " --ir tile -vv",
       "", ">>> t:040_stage_inputs\n"},
      // Warp specialization: Loom's is wgmma's (sm_90a); the SIMT kernel has none.
      {"BM=64,BN=64,FM=4,FN=4,BK=32,WARP_SPECIALIZE=1",
       "compile -c " + square(512) + " --ir tile -vv --target sm_120", kNoTarget,
       "WARP_SPECIALIZE=1 needs a wgmma atom", true},
      // Staging benchmarks.
      {base + ",STAGE=00", "run -c " + kF32 + " --bench", kLoomNames, ""},
      {base + ",STAGE=11,TMA=0,ASYNC_COPY=0,PIPELINE_STAGES=0", "run -c " + kF32 + " --bench",
       kLoomNames, ""},
      {base + ",STAGE=11,TMA=0,PIPELINE_STAGES=0", "run -c " + kF32 + " --bench", kLoomNames, ""},
      {base + ",STAGE=11,TMA=1,PIPELINE_STAGES=0", "run -c " + kF32 + " --bench", kLoomNames, ""},
      {base + ",STAGE=11,TMA=1", "run -c " + kF32 + " --bench", kLoomNames, ""},
      // The fp16 tensor-core kernels: Loom's mma.sync stages by cp.async (TMA feeds wgmma),
      // and its warp specialization is wgmma's.
      {k16 + ",WM=2,WN=4,FM=4,FN=4,BUFFER_COUNT=3", "run --bench --code " + kF16, kLoomNames,
       "STAGE=tma: mma fragments are read from shared slabs filled by STAGE=sync or "
       "STAGE=cp_async",
       true},
      {k16 + ",WM=1,WN=4,FM=4,FN=2,BUFFER_COUNT=2,WARP_SPECIALIZE=1,SPLITK=1",
       "run --bench --code " + kF16, kLoomNames, "needs a wgmma atom", true},
      // Shared-memory padding.
      {"FM=2,FN=2,STAGE=11,PAD_SMEM=1", "compile -c " + square(256) + " --ir tile -vv --target sm_70",
       kNoTarget, ">>> t:045_pad_smem\n"},
      {base + ",STAGE=11,TMA=0,PIPELINE_STAGES=0,PAD_SMEM=0", "run -c " + kF32 + " --bench",
       kLoomNames, ""},
      // Grid scheduling: swizzle, split-K.
      // Loom walks this 4x4 grid row-major by default; GROUP_M=2 shows t:025's rewrite.
      {"", "compile -c " + square(256) + " --ir tile -vv", "", ">>> t:010_partition_loops\n"},
      {"GROUP_M=2", "compile -c " + square(256) + " --ir tile -vv", "", ">>> t:025_rasterize\n"},
      {"BM=16,BN=16,FM=4,FN=4,BK=32,SPLITK=1,STAGE=11,TMA=1,GROUP_M=1",
       "run -c \"torch.matmul(torch.randn(8192,8192),torch.randn(8192,8192))\" --bench", kLoomNames,
       ""},
      {"SPLITK=2", "compile -c \"torch.matmul(torch.randn(16,64),torch.randn(64,16))\" --ir tile -vv",
       "", ">>> l:020_split_k\n"},
      {"BM=16,BN=16,FM=2,FN=2,BK=32,STAGE=11,SPLITK=1",
       "run -c \"torch.matmul(torch.randn(128,16384),torch.randn(16384,128))\" --bench", kLoomNames,
       ""},
      // The final kernels.
      {base + ",TMA=1,STAGE=11", "compile -c " + kF32 + " --ir cuda", kLoomNames,
       "cp_async_bulk_tensor_2d_global_to_shared"},
      {"TMA=1,ATOM_KIND=mma_m16n8k16_f16,WM=1,WN=4,FM=4,FN=2,BK=2,BUFFER_COUNT=2,"
       "WARP_SPECIALIZE=1,SPLITK=1",
       "compile --code " + kF16 + " --ir cuda", kLoomNames, "needs a wgmma atom", true},
  };
}

// A `run ...` command as the `compile` of the same program and knobs (without --bench,
// which compile does not take).
std::string as_compile(const std::string& run_args) {
  std::string args = "compile " + run_args.substr(4);
  if (const size_t at = args.find(" --bench"); at != std::string::npos) args.erase(at, 8);
  return args;
}

// Follows a step's errors as a user would; returns the output where it lands.
Result follow(Step s, std::string& knobs, std::string& args) {
  knobs = s.knobs;
  args = s.args;
  Result r = loom(knobs, args);
  if (s.article_error.empty()) {
    EXPECT_FALSE(has(r.out, kLoomNames) || has(r.out, kNoTarget)) << r.out;
  } else {
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_TRUE(has(r.out, s.article_error)) << r.out;
  }
  for (int fixes = 0; fixes < 3; ++fixes) {
    if (const size_t at = r.out.find(kLoomNames); at != std::string::npos && r.rc == 1) {
      const size_t from = at + std::string(kLoomNames).size();
      knobs = r.out.substr(from, r.out.find('\n', from) - from);
    } else if (r.rc == 1 && has(r.out, kNoTarget)) {
      for (auto [old, fix] : {std::pair{"sm_70", "sm_80"}, std::pair{"sm_120", "sm_90a"}})
        if (const size_t at = args.find(old); at != std::string::npos)
          args.replace(at, std::string(old).size(), fix);
    } else {
      break;
    }
    r = loom(knobs, args);
  }
  return r;
}

TEST(ArticleWalkthrough, EveryCommandWorksOrSaysWhatToChange) {
  for (const Step& s : walkthrough()) {
    SCOPED_TRACE("LOOM_KNOBS='" + s.knobs + "' loom " + s.args);
    std::string knobs, args;
    if (s.args.rfind("run ", 0) == 0 && have_gpu()) continue;  // tests/gpu runs these
    Result r = follow(s, knobs, args);
    SCOPED_TRACE("after the errors' fixes: LOOM_KNOBS='" + knobs + "' loom " + args);
    if (s.limit) {
      // A run stops at the knobs' error before it looks for a GPU.
      if (args.rfind("run ", 0) == 0) r = loom(knobs, as_compile(args) + " --ir loop");
      EXPECT_EQ(r.rc, 1) << r.out;
      EXPECT_TRUE(has(r.out, s.lands)) << r.out;
      continue;
    }
    if (args.rfind("run ", 0) == 0) {
      EXPECT_EQ(r.rc, 1) << r.out;
      EXPECT_TRUE(has(r.out, "loom: loom run needs a GPU: ")) << r.out;
      EXPECT_TRUE(has(r.out, "GPU steps are skipped")) << r.out;
      // The knobs it would run with compile for an H100.
      r = loom(knobs, as_compile(args) + " --target sm_90a --ir loop");
    }
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(has(r.out, s.lands)) << r.out;
  }
}

// The article's -vv filters (awk '/^>>> t:010/,/^<<< t:010/') select a pass's diff by its
// id's prefix; Loom prints its ids the same way, so the filter works unchanged where the
// numbers agree (t:010 partitions the loops in both).
TEST(ArticleWalkthrough, PassDiffFiltersSelectOnePass) {
  Result r = shell("LOOM_KNOBS='FM=2,FN=2' " + std::string(LOOM_BINARY) + " compile -c " +
                   square(32) + " --ir tile -vv 2>/dev/null | awk '/^>>> t:010/,/^<<< t:010/'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.rfind(">>> t:010_partition_loops\n", 0), 0u) << r.out;
  EXPECT_TRUE(has(r.out, "+matmul = TileOp(A, B) -> out")) << r.out;
  EXPECT_TRUE(has(r.out, "<<< t:010_partition_loops\n")) << r.out;
  EXPECT_FALSE(has(r.out, ">>> t:020")) << r.out;
}

// --code is -c's alias, and either spelling takes either language.
TEST(ArticleWalkthrough, CodeIsAnAliasOfC) {
  Result code = loom("", "compile --code \"matmul(A[64,64]:f16, B[64,64]:f16)\" --ir loop");
  EXPECT_EQ(code.rc, 0) << code.out;
  Result c = loom("", "compile -c " + kF16 + " --ir loop");
  EXPECT_EQ(c.rc, 0) << c.out;
  EXPECT_TRUE(has(c.out, "a: f16[2048, 2048] input")) << c.out;
  Result twice = loom("", "compile -c " + square(64) + " --code " + square(64));
  EXPECT_EQ(twice.rc, 1) << twice.out;
  EXPECT_TRUE(has(twice.out, "option --code is given twice")) << twice.out;
}

// The note that says how the article's names were read.
TEST(ArticleWalkthrough, TheNoteShowsTheLoomNames) {
  Result r = loom("STAGE=11,TMA=0,ASYNC_COPY=0,PIPELINE_STAGES=0,BUFFER_COUNT=2",
                  "compile -c " + square(128) + " --target sm_80 -v --ir loop");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "loom: note: knobs by the article's names: STAGE=11,TMA=0,ASYNC_COPY=0,"
                         "PIPELINE_STAGES=0,BUFFER_COUNT=2 -> PIPELINE=0,STAGES=2,STAGE=sync"))
      << r.out;
  EXPECT_TRUE(has(r.out, "STAGE=sync,SLAB_KOUTER=1,STAGES=2,PIPELINE=0")) << r.out;
}

}  // namespace
