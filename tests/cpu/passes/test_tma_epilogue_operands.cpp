// k:056_tma_epilogue_operands on the CPU: after every pass the program runs on the
// interpreter — which checks the mbarrier phases and transaction bytes of the operand's
// TMA loads, that no consumer reads a strip buffer before its box landed, and that the
// producer does not refill one while a consumer may still read it — and is compared with
// the naive Loop IR. The residual add and the SwiGLU gate, with bias, ragged M and N
// (the box is zero-filled past the edges), the persistent schedule with several tiles
// per CTA and strip buffers refilled within a tile; plus the IR's shape, the fallbacks
// and the errors.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::sm90a_with_sms;

int count(const Block& b, const std::function<bool(const Stmt&)>& pred) {
  int n = 0;
  walk(b, [&](const Stmt& s) { n += pred(s); });
  return n;
}

int loads_of(const KernelOp& k, const std::string& t) {
  return count(k.body, [&](const Stmt& x) { return x.kind == StmtKind::Load && x.tensor == t; });
}

int tma_loads_of(const KernelOp& k, const std::string& t) {
  return count(k.body, [&](const Stmt& x) { return x.kind == StmtKind::TmaLoad && x.tensor == t; });
}

// Each release of an operand buffer (one thread per warpgroup arriving on an empty
// barrier, `if ...: mbar.arrive [const]`) directly follows a barrier the warpgroup meets
// at, which orders every reader's loads before the arrival. The interpreter runs an arm's
// threads as one task (interpret_shared.h), so it cannot see a release that leaves other
// warps' reads unordered; this checks the shape instead. Returns the releases found.
int releases_after_barriers(const Block& b) {
  int n = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const Stmt& x = b[i];
    if (x.kind == StmtKind::If && x.body.size() == 1 && x.body[0].kind == StmtKind::MbarArrive &&
        x.body[0].value.is_const() && x.cond.uses("threadIdx.x") && !x.cond.uses("wg_thread")) {
      EXPECT_TRUE(i > 0 && b[i - 1].kind == StmtKind::Barrier && !b[i - 1].named_arrive())
          << "release " << x.body[0].value.str() << " does not follow a barrier";
      ++n;
    }
    if (x.kind == StmtKind::For || x.kind == StmtKind::If || x.kind == StmtKind::Specialize)
      n += releases_after_barriers(x.body);
  }
  return n;
}

// The large schedule's shape, small: 128 x 256 tiles of two consumer warpgroups, strip
// buffers for the output, persistent over 2 SMs.
const std::string kLarge = "ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                           "GROUP_M=2,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,"
                           "EPI_BUFFERS=2,EPI_LOAD=tma";

TEST(TmaEpilogueOperands, ResidualWithBiasRaggedPersistentWholeTile) {
  // 200 x 296 in 128 x 256 tiles on 2 SMs: 2 x 2 tiles, each CTA reads a second tile's
  // residual into the buffer the first tile's epilogue read; the last tiles' boxes hang
  // over both edges.
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[200,128]:bf16, W[296,128]:bf16, b[296]:bf16), R[200,296]:bf16)",
      Knobs::parse(kLarge), 41, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(loads_of(k, "R"), 0);
  EXPECT_GT(loads_of(k, "R_s"), 0);
  EXPECT_EQ(tma_loads_of(k, "R_s"), 4);  // 4 strips of 64 columns, one box each
  const TensorDecl& buf = s.kernel.tensor("R_s");
  EXPECT_EQ(buf.shape.at(0).const_value(), 4);  // the whole tile
  EXPECT_EQ(buf.shape.at(1).const_value(), 128);
  EXPECT_EQ(buf.shape.at(2).const_value(), 64);
  EXPECT_EQ(buf.swizzle.bits, 3);
  EXPECT_EQ(k.tma.back().box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(k.tma.back().swizzle_bytes, 128);
  EXPECT_EQ(s.used_knobs.at("EPI_LOAD"), "tma");
}

TEST(TmaEpilogueOperands, GateTwoBuffersRefilledWithinATile) {
  // SwiGLU's gate through 2 strip buffers: strip j + 2 waits for the consumers' release
  // of strip j in the same tile, and the next tile's strip 0 for strip 2's.
  CompileState s = passcheck::check_every_pass(
      "mul(silu(linear(X[200,64]:bf16, W[296,64]:bf16)), E0[200,296]:bf16)",
      Knobs::parse(kLarge + ",EPI_LOAD_BUFFERS=2"), 43, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(loads_of(k, "E0"), 0);
  EXPECT_EQ(s.kernel.tensor("E0_s").shape.at(0).const_value(), 2);
  // Strips 0, 1 after the tile's slab loop; strips 2, 3 of the previous tile inside the
  // slab loop, and the last tile's after the tile loop.
  EXPECT_EQ(tma_loads_of(k, "E0_s"), 6);
  int deferred = 0;
  walk(k.body, [&](const Stmt& x) {
    if (x.kind == StmtKind::For && x.loop_kind == LoopKind::Reduce)
      for (const Stmt& c : x.body)
        deferred += c.kind == StmtKind::If && count(c.body, [](const Stmt& y) {
          return y.kind == StmtKind::TmaLoad && y.tensor == "E0_s";
        }) == 2;
  });
  EXPECT_EQ(deferred, 1);
  // Each strip: a wait before its first read and a release after the warpgroup's barrier
  // behind its last.
  EXPECT_EQ(releases_after_barriers(k.body), 4);
}

TEST(TmaEpilogueOperands, GateWholeOutputTileRegisterLoop) {
  // The whole output tile (EPI_BUFFERS=0): the epilogue stays a register loop whose one
  // statement reads both strips of the operand's whole-tile buffer.
  CompileState s = passcheck::check_every_pass(
      "mul(silu(linear(X[136,64]:bf16, W[200,64]:bf16)), E0[136,200]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_LOAD=tma"),
      47, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(loads_of(k, "E0"), 0);
  EXPECT_EQ(tma_loads_of(k, "E0_s"), 2);
}

TEST(TmaEpilogueOperands, DirectEpilogueNonPersistent) {
  // Without the TMA store and without a tile loop: one tile per CTA, fill 0 only.
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[150,64]:bf16, W[72,64]:bf16), R[150,72]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,EPI_LOAD=tma"),
      53);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(loads_of(k, "R"), 0);
  EXPECT_EQ(tma_loads_of(k, "R_s"), 1);
  // No TMA store, so no strip barriers: the pass adds one per warpgroup behind the reads.
  EXPECT_EQ(releases_after_barriers(k.body), 1);
}

TEST(TmaEpilogueOperands, ClusterOfTwo) {
  // The slabs multicast within a 2-CTA cluster; each CTA loads its own operand tile.
  CompileState s = passcheck::check_every_pass(
      "mul(silu(linear(X[384,64]:bf16, W[200,64]:bf16)), E0[384,200]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2,EPILOGUE=tma_store,EPI_BUFFERS=2,"
                   "EPI_LOAD=tma"),
      67, {}, {}, std::nullopt, sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.cluster[0], 2);
  EXPECT_EQ(loads_of(k, "E0"), 0);
  int multicast = 0;
  walk(k.body, [&](const Stmt& x) {
    multicast += x.kind == StmtKind::TmaLoad && x.tensor == "E0_s" && !x.multicast.is_const();
  });
  EXPECT_EQ(multicast, 0);
}

TEST(TmaEpilogueOperands, SwappedDecodeTile) {
  // The decode schedule computes the transposed tile (SWAP_AB=1): the residual's rows are
  // the kernel's columns, so its box is 64 output columns by the tile's 8 tokens.
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[5,128]:bf16, W[136,128]:bf16), R[5,136]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,BN=8,SWAP_AB=1,WM=1,WN=1,STAGE=tma,SWIZZLE=128B,BK=64,"
                   "STAGES=2,WARP_SPECIALIZE=1,EPI_LOAD=tma"),
      71);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(loads_of(k, "R"), 0);
  EXPECT_EQ(k.tma.back().box, (std::vector<int64_t>{64, 8}));
}

TEST(TmaEpilogueOperands, BatchedOperandKeepsDirectReadsWithANote) {
  CompileState s = passcheck::compile_sm90a(
      "add(bmm(A[2,136,64]:bf16, B[2,64,136]:bf16), R[2,136,136]:bf16)",
      "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
      "WARP_SPECIALIZE=1,PERSISTENT=1,EPI_LOAD=tma");
  EXPECT_GT(loads_of(s.kernel.kernels.at(0), "R"), 0);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("rank 3"), std::string::npos) << s.notes[0];
}

TEST(TmaEpilogueOperands, StreamKResidual) {
  // Stream-K: each unit (a tile, or a K range of one) loads the operand and releases it,
  // though only the unit that finishes the tile runs the epilogue (`if sk_last`).
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[200,104]:bf16, W[136,104]:bf16, bias[136]:bf16), R[200,136]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,STREAM_K=1,EPILOGUE=tma_store,EPI_BUFFERS=2,"
                   "EPI_LOAD=tma"),
      73, {}, {}, std::nullopt, sm90a_with_sms(4));
  EXPECT_EQ(loads_of(s.kernel.kernels.at(0), "R"), 0);
  // One buffer for two strips: the epilogue is one statement (`if sk_last: ...`) reading
  // both, so strip 1 could never refill the buffer strip 0 holds: refused, by name.
  const std::string err = passcheck::error_of(
      "add(linear(X[200,104]:bf16, W[264,104]:bf16, bias[264]:bf16), R[200,264]:bf16)",
      "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
      "WARP_SPECIALIZE=1,PERSISTENT=1,STREAM_K=1,EPILOGUE=tma_store,EPI_BUFFERS=2,"
      "EPI_LOAD=tma,EPI_LOAD_BUFFERS=1",
      sm90a_with_sms(4));
  EXPECT_NE(err.find("before it is done with strip 0"), std::string::npos) << err;
}

TEST(TmaEpilogueOperands, TransposedResidual) {
  // R given as R[N, M].T: its storage rows are the tile's columns, so the box is 64 of the
  // tile's rows by its 128 columns, and each read's strip depends on the thread.
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[200,64]:bf16, W[136,64]:bf16), R[136,200]:bf16.T)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,EPI_LOAD=tma"),
      79, {}, {}, std::nullopt, sm90a_with_sms(2));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(loads_of(k, "R"), 0);
  EXPECT_EQ(k.tma.back().box, (std::vector<int64_t>{64, 128}));
}

TEST(TmaEpilogueOperands, RuntimeM) {
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[M,64]:bf16, W[296,64]:bf16, b[296]:bf16), R[M,296]:bf16)",
      Knobs::parse(kLarge), 59, {{"M", 200}}, {}, std::nullopt, sm90a_with_sms(2));
  EXPECT_EQ(loads_of(s.kernel.kernels.at(0), "R"), 0);
}

TEST(TmaEpilogueOperands, UnalignedRowsKeepDirectReads) {
  // 100 bf16 columns are 200 B a row: no tensor map; the reads stay global, recorded.
  CompileState s = passcheck::check_every_pass(
      "add(linear(X[64,64]:bf16, W[100,64]:bf16), R[64,100]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=1,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,EPI_LOAD=tma"),
      61);
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_GT(loads_of(k, "R"), 0);
  EXPECT_EQ(s.used_knobs.at("EPI_LOAD"), "direct");
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("200 B apart"), std::string::npos) << s.notes[0];
}

TEST(TmaEpilogueOperands, Errors) {
  auto compile = [](const std::string& knobs) {
    return passcheck::compile_sm90a("add(linear(X[1024,2048]:bf16, W[8192,2048]:bf16), R[1024,8192]:bf16)",
                                    knobs);
  };
  // STAGES=4 slabs and the output's strips leave no room for a 64 KB residual tile.
  try {
    compile("ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
            "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,EPI_LOAD=tma");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EPI_LOAD_BUFFERS"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compile("ATOM=wgmma_bf16,WM=2,WN=1,BN=256,STAGE=tma,BK=64,STAGES=3,WARP_SPECIALIZE=1,"
                       "EPI_LOAD=tma,EPI_LOAD_BUFFERS=3"),
               Error);
  EXPECT_THROW(compile("ATOM=wgmma_bf16,STAGE=tma,EPI_LOAD=fast"), Error);
}

}  // namespace
}  // namespace loom
