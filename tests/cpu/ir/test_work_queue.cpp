// A dynamic work queue in Kernel IR (the persistent attention walk's ATTN_SCHEDULE=dynamic):
// `let u = fetch.inc counter[0] wrap N` (atom.inc on a zeroed i32 global temp, the launch's
// N-th fetch wrapping it back to 0), an integer store into shared memory (`S[i] = int e`)
// that hands the value to other threads, and `break if cond` ending a loop whose trip
// count is found on the way. Printed, verified, interpreted (the CTAs one after another,
// each fetch one atomic step), the hand-off checked for races like any shared access, and
// a zeroed temp a program leaves non-zero reported.
#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

// Every CTA (one thread) takes unit blockIdx.x, then counter + G until it passes N, and
// marks C[unit]. Exactly N fetches happen over the launch (each CTA's last one fails), so
// the last wraps the counter to 0.
KernelProgram queue_kernel(int64_t units, int64_t ctas, int64_t wrap) {
  KernelProgram p;
  p.tensors = {decl("C", DType::F32, {units}, TensorRole::Output),
               decl("work", DType::I32, {1}, TensorRole::Temp)};
  p.tensors[1].zero_init = true;
  KernelOp k;
  k.name = "k_queue";
  k.params = {"C", "work"};
  k.grid[0] = Expr(ctas);
  k.block_threads = 1;
  const Expr t = var("t"), later = min(t, Expr(1));
  Block it = {Stmt::LetFetchInc("got", "work", {Expr(0)}, Expr(wrap), Expr(0) < t),
              Stmt::Let("u", later * (var("got") + Expr(ctas)) + (Expr(1) - later) * var("blockIdx.x")),
              Stmt::If(var("u") < Expr(units), {Stmt::Write("C", {var("u")}, Operand::constant(1.0))}),
              Stmt::BreakIf(Expr::make(Expr::Kind::Le, Expr(units), var("u")))};
  k.body = {loop("t", Expr(units + 1), it)};
  p.kernels.push_back(k);
  return p;
}

TEST(WorkQueue, EveryUnitOnceAndTheCounterBackAtZero) {
  for (int64_t ctas : {1, 3, 7}) {
    KernelProgram p = queue_kernel(7, ctas, 7);
    verify(p);
    const std::string text = print(p);
    EXPECT_CONTAINS(text, "let got = fetch.inc work[0] wrap 7 when 0 < t");
    EXPECT_CONTAINS(text, "break if 7 <= u");
    Bindings b;
    make_random_inputs(p, b, 1);
    for (int launch = 0; launch < 2; ++launch) {
      b.tensors.at("C").data.assign(7, 0.0);
      interpret(p, b);
      for (double v : b.tensors.at("C").data) EXPECT_EQ(v, 1.0) << ctas << " CTAs";
      EXPECT_EQ(b.tensors.at("work").data[0], 0.0);
    }
  }
}

TEST(WorkQueue, ACounterLeftNonZeroIsReported) {
  // A wrap one too large: the launch's 7 fetches leave the counter at 7, which the next
  // launch would start from (units skipped): the run is refused, naming the temp.
  KernelProgram p = queue_kernel(7, 3, 8);
  Bindings b;
  make_random_inputs(p, b, 2);
  EXPECT_CONTAINS(error_of([&] { interpret(p, b); }),
                  "leaves zeroed temp work non-zero (element 0 = 7)");
  // A counter found at or past its wrap: a launch before fetched the wrong number of times.
  KernelProgram q = queue_kernel(7, 3, 7);
  Bindings c;
  make_random_inputs(q, c, 3);
  c.tensors.at("work").data[0] = 9;
  EXPECT_CONTAINS(error_of([&] { interpret(q, c); }), "counter work holds 9");
}

TEST(WorkQueue, VerifierRules) {
  KernelProgram p = queue_kernel(7, 3, 7);
  // The counter must be a zeroed i32 temp.
  p.tensors[1].zero_init = false;
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "must be a zeroed i32 temp");
  p.tensors[1].zero_init = true;
  // A break is a statement of its loop's own body, not under an If.
  Block& it = p.kernels[0].body[0].body;
  it[2].body.push_back(Stmt::BreakIf(Expr(1)));
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "a break is a statement of its loop's own body");
  it[2].body.pop_back();
  // Before the iteration's other statements it skips them: the unit past the end is never
  // marked (C has 7 elements: a write to C[7] would be out of range).
  std::swap(it[2], it[3]);
  it[3].cond = Expr(1);  // the mark unguarded
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 4);
  b.tensors.at("C").data.assign(7, 0.0);
  interpret(p, b);
  for (double v : b.tensors.at("C").data) EXPECT_EQ(v, 1.0);
  std::swap(it[2], it[3]);
  // An integer store writes an i32 tensor.
  it.insert(it.begin() + 2, Stmt::WriteInt("C", {Expr(0)}, var("u")));
  EXPECT_CONTAINS(error_of([&] { verify(p); }), "an integer store writes an i32 tensor; `C` is f32");
}

// The hand-off: thread 0 stores an integer into shared memory, thread 32 reads it (a
// LetLoad from the shared tensor) and uses it as an index. Without an mbarrier between
// them it is a race; with thread 0 arriving after its store and thread 32 waiting before
// its read, it runs, and the value arrives.
TEST(WorkQueue, SharedHandOffNeedsItsBarrier) {
  KernelProgram p;
  p.tensors = {decl("C", DType::F32, {4}, TensorRole::Output),
               decl("S", DType::I32, {1}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_handoff";
  k.params = {"C"};
  k.block_threads = 64;
  k.body = {Stmt::Specialize(
      {Stmt::If(eq(tid(), Expr(0)), {Stmt::WriteInt("S", {Expr(0)}, Expr(3))}),
       Stmt::If(eq(tid(), Expr(32)), {Stmt::LetLoad("u", "S", {Expr(0)}),
                                      Stmt::Write("C", {var("u")}, Operand::constant(2.0))})})};
  p.kernels.push_back(k);
  verify(p);
  EXPECT_CONTAINS(print(p), "S[0] = int 3");
  Bindings b;
  make_random_inputs(p, b, 6);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "read-after-write");
  }
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
  EXPECT_EQ(b.tensors.at("C").data[3], 2.0);
}

}  // namespace
}  // namespace loom
