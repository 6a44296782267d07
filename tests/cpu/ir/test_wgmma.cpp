// Warpgroup MMA (wgmma) on the Kernel IR interpreter: a hand-written m64n8k16 atom with A
// and B read from shared memory gives the CPU matmul, and the asynchrony the hardware
// has — operands read and accumulators written until wgmma.wait retires the group — is
// enforced: overwriting an operand or touching the accumulators before the wait fails.
#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

Bindings run(const KernelProgram& p, uint64_t seed) {
  verify(p);
  Bindings b;
  make_random_inputs(p, b, seed);
  interpret(p, b);
  return b;
}

void expect_product(const SharedGemm& o, uint64_t seed) {
  const Bindings b = run(shared_gemm(o), seed);
  const std::vector<double> ref =
      reference(b.tensors.at("A").data, b.tensors.at("B").data, o.K(), false);
  const std::vector<double>& C = b.tensors.at("C").data;
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(C[i], ref[i], 1e-5 * o.K()) << "C[" << i << "]";
}

TEST(Wgmma, SharedOperandsMatchCpuMatmul) {
  expect_product(SharedGemm{}, 1);
  expect_product(SharedGemm{}, 2);
}

TEST(Wgmma, ChainedKStepsInOneGroupAccumulate) {
  // Two wgmma on the same accumulators with no wait between: the hardware orders them.
  expect_product(SharedGemm{.ksteps = 3}, 3);
}

TEST(Wgmma, ResultDependsOnEveryOperandElement) {
  // Guards against a reference and an interpreter that agree by both ignoring B.
  KernelProgram p = shared_gemm(SharedGemm{});
  Bindings b;
  make_random_inputs(p, b, 4);
  Bindings b2 = b;
  b2.tensors.at("B").data[3] += 0.5;
  interpret(p, b);
  interpret(p, b2);
  EXPECT_NE(b.tensors.at("C").data, b2.tensors.at("C").data);
}

TEST(Wgmma, OverwritingAnOperandBeforeTheWaitIsARace) {
  KernelProgram p = shared_gemm(SharedGemm{.overwrite_operand = true});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 5);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    const std::string msg = e.what();
    EXPECT_CONTAINS(msg, "write of As offset 5");
    EXPECT_CONTAINS(msg, "acc <- test_wgmma_m64n8k16(As[0, 16, 1], Bs[0, 1, 16])");
    EXPECT_CONTAINS(msg, "missing wgmma.wait?");
  }
}

TEST(Wgmma, AccumulatorsReadBeforeTheWaitFail) {
  KernelProgram p = shared_gemm(SharedGemm{.read_acc_early = true});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 6);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "wgmma accumulators read before wgmma.wait");
  EXPECT_CONTAINS(msg, "register array acc");
}

TEST(Wgmma, NoWaitAtAllIsAnErrorAtBlockEnd) {
  // Stores after the (missing) wait read the accumulators in flight; with them gone too
  // the block ends with the wgmma in flight.
  KernelProgram p = shared_gemm(SharedGemm{.wait = false});
  Bindings b;
  make_random_inputs(p, b, 7);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "wgmma accumulators read before wgmma.wait");
  p.kernels[0].body.pop_back();  // the C stores
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "still in flight when the block ends");
}

TEST(Wgmma, ThreadStoresNeedAProxyFenceBeforeWgmmaReadsThem) {
  KernelProgram p = shared_gemm(SharedGemm{.fence = false});
  Bindings b;
  make_random_inputs(p, b, 8);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "through the async proxy");
  EXPECT_CONTAINS(msg, "no fence.proxy.async since");
}

TEST(Wgmma, PartOfAWarpgroupIsRejected) {
  KernelProgram p = shared_gemm(SharedGemm{});
  Block& body = p.kernels[0].body;
  for (Stmt& s : body)
    if (s.kind == StmtKind::Atom) s = Stmt::If(Expr::make(Expr::Kind::Lt, tid(), Expr(96)), {s});
  Bindings b;
  make_random_inputs(p, b, 9);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "reached by 96 of the 128 threads of warpgroup 0");
}

}  // namespace
}  // namespace loom
