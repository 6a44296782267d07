// k:053_tma_store_epilogue on the CPU: after every pass the program runs on the
// interpreter — which checks the named barriers, the proxy fence before each TMA store,
// that no thread rewrites the tile while a store still reads it (bulk.wait.read), and
// that the stores are retired before the block exits — and is compared with the naive
// Loop IR. Ragged M and N (the tensor map clips the boxes), fused bias + relu, an f32
// output, a persistent warp-specialized kernel whose stores overlap the next tile, a
// 2-CTA cluster; plus the IR's shape and the errors of impossible knob sets.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;
using passcheck::sm90a_with_sms;

int count(const Block& b, const std::function<bool(const Stmt&)>& pred) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += pred(s); });
  return n;
}

Target four_sms() { return sm90a_with_sms(4); }

const std::string kSmall = "ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                           "EPILOGUE=tma_store";

TEST(TmaStoreEpilogue, OneWarpgroupRaggedMAndN) {
  // 100 x 72 of 64 x 64 tiles: the last tiles' boxes hang over both edges.
  CompileState s = passcheck::check_every_pass("matmul(A[M,K]:bf16, B[N,K]:bf16.T)",
                                               Knobs::parse(kSmall), 3,
                                               {{"M", 100}, {"N", 72}, {"K", 192}});
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 1);
  EXPECT_EQ(count(k.body, [](const Stmt& x) { return x.named_barrier(); }), 2);
  const TensorDecl& tile = s.kernel.tensor("out_s");
  EXPECT_EQ(tile.shape.size(), 3u);
  EXPECT_EQ(tile.swizzle.bits, 3);  // a 64-column bf16 strip is one 128-byte span
  ASSERT_EQ(k.tma.size(), 3u);
  EXPECT_EQ(k.tma[2].box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(k.tma[2].swizzle_bytes, 128);
  // No store guards are left: the tensor map clips.
  EXPECT_EQ(count(k.body, [](const Stmt& x) { return x.kind == StmtKind::Write; }),
            count(k.body, [](const Stmt& x) { return x.kind == StmtKind::Write && x.tensor == "out_s"; }));
}

TEST(TmaStoreEpilogue, WarpSpecializedPersistentBiasReluRagged) {
  // 200 x 136 in 128 x 64 tiles: 2 x 3 tiles on 4 SMs, so two CTAs store a second tile
  // while their first tile's stores may still be reading. Each consumer warpgroup owns its
  // 64 x 64 half: its own barrier id and storing thread.
  CompileState s = passcheck::check_every_pass(
      "relu(linear(X[200,128]:bf16, W[136,128]:bf16, bias[136]:bf16))",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store"),
      7, {}, {}, std::nullopt, four_sms());
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 2);  // one box per warpgroup
  int per_warpgroup = 0;
  walk(k.body, [&](const Stmt& x) {
    per_warpgroup += x.named_barrier() && x.imm == 128 && x.value.uses("threadIdx.x");
  });
  EXPECT_EQ(per_warpgroup, 2);
  EXPECT_EQ(count(k.body, StmtKind::BulkWait), 2);  // before reuse, and after the tile loop
  EXPECT_EQ(count(k.body, StmtKind::Barrier), 3);   // + the mbarrier setup's bar.sync 0
}

TEST(TmaStoreEpilogue, F32OutputInTwoStripsPerWarpgroup) {
  // An f32 row of 128 bytes is 32 columns: each 64-wide warpgroup tile is two boxes.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[K,N]:bf16, out=f32)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,EPILOGUE=tma_store"),
      11, {{"M", 160}, {"N", 100}, {"K", 128}});
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 4);
  EXPECT_EQ(k.tma.back().box, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(s.kernel.tensor("out_s").dtype, DType::F32);
}

TEST(TmaStoreEpilogue, NarrowTileTakesANarrowerSwizzle) {
  // BN=32 bf16 is 64 bytes per row: 64-byte swizzle strips; two warpgroups, bias + relu.
  CompileState s = passcheck::check_every_pass(
      "relu(linear(X[M,K]:bf16, W[N,K]:bf16, bias[N]:bf16))",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=32,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=3,"
                   "EPILOGUE=tma_store"),
      13, {{"M", 150}, {"N", 40}, {"K", 128}});
  EXPECT_EQ(s.kernel.kernels.at(0).tma.back().swizzle_bytes, 64);
}

TEST(TmaStoreEpilogue, ClusterOfTwo) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[384,128]:bf16, B[128,256]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,EPILOGUE=tma_store"),
      17, {}, {}, std::nullopt, four_sms());
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 2);
}

// ---- EPI_BUFFERS: the tile streamed through strip buffers ------------------------------

int stmatrix_count(const KernelOp& k) {
  return count(k.body, [](const Stmt& x) {
    return x.kind == StmtKind::Atom && x.atom.rfind("stmatrix_x4", 0) == 0;
  });
}

const std::string kWsPersistent = "ATOM=wgmma_bf16,WM=2,WN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                                  "GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,"
                                  "EPI_BUFFERS=2";

TEST(TmaStoreEpilogue, StripBuffersBiasReluRaggedWithStmatrix) {
  // 200 x 296 in 128 x 256 tiles on 2 SMs: 2 x 2 tiles, so each CTA starts a second tile
  // while the first tile's last strips may still be read; each tile is 4 strips of 64
  // columns per warpgroup through 2 buffers, and strip j + 2 reuses strip j's buffer.
  CompileState s = passcheck::check_every_pass(
      "relu(linear(X[200,64]:bf16, W[296,64]:bf16, bias[296]:bf16))",
      Knobs::parse(kWsPersistent + ",BN=256"), 23, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  const TensorDecl& tile = s.kernel.tensor("out_s");
  EXPECT_EQ(tile.shape.at(0).const_value(), 2);  // buffers, rows, strip
  EXPECT_EQ(tile.shape.at(1).const_value(), 128);
  EXPECT_EQ(tile.shape.at(2).const_value(), 64);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 8);      // 4 strips x 2 warpgroups
  EXPECT_EQ(count(k.body, StmtKind::BulkCommit), 8);    // one group per strip and owner
  EXPECT_EQ(count(k.body, StmtKind::FenceProxyAsync), 4);
  int keep_none = 0;
  walk(k.body, [&](const Stmt& x) { keep_none += x.kind == StmtKind::BulkWait && x.imm == 0; });
  // EPI_SYNC=1: before each strip's store, the previous strip's store has read its buffer
  // (the one the next strip writes), and the drain (tests/cpu/passes/test_tile_transition
  // has EPI_SYNC=2's waits).
  EXPECT_EQ(keep_none, 4 + 1);
  EXPECT_EQ(count(k.body, [](const Stmt& x) { return x.named_barrier(); }), 4);
  // 64 x 64 per warpgroup and strip, 16 rows x 16 columns per warp and stmatrix.x4: a
  // thread's 32 values of a strip are 4 of them (the statements serve both warpgroups).
  EXPECT_EQ(stmatrix_count(k), 4 * 4);
  EXPECT_EQ(count(k.body, [](const Stmt& x) { return x.kind == StmtKind::Write && x.tensor == "out_s"; }), 0);
  ASSERT_NE(find_warp_copy(k, "stmatrix_x4"), nullptr);
  EXPECT_TRUE(find_warp_copy(k, "stmatrix_x4")->to_shared);
}

TEST(TmaStoreEpilogue, StripBuffersWithoutStmatrixKeepPlainStores) {
  // The plain stores of the buffered path run on the interpreter in the f32 test below.
  CompileState s = passcheck::compile_sm90a("matmul(A[136,64]:f16, B[64,200]:f16)",
                                            passcheck::knobs_over(kWsPersistent, "ATOM=wgmma_f16,BN=128,STMATRIX=0"));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(stmatrix_count(k), 0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 4);  // 2 strips x 2 warpgroups
  EXPECT_GT(count(k.body, [](const Stmt& x) { return x.kind == StmtKind::Write && x.tensor == "out_s"; }), 0);
}

TEST(TmaStoreEpilogue, StripBuffersF16) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[136,64]:f16, B[64,200]:f16)", Knobs::parse(passcheck::knobs_over(kWsPersistent, "ATOM=wgmma_f16,BN=128")), 31,
      {}, {}, std::nullopt, sm90a_with_sms(2));
  EXPECT_EQ(stmatrix_count(s.kernel.kernels.at(0)), 2 * 4);
}

TEST(TmaStoreEpilogue, StripBuffersF32OutputInStripsOf32) {
  // f32: a 128-byte strip is 32 columns, so 128 columns are 4 strips per warpgroup; no
  // stmatrix (it stores 16-bit values).
  CompileState s = passcheck::check_every_pass(
      "matmul(A[160,64]:bf16, B[64,136]:bf16, out=f32)", Knobs::parse(kWsPersistent + ",BN=128"), 37,
      {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 8);
  EXPECT_EQ(stmatrix_count(k), 0);
  const TensorDecl& tile = s.kernel.tensor("out_s");
  EXPECT_EQ(tile.shape.at(0).const_value(), 2);
  EXPECT_EQ(tile.shape.at(2).const_value(), 32);
}

TEST(TmaStoreEpilogue, StripBuffersClusterOfTwo) {
  CompileState s = passcheck::check_every_pass(
      "matmul(A[384,64]:bf16, B[64,128]:bf16)",
      Knobs::parse(kWsPersistent + ",BN=128,CLUSTER_M=2"), 41, {}, {}, std::nullopt, sm90a_with_sms(2));
  EXPECT_EQ(s.kernel.kernels.at(0).cluster[0], 2);
  EXPECT_GT(stmatrix_count(s.kernel.kernels.at(0)), 0);
}

TEST(TmaStoreEpilogue, StripBuffersOneWarpgroupTwoAtoms) {
  // Not specialized, one warpgroup of two m64n64 atoms (FN=2): the register loop over
  // the atoms is unrolled so that each strip's statements come together.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[M,K]:bf16, B[N,K]:bf16.T)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,FN=2,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "EPILOGUE=tma_store,EPI_BUFFERS=2"),
      43, {{"M", 100}, {"N", 136}, {"K", 64}});
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 2);
  EXPECT_EQ(stmatrix_count(k), 2 * 4);
}

// ---- EPI_BUFFERS spanning tiles: a ring across the persistent tile loop ---------------

int bulk_waits(const KernelOp& k, int keep) {
  return count(k.body, [&](const Stmt& x) { return x.kind == StmtKind::BulkWait && x.imm == keep; });
}

// Whether a statement's shared offset names the tile loop's variable (the tile's group).
bool uses_tile_group(const Stmt& x) { return !x.index.empty() && x.index.at(0).uses("t_i"); }

TEST(TmaStoreEpilogue, StripRingAcrossTilesOverlapsTheNextTile) {
  // 520 x 392 in 128 x 128 tiles on 2 SMs: 5 x 4 tiles, 10 per CTA, ragged M and N. Each
  // tile is 2 strips of 64 columns; EPI_BUFFERS=4 holds two tiles' strips, tile t_i's in
  // group t_i % 2, so a tile's stores are still read while the next tile computes and
  // writes its strips: before strip j's store, all but the newest 2 stores have read
  // their buffers (strip j + 1 reuses the buffer of the store 3 strips back). The
  // interpreter checks that no strip is written while a store still reads its buffer.
  CompileState s = passcheck::check_every_pass(
      "relu(linear(X[520,64]:bf16, W[392,64]:bf16, bias[392]:bf16))",
      Knobs::parse(passcheck::knobs_over(kWsPersistent, "BN=128,EPI_BUFFERS=4")), 29, {}, {},
      std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  const TensorDecl& tile = s.kernel.tensor("out_s");
  EXPECT_EQ(tile.shape.at(0).const_value(), 4);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 4);  // 2 strips x 2 warpgroups
  EXPECT_EQ(bulk_waits(k, 2), 2);                   // one per strip
  EXPECT_EQ(bulk_waits(k, 0), 1);                   // the drain only
  EXPECT_EQ(count(k.body, [](const Stmt& x) { return x.kind == StmtKind::TmaStore && uses_tile_group(x); }), 4);
  EXPECT_EQ(count(k.body, [](const Stmt& x) {
              return x.kind == StmtKind::Atom && x.tensor == "out_s" && uses_tile_group(x);
            }),
            stmatrix_count(k));
  EXPECT_EQ(stmatrix_count(k), 2 * 4);
}

TEST(TmaStoreEpilogue, StripRingAcrossTilesTwoBarriersAndPlainStores) {
  // EPI_SYNC=2 waits for all but the newest N - 1 = 3 stores before a strip's writes;
  // plain stores (STMATRIX=0) move into the tile's group like stmatrix's.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[520,64]:f16, B[64,264]:f16)",
      Knobs::parse(passcheck::knobs_over(kWsPersistent,
                                         "ATOM=wgmma_f16,BN=128,EPI_BUFFERS=4,EPI_SYNC=2,STMATRIX=0")),
      31, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(bulk_waits(k, 3), 2);
  EXPECT_EQ(stmatrix_count(k), 0);
  const int writes = count(k.body, [](const Stmt& x) { return x.kind == StmtKind::Write && x.tensor == "out_s"; });
  EXPECT_GT(writes, 0);
  EXPECT_EQ(count(k.body, [](const Stmt& x) {
              return x.kind == StmtKind::Write && x.tensor == "out_s" && uses_tile_group(x);
            }),
            writes);
}

TEST(TmaStoreEpilogue, StripRingAcrossTilesInAClusterOfTwo) {
  // 2-CTA clusters along M: each CTA's ring follows its own tile loop (4 x 4 tiles of
  // 128 x 128 on one cluster: 8 tiles per CTA, ragged N).
  CompileState s = passcheck::check_every_pass(
      "matmul(A[512,64]:bf16, B[64,392]:bf16)",
      Knobs::parse(passcheck::knobs_over(kWsPersistent, "BN=128,EPI_BUFFERS=4,CLUSTER_M=2")), 47,
      {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(s.kernel.tensor("out_s").shape.at(0).const_value(), 4);
  EXPECT_EQ(bulk_waits(k, 2), 2);
}

TEST(TmaStoreEpilogue, StripRingAcrossFourBatchedTiles) {
  // One strip per tile (BN = 64) and 4 buffers: the ring spans 4 (batch, tile) units.
  CompileState s = passcheck::check_every_pass(
      "relu(add(bmm(A[3,200,128]:bf16, B[3,128,136]:bf16), bias[136]:bf16))",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=4"),
      7, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(s.kernel.tensor("out_s").shape.at(0).const_value(), 4);
  EXPECT_EQ(bulk_waits(k, 2), 1);
}

TEST(TmaStoreEpilogue, StripRingStaysInTheTileWithoutATileLoop) {
  // Without a persistent tile loop there is no next tile to overlap: EPI_BUFFERS caps at
  // the tile's strips, as before.
  CompileState s = passcheck::compile_sm90a(
      "matmul(A[136,64]:f16, B[64,200]:f16)",
      passcheck::knobs_over(kWsPersistent, "ATOM=wgmma_f16,BN=128,PERSISTENT=0,EPI_BUFFERS=4"));
  EXPECT_EQ(s.kernel.tensor("out_s").shape.at(0).const_value(), 2);
}

TEST(TmaStoreEpilogue, ErrorsNameTheLimit) {
  auto fails = [](const std::string& expr, const std::string& knobs, const std::string& want) {
    {
      const std::string e = passcheck::error_of(expr, knobs);
      ASSERT_NE(e, "") << "no error for " << knobs;
      EXPECT_NE(e.find(want), std::string::npos) << e;
    }
  };
  const std::string big = "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)";
  const std::string hopper = "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,"
                             "BK=64,GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store";
  // 4 x 48 KB of slabs + the 64 KB tile.
  fails(big, hopper + ",STAGES=4", "this GPU allows 232448 B per block");
  passcheck::compile_sm90a(big, hopper + ",STAGES=3");
  // 2 strip buffers of 128 x 64 (32 KB) leave room for the fourth stage.
  passcheck::compile_sm90a(big, hopper + ",STAGES=4,EPI_BUFFERS=2");
  fails(big, "ATOM=wgmma_bf16,WM=1,WN=2,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
             "EPILOGUE=tma_store,EPI_BUFFERS=2", "WN > 1");
  fails(big, "ATOM=mma_bf16,EPILOGUE=tma_store", "ATOM=wgmma_");
  // Rows of 100 x bf16 = 200 B: a tensor map's row stride is a multiple of 16 B.
  fails("matmul(A[256,64]:bf16, B[100,64]:bf16.T)", kSmall, "multiple of 16 B");
  // Rank 4 ([B, H, M, N]) is not mapped yet; rank 3 is (BatchedOutputs below).
  fails("matmul(A[2,2,64,64]:bf16, B[2,2,64,64]:bf16)", kSmall, "has rank 4");
}

TEST(TmaStoreEpilogue, BatchedOutputsRaggedPerEntry) {
  // bmm's [B, M, N] output through a rank-3 map, boxes of one entry: M = 100 and N = 72 in
  // 64 x 64 tiles hang over each entry's edges, which the map clips per entry (a box
  // flattened over B * M rows would write the next entry's first rows).
  CompileState s = passcheck::check_every_pass("bmm(A[3,100,64]:bf16, B[3,64,72]:bf16)",
                                               Knobs::parse(kSmall), 3);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 1);
  const TmaDescriptor& d = k.tma.back();
  EXPECT_EQ(d.tensor, "out");
  EXPECT_EQ(d.box, (std::vector<int64_t>{64, 64, 1}));
  walk(k.body, [](const Stmt& x) {
    if (x.kind == StmtKind::TmaStore) {
      EXPECT_EQ(x.src_index.size(), 3u);
    }
  });
}

TEST(TmaStoreEpilogue, BatchedPersistentStripBuffersBiasRelu) {
  // The batched large schedule's form: two consumer warpgroups, a persistent walk over
  // (batch, tile) units whose stores overlap the next unit's mainloop, strip buffers with
  // stmatrix, a fused bias + relu; ragged M per entry.
  passcheck::check_every_pass(
      "relu(add(bmm(A[3,200,128]:bf16, B[3,128,136]:bf16), bias[136]:bf16))",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2"),
      7, {}, {}, std::nullopt, four_sms());
}

}  // namespace
TEST(TmaStoreEpilogue, StripBuffersOddStripCountInAClusterOfTwo) {
  // BN=192 hung on H100 (8192x8192x1024, 2026-11-22), two bugs the interpreter shows:
  //  - CLUSTER_M=2 splits B's slab of three 64-column chunks by rows, and k:015 loaded the
  //    rank's rows of chunk 0 only (the mbarrier waited for bytes that never came);
  //  - three strips through two buffers: the next tile's strip 0 reuses the buffer of this
  //    tile's last strip, so waiting for all but one store was not enough.
  // 256 x 200 on 2 SMs: one cluster, two tiles per CTA (192 columns, then 8).
  CompileState s = passcheck::check_every_pass(
      "matmul(A[256,64]:bf16, B[64,200]:bf16)",
      Knobs::parse(kWsPersistent + ",BN=192,CLUSTER_M=2"), 43, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 6);  // 3 strips x 2 warpgroups
  EXPECT_EQ(count(k.body, StmtKind::TmaLoad), 1 + 3);  // A's box; B's rows of each chunk
  int wait_all = 0;
  walk(k.body, [&](const Stmt& x) { wait_all += x.kind == StmtKind::BulkWait && x.imm == 0; });
  EXPECT_EQ(wait_all, 2);  // before strip 0, and the drain
}

namespace {

// ---- EPILOGUE=smem: a warp-specialized kernel's strips copied out by its threads --------

const std::string kWsStaged = "ATOM=wgmma_bf16,WM=2,WN=1,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                              "GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=smem";

int copy_loops(const KernelOp& k) {
  return count(k.body, [](const Stmt& x) { return x.kind == StmtKind::For && x.axis == "epilogue.store"; });
}
int copy_width(const KernelOp& k) {
  int w = 0;
  walk(k.body, [&](const Stmt& x) {
    if (x.kind == StmtKind::Write && x.tensor == "out") w = std::max(w, x.width);
  });
  return w;
}
int warpgroup_barriers(const KernelOp& k) {
  int n = 0;
  walk(k.body, [&](const Stmt& x) { n += x.named_barrier() && x.imm == 128; });
  return n;
}

TEST(StagedStripEpilogue, OddRowPitchPersistentStripRing) {
  // GPT-2's LM head in small: N = 137 (274-byte rows: no tensor map) in 128 x 128 tiles
  // on 2 SMs, 2 x 2 tiles, so each CTA writes a second tile's strips into buffers whose
  // copies of the first tile the interpreter's race check watches. Scalar copies (an odd
  // row pitch), fused bias + relu, ragged M and N.
  CompileState s = passcheck::check_every_pass(
      "relu(linear(X[200,64]:bf16, W[137,64]:bf16, bias[137]:bf16))",
      Knobs::parse(kWsStaged + ",BN=128,EPI_BUFFERS=2"), 47, {}, {}, std::nullopt,
      sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(count(k.body, StmtKind::TmaStore), 0);
  EXPECT_EQ(count(k.body, StmtKind::BulkWait), 0);
  EXPECT_EQ(count(k.body, StmtKind::FenceProxyAsync), 0);
  EXPECT_EQ(copy_loops(k), 4);  // 2 strips x 2 warpgroups
  EXPECT_EQ(copy_width(k), 1);
  EXPECT_EQ(stmatrix_count(k), 2 * 4);
  EXPECT_EQ(warpgroup_barriers(k), 2);  // one per strip: 2 buffers divide the 2 strips
}

TEST(StagedStripEpilogue, OneBufferMeetsBeforeEachStripsWrites) {
  // One buffer: strip j + 1 writes what strip j's copy reads, so the owner also meets
  // before each strip's writes.
  CompileState s = passcheck::check_every_pass(
      "linear(X[136,64]:bf16, W[201,64]:bf16)",
      Knobs::parse(kWsStaged + ",BN=128,EPI_BUFFERS=1"), 53, {}, {}, std::nullopt,
      sm90a_with_sms(2));
  EXPECT_EQ(warpgroup_barriers(s.kernel.kernels.at(0)), 4);  // 2 strips x 2
}

TEST(StagedStripEpilogue, WholeTileRingAcrossTilesAndWiderCopies) {
  // N = 260: 520-byte rows (8-byte multiples, not 16): copies of 4 elements. EPI_BUFFERS=0
  // keeps the whole 128 x 128 tile; EPI_BUFFERS=4 rings two tiles' strips.
  for (const char* buffers : {"EPI_BUFFERS=0", "EPI_BUFFERS=4"}) {
    SCOPED_TRACE(buffers);
    CompileState s = passcheck::check_every_pass(
        "linear(X[200,64]:f16, W[260,64]:f16)",
        Knobs::parse(passcheck::knobs_over(kWsStaged, std::string("ATOM=wgmma_f16,BN=128,") + buffers)),
        59, {}, {}, std::nullopt, sm90a_with_sms(2));
    EXPECT_EQ(copy_width(s.kernel.kernels.at(0)), 4);
    EXPECT_EQ(count(s.kernel.kernels.at(0).body, StmtKind::TmaStore), 0);
  }
}

TEST(StagedStripEpilogue, BatchedOddColumnsAndF32Output) {
  // bmm's [B, M, N] with N = 75 per entry (the copy's batch offset and per-entry edges), and
  // an f32 output (strips of 32 columns) of odd width.
  passcheck::check_every_pass("bmm(A[3,100,64]:bf16, B[3,75,64]:bf16.T)",
                              Knobs::parse(kWsStaged + ",BN=64,EPI_BUFFERS=1"), 61, {}, {},
                              std::nullopt, four_sms());
  CompileState s = passcheck::check_every_pass(
      "matmul(A[130,64]:bf16, B[77,64]:bf16.T, out=f32)",
      Knobs::parse(kWsStaged + ",BN=64,EPI_BUFFERS=2"), 67, {}, {}, std::nullopt, four_sms());
  EXPECT_EQ(s.kernel.tensor("out_s").shape.at(2).const_value(), 32);
}

TEST(StagedStripEpilogue, WarpgroupsSideBySideEachCopyTheirColumns) {
  // WN=2: the two consumer warpgroups split the tile's columns, each owning a 64 x 64
  // rectangle (its own barrier, its one strip at column 0 or 64), without EPI_BUFFERS
  // (which needs owners stacked along M): the whole tile, a barrier before the writes
  // and one before the copies.
  CompileState s = passcheck::check_every_pass(
      "linear(X[130,64]:bf16, W[201,64]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=2,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,"
                   "STAGES=2,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=smem"),
      73, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(warpgroup_barriers(k), 2);
  EXPECT_EQ(copy_loops(k), 2);  // one strip per owner
}

TEST(StagedStripEpilogue, TmaStoreStillRefusesAnOddPitchAndNamesTheCopy) {
  try {
    passcheck::check_every_pass("linear(X[128,64]:bf16, W[137,64]:bf16)",
                                Knobs::parse(passcheck::knobs_over(kWsStaged, "EPILOGUE=tma_store")), 3);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EPILOGUE=smem copies such rows"), std::string::npos) << e.what();
  }
}

}  // namespace

}  // namespace loom
