// wgmma with A from registers (WGMMA_A=regs, k:026): each consumer warpgroup fills its A
// fragments from the staged slab (ldmatrix .x4 / .x4.trans / the b32 view, or 32-bit
// ld.shared) and issues the register-A form. Every pass interpreted against the naive
// Loop IR — the interpreter holds the fragment registers "being read" until the wgmma's
// group retires and checks the wgmma.fence between fill and wgmma — over ragged shapes,
// both majornesses, tf32 with a row-major B (run swapped) or an M-major A, epilogues and
// the warp-specialized, persistent and cluster schedules. Plus the IR's shape, the
// defaults' tf32 orientation for every majorness and the errors of impossible knob sets.
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

TEST(WgmmaRs, F16MMajorAThroughTransposedLdmatrixEveryPassMatches) {
  // SWAP_AB with B [K, N] row-major: the swapped problem's A is B^T, M-major (N
  // contiguous), which ldmatrix .trans turns into the A fragment.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f16, B[K,N]:f16)",
      Knobs::parse("ATOM=wgmma_f16,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "SWAP_AB=1,WGMMA_A=regs"),
      43, {{"M", 40}, {"N", 130}, {"K", 80}});
  EXPECT_TRUE(declares_copy(s.kernel.kernels.at(0), "ldmatrix_x4_trans"));
}

// tf32 with B [K, N] row-major: wgmma's tf32 shared operands must be K-major, so the GEMM
// runs swapped (B^T becomes A, M-major, loaded into registers with 32-bit ld.shared
// through the 128-byte swizzle; A^T becomes a K-major B). Its slab rows are 64 tf32 wide
// (256 B), so TMA lands them as two 128-byte chunks (row_chunk): the fills read through
// the chunk permutation. Ragged M, N, K; f32 out.
const std::string kTf32SwapBase =
    "ATOM=wgmma_tf32,WN=1,STAGE=tma,SWIZZLE=128B,BK=32,SWAP_AB=1,WGMMA_A=regs";
const std::string kTf32Swap = kTf32SwapBase + ",WM=1,BN=32,STAGES=2";

TEST(WgmmaRs, Tf32RowMajorBSwappedEveryPassMatches) {
  CompileState s = passcheck::check_every_pass("matmul(A[M,K]:f32, B[K,N]:f32)",
                                               Knobs::parse(kTf32Swap), 53,
                                               {{"M", 36}, {"N", 100}, {"K", 72}}, round_tf32);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_TRUE(k.warp_copies.empty());  // no ldmatrix view of M-major 32-bit words
  int shared_loads = 0;
  walk(k.body, [&](const Stmt& x) {
    shared_loads += x.kind == StmtKind::Load && s.kernel.tensor(x.tensor).role == TensorRole::Shared;
  });
  EXPECT_EQ(shared_loads, 4);  // the 4 tf32 values of the A fragment
  // B^T's slab is chunked: 64 rows of the swapped M in 128-byte spans.
  bool chunked = false;
  for (const TensorDecl& t : s.kernel.tensors) chunked |= t.role == TensorRole::Shared && t.row_chunk > 0;
  EXPECT_TRUE(chunked);
}

TEST(WgmmaRs, Tf32RowMajorBWithBiasEveryPassMatches) {
  passcheck::check_every_pass("relu(add(matmul(A[M,K]:f32, B[K,N]:f32), bias[N]:f32))",
                              Knobs::parse(kTf32Swap), 59, {{"M", 50}, {"N", 72}, {"K", 40}},
                              round_tf32);
  // A residual read through the transposed cell, and a 16-bit output.
  passcheck::check_every_pass("add(matmul(A[M,K]:f32, B[K,N]:f32), R[M,N]:f32)",
                              Knobs::parse(kTf32Swap), 61, {{"M", 44}, {"N", 68}, {"K", 40}},
                              round_tf32);
  passcheck::check_every_pass("matmul(A[M,K]:tf32, B[K,N]:tf32, out=bf16)",
                              Knobs::parse(kTf32Swap), 63, {{"M", 40}, {"N", 64}, {"K", 48}},
                              round_tf32);
}

TEST(WgmmaRs, Tf32RowMajorBWarpSpecializedEveryPassMatches) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)",
      Knobs::parse(kTf32SwapBase + ",WM=1,BN=32,STAGES=3,WARP_SPECIALIZE=1"), 61,
      {{"M", 30}, {"N", 130}, {"K", 200}}, round_tf32);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::Specialize), 1);
  // The slab closes with wait E = 4 (this slab's 4 groups in flight, the previous slab's
  // retired and its slot released: one wait 1 drained the warpgroup to one group at
  // every slab boundary, 0.87x cuBLAS on H100 against shared A's 0.99x); the wait before
  // each fill keeps E - 1 = 3 groups.
  std::vector<int64_t> waits;
  walk(k.body, [&](const Stmt& x) {
    if (x.kind == StmtKind::WgmmaWait) waits.push_back(int64_t(x.imm));
  });
  EXPECT_EQ(waits, (std::vector<int64_t>{3, 4, 0}));
}

TEST(WgmmaRs, Tf32SwappedPersistentClusterEveryPassMatches) {
  // The defaults' form of a row-major B (two consumer warpgroups, persistent 2-CTA
  // clusters) on 2 SMs: the ring turns across tiles.
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  passcheck::check_every_pass(
      "matmul(A[40,64]:f32, B[64,260]:f32)",
      Knobs::parse(kTf32SwapBase + ",WM=2,BN=32,STAGES=3,WARP_SPECIALIZE=1,PERSISTENT=1,GROUP_M=2"),
      71,
      {}, round_tf32, std::nullopt, t);
  passcheck::check_every_pass(
      "matmul(A[64,64]:f32, B[64,256]:f32)",
      Knobs::parse(kTf32SwapBase + ",WM=2,BN=64,STAGES=3,WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2"),
      73, {}, round_tf32, std::nullopt, t);
}

// Swapped, the tile is C^T: the TMA-store epilogue takes it whole (EPI_BUFFERS=0), each
// consumer warpgroup owning a column band of C (its strips, 32 f32 columns wide, are
// stored as boxes of the tile's rows).
TEST(WgmmaRs, Tf32SwappedThroughTheTmaStoreEveryPassMatches) {
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  CompileState s = passcheck::check_every_pass(
      "matmul(A[72,64]:f32, B[64,200]:f32)",
      Knobs::parse(kTf32SwapBase + ",WM=2,BN=64,STAGES=3,WARP_SPECIALIZE=1,PERSISTENT=1,"
                                   "EPILOGUE=tma_store,EPI_BUFFERS=0"),
      89, {}, round_tf32, std::nullopt, t);
  EXPECT_GE(count(s.kernel.kernels.at(0).body, StmtKind::TmaStore), 1);
}

// tf32 with A given transposed (M-major) and a K-major B: unswapped, A in registers read
// M-major from its chunked slab; the TMA-store epilogue as the K-major schedule has it.
TEST(WgmmaRs, Tf32MMajorAEveryPassMatches) {
  const std::string knobs =
      "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,WGMMA_A=regs";
  passcheck::check_every_pass("matmul(A[K,M]:f32.T, B[N,K]:f32.T)", Knobs::parse(knobs), 79,
                              {{"M", 72}, {"N", 40}, {"K", 104}}, round_tf32);
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  passcheck::check_every_pass(
      "matmul(A[64,200]:f32.T, B[72,64]:f32.T)",
      Knobs::parse("ATOM=wgmma_tf32,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=3,"
                   "WGMMA_A=regs,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2"),
      83, {}, round_tf32, std::nullopt, t);
}

// TF32_ROUND=none: the register fills pass the slab's raw f32 bits (no cvt.rna), the
// tensor core reads their top 19. On tf32-exact inputs every pass still matches, in the
// swapped form (ragged, warp-specialized, persistent clusters) and with A given transposed.
TEST(WgmmaRs, Tf32RawFillsEveryPassMatches) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)", Knobs::parse(kTf32Swap + ",TF32_ROUND=none"), 97,
      {{"M", 36}, {"N", 100}, {"K", 72}}, round_tf32);
  EXPECT_EQ(s.used_knobs.at("TF32_ROUND"), "none");
  const KernelOp& k = s.kernel.kernels.at(0);
  ASSERT_EQ(k.warp_atoms.size(), 1u);
  EXPECT_TRUE(k.warp_atoms[0].a_truncated);
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  passcheck::check_every_pass(
      "matmul(A[64,64]:f32, B[64,256]:f32)",
      Knobs::parse(kTf32SwapBase + ",WM=2,BN=64,STAGES=3,WARP_SPECIALIZE=1,PERSISTENT=1,"
                                   "CLUSTER_M=2,TF32_ROUND=none"),
      101, {}, round_tf32, std::nullopt, t);
  passcheck::check_every_pass(
      "matmul(A[K,M]:f32.T, B[N,K]:f32.T)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,"
                   "WGMMA_A=regs,TF32_ROUND=none"),
      103, {{"M", 72}, {"N", 40}, {"K", 104}}, round_tf32);
  // none is the default (what the shared-A kernels compute); they have no register fills,
  // so the knob is not used there.
  const CompileState def = passcheck::compile_sm90a("matmul(A[64,64]:f32, B[64,64]:f32)", kTf32Swap);
  EXPECT_EQ(def.used_knobs.at("TF32_ROUND"), "none");
  EXPECT_TRUE(def.kernel.kernels.at(0).warp_atoms.at(0).a_truncated);
  EXPECT_FALSE(passcheck::compile_sm90a("matmul(A[64,64]:f32, B[64,64]:f32.T)",
                                        "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,"
                                        "SWIZZLE=128B,BK=32,STAGES=2,TF32_ROUND=none")
                   .used_knobs.count("TF32_ROUND"));
  EXPECT_NE(passcheck::error_of("matmul(A[64,64]:f32, B[64,64]:f32)", kTf32Swap + ",TF32_ROUND=rz")
                .find("TF32_ROUND=rz"),
            std::string::npos);
}

// The interpreter computes what each mode's kernel computes: the register A operand
// rounded to nearest (rna) or truncated (none), on values whose low 13 bits decide it.
// 1 + 3 * 2^-12 rounds to 1 + 2^-10 and truncates to 1 (toward zero for either sign),
// so each output is +-K (1 + 2^-10) with rna and +-K with none (exact in f32).
TEST(WgmmaRs, Tf32RawFillsTruncateTheRegisterOperand) {
  const double x = 1.0 + 3.0 / 4096.0;
  struct Case {
    std::string expr, knobs, reg;  // reg: the operand wgmma reads from registers
    size_t n;                      // output columns
  };
  // :tf32 tensors (their slabs' loads round unless the fill is raw) and :f32 ones.
  const std::string at = "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,"
                         "WGMMA_A=regs";
  const std::vector<Case> cases = {
      {"matmul(A[40,48]:tf32, B[48,100]:tf32)", kTf32Swap, "B", 100},  // swapped: B^T in registers
      {"matmul(A[40,48]:f32, B[48,100]:f32)", kTf32Swap, "B", 100},
      {"matmul(A[48,72]:tf32.T, B[40,48]:tf32.T)", at, "A", 40},
      {"matmul(A[48,72]:f32.T, B[40,48]:f32.T)", at, "A", 40}};
  for (const Case& c : cases)
    for (const bool raw : {false, true}) {
      SCOPED_TRACE(c.expr + (raw ? " TF32_ROUND=none" : " TF32_ROUND=rna"));
      const CompileState s = passcheck::compile_sm90a(
          c.expr, c.knobs + (raw ? ",TF32_ROUND=none" : ",TF32_ROUND=rna"));
      Bindings b;
      make_random_inputs(s.loop, b, 7);
      for (auto& [name, t] : b.tensors) {
        if (name == "out") continue;
        // The register operand: +-x by output column (B [K, N]) or all x (A); the other 1.
        for (size_t i = 0; i < t.data.size(); ++i)
          t.data[i] = name != c.reg ? 1.0 : name == "B" && i % c.n % 2 ? -x : x;
      }
      const HostTensor got = passcheck::run_level(s, Level::Kernel, b);
      const double K = 48, mag = raw ? K : K * (1.0 + 1.0 / 1024.0);
      for (size_t i = 0; i < got.data.size(); ++i) {
        const double sign = c.reg == "B" && i % c.n % 2 ? -1.0 : 1.0;
        ASSERT_EQ(got.data[i], sign * mag) << "element " << i;
      }
    }
}

// WGMMA_FILLS=slab: a slab's fragments are filled at once into the set of its parity, one
// fence, the slab's wgmmas one group; under k:030 the closing wait keeps that group in
// flight while the next slab fills the other set. The interpreter after every pass (its
// async model faults a fill of registers an unretired wgmma reads) in the swapped form
// (ragged, warp-specialized persistent 2-CTA clusters), A.T, and 16-bit A by ldmatrix.
TEST(WgmmaRs, SlabFillsEveryPassMatches) {
  Target t = Target::for_arch("sm_90a");
  t.sm_count = 2;
  const CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:f32, B[K,N]:f32)", Knobs::parse(kTf32Swap + ",WGMMA_FILLS=slab"), 107,
      {{"M", 36}, {"N", 100}, {"K", 72}}, round_tf32);
  EXPECT_EQ(s.used_knobs.at("WGMMA_FILLS"), "slab");
  passcheck::check_every_pass(
      "matmul(A[64,200]:f32, B[200,256]:f32)",
      Knobs::parse(kTf32SwapBase + ",WM=2,BN=64,STAGES=3,WARP_SPECIALIZE=1,PERSISTENT=1,"
                                   "CLUSTER_M=2,WGMMA_FILLS=slab"),
      109, {}, round_tf32, std::nullopt, t);
  passcheck::check_every_pass(
      "matmul(A[K,M]:f32.T, B[N,K]:f32.T)",
      Knobs::parse("ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=32,STAGES=2,"
                   "WGMMA_A=regs,WARP_SPECIALIZE=1,WGMMA_FILLS=slab"),
      113, {{"M", 72}, {"N", 40}, {"K", 104}}, round_tf32);
  passcheck::check_every_pass(
      "matmul(A[128,192]:bf16, B[64,192]:bf16.T)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,"
                   "WGMMA_A=regs,WARP_SPECIALIZE=1,WGMMA_FILLS=slab"),
      127);
  // The default, and the knob's error; shared-A kernels have no fills (not used).
  EXPECT_EQ(passcheck::compile_sm90a("matmul(A[64,64]:f32, B[64,64]:f32)", kTf32Swap)
                .used_knobs.at("WGMMA_FILLS"),
            "step");
  EXPECT_FALSE(passcheck::compile_sm90a("matmul(A[64,64]:f32, B[64,64]:f32.T)",
                                        "ATOM=wgmma_tf32,WM=1,WN=1,BN=32,STAGE=tma,"
                                        "SWIZZLE=128B,BK=32,STAGES=2,WGMMA_FILLS=slab")
                   .used_knobs.count("WGMMA_FILLS"));
  EXPECT_NE(passcheck::error_of("matmul(A[64,64]:f32, B[64,64]:f32)", kTf32Swap + ",WGMMA_FILLS=k")
                .find("WGMMA_FILLS=k"),
            std::string::npos);
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

TEST(WgmmaRs, DefaultsOrientTf32ForEveryMajorness) {
  // B [K, N] row-major: swapped, B^T in registers, the large TMA schedule (warp-specialized,
  // persistent) storing directly (k:053 takes no transposed tile).
  auto n_major = default_knobs_of("matmul(A[4096,4096]:f32, B[4096,4096]:f32)", "wgmma_tf32");
  EXPECT_EQ(n_major.at("SWAP_AB"), "1");
  EXPECT_EQ(n_major.at("WGMMA_A"), "regs");
  EXPECT_EQ(n_major.at("STAGE"), "tma");
  EXPECT_EQ(n_major.at("WARP_SPECIALIZE"), "1");
  EXPECT_EQ(n_major.at("PERSISTENT"), "1");
  EXPECT_EQ(n_major.at("EPILOGUE"), "direct");
  // The register fills pass raw bits (TF32_ROUND=none): the products the shared-A form
  // computes, the tensor core truncating both operands.
  EXPECT_EQ(n_major.at("TF32_ROUND"), "none");
  // A given transposed (M-major), B K-major: registers, unswapped, the TMA store.
  auto a_m = default_knobs_of("matmul(A[4096,4096]:f32.T, B[4096,4096]:f32.T)", "wgmma_tf32");
  EXPECT_EQ(a_m.at("SWAP_AB"), "0");
  EXPECT_EQ(a_m.at("WGMMA_A"), "regs");
  EXPECT_EQ(a_m.at("STAGE"), "tma");
  EXPECT_EQ(a_m.at("EPILOGUE"), "tma_store");
  EXPECT_EQ(a_m.at("TF32_ROUND"), "none");
  // Both K-major: shared A, as before.
  auto k_major = default_knobs_of("matmul(A[4096,4096]:f32, B[4096,4096]:f32.T)", "wgmma_tf32");
  EXPECT_EQ(k_major.at("SWAP_AB"), "0");
  EXPECT_EQ(k_major.at("WGMMA_A"), "smem");
  EXPECT_EQ(k_major.at("STAGE"), "tma");
  // Neither K-major: no orientation gives wgmma a K-major B; both are TMA-staged and
  // transposed in shared memory (k:015), BK = 16 with 4 slots of 48 KB (0.64x cuBLAS at
  // BK = 32 with 2 slots on H100 against the threads' copies' 0.44x; test_wgmma_transpose).
  auto neither = default_knobs_of("matmul(A[4096,4096]:f32.T, B[4096,4096]:f32)", "wgmma_tf32");
  EXPECT_EQ(neither.at("STAGE"), "tma");
  EXPECT_EQ(neither.at("WGMMA_A"), "smem");
  EXPECT_EQ(neither.at("SLAB_A"), "kinner");
  EXPECT_EQ(neither.at("SLAB_B"), "kinner");
  EXPECT_EQ(neither.at("BK"), "16");
  EXPECT_EQ(neither.at("SWIZZLE"), "64B");
  EXPECT_EQ(neither.at("STAGES"), "4");
  EXPECT_EQ(neither.at("EPILOGUE"), "tma_store");
  // B [K, N] and A.T keep their register forms (the transpose measured slower there).
  EXPECT_EQ(n_major.count("SLAB_B"), 0u);
  EXPECT_EQ(a_m.count("SLAB_A"), 0u);
  // Rows TMA cannot address (N = 4090: 16360-byte rows) keep the threads' copies, and so
  // does N = 4092 (rows TMA can address, but no multiple of 8 for the swapped wgmma's N).
  auto ragged = default_knobs_of("matmul(A[4096,4096]:f32, B[4096,4090]:f32)", "wgmma_tf32");
  EXPECT_EQ(ragged.at("STAGE"), "cp_async");
  auto n4092 = default_knobs_of("matmul(A[4096,4096]:f32, B[4096,4092]:f32)", "wgmma_tf32");
  EXPECT_EQ(n4092.at("STAGE"), "cp_async");
  EXPECT_EQ(n4092.at("SWAP_AB"), "0");
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
  // Row-major B kept as wgmma's shared B, or swapped into a shared A: tf32 is K-major only;
  // the errors name the orientations that work.
  fails("matmul(A[256,256]:f32, B[256,256]:f32)", tf32 + ",SWAP_AB=0", "SWAP_AB=1,WGMMA_A=regs");
  fails("matmul(A[256,256]:f32, B[256,256]:f32)", tf32 + ",SWAP_AB=1,WGMMA_A=smem",
        "WGMMA_A=regs");
  // An M-major A kept in shared memory.
  fails("matmul(A[256,256]:f32.T, B[256,256]:f32.T)", tf32, "WGMMA_A=regs");
  // Both operands M-/N-major: no orientation puts a K-major tile in wgmma's B; the threads'
  // transposing copies do.
  fails("matmul(A[256,256]:f32.T, B[256,256]:f32)", tf32 + ",SWAP_AB=1,WGMMA_A=regs",
        "STAGE=cp_async");
  fails("matmul(A[256,256]:f32.T, B[256,256]:f32)", tf32 + ",WGMMA_A=regs", "STAGE=cp_async");
  fails("matmul(A[256,256]:bf16, B[256,256]:bf16)", std::string(kSmall16).replace(kSmall16.find("WGMMA_A=regs"), 12, "WGMMA_A=tmem"), "WGMMA_A");
}

}  // namespace
}  // namespace loom
