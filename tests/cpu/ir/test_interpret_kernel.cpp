// Block-level (lockstep) interpretation of Kernel IR: staged GEMMs give the Loop IR
// answer, and each missing barrier or cp.async wait is reported as the race it causes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "gemm_kernels.h"
#include "ir/error.h"
#include "ir/interpreter.h"

namespace loom {
namespace {

using test::GemmKernelOptions;
using test::Staging;
using test::var;

LoopProgram loop_gemm() {
  LoopProgram p;
  p.symbols = {"M", "N", "K"};
  p.tensors = {test::tensor_decl("A", {var("M"), var("K")}, TensorRole::Input),
               test::tensor_decl("B", {var("K"), var("N")}, TensorRole::Input),
               test::tensor_decl("C", {var("M"), var("N")}, TensorRole::Output)};
  Block cell = {Stmt::Init("acc", 0.0),
                Stmt::For("k", var("K"), LoopKind::Reduce, "k",
                          {Stmt::Load("a", "A", {var("m"), var("k")}),
                           Stmt::Load("b", "B", {var("k"), var("n")}),
                           Stmt::Compute("t", ScalarOp::Mul,
                                         {Operand::value("a"), Operand::value("b")}),
                           Stmt::Accum("acc", Operand::value("t"))}),
                Stmt::Write("C", {var("m"), var("n")}, Operand::value("acc"))};
  p.ops.push_back(LoopOp{"gemm", {"A", "B"}, "C",
                         {Stmt::For("m", var("M"), LoopKind::Parallel, "m",
                                    {Stmt::For("n", var("N"), LoopKind::Parallel, "n", cell)})}});
  return p;
}

Bindings inputs(const ProgramBase& p, int64_t M, int64_t N, int64_t K, uint64_t seed) {
  Bindings b;
  b.symbols = {{"M", M}, {"N", N}, {"K", K}};
  make_random_inputs(p, b, seed);
  return b;
}

// C of the Loop IR GEMM on the same A and B.
std::vector<double> loop_result(const Bindings& b) {
  Bindings l = b;
  l.tensors.erase("C");
  interpret(loop_gemm(), l);
  return l.tensors.at("C").data;
}

// Runs `p` and expects bit-identical results to Loop IR: the kernels sum k in the same
// order, and the zero-filled tail adds exact zeros.
void expect_matches_loop_ir(const KernelProgram& p, int64_t M, int64_t N, int64_t K) {
  verify(p);
  Bindings b = inputs(p, M, N, K, uint64_t(M * 10000 + N * 100 + K));
  interpret(p, b);
  std::vector<double> want = loop_result(b);
  const std::vector<double>& got = b.tensors.at("C").data;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
}

std::string error_of(const KernelProgram& p, int64_t M, int64_t N, int64_t K) {
  Bindings b = inputs(p, M, N, K, 1);
  try {
    interpret(p, b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(msg, part) \
  EXPECT_NE((msg).find(part), std::string::npos) << "missing `" << (part) << "` in: " << (msg)

TEST(InterpretKernel, StagedGemmMatchesLoopIr) {
  GemmKernelOptions o;
  expect_matches_loop_ir(test::gemm_kernel(o), 16, 16, 8);
  // Ragged edges in M, N and K: the predicated loads fill the slabs with zeros.
  expect_matches_loop_ir(test::gemm_kernel(o), 21, 35, 13);
}

TEST(InterpretKernel, MissingFirstBarrierIsReadAfterWriteRace) {
  GemmKernelOptions o;
  o.first_barrier = false;
  KernelProgram p = test::gemm_kernel(o);
  verify(p);  // the verifier cannot see it; only execution order can
  std::string msg = error_of(p, 16, 16, 8);
  EXPECT_CONTAINS(msg, "race on shared tensor As offset");
  EXPECT_CONTAINS(msg, "read-after-write");
  EXPECT_CONTAINS(msg, "kernel k_gemm block (0, 0, 0)");
  EXPECT_CONTAINS(msg, "As[row_As * 8 + col_As] = x_As");      // the write
  EXPECT_CONTAINS(msg, "a[i] = load As[(tm * 2 + i) * 8 + kk]");  // the read
}

TEST(InterpretKernel, MissingTrailingBarrierIsWriteAfterReadRace) {
  GemmKernelOptions o;
  o.trailing_barrier = false;
  KernelProgram p = test::gemm_kernel(o);
  // One k step has no refill, so nothing races...
  expect_matches_loop_ir(p, 16, 16, 8);
  // ...two steps refill the slabs that other threads are still reading.
  std::string msg = error_of(p, 16, 16, 16);
  EXPECT_CONTAINS(msg, "race on shared tensor As offset");
  EXPECT_CONTAINS(msg, "write-after-read");
  try {
    Bindings b = inputs(p, 16, 16, 16, 1);
    interpret(p, b);
    ADD_FAILURE() << "no race reported";
  } catch (const RaceError&) {
  }
}

TEST(InterpretKernel, CpAsyncWithCommitWaitAndBarrierMatchesLoopIr) {
  GemmKernelOptions o;
  o.staging = Staging::CpAsync;
  expect_matches_loop_ir(test::gemm_kernel(o), 16, 16, 8);
  expect_matches_loop_ir(test::gemm_kernel(o), 19, 30, 21);  // zero-filled edges
  o.vec = 4;  // 16-byte copies; 16 threads of 4 x 4 cells so that each copies whole vectors
  o.tm = o.tn = 4;
  expect_matches_loop_ir(test::gemm_kernel(o), 19, 36, 24);  // N, K: whole vectors
}

TEST(InterpretKernel, CpAsyncWithoutWaitIsCaught) {
  GemmKernelOptions o;
  o.staging = Staging::CpAsync;
  o.wait = false;
  std::string msg = error_of(test::gemm_kernel(o), 16, 16, 8);
  EXPECT_CONTAINS(msg, "before its cp.async completed");
  EXPECT_CONTAINS(msg, "missing cp.async.wait?");
  EXPECT_CONTAINS(msg, "read of As offset");
}

TEST(InterpretKernel, CpAsyncWaitDoesNotRetireUncommittedCopies) {
  // wait_group only retires committed groups: a wait before the commit leaves the
  // copies in flight, as on the GPU.
  GemmKernelOptions o;
  o.staging = Staging::CpAsync;
  KernelProgram p = test::gemm_kernel(o);
  Block& loop = p.kernels[0].body[8].body;  // the ko loop: fills, commit, wait, ...
  ASSERT_EQ(loop[2].kind, StmtKind::AsyncCommit);
  std::swap(loop[2], loop[3]);
  EXPECT_CONTAINS(error_of(p, 16, 16, 8), "before its cp.async completed");
}

TEST(InterpretKernel, CopiesInFlightAtKernelEndAreAnError) {
  KernelProgram p = test::gemm_kernel(GemmKernelOptions{});
  p.kernels[0].body.push_back(Stmt::AsyncCopy("As", var("threadIdx.x"), "A", 0, 1, Expr(1)));
  p.kernels[0].body.push_back(Stmt::AsyncCommit());
  std::string msg = error_of(p, 16, 16, 8);
  EXPECT_CONTAINS(msg, "still in flight when the kernel ends");
}

TEST(InterpretKernel, PipelinedDoubleBufferWithWaitOneMatchesLoopIr) {
  GemmKernelOptions o;
  o.staging = Staging::Pipelined;
  expect_matches_loop_ir(test::gemm_kernel(o), 16, 16, 40);
  expect_matches_loop_ir(test::gemm_kernel(o), 23, 9, 13);
  o.vec = 4;
  o.tm = o.tn = 4;
  expect_matches_loop_ir(test::gemm_kernel(o), 23, 12, 20);
}

TEST(InterpretKernel, PipelinedWaitingForTooFewGroupsIsCaught) {
  // wait 2 leaves the current stage's group in flight while it is read.
  GemmKernelOptions o;
  o.staging = Staging::Pipelined;
  o.wait_keep = 2;
  EXPECT_CONTAINS(error_of(test::gemm_kernel(o), 16, 16, 40), "before its cp.async completed");
}

TEST(InterpretKernel, PipelinedRefillWithoutTrailingBarrierRacesAtIssue) {
  // Without the trailing barrier, step k+1 issues copies into the buffer that step k
  // has just read, in the same epoch: the copy may land before another thread's read.
  GemmKernelOptions o;
  o.staging = Staging::Pipelined;
  o.trailing_barrier = false;
  std::string msg = error_of(test::gemm_kernel(o), 16, 16, 40);
  EXPECT_CONTAINS(msg, "write-after-read");
  EXPECT_CONTAINS(msg, "cp.async As[");
}

TEST(InterpretKernel, PaddedAndSwizzledSharedTensorsGiveIdenticalResults) {
  for (Staging st : {Staging::Sync, Staging::CpAsync, Staging::Pipelined}) {
    GemmKernelOptions plain;
    plain.staging = st;
    GemmKernelOptions padded = plain, swizzled = plain;
    padded.pad = 1;
    swizzled.swizzle = Swizzle{2, 0, 3};  // 16 x 8 slabs: 32-element blocks
    KernelProgram pp = test::gemm_kernel(plain), pd = test::gemm_kernel(padded),
                  sw = test::gemm_kernel(swizzled);
    // Not a no-op: the swizzle moves elements, the pad changes the footprint.
    EXPECT_NE(sw.tensors[3].physical(9), 9);
    EXPECT_NE(pd.tensors[3].footprint().str(), pp.tensors[3].footprint().str());
    Bindings a = inputs(pp, 21, 18, 19, 7), b = a, c = a;
    verify(pd);
    verify(sw);
    interpret(pp, a);
    interpret(pd, b);
    interpret(sw, c);
    EXPECT_EQ(a.tensors.at("C").data, b.tensors.at("C").data);
    EXPECT_EQ(a.tensors.at("C").data, c.tensors.at("C").data);
    EXPECT_EQ(a.tensors.at("C").data, loop_result(a));
  }
}

TEST(InterpretKernel, OffsetsIgnoringTheRowPadAreCaught) {
  // The kernel addresses As as if unpadded while the declaration pads its rows.
  GemmKernelOptions o;
  KernelProgram p = test::gemm_kernel(o);
  p.tensors[3].pad = 4;
  std::string msg = error_of(p, 16, 16, 8);
  EXPECT_CONTAINS(msg, "lands in the row padding of shared tensor As");
}

TEST(InterpretKernel, UninitializedSharedReadIsCaught) {
  // Fill only half of A's slab: the other half is read unwritten.
  KernelProgram p = test::gemm_kernel(GemmKernelOptions{});
  Stmt& fill_a = p.kernels[0].body[8].body[0];
  ASSERT_EQ(fill_a.var, "r_As");
  fill_a.extent = 1;
  std::string msg = error_of(p, 16, 16, 8);
  EXPECT_CONTAINS(msg, "uninitialized shared read");
  EXPECT_CONTAINS(msg, "As offset");
}

TEST(InterpretKernel, DivergentBarrierAndThreadDependentLoopAreRejected) {
  KernelProgram p = test::gemm_kernel(GemmKernelOptions{});
  Block& loop = p.kernels[0].body[8].body;
  ASSERT_EQ(loop[2].kind, StmtKind::Barrier);
  loop[2] = Stmt::If(var("threadIdx.x") < 32, {Stmt::Barrier()});
  EXPECT_CONTAINS(error_of(p, 16, 16, 8), "barrier reached by 32 of the 64 threads");

  KernelProgram q = test::gemm_kernel(GemmKernelOptions{});
  q.kernels[0].body[8].body[4] = Stmt::For("z", var("tm") % 3, LoopKind::Parallel, "", {});
  std::string msg = error_of(q, 16, 16, 8);
  EXPECT_CONTAINS(msg, "loop z has a thread-dependent extent tm % 3");
}

TEST(InterpretKernel, AtomicAddFromFourBlocksSums) {
  // Split-K: block x adds its quarter of the k range into every C element.
  KernelProgram p;
  p.symbols = {"K"};
  const int M = 3, N = 5, KS = 4;
  p.tensors = {test::tensor_decl("A", {M, var("K")}, TensorRole::Input),
               test::tensor_decl("B", {var("K"), N}, TensorRole::Input),
               test::tensor_decl("C", {M, N}, TensorRole::Output)};
  KernelOp k;
  k.name = "k_splitk";
  k.params = {"A", "B", "C", "K"};
  k.grid[0] = 4;
  k.block_threads = M * N;
  const Expr m = var("m"), n = var("n"), kk = var("kk");
  k.body = {Stmt::Let("m", var("threadIdx.x") / N), Stmt::Let("n", var("threadIdx.x") % N),
            Stmt::Init("acc", 0.0),
            Stmt::For("kq", KS, LoopKind::Reduce, "k",
                      {Stmt::Let("kk", var("blockIdx.x") * KS + var("kq")),
                       Stmt::If(kk < var("K"),
                                {Stmt::Load("a", "A", {m * var("K") + kk}),
                                 Stmt::Load("b", "B", {kk * N + n}),
                                 Stmt::Atom("fma_f32", "acc",
                                            {Operand::value("a"), Operand::value("b")})})}),
            Stmt::Write("C", {m * N + n}, Operand::value("acc"))};
  k.body.back().atomic_add = true;
  p.kernels.push_back(k);
  verify(p);

  Bindings b;
  b.symbols = {{"K", 14}};
  make_random_inputs(p, b, 3);
  b.tensors.at("C").data.assign(M * N, 0.0);  // atomic split-K needs a zeroed output
  Bindings plain = b;
  interpret(p, b);
  const auto& A = b.tensors.at("A").data;
  const auto& B = b.tensors.at("B").data;
  double differs = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int q = 0; q < 14; ++q) want += A[size_t(i * 14 + q)] * B[size_t(q * N + j)];
      EXPECT_NEAR(b.tensors.at("C").data[size_t(i * N + j)], want, 1e-5) << i << ", " << j;
      differs += std::fabs(want - 0);
    }
  EXPECT_GT(differs, 0);

  // A plain store keeps only the last block's partial sum.
  p.kernels[0].body.back().atomic_add = false;
  interpret(p, plain);
  int wrong = 0;
  for (size_t i = 0; i < size_t(M * N); ++i)
    wrong += std::fabs(plain.tensors.at("C").data[i] - b.tensors.at("C").data[i]) > 1e-5;
  EXPECT_GT(wrong, 0);
}

TEST(InterpretKernel, Gemm64x64x32With256ThreadsIsFast) {
  GemmKernelOptions o;
  o.bm = o.bn = 64;
  o.bk = 32;
  o.tm = o.tn = 4;
  for (Staging st : {Staging::Sync, Staging::Pipelined}) {
    o.staging = st;
    o.vec = st == Staging::Sync ? 1 : 4;
    KernelProgram p = test::gemm_kernel(o);
    ASSERT_EQ(p.kernels[0].block_threads, 256);
    Bindings b = inputs(p, 64, 64, 32, 11);
    auto start = std::chrono::steady_clock::now();
    interpret(p, b);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty(st == Staging::Sync ? "sync_seconds" : "pipelined_seconds", std::to_string(s));
    EXPECT_LT(s, 1.0) << "a 64x64x32 block of 256 threads took " << s << " s";
    EXPECT_EQ(b.tensors.at("C").data, loop_result(b));
  }
}

}  // namespace
}  // namespace loom
