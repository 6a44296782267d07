// Named barriers (bar.sync id, count) on the verifier and the interpreter: they order the
// shared-memory accesses of exactly the threads that meet there, per warpgroup inside a
// block or across the arms of a specialize, and a count that does not match the threads
// that arrive is reported (a deadlock or an overflow), never hung on.
#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

// 256 threads, two warpgroups. Each thread writes its own cell of Ts[256]; after the
// barrier thread t reads the cell of thread `partner(t)` and copies it to O[t].
struct Exchange {
  Stmt barrier = Stmt::NamedBarrier(Expr(1) + tid() / 128, 128);
  Expr partner = tid() / 128 * 128 + (tid() + 1) % 128;  // a neighbour in its warpgroup
  std::optional<Expr> barrier_under = std::nullopt;      // an If around the barrier
};

KernelProgram exchange_kernel(const Exchange& o) {
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {256}, TensorRole::Input),
               decl("O", DType::F32, {256}, TensorRole::Output),
               decl("Ts", DType::F32, {256}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_exchange";
  k.params = {"X", "O"};
  k.block_threads = 256;
  k.body = {Stmt::Load("x", "X", {tid()}), Stmt::Write("Ts", {tid()}, Operand::value("x"))};
  k.body.push_back(o.barrier_under ? Stmt::If(*o.barrier_under, {o.barrier}) : o.barrier);
  k.body.push_back(Stmt::Load("y", "Ts", {o.partner}));
  k.body.push_back(Stmt::Write("O", {tid()}, Operand::value("y")));
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(NamedBarrier, OrdersTheThreadsOfEachWarpgroup) {
  const Exchange o;
  KernelProgram p = exchange_kernel(o);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 1);
  interpret(p, b);
  const std::vector<double>& X = b.tensors.at("X").data;
  const std::vector<double>& O = b.tensors.at("O").data;
  for (int t = 0; t < 256; ++t) EXPECT_EQ(O[size_t(t)], X[size_t(t / 128 * 128 + (t + 1) % 128)]);
  EXPECT_EQ(print_block({o.barrier}), "bar.sync threadIdx.x / 128 + 1, 128\n");
}

TEST(NamedBarrier, DoesNotOrderThreadsOfAnotherId) {
  // Thread t reads a cell of the other warpgroup, which waited at the other barrier.
  KernelProgram p = exchange_kernel(Exchange{.partner = (tid() + 128) % 256});
  Bindings b;
  make_random_inputs(p, b, 2);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "read-after-write");
  }
}

TEST(NamedBarrier, OneIdForTheBlockOrdersEveryone) {
  KernelProgram p = exchange_kernel(
      Exchange{.barrier = Stmt::NamedBarrier(Expr(3), 256), .partner = (tid() + 128) % 256});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 3);
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("O").data[5], b.tensors.at("X").data[133]);
}

TEST(NamedBarrier, TooFewThreadsIsADeadlock) {
  // Only warpgroup 0 reaches `bar.sync 1, 256`: on the GPU it waits forever.
  KernelProgram p = exchange_kernel(
      Exchange{.barrier = Stmt::NamedBarrier(Expr(1), 256), .barrier_under = tid() < 128});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 4);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "deadlock: bar.sync 1, 256");
  EXPECT_CONTAINS(msg, "128 of its 256 threads");
}

TEST(NamedBarrier, TooManyThreadsIsReported) {
  KernelProgram p = exchange_kernel(Exchange{.barrier = Stmt::NamedBarrier(Expr(1), 128)});
  Bindings b;
  make_random_inputs(p, b, 5);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }),
                  "256 threads arrive at barrier 1, more than the 128 it counts");
}

TEST(NamedBarrier, HalfAWarpIsReported) {
  KernelProgram p = exchange_kernel(
      Exchange{.barrier = Stmt::NamedBarrier(Expr(1), 256), .barrier_under = tid() % 32 < 16});
  Bindings b;
  make_random_inputs(p, b, 6);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "the hardware counts whole warps");
}

TEST(NamedBarrier, VerifierChecksCountAndId) {
  KernelProgram p = exchange_kernel(Exchange{.barrier = Stmt::NamedBarrier(Expr(1), 100)});
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "is not a multiple of 32");
  p = exchange_kernel(Exchange{.barrier = Stmt::NamedBarrier(Expr(16), 128)});
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "outside 1..15");
  p = exchange_kernel(Exchange{.barrier = Stmt::NamedBarrier(tid() / 128 * 15, 128)});
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "outside 1..15");
  p = exchange_kernel(Exchange{.barrier = Stmt::NamedBarrier(Expr(1), 512)});
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "could never complete");
  // Unlike bar.sync 0 it may sit under a thread-dependent If.
  p = exchange_kernel(Exchange{.barrier = Stmt::NamedBarrier(Expr(2), 128),
                               .partner = (tid() + 1) % 128,
                               .barrier_under = tid() < 128});
  verify(p);
}

// Two arms of a specialize, 128 threads each, meet at a barrier of both: what the first
// arm wrote before it, the second reads after it.
KernelProgram arms_kernel(int count) {
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {128}, TensorRole::Input),
               decl("O", DType::F32, {128}, TensorRole::Output),
               decl("Ts", DType::F32, {128}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_arms";
  k.params = {"X", "O"};
  k.block_threads = 256;
  const Stmt bar = Stmt::NamedBarrier(Expr(2), count);
  Block writer = {Stmt::Load("x", "X", {tid() - 128}), Stmt::Write("Ts", {tid() - 128}, Operand::value("x")),
                  bar};
  Block reader = {bar, Stmt::Load("y", "Ts", {(tid() + 5) % 128}),
                  Stmt::Write("O", {tid()}, Operand::value("y"))};
  k.body = {Stmt::Specialize({Stmt::If(Expr(128) <= tid(), writer), Stmt::If(tid() < 128, reader)})};
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(NamedBarrier, JoinsTheArmsOfASpecialize) {
  KernelProgram p = arms_kernel(256);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 7);
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("O").data[3], b.tensors.at("X").data[8]);
}

TEST(NamedBarrier, ACountNoArmCanCompleteIsADeadlock) {
  // 384 threads never meet in a block of 256 (the verifier would say so first): both
  // arms block, and the scheduler reports it.
  KernelProgram p = arms_kernel(384);
  Bindings b;
  make_random_inputs(p, b, 8);
  const std::string msg = error_of([&] { interpret(p, b); });
  EXPECT_CONTAINS(msg, "deadlock");
  EXPECT_CONTAINS(msg, "bar.sync 2, 384");
}

// bar.arrive: the writer arm arrives (and runs on), the reader arm waits. The reader's arm
// comes first, so the interpreter runs it up to its bar.sync before the writer starts.
// `late_write`: the writer writes Ts again after its arrive; `arriver_reads`: it reads
// the reader's Us (written before the reader's bar.sync) after its arrive. The barrier
// orders neither. `arrive_count`: the count the writer's bar.arrive gives.
KernelProgram arrive_kernel(bool late_write, bool arriver_reads, int arrive_count = 256) {
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {128}, TensorRole::Input),
               decl("O", DType::F32, {256}, TensorRole::Output),
               decl("Ts", DType::F32, {128}, TensorRole::Shared),
               decl("Us", DType::F32, {128}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_arrive";
  k.params = {"X", "O"};
  k.block_threads = 256;
  Block writer = {Stmt::Load("x", "X", {tid() - 128}), Stmt::Write("Ts", {tid() - 128}, Operand::value("x"))};
  writer.push_back(Stmt::NamedBarrierArrive(Expr(2), arrive_count));
  if (late_write) writer.push_back(Stmt::Write("Ts", {tid() - 128}, Operand::constant(1.0)));
  if (arriver_reads) {
    writer.push_back(Stmt::Load("u", "Us", {tid() - 128}));
    writer.push_back(Stmt::Write("O", {tid()}, Operand::value("u")));
  }
  Block reader = {Stmt::Write("Us", {tid()}, Operand::constant(2.0)),
                  Stmt::NamedBarrier(Expr(2), 256),
                  Stmt::Load("y", "Ts", {(tid() + 5) % 128}),
                  Stmt::Write("O", {tid()}, Operand::value("y"))};
  k.body = {Stmt::Specialize({Stmt::If(tid() < 128, reader), Stmt::If(Expr(128) <= tid(), writer)})};
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(NamedBarrier, ArriveHandsOffOneWay) {
  KernelProgram p = arrive_kernel(false, false);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 9);
  interpret(p, b);
  EXPECT_EQ(b.tensors.at("O").data[3], b.tensors.at("X").data[8]);
  EXPECT_EQ(print_block({Stmt::NamedBarrierArrive(Expr(2), 256)}), "bar.arrive 2, 256\n");
}

TEST(NamedBarrier, ArriveOrdersNothingAfterIt) {
  // The arriver writes Ts again after its arrive: the waiters' reads race with it.
  KernelProgram p = arrive_kernel(true, false);
  Bindings b;
  make_random_inputs(p, b, 10);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "race");
}

TEST(NamedBarrier, ArriveLearnsNothingFromTheWaiters) {
  // The reader wrote Us before its bar.sync; the arriver reads Us after its arrive: the
  // barrier orders the other way only.
  KernelProgram p = arrive_kernel(false, true);
  Bindings b;
  make_random_inputs(p, b, 11);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "race");
}

TEST(NamedBarrier, ArrivalsLeftAtTheEndAreReported) {
  // Warpgroup 1 arrives at barrier 4 and nobody ever waits there: on the GPU the phase
  // stays open into the next use of the id.
  KernelProgram p = exchange_kernel(Exchange{});
  p.kernels[0].body.push_back(
      Stmt::If(Expr(128) <= tid(), {Stmt::NamedBarrierArrive(Expr(4), 256)}));
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 12);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }),
                  "barrier 4 ends the block with 128 of its 256 threads arrived (bar.arrive)");
}

TEST(NamedBarrier, ArriveAndSyncMustAgreeOnTheCount) {
  // The reader waits for 256 at barrier 2; the writer's arrive says 128.
  KernelProgram p = arrive_kernel(false, false, 128);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 13);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }), "every thread of a named barrier must give the same count");
}

// FlashAttention-3's ping-pong inside one arm: warpgroup 0 waits at barrier 1 for
// warpgroup 1's arrive, then arrives at 2 where warpgroup 1 waits. Under a plain
// specialize the arm's two warpgroups run in lockstep and deadlock; `specialize
// warpgroups` runs them as tasks of their own.
KernelProgram pingpong_kernel(bool per_warpgroup) {
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {256}, TensorRole::Input),
               decl("O", DType::F32, {256}, TensorRole::Output),
               decl("Ts", DType::F32, {256}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_pingpong";
  k.params = {"X", "O"};
  k.block_threads = 384;
  const Expr wg = tid() / 128;
  // Warpgroup 1 writes its cells and hands the turn to 0, which reads them, writes its own
  // and hands the turn back; warpgroup 1 then reads warpgroup 0's.
  Block arm = {
      Stmt::Load("x", "X", {tid()}),
      Stmt::If(Expr::make(Expr::Kind::Eq, wg, Expr(1)),
               {Stmt::Write("Ts", {tid()}, Operand::value("x")),
                Stmt::NamedBarrierArrive(Expr(1), 256), Stmt::NamedBarrier(Expr(2), 256),
                Stmt::Load("y", "Ts", {tid() - 128}), Stmt::Write("O", {tid()}, Operand::value("y"))}),
      Stmt::If(Expr::make(Expr::Kind::Eq, wg, Expr(0)),
               {Stmt::NamedBarrier(Expr(1), 256), Stmt::Load("y", "Ts", {tid() + 128}),
                Stmt::Write("O", {tid()}, Operand::value("y")),
                Stmt::Write("Ts", {tid()}, Operand::value("x")),
                Stmt::NamedBarrierArrive(Expr(2), 256)}),
  };
  Stmt spec = Stmt::Specialize({Stmt::If(Expr(256) <= tid(), {}), Stmt::If(tid() < 256, arm)});
  if (per_warpgroup) spec.mode = "warpgroups";
  k.body = {spec};
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(NamedBarrier, PingPongBetweenTheWarpgroupsOfAnArm) {
  KernelProgram p = pingpong_kernel(true);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 14);
  interpret(p, b);
  const std::vector<double>& X = b.tensors.at("X").data;
  const std::vector<double>& O = b.tensors.at("O").data;
  for (int t = 0; t < 256; ++t) EXPECT_EQ(O[size_t(t)], X[size_t((t + 128) % 256)]) << t;
  EXPECT_CONTAINS(print(p), "specialize warpgroups:");
  // In lockstep, warpgroup 0's bar.sync 1 waits for warpgroup 1's arrive, which the same
  // task can never reach first: a deadlock, reported.
  KernelProgram q = pingpong_kernel(false);
  Bindings c;
  make_random_inputs(q, c, 14);
  EXPECT_CONTAINS(error_of([&] { interpret(q, c); }), "deadlock");
}

// The same hand-off in a loop: each warpgroup task runs the loop at its own pace, so each
// keeps its own counter (a loop in an arm once set it for every thread of the block, and
// the warpgroup that ran ahead moved the other's).
TEST(NamedBarrier, PingPongInALoopKeepsEachWarpgroupsCounter) {
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {256}, TensorRole::Input),
               decl("O", DType::F32, {768}, TensorRole::Output)};
  KernelOp k;
  k.name = "k_pingpong_loop";
  k.params = {"X", "O"};
  k.block_threads = 256;
  const Expr wg = tid() / 128, i = Expr::var("i");
  Block turn = {
      Stmt::If(Expr::make(Expr::Kind::Eq, wg, Expr(1)),
               {Stmt::NamedBarrierArrive(Expr(1), 256), Stmt::NamedBarrier(Expr(2), 256)}),
      Stmt::If(Expr::make(Expr::Kind::Eq, wg, Expr(0)),
               {Stmt::NamedBarrier(Expr(1), 256), Stmt::NamedBarrierArrive(Expr(2), 256)}),
      Stmt::Write("O", {i * 256 + tid()}, Operand::value("x"))};
  Stmt spec = Stmt::Specialize({Stmt::If(tid() < 256, {Stmt::Load("x", "X", {tid()}),
                                                      Stmt::For("i", Expr(3), LoopKind::Reduce, "i", turn)})});
  spec.mode = "warpgroups";
  k.body = {spec};
  p.kernels.push_back(std::move(k));
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 15);
  interpret(p, b);
  const std::vector<double>& X = b.tensors.at("X").data;
  const std::vector<double>& O = b.tensors.at("O").data;
  for (int j = 0; j < 768; ++j) EXPECT_EQ(O[size_t(j)], X[size_t(j % 256)]) << j;
}

TEST(NamedBarrier, VerifierChecksModes) {
  KernelProgram p = exchange_kernel(Exchange{});
  p.kernels[0].body[2].mode = "red";
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "barrier mode `red`");
  KernelProgram q = pingpong_kernel(true);
  q.kernels[0].body[0].mode = "warps";
  EXPECT_CONTAINS(error_of([&] { verify(q); }), "specialize mode `warps` is not warpgroups");
}

}  // namespace
}  // namespace loom
