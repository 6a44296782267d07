// Hand-built sm_90 Kernel IR for the interpreter and verifier tests: a wgmma m64n8k16
// atom written out by hand, a one-warpgroup GEMM whose operands threads stage in shared
// memory, and a warp-specialized GEMM (producer warpgroup issuing TMA loads into a
// two-slot ring, consumer warpgroup issuing wgmma). Each builder takes the knobs its
// tests break (a missing fence, wait or arrival) so every failure has a passing twin.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/program.h"

namespace loom::hopper {

inline Expr var(const std::string& n) { return Expr::var(n); }
inline Expr tid() { return Expr::var("threadIdx.x"); }
inline Expr eq(Expr a, Expr b) { return Expr::make(Expr::Kind::Eq, std::move(a), std::move(b)); }

inline TensorDecl decl(std::string name, DType dt, std::vector<Expr> shape, TensorRole role) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = dt;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

inline Stmt element(Stmt s, std::vector<Expr> index) {
  s.dst_index = std::move(index);
  return s;
}

inline Stmt loop(const std::string& v, Expr extent, Block body) {
  return Stmt::For(v, std::move(extent), LoopKind::Parallel, "", std::move(body));
}

constexpr const char* kWgmma = "test_wgmma_m64n8k16";

// wgmma m64n8k16 f16 -> f32 with A and B from shared memory. Its D fragment (PTX ISA
// 9.7.15.5.1, "Register fragments"): warp w of the warpgroup holds rows 16w .. 16w + 15
// in the mma.sync m16n8 C layout — lane l = 4g + t, value v at (g + 8(v / 2), 2t + v % 2).
inline WarpAtom wgmma_atom() {
  WarpAtom w;
  w.id = kWgmma;
  w.threads = 128;
  w.a_shared = w.b_shared = true;
  w.m = 64, w.n = 8, w.k = 16;
  w.a_type = w.b_type = DType::F16;
  w.acc_type = DType::F32;
  w.c_values = 4;
  for (int lane = 0; lane < 128; ++lane) {
    const int warp = lane / 32, g = lane % 32 / 4, t = lane % 4;
    for (int v = 0; v < 4; ++v) w.c.push_back({16 * warp + g + 8 * (v / 2), 2 * t + v % 2});
  }
  return w;
}

// The D fragment's flat offset in a row-major [64, 8] C, for thread `lane` of the group.
inline Expr c_offset(const Expr& lane, const Expr& v) {
  const Expr warp = lane / 32, g = lane % 32 / 4, t = lane % 4;
  return (warp * 16 + g + v / 2 * 8) * 8 + t * 2 + v % 2;
}

// The wgmma of one K step: acc += As tile x Bs tile, A K-major (row stride K), B stored
// N x K (element (k, n) at n * K + k: row stride 1, column stride K).
inline Stmt wgmma(Expr a_origin, int64_t a_row, Expr b_origin, int64_t b_col,
                  const std::string& as = "As", const std::string& bs = "Bs") {
  return Stmt::Atom(kWgmma, "acc",
                    {Operand::value(as, {std::move(a_origin), Expr(a_row), Expr(1)}),
                     Operand::value(bs, {std::move(b_origin), Expr(1), Expr(b_col)})});
}

inline Block store_acc(const Expr& lane) {
  return {loop("v", 4,
               {Stmt::Write("C", {c_offset(lane, var("v"))}, Operand::value("acc", {var("v")}))})};
}

// C[64, 8] = A[64, K] x B[K, 8] on one warpgroup: the threads copy A and B into shared
// memory (B transposed, N x K), then K / 16 wgmma accumulate into one group.
struct SharedGemm {
  int ksteps = 1;
  bool fence = true;               // fence.proxy.async after the threads' shared stores
  bool overwrite_operand = false;  // a thread stores into As before wgmma.wait
  bool read_acc_early = false;     // C is stored before wgmma.wait
  bool wait = true;                // wgmma.wait 0 at all
  int K() const { return 16 * ksteps; }
};

inline KernelProgram shared_gemm(const SharedGemm& o) {
  const int K = o.K();
  KernelProgram p;
  p.tensors = {decl("A", DType::F16, {64, K}, TensorRole::Input),
               decl("B", DType::F16, {K, 8}, TensorRole::Input),
               decl("C", DType::F32, {64, 8}, TensorRole::Output),
               decl("As", DType::F16, {64, K}, TensorRole::Shared),
               decl("Bs", DType::F16, {8, K}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_wgmma";
  k.params = {"A", "B", "C"};
  k.block_threads = 128;
  k.warp_atoms = {wgmma_atom()};
  const Expr a_at = tid() + var("i") * 128, b_at = tid() + var("j") * 128;
  k.body = {
      loop("i", 64 * K / 128,
           {Stmt::Load("x", "A", {a_at}), Stmt::Write("As", {a_at}, Operand::value("x"))}),
      loop("j", 8 * K / 128,
           {Stmt::Load("y", "B", {b_at}),
            Stmt::Write("Bs", {b_at % 8 * K + b_at / 8}, Operand::value("y"))}),
  };
  if (o.fence) k.body.push_back(Stmt::FenceProxyAsync());
  k.body.push_back(Stmt::Barrier());
  k.body.push_back(Stmt::Alloc("acc", {4}));
  k.body.push_back(loop("v", 4, {element(Stmt::Init("acc", 0.0), {var("v")})}));
  k.body.push_back(Stmt::WgmmaFence());
  for (int s = 0; s < o.ksteps; ++s) k.body.push_back(wgmma(16 * s, K, 16 * s, K));
  k.body.push_back(Stmt::WgmmaCommit());
  if (o.overwrite_operand)
    k.body.push_back(
        Stmt::If(eq(tid(), Expr(5)), {Stmt::Write("As", {Expr(5)}, Operand::constant(0.5))}));
  if (o.read_acc_early)
    for (const Stmt& s : store_acc(tid())) k.body.push_back(s);
  if (o.wait) k.body.push_back(Stmt::WgmmaWait(0));
  if (!o.read_acc_early)
    for (const Stmt& s : store_acc(tid())) k.body.push_back(s);
  p.kernels.push_back(std::move(k));
  return p;
}

// The same product, warp-specialized: warpgroup 0 produces (thread 0 issues TMA loads of
// A[64, 16] and Bt[8, 16] boxes into slot k % 2 of a two-slot ring, after waiting for the
// slot's "empty" mbarrier), warpgroup 1 consumes (waits for the slot's "full" mbarrier,
// runs the wgmma, waits for it, arrives on "empty"). Slots 0, 1 are full, 2, 3 empty.
struct SpecializedGemm {
  int ksteps = 6;
  bool consumer_arrives = true;
  bool wait_before_arrive = true;  // wgmma.wait 0 before the consumer frees the slot
  bool barrier_in_arm = false;
  int K() const { return 16 * ksteps; }
};

inline KernelProgram specialized_gemm(const SpecializedGemm& o) {
  const int K = o.K();
  KernelProgram p;
  p.tensors = {decl("A", DType::F16, {64, K}, TensorRole::Input),
               decl("Bt", DType::F16, {8, K}, TensorRole::Input),
               decl("C", DType::F32, {64, 8}, TensorRole::Output),
               decl("As", DType::F16, {2, 64, 16}, TensorRole::Shared),
               decl("Bs", DType::F16, {2, 8, 16}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_ws";
  k.params = {"A", "Bt", "C"};
  k.block_threads = 256;
  k.mbarriers = 4;
  k.warp_atoms = {wgmma_atom()};
  k.tma = {TmaDescriptor{"A_tmap", "A", "As", {16, 64}, 0},
           TmaDescriptor{"B_tmap", "Bt", "Bs", {16, 8}, 0}};
  const Expr kk = var("k"), slot = kk % 2, round = kk / 2;
  const int64_t bytes = (64 * 16 + 8 * 16) * 2;
  Block produce = {
      Stmt::MbarWait(slot + 2, (round + 1) % 2),  // the first round finds every slot empty
      Stmt::MbarArriveExpectTx(slot, bytes),
      Stmt::TmaLoad("As", slot * 1024, "A", {Expr(0), kk * 16}, "A_tmap", slot, 64 * 16 * 2),
      Stmt::TmaLoad("Bs", slot * 128, "Bt", {Expr(0), kk * 16}, "B_tmap", slot, 8 * 16 * 2),
  };
  Block consume = {Stmt::MbarWait(slot, round % 2), Stmt::WgmmaFence(),
                   wgmma(slot * 1024, 16, slot * 128, 16), Stmt::WgmmaCommit()};
  if (o.wait_before_arrive) consume.push_back(Stmt::WgmmaWait(0));
  if (o.consumer_arrives) consume.push_back(Stmt::MbarArrive(slot + 2));
  if (!o.wait_before_arrive) consume.push_back(Stmt::WgmmaWait(0));
  Block consumer = {Stmt::SetMaxNReg(true, 232), Stmt::Alloc("acc", {4}),
                    loop("v", 4, {element(Stmt::Init("acc", 0.0), {var("v")})})};
  if (o.barrier_in_arm) consumer.push_back(Stmt::Barrier());
  consumer.push_back(Stmt::For("k", o.ksteps, LoopKind::Reduce, "k", consume));
  for (const Stmt& s : store_acc(tid() - 128)) consumer.push_back(s);
  k.body = {
      Stmt::If(eq(tid(), Expr(0)),
               {Stmt::MbarInit(Expr(0), 1), Stmt::MbarInit(Expr(1), 1),
                Stmt::MbarInit(Expr(2), 128), Stmt::MbarInit(Expr(3), 128), Stmt::FenceMbarInit()}),
      Stmt::Barrier(),
      Stmt::Specialize({
          Stmt::If(eq(tid() / 128, Expr(0)),
                   {Stmt::SetMaxNReg(false, 40),
                    Stmt::If(eq(tid(), Expr(0)),
                             {Stmt::For("k", o.ksteps, LoopKind::Reduce, "k", produce)})}),
          Stmt::If(eq(tid() / 128, Expr(1)), consumer),
      }),
  };
  p.kernels.push_back(std::move(k));
  return p;
}

// C = A x B in double from the f16 inputs (exact in double), rounded to f32: a K-step
// chain of f32 accumulations differs from this only by f32 rounding.
inline std::vector<double> reference(const std::vector<double>& A, const std::vector<double>& B,
                                     int K, bool b_transposed) {
  std::vector<double> C(64 * 8);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 8; ++n) {
      double c = 0;
      for (int k = 0; k < K; ++k)
        c += A[size_t(m * K + k)] * (b_transposed ? B[size_t(n * K + k)] : B[size_t(k * 8 + n)]);
      C[size_t(m * 8 + n)] = c;
    }
  return C;
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace loom::hopper

#define EXPECT_CONTAINS(msg, part) \
  EXPECT_NE((msg).find(part), std::string::npos) << "missing `" << (part) << "` in: " << (msg)
