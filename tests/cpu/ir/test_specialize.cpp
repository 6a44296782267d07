// Warp specialization on the interpreter: the arms of a Specialize run concurrently as
// cooperative tasks, so a producer warpgroup filling a two-slot ring with TMA loads and a
// consumer warpgroup draining it with wgmma hand the slots back and forth through
// full/empty mbarriers over six K steps — three times round the ring. Leaving out an
// arrival is the deadlock the GPU would hang in, reported instead of hanging.
#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

TEST(Specialize, ProducerConsumerRingMatchesCpuMatmul) {
  const SpecializedGemm o;
  KernelProgram p = specialized_gemm(o);
  verify(p);
  for (uint64_t seed : {1, 2}) {
    Bindings b;
    make_random_inputs(p, b, seed);
    interpret(p, b);
    const std::vector<double> ref =
        reference(b.tensors.at("A").data, b.tensors.at("Bt").data, o.K(), true);
    const std::vector<double>& C = b.tensors.at("C").data;
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(C[i], ref[i], 1e-4) << "C[" << i << "]";
  }
}

TEST(Specialize, MissingConsumerArrivalIsADeadlockNotAHang) {
  KernelProgram p = specialized_gemm(SpecializedGemm{.consumer_arrives = false});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 3);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "deadlock: every arm of the specialize waits");
  // Both blocked waits are named: the producer on an empty slot, the consumer on a full one.
  EXPECT_CONTAINS(msg, "mbar.wait [k % 2 + 2]");
  EXPECT_CONTAINS(msg, "mbarrier slot 2 (still expects 128 of 128 arrivals");
  EXPECT_CONTAINS(msg, "mbar.wait [k % 2] parity=k / 2 % 2");
}

TEST(Specialize, FreeingASlotBeforeTheWgmmaRetiresIsARace) {
  // The consumer arrives on "empty" while its wgmma may still read the slot: the
  // producer's next TMA load into that slot races with it.
  KernelProgram p = specialized_gemm(SpecializedGemm{.wait_before_arrive = false});
  Bindings b;
  make_random_inputs(p, b, 4);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    const std::string msg = e.what();
    EXPECT_CONTAINS(msg, "tma.load As[k % 2 * 1024]");
    EXPECT_CONTAINS(msg, "may still be reading it");
    EXPECT_CONTAINS(msg, "missing wgmma.wait?");
  }
}

TEST(Specialize, BarrierInsideAnArmIsRejected) {
  KernelProgram p = specialized_gemm(SpecializedGemm{.barrier_in_arm = true});
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "barrier (bar.sync 0) inside an arm");
  Bindings b;
  make_random_inputs(p, b, 5);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "bar.sync 0 inside an arm of a specialize");
}

TEST(Specialize, WithoutMbarrierOrderingArmsRace) {
  // Happens-before between arms comes only from mbarriers: the consumer reading a
  // shared value the producer stored, with nothing between, is a race.
  KernelProgram p;
  p.tensors = {decl("C", DType::F32, {1}, TensorRole::Output),
               decl("S", DType::F32, {1}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_race";
  k.params = {"C"};
  k.block_threads = 64;
  k.body = {Stmt::Specialize(
      {Stmt::If(eq(tid(), Expr(0)), {Stmt::Write("S", {Expr(0)}, Operand::constant(2.0))}),
       Stmt::If(eq(tid(), Expr(32)), {Stmt::Load("x", "S", {Expr(0)}),
                                      Stmt::Write("C", {Expr(0)}, Operand::value("x"))})})};
  p.kernels.push_back(k);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 6);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "read-after-write");
  }

  // Ordered by an mbarrier (the writer arrives after its store, the reader waits), it
  // runs — with the reader as arm 0, which blocks until the writer has arrived.
  p.kernels[0].mbarriers = 1;
  Block& arms = p.kernels[0].body[0].body;
  arms[0].body.push_back(Stmt::MbarArrive(Expr(0)));
  arms[1].body.insert(arms[1].body.begin(), Stmt::MbarWait(Expr(0), Expr(0)));
  std::swap(arms[0], arms[1]);
  p.kernels[0].body.insert(
      p.kernels[0].body.begin(),
      {Stmt::If(eq(tid(), Expr(0)), {Stmt::MbarInit(Expr(0), 1), Stmt::FenceMbarInit()}),
       Stmt::Barrier()});
  verify(p);
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("C").data[0], 2.0);
}

TEST(Specialize, ArmsMustBeIfsAndDisjoint) {
  KernelProgram p;
  p.tensors = {decl("C", DType::F32, {2}, TensorRole::Output)};
  KernelOp k;
  k.name = "k_arms";
  k.params = {"C"};
  k.block_threads = 64;
  k.body = {Stmt::Specialize({Stmt::Write("C", {Expr(0)}, Operand::constant(1.0))})};
  p.kernels.push_back(k);
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "arm 0 is `C[0] = 1`, not an If");

  p.kernels[0].body = {
      Stmt::Specialize({Stmt::If(Expr::make(Expr::Kind::Lt, tid(), Expr(40)),
                                 {Stmt::Write("C", {Expr(0)}, Operand::constant(1.0))}),
                        Stmt::If(Expr::make(Expr::Kind::Lt, Expr(31), tid()),
                                 {Stmt::Write("C", {Expr(1)}, Operand::constant(2.0))})})};
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 7);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }),
                  "thread 32 satisfies the conditions of arms 0 and 1");
}

TEST(Specialize, TileIrArmsRunToCompletion) {
  // Tile IR runs as one thread: each arm whose condition holds runs as a task.
  TileProgram p;
  p.tensors = {decl("C", DType::F32, {3}, TensorRole::Output)};
  Block arms = {
      Stmt::If(Expr(1), {Stmt::Write("C", {Expr(0)}, Operand::constant(1.0))}),
      Stmt::If(Expr(0), {Stmt::Write("C", {Expr(1)}, Operand::constant(5.0))}),
      Stmt::If(Expr(1),
               {loop("i", 2, {Stmt::Write("C", {var("i") + 1}, Operand::constant(3.0))})})};
  p.ops.push_back(TileOp{"spec", {}, "C", {Stmt::Specialize(arms)}});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 8);
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("C").data, (std::vector<double>{1.0, 3.0, 3.0}));
}

}  // namespace
}  // namespace loom
