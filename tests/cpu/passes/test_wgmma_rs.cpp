// wgmma with A from registers (WGMMA_A=regs, k:026): each consumer warpgroup fills its A
// fragments from the staged slab (ldmatrix .x4 / .x4.trans / the b32 view, or 32-bit
// ld.shared) and issues the register-A form. Every pass interpreted against the naive
// Loop IR — the interpreter holds the fragment registers "being read" until the wgmma's
// group retires and checks the wgmma.fence between fill and wgmma — over ragged shapes,
// both majornesses, tf32 with a row-major B (run swapped), epilogues and the warp-
// specialized, persistent and cluster schedules. Plus the IR's shape, the defaults' tf32
// rule and the errors of impossible knob sets.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "passes/defaults.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;

int count_atoms(const Block& b, const std::string& id) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += s.kind == StmtKind::Atom && s.atom == id; });
  return n;
}

bool declares_copy(const KernelOp& k, const std::string& id) { return find_warp_copy(k, id); }

// tf32 inputs rounded, so that the reference and the tensor cores see the same values.
void round_tf32(const LoopProgram&, Bindings& b) {
  for (auto& [name, t] : b.tensors)
    if (name != "out")
      for (double& v : t.data) v = round_to_tf32(float(v));
}

const std::string kSmall16 =
    "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,WGMMA_A=regs";

TEST(WgmmaRs, Bf16KMajorAEveryPassMatches) {
  CompileState s = passcheck::check_every_pass("matmul(A[M,K]:bf16, B[N,K]:bf16.T)",
                                               Knobs::parse(kSmall16), 41,
                                               {{"M", 100}, {"N", 70}, {"K", 192}});
  const KernelOp& k = s.kernel.kernels.at(0);
  ASSERT_EQ(k.warp_atoms.size(), 1u);
  EXPECT_EQ(k.warp_atoms[0].id, "wgmma_m64n64k16_f32_bf16_rs");
  EXPECT_FALSE(k.warp_atoms[0].a_shared);
  EXPECT_TRUE(declares_copy(k, "ldmatrix_x4"));  // K-major: the plain ldmatrix
  // BK=64 is 4 atom steps: one fill, fence, wgmma and commit each (unrolled).
  EXPECT_EQ(count_atoms(k.body, "ldmatrix_x4"), 1);
  EXPECT_EQ(count(k.body, StmtKind::WgmmaFence), 1);
  EXPECT_EQ(count(k.body, StmtKind::WgmmaCommit), 1);
  EXPECT_EQ(count(k.body, StmtKind::WgmmaWait), 2);  // before each fill, closing the slab
  EXPECT_EQ(s.used_knobs.at("WGMMA_A"), "regs");
}

TEST(WgmmaRs, Tf32KMajorAThroughB32LdmatrixEveryPassMatches) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[N,K]:f32.T)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,"
                   "WGMMA_A=regs"),
      47, {{"M", 64}, {"N", 32}, {"K", 96}}, round_tf32);
  EXPECT_TRUE(declares_copy(s.kernel.kernels.at(0), "ldmatrix_x4_b32"));
}

TEST(WgmmaRs, PersistentClusterWarpSpecializedEveryPassMatches) {
  // 4 tiles on 2 SMs: one 2-CTA cluster, each CTA two tiles, the ring running on.
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  passcheck::check_every_pass(
      "matmul(A[256,128]:bf16, B[128,128]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,WGMMA_A=regs"),
      67, {}, {}, std::nullopt, t);
}

// An M-major A in its slab (a swapped row-major B, or A given transposed) is refused:
// its register fills passed the interpreter but computed wrong products on H100
// (2026-11-22), so the pass names the limit instead of compiling them.
TEST(WgmmaRs, MMajorARefusedUntilVerifiedOnTheGpu) {
  for (const auto& [expr, knobs] : std::vector<std::pair<std::string, std::string>>{
           {"matmul(A[40,80]:f16, B[80,136]:f16)",
            "ATOM=wgmma_f16,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,SWAP_AB=1,"
            "WGMMA_A=regs"},
           {"matmul(A[36,72]:f32, B[72,100]:f32)",
            "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,SWAP_AB=1,"
            "WGMMA_A=regs"},
           {"matmul(A[72,64]:f32.T, B[32,72]:f32.T)",
            "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,WGMMA_A=regs"}}) {
    {
      const std::string e = passcheck::error_of(expr, knobs);
      ASSERT_NE(e, "") << "no error for " << expr;
      EXPECT_NE(e.find("M-major in its shared slab"), std::string::npos) << e;
    }
  }
}

TEST(WgmmaRs, PingPongConsumersEveryPassMatch) {
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  passcheck::check_every_pass(
      "matmul(A[256,128]:bf16, B[128,64]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong,WGMMA_A=regs"),
      73, {}, {}, std::nullopt, t);
}

TEST(WgmmaRs, OneAtomStepPerSlabWaitsBeforeEachFill) {
  // BK = the atom's k: no step loop; the fill of the next slab waits for the group that
  // read the fragment (wait 0) while the slab's closing wait keeps one in flight.
  passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[N,K]:bf16.T)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=32B,BK=16,STAGES=3,"
                   "WARP_SPECIALIZE=1,WGMMA_A=regs"),
      79, {{"M", 64}, {"N", 32}, {"K", 80}});
}

// The interpreter holds the programs k:026 emits to the PTX rules they rely on: removing
// a wait or a fence from a correct program is an error, not a silent pass.
TEST(WgmmaRs, InterpreterCatchesAMissingWaitOrFence) {
  CompileState s = passcheck::compile_sm90a("matmul(A[64,256]:bf16, B[64,256]:bf16.T)",
                                            passcheck::knobs_over(kSmall16, "STAGES=3,WARP_SPECIALIZE=1"));
  Bindings in;
  make_random_inputs(s.loop, in, 83);
  auto run_without = [&](StmtKind kind, int imm) {
    KernelProgram p = s.kernel;
    for (KernelOp& k : p.kernels) {
      std::function<void(Block&)> drop = [&](Block& b) {
        for (size_t i = 0; i < b.size();) {
          if (b[i].kind == kind && int(b[i].imm) == imm) {
            b.erase(b.begin() + long(i));
            continue;
          }
          drop(b[i].body);
          ++i;
        }
      };
      drop(k.body);
    }
    Bindings b = in;
    try {
      interpret(p, b);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  {
    Bindings b = in;
    EXPECT_NO_THROW(interpret(s.kernel, b));
  }
  EXPECT_NE(run_without(StmtKind::WgmmaWait, 3).find("register A operand touched before "
                                                     "wgmma.wait"),
            std::string::npos);
  EXPECT_NE(run_without(StmtKind::WgmmaFence, 0).find("after this warpgroup's last wgmma.fence"),
            std::string::npos);
}

// The knobs the driver resolves for an explicit ATOM (src/driver/compile.cpp), compiled.
std::map<std::string, std::string> default_knobs_of(const std::string& expr,
                                                    const std::string& atom) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.target = Target::for_arch("sm_90a");
  const DefaultChoice d = default_knobs(s.graph, s.target);
  s.knobs = resolve_knobs(d.knobs, Knobs::parse("ATOM=" + atom), d.wgmma);
  run_pipeline(s);
  return s.used_knobs;
}

TEST(WgmmaRs, DefaultsKeepAInSharedMemory) {
  // A row-major B: tf32's default takes the threads' copies, which transpose it into a
  // K-major slab (defaults.cpp, wgmma_thread_copies); A stays in shared memory.
  auto n_major = default_knobs_of("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", "wgmma_tf32");
  EXPECT_EQ(n_major.at("STAGE"), "cp_async");
  EXPECT_EQ(n_major.at("WGMMA_A"), "smem");
  auto k_major = default_knobs_of("matmul(A[4096,4096]:f32, B[4096,4096]:f32.T)", "wgmma_tf32");
  EXPECT_EQ(k_major.at("SWAP_AB"), "0");
  EXPECT_EQ(k_major.at("WGMMA_A"), "smem");
  // 16-bit operands take the descriptor's transpose: nothing changes for them.
  auto bf16 = default_knobs_of("matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)", "wgmma_bf16");
  EXPECT_EQ(bf16.at("WGMMA_A"), "smem");
}

TEST(WgmmaRs, ImpossibleCombinationsNameTheReason) {
  auto fails = [](const std::string& expr, const std::string& knobs, const std::string& want) {
    {
      const std::string e = passcheck::error_of(expr, knobs);
      ASSERT_NE(e, "") << "no error for " << expr << " " << knobs;
      EXPECT_NE(e.find(want), std::string::npos) << e;
    }
  };
  const std::string tf32 = "ATOM=wgmma_tf32,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=32";
  // Row-major B kept as wgmma's shared B, or swapped into a shared A: tf32 is K-major only.
  fails("matmul(A[256,256]:f32, B[256,256]:f32)", tf32 + ",SWAP_AB=0", "give B K-major (B.T)");
  fails("matmul(A[256,256]:f32, B[256,256]:f32)", tf32 + ",SWAP_AB=1,WGMMA_A=smem",
        "give A K-major");
  // Both operands M-/N-major: no orientation puts a K-major tile in wgmma's B.
  fails("matmul(A[256,256]:f32.T, B[256,256]:f32)", tf32 + ",SWAP_AB=1,WGMMA_A=regs", "M-major");
  fails("matmul(A[256,256]:bf16, B[256,256]:bf16)", std::string(kSmall16).replace(kSmall16.find("WGMMA_A=regs"), 12, "WGMMA_A=tmem"), "WGMMA_A");
}

}  // namespace
}  // namespace loom
