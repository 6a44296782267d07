// Ping-pong consumer warpgroups (CONSUMERS=pingpong: t:010 tiles for one warpgroup, k:030
// gives two consumer warpgroups every other tile of the persistent tile loop and makes
// their mainloops take turns) on the CPU. After every pass the program runs on the
// interpreter and is compared with the naive Loop IR: up to k:030 as one warpgroup taking
// every tile, then the producer and the two consumer warpgroups as concurrent tasks whose
// mbarrier hand-offs (full, empty, turns) the interpreter checks for races and deadlocks.
// Persistent grids on small targets give CTAs odd and even numbers of tiles; the shapes
// are ragged in M and N.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "frontend/parser.h"
#include "ir/error.h"
#include "passes/pipeline.h"
#include "pass_check.h"

namespace loom {
namespace {
using passcheck::count;
using passcheck::sm90a_with_sms;

// 64 x 64 tiles per warpgroup (FM=1), 3 k-slabs of 64 through a 2-deep ring: the ring
// turns over within a tile, so a warpgroup that waited on the slots of its next tile
// before the other finished its own would alias their fills.
const std::string kPingPong =
    "ATOM=wgmma_bf16,WM=2,WN=1,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,GROUP_M=2,"
    "WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong";

TEST(PingPong, EveryPassMatchesOddAndEvenTilesPerCta) {
  // 5 x 2 tiles on 4 SMs: CTAs 0 and 1 take 3 tiles (warpgroup 0 two, warpgroup 1 one),
  // CTAs 2 and 3 take 2 (one each). M = 300 and N = 100 leave ragged edge tiles.
  CompileState s = passcheck::check_every_pass("matmul(A[300,192]:bf16, B[100,192]:bf16.T)",
                                               Knobs::parse(kPingPong), 31, {}, {},
                                               std::nullopt, sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.grid[0].const_value(), 4);
  EXPECT_EQ(k.block_threads, 384);  // two consumer warpgroups + the producer
  EXPECT_EQ(k.mbarriers, 2 + 2 + 2);  // full, empty per slot; one turn barrier per warpgroup
  EXPECT_EQ(count(k.body, StmtKind::Specialize), 1);
  EXPECT_EQ(k.body.back().kind, StmtKind::Specialize);
  EXPECT_EQ(k.body.back().body.size(), 3u);  // the producer and an arm per consumer warpgroup
  // Waits: the producer's empty; per consumer arm full and turn.
  EXPECT_EQ(count(k.body, StmtKind::MbarWait), 5);
  // Arrivals per consumer arm: the release in the loop, the last slab's, the turn.
  EXPECT_EQ(count(k.body, StmtKind::MbarArrive), 6);
  int single_reader = 0;
  walk(k.body, [&](const Stmt& x) {
    single_reader += x.kind == StmtKind::MbarInit && x.imm == 1;
  });
  EXPECT_EQ(single_reader, 6);  // a slot is read by one warpgroup: every barrier expects 1
}

TEST(PingPong, EveryPassMatchesWithTallTilesAndABiasReluEpilogue) {
  // 128-row tiles per warpgroup (FM=2: two m64 atoms) of a linear layer with a fused
  // bias and relu: 2 x 3 tiles on 4 SMs (2, 2, 1, 1 tiles per CTA).
  passcheck::check_every_pass(
      "relu(linear(X[200,128]:bf16, W[130,128]:bf16, bias[130]:bf16))",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,FM=2,BN=64,STAGE=tma,SWIZZLE=128B,BK=64,"
                   "STAGES=3,WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong"),
      37, {}, {}, std::nullopt, sm90a_with_sms(4));
}

TEST(PingPong, EveryPassMatchesInTwoCtaClusters) {
  // Clusters along M share B by multicast; each CTA's warpgroups take turns as alone:
  // 3 x 2 cluster tiles of 128 rows on 2 clusters (3 each: 2 for warpgroup 0, 1 for
  // warpgroup 1); M = 300 puts the last cluster's second CTA wholly past M.
  CompileState s = passcheck::check_every_pass(
      "matmul(A[300,128]:bf16, B[128,256]:bf16)",
      Knobs::parse("ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=2,"
                   "WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong,CLUSTER_M=2"),
      43, {}, {}, std::nullopt, sm90a_with_sms(4));
  const KernelOp& k = s.kernel.kernels.at(0);
  EXPECT_EQ(k.cluster[0], 2);
  int cluster_readers = 0;  // empty barriers: one warpgroup of each of the 2 CTAs
  walk(k.body, [&](const Stmt& x) {
    cluster_readers += x.kind == StmtKind::MbarInit && x.imm == 2;
  });
  EXPECT_EQ(cluster_readers, 2);
}

TEST(PingPong, UpToWarpSpecializationItIsOneWarpgroupsPersistentKernel) {
  auto tile_ir = [](const std::string& knobs) {
    CompileState s;
    s.graph = parse_expression("matmul(A[300,192]:bf16, B[100,192]:bf16.T)");
    s.knobs = Knobs::parse(knobs);
    s.target = sm90a_with_sms(4);
    run_pipeline(s, "t:050_multibuffer");
    return print(s.tile);
  };
  std::string one = kPingPong;
  one.replace(one.find("WM=2"), 4, "WM=1");
  one.erase(one.find(",CONSUMERS=pingpong"));
  EXPECT_EQ(tile_ir(kPingPong), tile_ir(one));
}

TEST(PingPong, EachWarpgroupTakesEveryOtherTileAndWaitsItsTurn) {
  CompileState s;
  s.graph = parse_expression("matmul(A[300,192]:bf16, B[100,192]:bf16.T)");
  s.knobs = Knobs::parse(kPingPong);
  s.target = sm90a_with_sms(4);
  run_pipeline(s, "k:030_warp_specialize");
  const std::string ir = print(s.kernel);
  // 10 tiles on 4 CTAs: n = (10 - cta + 3) / 4; warpgroup 0 takes (n + 1) / 2 of them.
  EXPECT_NE(ir.find("for t_w in 0..((10 - cta + 3) / 4 + 1) / 2  # persistent"), std::string::npos) << ir;
  EXPECT_NE(ir.find("for t_w in 0..(10 - cta + 3) / 8  # persistent"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let t_i = t_w * 2 + 1"), std::string::npos) << ir;
  // Slots 0-1 full, 2-3 empty, 4-5 the turns.
  EXPECT_NE(ir.find("mbar.wait [4] parity=(t_w + 1) % 2"), std::string::npos) << ir;
  EXPECT_NE(ir.find("mbar.wait [5] parity=t_w % 2"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let m_w = 0"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let wg_thread = threadIdx.x % 128"), std::string::npos) << ir;
}

// Without the turns, warpgroup 1 waits on its tile's first slot (fill 1 of slot 1,
// parity 1) while that slot's fill 0 is still in flight for warpgroup 0: the phase in
// progress has the other parity, the wait passes, and it reads a slot the copy engine is
// still writing. The interpreter must catch that (the turns are not only for speed).
TEST(PingPong, WithoutTheTurnsTheInterpreterFindsTheAliasedFill) {
  CompileState s;
  s.graph = parse_expression("matmul(A[256,192]:bf16, B[64,192]:bf16.T)");
  s.knobs = Knobs::parse(kPingPong);
  s.target = sm90a_with_sms(1);
  run_pipeline(s);
  KernelOp& k = s.kernel.kernels.at(0);
  // The turn barriers are the last two; the arms name them by constant slots.
  auto turn = [&](const Stmt& x) {
    return x.value.is_const() && x.value.const_value() >= k.mbarriers - 2;
  };
  int removed = 0;
  std::function<void(Block&)> strip = [&](Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& x = b[i];
      const bool turn_wait = x.kind == StmtKind::MbarWait && turn(x);
      const bool turn_arrive = x.kind == StmtKind::If && x.body.size() == 1 &&
                               x.body[0].kind == StmtKind::MbarArrive && turn(x.body[0]);
      if (turn_wait || turn_arrive) {
        b.erase(b.begin() + long(i--));
        ++removed;
        continue;
      }
      strip(x.body);
    }
  };
  strip(k.body);
  ASSERT_EQ(removed, 4);  // a wait and an arrive per consumer arm
  Bindings in;
  make_random_inputs(s.loop, in, 47);
  const HostTensor want = passcheck::run_level(s, Level::Loop, in);
  bool caught = false;
  try {
    Bindings b = in;
    interpret(s.kernel, b);
    const HostTensor& got = b.tensors.at("out");
    for (size_t i = 0; i < got.data.size(); ++i)
      caught |= std::isnan(got.data[i]) ||
                std::fabs(got.data[i] - want.data[i]) > 1.6e-2 * std::max(1.0, std::fabs(want.data[i]));
  } catch (const Error&) {
    caught = true;  // seen: the producer refills a slot a wgmma still reads (a release too early)
  }
  EXPECT_TRUE(caught);
}

TEST(PingPong, ErrorsNameTheKnobs) {
  auto fails = [](const std::string& knobs, const std::string& want) {
    try {
      CompileState s;
      s.graph = parse_expression("matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)");
      s.knobs = Knobs::parse(knobs);
      s.target = Target::for_arch("sm_90a");
      run_pipeline(s);
      ADD_FAILURE() << "no error for " << knobs;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  const std::string tma = "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,BN=256,";
  fails(tma + "WM=2,WARP_SPECIALIZE=1,CONSUMERS=pingpong", "PERSISTENT=1");
  fails(tma + "WM=2,PERSISTENT=1,CONSUMERS=pingpong", "WARP_SPECIALIZE=1");
  fails(tma + "WM=1,WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong", "WM=2,WN=1");
  fails(tma + "WM=2,BM=128,WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong", "BM=128");
  fails("ATOM=mma_bf16,WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong", "ATOM=wgmma_*");
  fails(tma + "CONSUMERS=sideways", "cooperative, pingpong");
}

}  // namespace
}  // namespace loom
