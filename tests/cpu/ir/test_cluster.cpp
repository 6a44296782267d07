// Thread-block clusters on the interpreter and the verifier: a CLUSTER_M = 2 GEMM whose
// two CTAs (one per 64-row half of C) share the B slab of every K step. Each CTA's
// producer TMA-loads its own A slab and half of the B slab, multicast to both CTAs
// (mask 0b11); each CTA's consumer warpgroup waits for its "full" slot, runs a wgmma and
// releases the slot on the "empty" mbarriers of both CTAs (both producers write into it),
// over a two-slot ring and six K steps. Each way of breaking that protocol is a test.
#include "hopper_kernels.h"

namespace loom {
namespace {

using namespace hopper;

struct ClusterGemm {
  int ksteps = 6;
  int64_t b_mask = 0b11;        // the B halves land in these CTAs
  int64_t release_mask = 0b11;  // the consumers free the slot of these CTAs (0: their own)
  int empty_arrivals = 256;     // per phase of an "empty" mbarrier: consumers x CTAs
  bool init_sync = true;        // cluster.sync after the mbarrier inits (else bar.sync)
  bool final_sync = true;       // cluster.sync before the CTAs exit
  int K() const { return 16 * ksteps; }
};

// C[128, 8] = A[128, K] x Bt[8, K]^T on a cluster of two CTAs of 256 threads: warpgroup 0
// produces (thread 0 issues the TMA loads), warpgroup 1 consumes. Slots 0, 1 are "full",
// 2, 3 "empty". CTA r loads rows 4r..4r+3 of the slot's Bt box.
KernelProgram cluster_gemm(const ClusterGemm& o) {
  const int K = o.K();
  KernelProgram p;
  p.tensors = {decl("A", DType::F16, {128, K}, TensorRole::Input),
               decl("Bt", DType::F16, {8, K}, TensorRole::Input),
               decl("C", DType::F32, {128, 8}, TensorRole::Output),
               decl("As", DType::F16, {2, 64, 16}, TensorRole::Shared),
               decl("Bs", DType::F16, {2, 8, 16}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_cluster";
  k.params = {"A", "Bt", "C"};
  k.grid[0] = Expr(2);
  k.cluster[0] = 2;
  k.block_threads = 256;
  k.mbarriers = 4;
  k.warp_atoms = {wgmma_atom()};
  k.tma = {TmaDescriptor{"A_tmap", "A", "As", {16, 64}, 0},
           TmaDescriptor{"B_tmap", "Bt", "Bs", {16, 4}, 0}};
  const Expr rank = var("blockIdx.x") % 2;
  const Expr kk = var("k"), slot = kk % 2, round = kk / 2;
  // Every CTA's "full" phase receives its A box and both halves of the B box.
  const int64_t a_bytes = 64 * 16 * 2, half_b_bytes = 4 * 16 * 2;
  Stmt b_half = Stmt::TmaLoad("Bs", slot * 128 + rank * 64, "Bt", {rank * 4, kk * 16}, "B_tmap",
                              slot, half_b_bytes);
  b_half.multicast = Expr(o.b_mask);
  Block produce = {
      Stmt::MbarWait(slot + 2, (round + 1) % 2),  // the first round finds every slot empty
      Stmt::MbarArriveExpectTx(slot, a_bytes + 2 * half_b_bytes),
      Stmt::TmaLoad("As", slot * 1024, "A", {rank * 64, kk * 16}, "A_tmap", slot, a_bytes),
      b_half,
  };
  Stmt release = Stmt::MbarArrive(slot + 2);
  release.multicast = Expr(o.release_mask);
  Block consume = {Stmt::MbarWait(slot, round % 2), Stmt::WgmmaFence(),
                   wgmma(slot * 1024, 16, slot * 128, 16), Stmt::WgmmaCommit(),
                   Stmt::WgmmaWait(0), release};
  Block consumer = {Stmt::Alloc("acc", {4}),
                    loop("v", 4, {element(Stmt::Init("acc", 0.0), {var("v")})}),
                    Stmt::For("k", o.ksteps, LoopKind::Reduce, "k", consume)};
  consumer.push_back(loop(
      "v", 4,
      {Stmt::Write("C", {rank * 512 + c_offset(tid() - 128, var("v"))},
                   Operand::value("acc", {var("v")}))}));
  k.body = {
      Stmt::If(eq(tid(), Expr(0)),
               {Stmt::MbarInit(Expr(0), 1), Stmt::MbarInit(Expr(1), 1),
                Stmt::MbarInit(Expr(2), o.empty_arrivals), Stmt::MbarInit(Expr(3), o.empty_arrivals),
                Stmt::FenceMbarInit()}),
      o.init_sync ? Stmt::ClusterSync() : Stmt::Barrier(),
      Stmt::Specialize({
          Stmt::If(eq(tid() / 128, Expr(0)),
                   {Stmt::If(eq(tid(), Expr(0)),
                             {Stmt::For("k", o.ksteps, LoopKind::Reduce, "k", produce)})}),
          Stmt::If(eq(tid() / 128, Expr(1)), consumer),
      }),
  };
  if (o.final_sync) k.body.push_back(Stmt::ClusterSync());
  p.kernels.push_back(std::move(k));
  return p;
}

std::string run_error(const KernelProgram& p, uint64_t seed = 1) {
  Bindings b;
  make_random_inputs(p, b, seed);
  return error_of([&] { interpret(p, b); });
}

TEST(Cluster, MulticastGemmMatchesCpuMatmul) {
  const ClusterGemm o;
  KernelProgram p = cluster_gemm(o);
  verify(p);
  for (uint64_t seed : {1, 2}) {
    Bindings b;
    make_random_inputs(p, b, seed);
    interpret(p, b);
    const std::vector<double>& A = b.tensors.at("A").data;
    const std::vector<double>& Bt = b.tensors.at("Bt").data;
    const std::vector<double>& C = b.tensors.at("C").data;
    for (int m = 0; m < 128; ++m)
      for (int n = 0; n < 8; ++n) {
        double ref = 0;
        for (int kk = 0; kk < o.K(); ++kk)
          ref += A[size_t(m * o.K() + kk)] * Bt[size_t(n * o.K() + kk)];
        EXPECT_NEAR(C[size_t(m * 8 + n)], ref, 1e-4) << "C[" << m << ", " << n << "]";
      }
  }
}

TEST(Cluster, GridOfSeveralClustersRunsEachCluster) {
  // Two clusters along x: the second one's CTAs are blocks 2 and 3 (ranks 0 and 1).
  KernelProgram p = cluster_gemm(ClusterGemm{.ksteps = 4});
  p.tensors[0].shape[0] = Expr(256);
  p.tensors[2].shape[0] = Expr(256);
  KernelOp& k = p.kernels[0];
  k.grid[0] = Expr(4);
  walk(k.body, [](Stmt& s) {
    if (s.kind == StmtKind::TmaLoad && s.tensor == "As")
      s.src_index[0] = Expr::var("blockIdx.x") * 64;
    if (s.kind == StmtKind::Write) s.index[0] = s.index[0] + Expr::var("blockIdx.x") / 2 * 1024;
  });
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 3);
  interpret(p, b);
  const std::vector<double>& A = b.tensors.at("A").data;
  const std::vector<double>& Bt = b.tensors.at("Bt").data;
  const std::vector<double>& C = b.tensors.at("C").data;
  for (int m : {0, 70, 130, 255})
    for (int n = 0; n < 8; ++n) {
      double ref = 0;
      for (int kk = 0; kk < 64; ++kk) ref += A[size_t(m * 64 + kk)] * Bt[size_t(n * 64 + kk)];
      EXPECT_NEAR(C[size_t(m * 8 + n)], ref, 1e-4) << "C[" << m << ", " << n << "]";
    }
}

TEST(Cluster, ACtaWaitsOutsideAnyArmUntilItsPeerMulticasts) {
  // No specialize: each CTA's thread 0 multicasts its half of X to both CTAs, then the
  // whole CTA waits; CTA 0's wait needs CTA 1's half, so CTA 0 must block and let CTA 1 run.
  KernelProgram p;
  p.tensors = {decl("X", DType::F32, {8}, TensorRole::Input),
               decl("Y", DType::F32, {16}, TensorRole::Output),
               decl("S", DType::F32, {8}, TensorRole::Shared)};
  KernelOp k;
  k.name = "k_halves";
  k.params = {"X", "Y"};
  k.grid[0] = Expr(2);
  k.cluster[0] = 2;
  k.block_threads = 32;
  k.mbarriers = 1;
  k.tma = {TmaDescriptor{"X_tmap", "X", "S", {4}, 0}};
  const Expr rank = var("blockIdx.x") % 2;
  Stmt half = Stmt::TmaLoad("S", rank * 4, "X", {rank * 4}, "X_tmap", Expr(0), 16);
  half.multicast = Expr(3);
  k.body = {Stmt::If(eq(tid(), Expr(0)), {Stmt::MbarInit(Expr(0), 1), Stmt::FenceMbarInit()}),
            Stmt::ClusterSync(),
            Stmt::If(eq(tid(), Expr(0)), {Stmt::MbarArriveExpectTx(Expr(0), 32), half}),
            Stmt::MbarWait(Expr(0), Expr(0)),
            Stmt::If(Expr::make(Expr::Kind::Lt, tid(), Expr(8)),
                     {Stmt::Load("y", "S", {tid()}),
                      Stmt::Write("Y", {rank * 8 + tid()}, Operand::value("y"))}),
            Stmt::ClusterSync()};
  p.kernels.push_back(k);
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 5);
  interpret(p, b);
  const std::vector<double>& X = b.tensors.at("X").data;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b.tensors.at("Y").data[size_t(i)], X[size_t(i % 8)]);

  // Without the multicast each CTA receives only its own half: 16 of the 32 bytes.
  p.kernels[0].body[2].body[1].multicast = Expr(0);
  EXPECT_CONTAINS(run_error(p), "CTA 0 waits in `mbar.wait [0] parity=0` (CTA 0 thread 0, "
                                "phase 0 of mbarrier slot 0 of CTA 0 (still expects 0 of 1 "
                                "arrivals and 16 bytes)");
}

TEST(Cluster, DroppingTheRemoteReleaseDeadlocksAcrossCtas) {
  // Each consumer frees only its own CTA's slot: the "empty" phases, expecting both CTAs'
  // consumers, never complete.
  KernelProgram p = cluster_gemm(ClusterGemm{.release_mask = 0});
  verify(p);
  const std::string msg = run_error(p);
  EXPECT_CONTAINS(msg, "deadlock: every CTA of the cluster waits and none can proceed");
  EXPECT_CONTAINS(msg, "CTA 0 arm 0");
  EXPECT_CONTAINS(msg, "CTA 1 arm 1");
  // Round 1 of the ring waits for phase 0 of "empty", which got only CTA 0's 128 arrivals.
  EXPECT_CONTAINS(msg, "(CTA 0 thread 0, phase 0 of mbarrier slot 2 of CTA 0 (still expects 128 "
                       "of 256 arrivals");
  EXPECT_CONTAINS(msg, "(CTA 1 thread 128, phase 1 of mbarrier slot 0 of CTA 1");
}

TEST(Cluster, ExitingWithoutAFinalClusterSyncIsReported) {
  KernelProgram p = cluster_gemm(ClusterGemm{.final_sync = false});
  verify(p);
  const std::string msg = run_error(p);
  EXPECT_CONTAINS(msg, "exited while the cluster still");
  EXPECT_CONTAINS(msg, "mbar.arrive [k % 2 + 2]  multicast 3");
  EXPECT_CONTAINS(msg, "(missing cluster.sync before the end?");
}

TEST(Cluster, PeersMayUseAnMbarrierOnlyAfterAClusterSync) {
  // A bar.sync publishes the inits to the CTA's own threads only: the peer's multicast
  // into this CTA's "full" mbarrier is not ordered after its init.
  KernelProgram p = cluster_gemm(ClusterGemm{.init_sync = false});
  verify(p);
  const std::string msg = run_error(p);
  EXPECT_CONTAINS(msg, "mbarrier slot 0 of CTA 1 initialized by CTA 1 thread 0 is used by CTA 0 "
                       "thread 0 in `tma.load Bs");
  EXPECT_CONTAINS(msg, "then cluster.sync");
}

TEST(Cluster, MulticastIntoAPeerWithoutItsReleaseIsARace) {
  // Each producer waits only for its own CTA's consumers, yet writes into the peer's slot
  // too, while the peer's wgmma may still read it: no mbarrier hands that slot over.
  KernelProgram p = cluster_gemm(ClusterGemm{.release_mask = 0, .empty_arrivals = 128});
  verify(p);
  Bindings b;
  make_random_inputs(p, b, 4);
  try {
    interpret(p, b);
    FAIL() << "expected a RaceError";
  } catch (const RaceError& e) {
    const std::string msg = e.what();
    EXPECT_CONTAINS(msg, "race on shared tensor Bs offset");
    EXPECT_CONTAINS(msg, "tma.load Bs[k % 2 * 128 + blockIdx.x % 2 * 64]");
    EXPECT_CONTAINS(msg, "may still be reading it");
  }
}

TEST(Cluster, MaskBeyondTheClusterIsAnError) {
  KernelProgram p = cluster_gemm(ClusterGemm{.b_mask = 0b101});
  EXPECT_CONTAINS(error_of([&] { verify(p); }),
                  "multicast mask 5 names a CTA beyond the cluster's 2 (bits 0..1)");
  EXPECT_CONTAINS(run_error(p), "multicast mask 0x5 has bit 2 set but the cluster has 2 CTAs");
}

TEST(Cluster, MaskWithoutClustersIsAnError) {
  KernelProgram p = specialized_gemm(SpecializedGemm{});
  walk(p.kernels[0].body, [](Stmt& s) {
    if (s.kind == StmtKind::TmaLoad) s.multicast = Expr(1);
  });
  EXPECT_CONTAINS(error_of([&] { verify(p); }),
                  "multicast mask 1 in a kernel without clusters");
  EXPECT_CONTAINS(run_error(p), "multicast mask 0x1 in a kernel without clusters");
}

std::string verify_error(const KernelProgram& p) {
  return error_of([&] { verify(p); });
}

TEST(Cluster, VerifierRules) {
  KernelProgram p = cluster_gemm(ClusterGemm{});
  p.kernels[0].cluster[1] = 2;
  EXPECT_CONTAINS(verify_error(p), "cluster {2, 2, 1}: clusters are 1-D along x");
  p.kernels[0].cluster[1] = 0;
  EXPECT_CONTAINS(verify_error(p), "CTAs per cluster are at least 1");

  p = cluster_gemm(ClusterGemm{});
  p.kernels[0].grid[0] = Expr(3);
  EXPECT_CONTAINS(verify_error(p), "grid.x = 3 is not a multiple of the cluster {2, 1, 1}");
  EXPECT_CONTAINS(run_error(p), "grid.x = 3 is not a multiple of the cluster's 2 CTAs");

  // Masks only on tma.load and mbar.arrive.
  p = cluster_gemm(ClusterGemm{});
  walk(p.kernels[0].body, [](Stmt& s) {
    if (s.kind == StmtKind::MbarArriveExpectTx) s.multicast = Expr(3);
  });
  EXPECT_CONTAINS(verify_error(p), "a multicast mask on a statement that is not tma.load or "
                                   "mbar.arrive");

  // cluster.sync: cluster kernels only, reached by every thread, never in one arm.
  p = cluster_gemm(ClusterGemm{});
  p.kernels[0].cluster[0] = 1;
  walk(p.kernels[0].body, [](Stmt& s) { s.multicast = Expr(0); });
  EXPECT_CONTAINS(verify_error(p), "cluster.sync in a kernel without clusters");
  EXPECT_CONTAINS(run_error(p), "cluster.sync in a kernel without clusters");

  p = cluster_gemm(ClusterGemm{});
  p.kernels[0].body.back() = Stmt::If(eq(tid() / 128, Expr(0)), {Stmt::ClusterSync()});
  EXPECT_CONTAINS(verify_error(p), "divergent cluster.sync");
  EXPECT_CONTAINS(run_error(p), "cluster.sync reached by 128 of the 256 threads");

  p = cluster_gemm(ClusterGemm{});
  p.kernels[0].body[2].body[1].body.push_back(Stmt::ClusterSync());
  EXPECT_CONTAINS(verify_error(p), "cluster.sync inside an arm of `specialize:`");
  EXPECT_CONTAINS(run_error(p), "cluster.sync inside an arm of a specialize");

  // Peers exchange data by pushing (remote stores, st.async); a load marked remote (the
  // retired pull form) is refused rather than read from the thread's own CTA.
  p = cluster_gemm(ClusterGemm{});
  Stmt pull = Stmt::Load("r", "As", {Expr(0)});
  pull.remote = true;
  pull.value = Expr(1);
  p.kernels[0].body.push_back(Stmt::If(eq(tid(), Expr(0)), {pull}));
  EXPECT_CONTAINS(verify_error(p), "a load from a peer CTA's shared memory (`remote`) is not a "
                                   "Kernel IR form");
}

// A remote store (st.async) naming a rank outside the cluster, or issued in a kernel
// without clusters, is an error of the interpreter as well as of codegen's caller.
TEST(Cluster, RemoteStoreRanksAreChecked) {
  KernelProgram p = cluster_gemm(ClusterGemm{});
  p.tensors.push_back(decl("X", DType::F32, {4}, TensorRole::Shared));
  Stmt push = Stmt::Write("X", {Expr(0)}, Operand::constant(1.0));
  push.remote = true;
  push.value = Expr(5);
  push.mbar = Expr(0);
  // After the final cluster.sync, by thread 0 of each CTA.
  p.kernels[0].body.push_back(Stmt::If(eq(tid(), Expr(0)), {push}));
  EXPECT_CONTAINS(run_error(p), "remote store into CTA 5 but the cluster has 2 CTAs (ranks 0..1)");
}

}  // namespace
}  // namespace loom
