// k:013_lower_attention_wgmma (ATTN_MMA=wgmma): every pass of an attention program run on
// the CPU interpreter computes what the naive loop form of l:000 computes — O and LSE — for
// the wgmma kernel: head dims 64, 128 and 192 and every other multiple of 8 (spans of 64, 32
// and 16 columns, the last one half zero fill), the three masks, Sq != Sk, ragged lengths (17,
// and key counts past one BLOCK_N), GQA and MQA, f16 and bf16, one to three warpgroups.
// The kernel level runs per thread: TMA boxes with their zero fill, mbarrier phases, both
// wgmmas with their asynchrony (a missing fence or wait, or a slot refilled while a wgmma
// reads it, fails here), the quad shuffles and the P repack.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "attention_exprs.h"
#include "pass_check.h"
#include "passes/attention_wgmma_tiles.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

using attention_test::attention;
using attention_test::kMasks;

// The pipeline pass by pass; the kernel level (k:013's output) interpreted and compared
// with the naive loop form, O and LSE.
CompileState wgmma_state(const std::string& expr, const std::string& knobs) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse("ATTN_MMA=wgmma" + (knobs.empty() ? "" : "," + knobs));
  s.target = Target::for_arch("sm_90a");
  return s;
}

void check_wgmma(const std::string& expr, const std::string& knobs, uint64_t seed) {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s = wgmma_state(expr, knobs);
  Bindings inputs, reference;
  const DType out = s.graph.node(s.graph.result()).dtype;
  bool lowered = false;
  for (const auto& p : pipeline()) {
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (reference.tensors.empty() && s.level >= Level::Loop) {
      make_random_inputs(s.loop, inputs, seed);
      reference = inputs;
      interpret(s.loop, reference);
    }
    if (p.id != "k:013_lower_attention_wgmma") continue;
    lowered = true;
    ASSERT_EQ(s.level, Level::Kernel);
    ASSERT_EQ(s.kernel.kernels.size(), 1u);
    EXPECT_EQ(s.kernel.kernels[0].block_threads % 128, 0);
    Bindings got = inputs;
    interpret(s.kernel, got);
    passcheck::expect_outputs_close(s.kernel, got, reference, out, "after " + p.id);
  }
  EXPECT_TRUE(lowered);
}

// The kernel level under `schedules` seeded interleavings (interpret(.., schedule_seed)):
// the consumer warpgroups as tasks of their own, handing the baton on at random
// synchronization points, so a race between them, the producer and the copies that the
// run-until-blocked order hides (a deadlock, a slot overwritten while read) fails here.
void check_wgmma_schedules(const std::string& expr, const std::string& knobs, uint64_t seed,
                           int schedules) {
  SCOPED_TRACE(expr + " knobs=" + knobs);
  CompileState s = wgmma_state(expr, knobs);
  Bindings inputs, reference;
  const DType out = s.graph.node(s.graph.result()).dtype;
  for (const auto& p : pipeline()) {
    p.run(s);
    if (reference.tensors.empty() && s.level >= Level::Loop) {
      make_random_inputs(s.loop, inputs, seed);
      reference = inputs;
      interpret(s.loop, reference);
    }
  }
  ASSERT_EQ(s.level, Level::Kernel);
  for (int k = 1; k <= schedules; ++k) {
    SCOPED_TRACE("schedule seed " + std::to_string(k));
    Bindings got = inputs;
    interpret(s.kernel, got, uint64_t(k));
    passcheck::expect_outputs_close(s.kernel, got, reference, out, "schedule");
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(AttentionWgmma, HeadDim64MasksAndLengths) {
  const int lengths[][2] = {{17, 17}, {17, 33}, {33, 17}, {1, 33}, {130, 150}};
  uint64_t seed = 100;
  for (const char* causal : kMasks)
    for (auto [sq, sk] : lengths)
      check_wgmma(attention(2, 1, sq, sk, 64, causal), "ATTN_WG=1,BLOCK_N=64", seed++);
}

// Key counts past one BLOCK_N (ring slots reused, mbarrier phases flipping), ragged
// both ways, two warpgroups, GQA 4/2 and f16.
TEST(AttentionWgmma, SeveralKeyBlocksTwoWarpgroups) {
  uint64_t seed = 200;
  for (const char* causal : kMasks) {
    check_wgmma(attention(4, 2, 129, 300, 64, causal, "f16"), "BLOCK_N=64", seed++);
    check_wgmma(attention(2, 2, 200, 77, 64, causal, "bf16", false), "BLOCK_N=32", seed++);
  }
}

// The K/V ring's variants: three slots (two blocks in flight), and slots handed back by
// a block barrier instead of the empty mbarriers; several key blocks, so slots are reused
// and every mbarrier's phase flips more than once.
TEST(AttentionWgmma, RingVariants) {
  uint64_t seed = 400;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 100, 300, 64, causal), "BLOCK_N=32,KV_STAGES=3", seed++);
    check_wgmma(attention(2, 2, 150, 200, 64, causal, "f16"), "BLOCK_N=32,ATTN_PRODUCER=1",
                seed++);
  }
  check_wgmma(attention(1, 1, 64, 333, 64, "false"), "ATTN_WG=1,BLOCK_N=16,KV_STAGES=3,ATTN_PRODUCER=1",
              seed++);
}

// ATTN_OVERLAP=1: S of block kb issued before P V of kb - 1, two S/P arrays trading roles
// (the loop unrolled by two): one, two, three and many key blocks, odd and even counts.
TEST(AttentionWgmma, OverlappedProducts) {
  uint64_t seed = 500;
  const std::string o = "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=32";
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 100, 300, 64, causal), o, seed++);
    check_wgmma(attention(2, 2, 33, 17, 64, causal, "f16"), o, seed++);
    check_wgmma(attention(2, 2, 150, 64, 64, causal), o + ",KV_STAGES=3", seed++);
  }
  check_wgmma(attention(1, 1, 64, 96, 64, "false"), o + ",ATTN_WG=1", seed++);
  check_wgmma(attention(1, 1, 70, 150, 128, "true"), "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=64", seed++);
  // O's rescale after P V of the block before retired (ATTN_O_UNDER_S=0, the placement
  // before the default moved it under the next S): the same products.
  for (const char* causal : kMasks)
    check_wgmma(attention(2, 1, 100, 300, 64, causal), o + ",ATTN_O_UNDER_S=0", seed++);
  check_wgmma(attention(1, 1, 70, 40, 128, "true"), o + ",ATTN_O_UNDER_S=0", seed++);
}


// ATTN_PINGPONG=1: the consumer warpgroups take turns issuing their wgmmas through named
// barriers 1..ATTN_WG (bar.sync before a turn, bar.arrive for the next warpgroup after
// it). The interpreter runs each warpgroup as its own task, so a ring that deadlocks,
// leaves a phase short at the block's end or lets a warpgroup skip its turn fails here.
// Two and three warpgroups, without and with ATTN_OVERLAP, one to many key blocks (odd and
// even counts), the three masks (causal blocks with no key: the ring must not start),
// ragged lengths, GQA, LSE, f16, D 64, 96, 128 and 256.
TEST(AttentionWgmma, PingPong) {
  uint64_t seed = 1500;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 150, 300, 64, causal), "ATTN_PRODUCER=1,ATTN_PINGPONG=1,BLOCK_N=32",
                seed++);
    check_wgmma(attention(4, 2, 200, 77, 128, causal, "f16"), "ATTN_PINGPONG=1,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 2, 130, 150, 96, causal, "bf16", false),
                "ATTN_PINGPONG=1,ATTN_OVERLAP=1,ATTN_WG=2,BLOCK_N=32", seed++);
  }
  // Three warpgroups (the ring 0, 1, 2), FA3's D = 128 tile; one key block; D = 256.
  check_wgmma(attention(2, 1, 190, 250, 128, "true"), "ATTN_PINGPONG=1,BLOCK_N=48", seed++);
  check_wgmma(attention(1, 1, 190, 250, 128, "false"), "ATTN_PRODUCER=1,ATTN_PINGPONG=1,ATTN_OVERLAP=1,ATTN_WG=3,BLOCK_N=16", seed++);
  check_wgmma(attention(1, 1, 100, 17, 64, "false"), "ATTN_PRODUCER=1,ATTN_PINGPONG=1", seed++);
  check_wgmma(attention(1, 1, 100, 17, 64, "true"), "ATTN_PRODUCER=1,ATTN_PINGPONG=1,ATTN_OVERLAP=1", seed++);
  check_wgmma(attention(1, 1, 70, 150, 256, "true"), "ATTN_PINGPONG=1,ATTN_OVERLAP=0,BLOCK_N=32", seed++);
  check_wgmma(attention(1, 1, 70, 150, 256, "false", "f16"), "ATTN_PINGPONG=1,ATTN_OVERLAP=1,BLOCK_N=32", seed++);
}

// ATTN_LOAD_WARPS on the dense form (one CTA per query block): lane 0 of two to four
// producer warps issue a block's 64-column boxes (box n to warp n mod L), the first arming
// the barrier; at D = 64 one box a half block, so the other warps only wait for the slots.
// Block order and the overlap's split release (K one block ahead of V), both masks, odd
// lengths, and seeded interleavings of the warpgroups.
TEST(AttentionWgmma, LoadWarps) {
  uint64_t seed = 2400;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 150, 300, 128, causal),
                "ATTN_PRODUCER=1,ATTN_PERSISTENT=0,ATTN_OVERLAP=0,ATTN_LOAD_WARPS=2,BLOCK_N=64", seed++);
    check_wgmma(attention(2, 2, 130, 77, 192, causal, "f16"),
                "ATTN_PERSISTENT=0,ATTN_OVERLAP=1,ATTN_LOAD_WARPS=3,BLOCK_N=32", seed++);
  }
  check_wgmma(attention(1, 1, 100, 200, 64, "false"),
              "ATTN_PRODUCER=1,ATTN_PERSISTENT=0,ATTN_LOAD_WARPS=4,BLOCK_N=32", seed++);
  check_wgmma_schedules(attention(1, 1, 130, 200, 128, "true"),
                        "ATTN_PERSISTENT=0,ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_LOAD_WARPS=4,BLOCK_N=64",
                        seed++, 3);
  // Under the static walk: every issuing warp walks the units itself with its own running
  // block count; the first alone hands each unit over and issues Q. No mask (every unit
  // alike) and causal (the stream: units of 0 to many blocks, each handed with its base).
  for (const char* causal : kMasks)
    check_wgmma(attention(2, 2, 150, 300, 64, causal),
                "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_CTAS=3,"
                "ATTN_LOAD_WARPS=3,BLOCK_N=32", seed++);
  check_wgmma(attention(2, 1, 130, 77, 128, "true", "f16"),
              "ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_CTAS=2,ATTN_OVERLAP=1,ATTN_LOAD_WARPS=2,"
              "BLOCK_N=48", seed++);
}

// ATTN_PERSISTENT=1: a grid of ATTN_CTAS CTAs walks the units (query block, head, batch),
// several per CTA (a tiny grid: 1 to 3 CTAs over 4 to 24 units, some CTAs one unit more
// than others), so the K/V ring turns across units (no mask: base t_i x key blocks;
// causal: each unit padded to 2 x KV_STAGES blocks whose phases complete with no bytes),
// Q's slot is handed back per unit and the producer loads the next unit while the
// consumers finish this one. The interpreter runs the producer and consumers as they run
// on the GPU: a phase off by one deadlocks or reads a stale slot here. The three masks
// (causal units of 0 to many key blocks, longest first), odd Sq and Sk, GQA, LSE, two and
// three warpgroups, two and three ring slots, the overlap and the ping-pong, batches > 1.
TEST(AttentionWgmma, Persistent) {
  uint64_t seed = 2500;
  for (const char* causal : kMasks) {
    check_wgmma(attention(4, 2, 150, 300, 64, causal, "bf16", true, 2),
                "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 1, 130, 77, 128, causal, "f16"),
                "ATTN_PERSISTENT=1,ATTN_CTAS=2,BLOCK_N=48,KV_STAGES=3", seed++);
    check_wgmma(attention(2, 2, 200, 100, 96, causal, "bf16", false),
                "ATTN_PERSISTENT=1,ATTN_CTAS=1,ATTN_WG=2,BLOCK_N=32,ATTN_OVERLAP=1", seed++);
  }
  // Sq > Sk (bottom-right: units with no key at all, the CTA's last), the ping-pong,
  // three warpgroups at D = 128 (the default tile's shape, 112 keys), D = 256.
  check_wgmma(attention(2, 1, 190, 40, 64, "true"),
              "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=2,BLOCK_N=16", seed++);
  check_wgmma(attention(2, 2, 200, 250, 128, "true"),
              "ATTN_PERSISTENT=1,ATTN_CTAS=2,ATTN_PINGPONG=1,BLOCK_N=48", seed++);
  check_wgmma(attention(3, 3, 200, 250, 128, "false", "bf16", true, 2),
              "ATTN_PERSISTENT=1,ATTN_CTAS=3", seed++);
  check_wgmma(attention(2, 1, 70, 150, 256, "true"), "ATTN_PERSISTENT=1,ATTN_CTAS=1,BLOCK_N=32",
              seed++);
}

// The persistent walk under seeded interleavings of the producer and each consumer
// warpgroup (check_wgmma_schedules): causal Sq > Sk (keyless units, the padding to 2S ring
// blocks) and not, two and three slots, the ping-pong, O through Q's slot (D = 256).
// Within a warpgroup, whose warps the interpreter runs in lockstep, an arrival by its
// first thread is checked to follow a meeting of the warpgroup (interpreter:
// check_elected_arrival): the keyless units' and the padding's arrivals, which hung the
// H100 (D = 256, Sq 4097 > Sk 1000, 16 CTAs), fail that check without k:013's meeting.
TEST(AttentionWgmma, PersistentSchedules) {
  uint64_t seed = 2700;
  const std::string p = "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_WG=2,";
  check_wgmma_schedules(attention(2, 1, 600, 100, 64, "true"), p + "ATTN_CTAS=1,BLOCK_N=16", seed++, 12);
  check_wgmma_schedules(attention(2, 1, 500, 130, 64, "true", "bf16", true, 2),
                        p + "ATTN_CTAS=3,BLOCK_N=48,KV_STAGES=3", seed++, 8);
  check_wgmma_schedules(attention(2, 2, 300, 200, 64, "false"), p + "ATTN_CTAS=2,BLOCK_N=32", seed++, 8);
  check_wgmma_schedules(attention(2, 1, 400, 100, 64, "true"),
                        p + "ATTN_CTAS=2,BLOCK_N=32,ATTN_PINGPONG=1", seed++, 8);
  check_wgmma_schedules(attention(2, 1, 300, 60, 256, "true"),
                        p + "ATTN_CTAS=1,BLOCK_N=32,ATTN_TMA_STORE=1", seed++, 4);
}

// ATTN_SCHEDULE=dynamic: the producer takes each CTA's first unit from blockIdx.x and the
// rest from the global work counter (fetch.inc, wrapping to 0 at the launch's last
// fetch), hands each unit and its ring base to the consumers through shared memory, and
// a unit past the last ends both arms' walks (break). The interpreter runs the CTAs one
// after another, so CTA 0 takes every fetched unit and the others stop at their first
// fetch: a legal GPU order. Causal and not, tiny grids (1-3 CTAs), Sq != Sk with Sq > Sk
// (keyless units), odd lengths, D = 96 (64 + 32 spans) and 256 (O through Q's slot), GQA
// and LSE, two and three slots, the overlap and the ping-pong. Causal static goes through
// the same stream (unpadded: each unit's ring base the producer's running count).
TEST(AttentionWgmma, PersistentDynamic) {
  uint64_t seed = 2800;
  const std::string d = "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic,";
  for (const char* causal : kMasks) {
    check_wgmma(attention(4, 2, 150, 300, 64, causal, "bf16", true, 2), d + "ATTN_CTAS=3,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 1, 130, 77, 96, causal, "f16"), d + "ATTN_CTAS=2,BLOCK_N=48,KV_STAGES=3", seed++);
    check_wgmma(attention(2, 2, 200, 100, 128, causal, "bf16", false),
                d + "ATTN_CTAS=1,ATTN_WG=2,BLOCK_N=32,ATTN_OVERLAP=1", seed++);
  }
  check_wgmma(attention(2, 1, 190, 40, 64, "true"), d + "ATTN_CTAS=2,BLOCK_N=16", seed++);
  check_wgmma(attention(2, 2, 200, 250, 128, "true"), d + "ATTN_CTAS=2,ATTN_PINGPONG=1,BLOCK_N=48", seed++);
  check_wgmma(attention(2, 1, 70, 150, 256, "true"), d + "ATTN_CTAS=1,BLOCK_N=32,ATTN_TMA_STORE=1", seed++);
  check_wgmma(attention(2, 1, 97, 33, 256, "true"), d + "ATTN_CTAS=3,BLOCK_N=16", seed++);
  // Causal static, unpadded: units of 1..n blocks back to back in the ring.
  check_wgmma(attention(2, 1, 333, 129, 96, "true"), "ATTN_PERSISTENT=1,ATTN_CTAS=2,BLOCK_N=16", seed++);
}

// Under seeded interleavings of the producer and each consumer warpgroup: the unit
// hand-off (the producer's stores after the consumers released Q's slot, their reads
// after Q's barrier) is checked for races, and the stop for a deadlock.
TEST(AttentionWgmma, PersistentDynamicSchedules) {
  uint64_t seed = 2900;
  const std::string d = "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_WG=2,ATTN_SCHEDULE=dynamic,";
  check_wgmma_schedules(attention(2, 1, 600, 100, 64, "true"), d + "ATTN_CTAS=1,BLOCK_N=16", seed++, 10);
  check_wgmma_schedules(attention(2, 1, 500, 130, 64, "true", "bf16", true, 2),
                        d + "ATTN_CTAS=3,BLOCK_N=48,KV_STAGES=3", seed++, 6);
  check_wgmma_schedules(attention(2, 2, 300, 200, 64, "false"), d + "ATTN_CTAS=2,BLOCK_N=32", seed++, 6);
  check_wgmma_schedules(attention(2, 1, 300, 60, 256, "true"),
                        d + "ATTN_CTAS=2,BLOCK_N=32,ATTN_TMA_STORE=1", seed++, 4);
  check_wgmma_schedules(attention(2, 1, 300, 100, 64, "true"),
                        "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_WG=2,ATTN_CTAS=2,BLOCK_N=16", seed++, 6);
}

// The hand-off is what orders the producer's stores of the next unit after the consumers'
// reads of this one: with the stores moved above the producer's wait for Q's release, the
// interpreter's seeded schedules find the race (the consumers of unit t, delayed, read
// unit t + 1's index), as they would find any hand-off that loses its barrier.
TEST(AttentionWgmma, DynamicHandOffRaceIsCaught) {
  CompileState s = wgmma_state(attention(2, 1, 600, 100, 64, "true"),
                               "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_WG=2,ATTN_SCHEDULE=dynamic,"
                               "ATTN_CTAS=1,BLOCK_N=16");
  run_pipeline(s);
  int moved = 0;
  walk(s.kernel.kernels[0].body, [&](Stmt& st) {
    // The producer's unit: [block 0, the wait for Q's release, the two stores, ...].
    for (size_t i = 0; i + 2 < st.body.size(); ++i)
      if (st.body[i].kind == StmtKind::If && st.body[i].body.size() == 1 &&
          st.body[i].body[0].kind == StmtKind::MbarWait && st.body[i + 1].write_int() &&
          st.body[i + 2].write_int()) {
        std::rotate(st.body.begin() + long(i), st.body.begin() + long(i) + 1,
                    st.body.begin() + long(i) + 3);
        ++moved;
        return;
      }
  });
  ASSERT_EQ(moved, 1);
  Bindings b;
  make_random_inputs(s.kernel, b, 41);
  std::string race;
  for (uint64_t seed = 1; seed <= 24 && race.empty(); ++seed) {
    Bindings got = b;
    try {
      interpret(s.kernel, got, seed);
    } catch (const RaceError& e) {
      race = e.what();
    }
  }
  EXPECT_NE(race.find("unit_s"), std::string::npos) << race;
}

// The work counter is left at 0 by each launch (its last fetch wraps it), so a second
// launch on the same workspace deals every unit again; a launch that finds it elsewhere
// (one before it fetched too few or too many times) deals units twice and leaves it
// non-zero: the interpreter reports a zeroed temp a kernel does not leave zeroed.
TEST(AttentionWgmma, DynamicWorkCounterResets) {
  CompileState s = wgmma_state(attention(2, 1, 300, 200, 64, "true"),
                               "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic,ATTN_CTAS=2,BLOCK_N=32");
  run_pipeline(s);
  std::string counter;
  for (const TensorDecl& t : s.kernel.tensors)
    if (t.role == TensorRole::Temp && t.zero_init && t.dtype == DType::I32) counter = t.name;
  ASSERT_FALSE(counter.empty());
  Bindings b;
  make_random_inputs(s.kernel, b, 31);
  for (int launch = 0; launch < 2; ++launch) {
    b.tensors.at("out").data.assign(b.tensors.at("out").data.size(),
                                    std::numeric_limits<double>::quiet_NaN());
    interpret(s.kernel, b);
    for (double v : b.tensors.at("out").data) ASSERT_FALSE(std::isnan(v)) << "launch " << launch;
    EXPECT_EQ(b.tensors.at(counter).data[0], 0.0) << "launch " << launch;
  }
  b.tensors.at(counter).data[0] = 5;  // 2 x 1 x 3 query blocks: 6 units, wrap 6
  std::string msg;
  try {
    interpret(s.kernel, b);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("leaves zeroed temp " + counter + " non-zero (element 0 = 5)"),
            std::string::npos) << msg;
}

// ATTN_TMA_STORE=1: O through shared memory and one TMA store per warpgroup and 64-column
// chunk or narrow span, rows past Sq and columns past D clipped by the tensor map (odd
// Sq; D = 40 and 104 end in a 16-column span with 8 columns past D); a buffer of its own,
// or Q's slot where it does not fit (D = 256); alone and under the persistent walk (the
// buffer reused by the next unit only once the store read it).
TEST(AttentionWgmma, TmaStoreEpilogue) {
  uint64_t seed = 2600;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 77, 100, 64, causal), "ATTN_TMA_STORE=1,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 2, 130, 90, 104, causal, "f16"),
                "ATTN_TMA_STORE=1,ATTN_PERSISTENT=1,ATTN_CTAS=2,BLOCK_N=32", seed++);
  }
  check_wgmma(attention(1, 1, 33, 50, 40, "false"), "ATTN_TMA_STORE=1,ATTN_PRODUCER=1,BLOCK_N=16", seed++);
  check_wgmma(attention(2, 1, 150, 100, 256, "false"), "ATTN_TMA_STORE=1", seed++);
  check_wgmma(attention(2, 1, 150, 100, 256, "true", "bf16", true, 2),
              "ATTN_TMA_STORE=1,ATTN_PERSISTENT=1,ATTN_CTAS=3", seed++);
}

TEST(AttentionWgmma, HeadDim128) {
  uint64_t seed = 300;
  for (const char* causal : kMasks)
    check_wgmma(attention(2, 1, 70, 150, 128, causal), "", seed++);
  check_wgmma(attention(1, 1, 33, 17, 128, "true", "f16"), "ATTN_WG=3,BLOCK_N=16", seed++);
}

// D = 192: Q, K and V rows as three TMA boxes of 64 columns, S's wgmma over 12 k-steps
// across them, O += P V as m64n192k16; the defaults above D = 128 (BLOCK_N = 64, the
// producer warpgroup), thread 0 issuing instead, a three-slot ring and ATTN_OVERLAP.
// Ragged lengths both ways, several key blocks, the three masks, GQA, f16 and bf16.
TEST(AttentionWgmma, HeadDim192) {
  uint64_t seed = 600;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 70, 150, 192, causal), "", seed++);
    check_wgmma(attention(1, 1, 33, 17, 192, causal, "f16"), "ATTN_WG=1", seed++);
  }
  check_wgmma(attention(2, 2, 100, 130, 192, "true", "bf16", false), "ATTN_PRODUCER=0,BLOCK_N=32",
              seed++);
  check_wgmma(attention(1, 1, 65, 100, 192, "false", "f16"), "ATTN_WG=1,BLOCK_N=32,KV_STAGES=3",
              seed++);
  check_wgmma(attention(1, 1, 64, 96, 192, "top_left"), "ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_WG=1",
              seed++);
}

std::string kernel_ir(const std::string& expr, const std::string& knobs,
                      const std::string& arch = "sm_90a") {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch(arch);
  run_pipeline(s);
  return print(s.kernel);
}

// ATTN_O_UNDER_S (the overlap's default): in the key loop O's rescale comes after S of
// the next block is committed and before P V of this block is issued (FlashAttention-3's
// rescale_o between its two gemms, under S's wgmma); the last block's P V after the loop
// is rescaled first too. With ATTN_O_UNDER_S=0 the rescale is the loop's last statement,
// after P V of the block before retired. The kernel IR's order, both ways.
TEST(AttentionWgmma, OverlapRescalesOUnderTheNextS) {
  const std::string e = attention(2, 2, 300, 300, 64, "false");
  auto order = [&](const std::string& knobs) {
    const std::string ir = kernel_ir(e, "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=32" + knobs);
    const size_t loop = ir.find("for kb", ir.find("alloc p_acc"));  // the consumers' loop
    EXPECT_NE(loop, std::string::npos) << ir;
    const size_t s_commit = ir.find("wgmma.commit", loop);
    const size_t rescale = ir.find("multiply(o_acc", s_commit);  // O times alpha
    const size_t pv = ir.find("_rs(p_acc", s_commit);    // P V's wgmma
    const size_t wait0 = ir.find("wgmma.wait 0", s_commit);
    return std::vector<size_t>{s_commit, rescale, pv, wait0};
  };
  const auto under = order("");
  EXPECT_LT(under[0], under[1]);
  EXPECT_LT(under[1], under[2]) << "the rescale comes before P V is issued";
  const auto after = order(",ATTN_O_UNDER_S=0");
  EXPECT_GT(after[1], after[3]) << "the rescale comes after the wait for P V";
}

// The overlap's wait for P V names the row sums it must follow (codegen turns that into a
// dependence ptxas keeps: see AttentionWgmmaCompile.OverlapWaitFollowsTheSoftmax), between
// the wait for S and the conversion of P; the default's waits name nothing.
TEST(AttentionWgmma, OverlapWaitNamesTheRowSums) {
  const std::string e = attention(1, 1, 300, 300, 128, "false");
  const std::string ov = kernel_ir(e, "ATTN_OVERLAP=1");
  const size_t wait1 = ov.find("wgmma.wait 1");
  const size_t after = ov.find("wgmma.wait 0 after l_i[0], l_i[1]");
  ASSERT_NE(wait1, std::string::npos) << ov;
  ASSERT_NE(after, std::string::npos) << ov;
  EXPECT_LT(wait1, after);
  EXPECT_EQ(ov.find("wgmma.wait 0 after", after + 1), std::string::npos) << "one per block";
  EXPECT_EQ(kernel_ir(e, "ATTN_OVERLAP=0").find("wgmma.wait 0 after"), std::string::npos);
}

// The overlap releases a slot's K and V apart (FlashAttention-3's two pipelines): K once
// S retired (after wgmma.wait 1), V once P V retired; the producer waits for each before
// loading it. With one release for both, the next block's K waited for the previous P V,
// so with two slots its load started right before its S (the GPU measured the overlap at
// 0.70x cuDNN at D = 256). Barriers (two slots, the walk): 0 Q, 1-2 full K, 3-4 full V,
// 5-6 V released, 7 Q released, 8-9 K released. The interpreter's ring checks (the
// OverlappedProducts, PingPong and Persistent cases) prove the early release safe.
TEST(AttentionWgmma, OverlapReleasesKAndVApart) {
  const std::string e = attention(1, 1, 300, 300, 128, "false");
  const std::string ov = kernel_ir(e, "ATTN_OVERLAP=1,ATTN_PERSISTENT=1,KV_STAGES=2");
  EXPECT_NE(ov.find("mbarriers=10"), std::string::npos) << ov;
  const size_t wait1 = ov.find("wgmma.wait 1");
  const size_t wait0 = ov.find("wgmma.wait 0 after");
  ASSERT_NE(wait1, std::string::npos) << ov;
  ASSERT_NE(wait0, std::string::npos) << ov;
  const size_t k_rel = ov.find("mbar.arrive [", wait1);
  const size_t v_rel = ov.find("mbar.arrive [", wait0);
  ASSERT_LT(k_rel, wait0) << ov;  // K released between the two waits
  EXPECT_EQ(ov.substr(ov.find(']', k_rel) - 3, 4), "+ 8]") << ov;
  EXPECT_EQ(ov.substr(ov.find(']', v_rel) - 3, 4), "+ 5]") << ov;
  // The producer waits for K's release (8-9) before K's load, V's (5-6) before V's.
  const size_t wk = ov.find("% 2 + 8] parity"), wv = ov.find("% 2 + 5] parity");
  const size_t lk = ov.find("tma.load K_s"), lv = ov.find("tma.load V_s");
  ASSERT_NE(wk, std::string::npos) << ov;
  EXPECT_LT(wk, lk);
  EXPECT_LT(lk, wv);
  EXPECT_LT(wv, lv);
  // K one block ahead of V: the producer's key loop loads K of block kb + 1, then V of
  // block kb (the order the overlap reads them; block 0's K comes before Q).
  const size_t k_next = ov.find("tma.load K_s[(kb + t_i * 3 + 1) % 2 * 16384] <- K[b, h, (kb + 1) * 128, 0]");
  const size_t v_this = ov.find("tma.load V_s[(kb + t_i * 3) % 2 * 16384] <- V[b, h, kb * 128, 0]");
  ASSERT_NE(k_next, std::string::npos) << ov;
  ASSERT_NE(v_this, std::string::npos) << ov;
  EXPECT_LT(k_next, v_this) << ov;
  EXPECT_LT(ov.find("tma.load K_s[t_i * 3 % 2 * 16384] <- K[b, h, 0, 0]"), ov.find("tma.load Q_s")) << ov;
  // Without the overlap one release per slot, as measured.
  const std::string base = kernel_ir(e, "ATTN_PERSISTENT=1,KV_STAGES=2,ATTN_OVERLAP=0");
  EXPECT_NE(base.find("mbarriers=8"), std::string::npos) << base;
}

// ATTN_PACK_P=1 without the overlap: P converted once after the softmax into a 16-bit
// register array that P V reads as it is (the interpreter checks the conversion comes
// after the wgmma of the block before retired and before P V reads it). D 64/128/256, the
// masks, ragged lengths, GQA, LSE, with the ping-pong and three warpgroups.
TEST(AttentionWgmma, PackedP) {
  uint64_t seed = 1700;
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 150, 300, 64, causal), "ATTN_PACK_P=1,BLOCK_N=32", seed++);
    check_wgmma(attention(4, 2, 200, 77, 128, causal, "f16"), "ATTN_PACK_P=1,ATTN_PINGPONG=1,BLOCK_N=32",
                seed++);
  }
  check_wgmma(attention(1, 1, 70, 150, 256, "true"), "ATTN_PACK_P=1,ATTN_OVERLAP=0,BLOCK_N=32", seed++);
  check_wgmma(attention(2, 2, 100, 130, 96, "false", "bf16", false), "ATTN_PACK_P=1,ATTN_PRODUCER=0",
              seed++);
}

// The ping-pong in the kernel: named barrier 1 + wg awaited, the next warpgroup's arrived
// at, the ring started by the last warpgroup, the arms run per warpgroup on the interpreter.
TEST(AttentionWgmma, PingPongKernelShape) {
  const std::string ir = kernel_ir(attention(2, 2, 1000, 1000, 128, "true"),
                                   "ATTN_WG=2,ATTN_PINGPONG=1,ATTN_PERSISTENT=0");
  EXPECT_NE(ir.find("bar.sync wg + 1, 256"), std::string::npos) << ir;
  EXPECT_NE(ir.find("bar.arrive (wg + 1) % 2 + 1, 256"), std::string::npos) << ir;
  EXPECT_NE(ir.find("bar.arrive 1, 256"), std::string::npos) << ir;
  EXPECT_NE(ir.find("specialize warpgroups:"), std::string::npos) << ir;
  const std::string plain = kernel_ir(attention(2, 2, 1000, 1000, 128, "true"),
                                      "ATTN_WG=2,ATTN_PERSISTENT=0,ATTN_OVERLAP=0");
  EXPECT_EQ(plain.find(" bar.sync"), std::string::npos) << plain;
  EXPECT_EQ(plain.find(" bar.arrive"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("specialize warpgroups:"), std::string::npos) << plain;
}

// The kernel's shape: TMA tensor maps over [B, H, S, D] (S its own dimension: ragged
// blocks read the map's zero fill, never the next head), the ss wgmma for S with scale-d
// off on its first k-step, the rs wgmma reading P straight from S's accumulator.
TEST(AttentionWgmma, KernelShape) {
  // ATTN_PRODUCER=0 (the default at D = 64): thread 0 issues block kb+1 at the top of kb.
  // Two consumer warpgroups by 128 keys (D = 128's default is three by 112: below).
  const std::string ir = kernel_ir(attention(8, 2, 1000, 1000, 128, "true"),
                                   "ATTN_MMA=wgmma,ATTN_PRODUCER=0,ATTN_WG=2,BLOCK_N=128,ATTN_PACK_P=0");
  EXPECT_NE(ir.find("kernel k_attention<<<grid(8, 8, 1), block(256)>>>(Q, K, V, out, lse)"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("tensor map K_s_tmap: K -> K_s box[64, 128, 1, 1] (innermost first) swizzle 128B"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("tma.load K_s[(kb + 1) % 2 * 16384 + 64] <- K[b, h / 4, (kb + 1) * 128, 64]"),
            std::string::npos) << ir;
  // ATTN_PRODUCER=1 (the default from D = 128 on): a producer warpgroup; slot kb % 2 is
  // refilled once both consumer warpgroups released it.
  const std::string pr =
      kernel_ir(attention(8, 2, 1000, 1000, 128, "true"),
                "ATTN_MMA=wgmma,ATTN_WG=2,BLOCK_N=128,ATTN_PACK_P=0,ATTN_PERSISTENT=0");
  EXPECT_NE(pr.find("tma.load K_s[kb % 2 * 16384 + 64] <- K[b, h / 4, kb * 128, 64]"),
            std::string::npos) << pr;
  EXPECT_NE(pr.find("block(384)"), std::string::npos) << pr;
  EXPECT_NE(pr.find("setmaxnreg.dec 24"), std::string::npos) << pr;
  EXPECT_NE(pr.find("setmaxnreg.inc 240"), std::string::npos) << pr;
  EXPECT_NE(pr.find("mbar.wait [kb % 2 + 5] parity=(kb / 2 + 1) % 2"), std::string::npos) << pr;
  EXPECT_NE(pr.find("mbar.arrive [kb % 2 + 5]"), std::string::npos) << pr;
  // The producer's loop stays one copy (unrolled at a small constant trip count, its 24
  // registers spilled); the consumers' is left to the compiler.
  EXPECT_NE(pr.find("for kb in 0..(min(1000, (qb + 1) * 128) + 127) / 128 reduce no_unroll"),
            std::string::npos) << pr;
  EXPECT_EQ(pr.find("no_unroll", pr.find("no_unroll") + 1), std::string::npos) << pr;
  EXPECT_NE(ir.find("s_acc <- wgmma_m64n128k16_f32_bf16_ss(Q_s[wg * 8192 + d_k * 16, 128, 1], "
                    "K_s[kb % 2 * 16384 + d_k * 16, 1, 128]) scale_d 0 < d_k"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("o_acc <- wgmma_m64n128k16_f32_bf16_rs(s_acc[kk], V_s[kb % 2 * 16384 + kk * 2048, 128, 1])"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("let qb = 7 - blockIdx.x"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("ldmatrix"), std::string::npos) << ir;
  // wgmma is the default on sm_90a for every multiple of 8 up to 256; mma_sync on sm_80,
  // for other head dims, and when asked for.
  const std::string e = attention(8, 2, 2000, 2000, 128, "true");
  EXPECT_NE(kernel_ir(e, "ATTN_OVERLAP=0").find("wgmma_m64n112k16_f32_bf16_ss"), std::string::npos);
  // D = 128's default: FlashAttention-3's 2 x 64 rows by 128 keys, the overlap, the ping-pong
  // (causal: where the persistent walk is off; the causal default is the dynamic walk, which
  // the overlap yields to: see PersistentKernelShape).
  EXPECT_NE(kernel_ir(e, "").find("fetch.inc"), std::string::npos);
  const std::string d128 = kernel_ir(e, "ATTN_PERSISTENT=0");
  EXPECT_NE(d128.find("wgmma_m64n128k16_f32_bf16_ss"), std::string::npos) << d128;
  EXPECT_NE(d128.find("wgmma.wait 1"), std::string::npos) << d128;
  EXPECT_NE(d128.find("bar.sync wg + 1, 256"), std::string::npos) << d128;
  EXPECT_NE(kernel_ir(attention(8, 2, 1000, 1000, 64, "true"), "").find("block(256)"),
            std::string::npos);  // D = 64: no producer
  EXPECT_NE(kernel_ir(e, "ATTN_MMA=mma_sync").find("ldmatrix"), std::string::npos);
  EXPECT_NE(kernel_ir(e, "", "sm_80").find("ldmatrix"), std::string::npos);
  // (Sq = 100: 64 query rows or fewer take the decode defaults, on mma.sync.)
  EXPECT_EQ(kernel_ir(attention(2, 2, 100, 100, 48, "true"), "").find("ldmatrix"), std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 48, "true"), "", "sm_80").find("ldmatrix"),
            std::string::npos);
}

TEST(AttentionWgmma, NoMaskWhereNothingIsMasked) {
  const std::string ir = kernel_ir(attention(2, 2, 256, 256, 64, "false"), "ATTN_MMA=wgmma");
  EXPECT_EQ(ir.find("s_acc[n2, hf, e] = -inf"), std::string::npos) << ir;
  const std::string ragged = kernel_ir(attention(2, 2, 256, 200, 64, "false"), "ATTN_MMA=wgmma");
  EXPECT_NE(ragged.find("s_acc[n2, hf, e] = -inf"), std::string::npos) << ragged;
  // Causal: the block is masked where the warpgroup's first row (not the CTA's) drops its
  // last key.
  const std::string causal = kernel_ir(attention(2, 2, 2000, 2000, 128, "true"), "ATTN_MMA=wgmma,ATTN_OVERLAP=0");
  EXPECT_NE(causal.find("qb * 192 + wg * 64 < kb * 112 + 111"), std::string::npos) << causal;
}

// ATTN_PEEL_MASK=1: the key blocks that some row of a warpgroup masks (past Sk, or across
// the causal diagonal) run as a loop of their own after the unmasked ones, whose loop has
// no mask code. The split is per warpgroup (kb_full from its first row), so the products
// must still be the same: ragged Sk (the last block alone masked), Sq != Sk both ways (the
// bottom-right diagonal's offset; Sq > Sk: warpgroups with no unmasked block, or no key),
// the three masks; thread 0 issuing, the producer, the ping-pong (turns across the two
// loops), the overlap (block 0 before the loops, masked or not; the masked loop from block
// max(kb_full, 1)), three warpgroups, both persistent schedules, f16, GQA, LSE.
TEST(AttentionWgmma, PeeledMaskedBlocks) {
  uint64_t seed = 3100;
  const std::string p = "ATTN_PEEL_MASK=1,";
  for (const char* causal : kMasks) {
    check_wgmma(attention(2, 1, 150, 300, 64, causal), p + "BLOCK_N=32", seed++);
    check_wgmma(attention(4, 2, 200, 77, 128, causal, "f16"), p + "ATTN_PINGPONG=1,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 1, 100, 300, 64, causal), p + "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 2, 130, 150, 96, causal, "bf16", false),
                p + "ATTN_PINGPONG=1,ATTN_OVERLAP=1,ATTN_WG=2,BLOCK_N=32", seed++);
    check_wgmma(attention(4, 2, 150, 300, 64, causal, "bf16", true, 2),
                p + "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 1, 130, 77, 96, causal, "f16"),
                p + "ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic,ATTN_CTAS=2,BLOCK_N=48,KV_STAGES=3", seed++);
  }
  // Sq > Sk (bottom-right: the first rows keep no key), the overlap and not; three
  // warpgroups at D = 128 with 48 keys; D = 256 with the overlap at 80 keys (its default
  // tile) over 1000 keys (12.5 blocks: the last one masked).
  check_wgmma(attention(2, 1, 190, 40, 64, "true"), p + "ATTN_PRODUCER=1,BLOCK_N=16", seed++);
  check_wgmma(attention(2, 1, 190, 70, 64, "true"), p + "ATTN_PRODUCER=1,ATTN_OVERLAP=1,BLOCK_N=16", seed++);
  check_wgmma(attention(2, 2, 200, 250, 128, "true"), p + "ATTN_PERSISTENT=1,ATTN_CTAS=2,ATTN_WG=3,BLOCK_N=48",
              seed++);
  check_wgmma(attention(1, 1, 70, 1000, 256, "false"), p + "ATTN_OVERLAP=1", seed++);
}

// The peeled loops under seeded interleavings of the producer and each consumer
// warpgroup: the ping-pong's turns across each warpgroup's own split, the dynamic walk's
// causal units (each a split of its own).
TEST(AttentionWgmma, PeeledMaskedBlocksSchedules) {
  uint64_t seed = 3200;
  const std::string d = "ATTN_PEEL_MASK=1,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_WG=2,ATTN_SCHEDULE=dynamic,";
  check_wgmma_schedules(attention(2, 1, 400, 100, 64, "true"), d + "ATTN_CTAS=2,BLOCK_N=32,ATTN_PINGPONG=1",
                        seed++, 6);
  check_wgmma_schedules(attention(2, 1, 300, 260, 64, "top_left"), d + "ATTN_CTAS=1,BLOCK_N=32,ATTN_OVERLAP=1",
                        seed++, 6);
}

// ATTN_PEEL_MASK=1 in the kernel IR: the consumers' first key loop carries no mask, the
// second (kbm) does; where no block can be masked (Sk a multiple of BLOCK_N, no causal
// mask) there is one loop, as without the knob; off, the kernel is unchanged.
TEST(AttentionWgmma, PeeledMaskKernelShape) {
  const std::string mask = "s_acc[n2, hf, e] = -inf";
  for (const char* causal : {"false", "true"})
    for (const char* knobs : {"ATTN_OVERLAP=0", "ATTN_OVERLAP=1"}) {
      SCOPED_TRACE(std::string(causal) + " " + knobs);
      const std::string e = attention(2, 2, 1000, 1000, 256, causal);
      const std::string ir = kernel_ir(e, std::string(knobs) + ",ATTN_PEEL_MASK=1");
      const size_t masked = ir.find("for kbm in");
      ASSERT_NE(masked, std::string::npos) << ir;
      const size_t full = ir.rfind("for kb in", masked);
      ASSERT_NE(full, std::string::npos) << ir;
      EXPECT_EQ(ir.substr(full, masked - full).find(mask), std::string::npos) << ir;
      EXPECT_NE(ir.find(mask, masked), std::string::npos) << ir;
      EXPECT_EQ(kernel_ir(e, std::string(knobs) + ",ATTN_PEEL_MASK=0"), kernel_ir(e, knobs));
    }
  const std::string even = attention(2, 2, 1024, 1024, 256, "false");
  const std::string ir = kernel_ir(even, "ATTN_OVERLAP=1,BLOCK_N=64,ATTN_PEEL_MASK=1");
  EXPECT_EQ(ir.find("for kbm"), std::string::npos) << ir;
  EXPECT_EQ(ir, kernel_ir(even, "ATTN_OVERLAP=1,BLOCK_N=64"));
}

// ATTN_PEEL_MASK's defaults (measured on the H200): causal D = 128 in the short tile
// (2 x 64 rows by 128 keys with the ping-pong; Sq and Sk up to kShortQueries) or from 512
// keys with the overlap under the dynamic walk, and causal D = 256 from 4096 keys, where
// the overlap runs under the dynamic walk (80 keys) by default too. Off without a mask,
// past kShortQueries at D = 128 below 512 keys (3 x 112), at one key
// block, at D = 256 below 4096 keys (the walk without the overlap, 64 keys), at D = 192,
// for the serving forms; a given ATTN_PEEL_MASK=0 or ATTN_OVERLAP=0 wins. The default
// forms interpreted against the reference: the short tile under both causal masks, Sq > Sk.
TEST(AttentionWgmma, PeeledMaskDefaults) {
  const auto peeled = [](const std::string& e, const std::string& knobs = "") {
    return kernel_ir(e, knobs).find("for kbm in") != std::string::npos;
  };
  for (int sq : {1000, int(kShortQueries)}) {
    EXPECT_TRUE(peeled(attention(2, 2, sq, 1000, 128, "true"))) << sq;
    EXPECT_TRUE(peeled(attention(2, 2, sq, sq, 128, "top_left"))) << sq;
    EXPECT_FALSE(peeled(attention(2, 2, sq, 1000, 128, "false"))) << sq;
    EXPECT_FALSE(peeled(attention(2, 2, sq, 1000, 96, "true"))) << sq;
  }
  // Past kShortQueries: from 512 keys the overlap under the dynamic walk (2 x 64 rows by
  // 128 keys), peeled; below 512 keys the three warpgroups' tile, one loop.
  const int long_q = int(kShortQueries) + 1;
  for (int sk : {512, long_q}) {
    const std::string ov = kernel_ir(attention(2, 2, long_q, sk, 128, "true"), "");
    EXPECT_NE(ov.find("for kbm in"), std::string::npos) << sk << ov;
    EXPECT_NE(ov.find("wgmma.wait 1"), std::string::npos) << sk << ov;
    EXPECT_NE(ov.find("fetch.inc attn_work"), std::string::npos) << sk << ov;
  }
  EXPECT_TRUE(peeled(attention(2, 2, 1000, long_q, 128, "true")));
  const std::string wg3 = kernel_ir(attention(2, 2, long_q, 511, 128, "true"), "");
  EXPECT_EQ(wg3.find("for kbm in"), std::string::npos) << wg3;
  EXPECT_EQ(wg3.find("wgmma.wait 1"), std::string::npos) << wg3;
  EXPECT_FALSE(peeled(attention(2, 2, long_q, long_q, 128, "true"), "ATTN_OVERLAP=0"));
  EXPECT_FALSE(peeled(attention(2, 2, 100, 128, 128, "true")));  // one key block
  EXPECT_FALSE(peeled(attention(2, 2, 1000, 1000, 128, "true"), "ATTN_PEEL_MASK=0"));
  EXPECT_FALSE(peeled(attention(2, 2, 1000, 1000, 128, "true"), "ATTN_WG=3"));
  // D = 256: below 1024 keys the causal walk without the overlap, 64 keys, not peeled.
  const std::string d256 = kernel_ir(attention(2, 2, 1023, 1023, 256, "true"), "");
  EXPECT_EQ(d256.find("for kbm in"), std::string::npos) << d256;
  EXPECT_EQ(d256.find("wgmma.wait 1"), std::string::npos) << d256;
  EXPECT_NE(d256.find("wgmma_m64n64k16_f32_bf16_ss"), std::string::npos) << d256;
  // From 1024 keys (D = 232..256): the overlap at 80 keys, under the dynamic walk, peeled;
  // a given dynamic schedule (the default there) keeps it.
  for (int d : {232, 256})
    for (int sk : {1024, 4096})
    for (const char* knobs : {"", "ATTN_SCHEDULE=dynamic", "ATTN_PERSISTENT=1"}) {
      SCOPED_TRACE(std::to_string(d) + " " + std::to_string(sk) + " " + knobs);
      const std::string ir = kernel_ir(attention(2, 2, sk, sk, d, "true"), knobs);
      for (const char* part : {"for kbm in", "wgmma.wait 1", "wgmma_m64n80k16_f32_bf16_ss",
                               "fetch.inc attn_work[0]"})
        EXPECT_NE(ir.find(part), std::string::npos) << part << "\n" << ir;
    }
  EXPECT_NE(kernel_ir(attention(1, 1, 100, 4096, 256, "top_left"), "").find("wgmma.wait 1"),
            std::string::npos);
  // Not without a mask (the overlap is D = 256's default there anyway), nor at D = 192,
  // nor with the overlap or the walk given off.
  EXPECT_FALSE(peeled(attention(2, 2, 4096, 4096, 256, "false")));
  EXPECT_FALSE(peeled(attention(2, 2, 4096, 4096, 192, "true")));
  const std::string no_ov = kernel_ir(attention(2, 2, 4096, 4096, 256, "true"), "ATTN_OVERLAP=0");
  EXPECT_EQ(no_ov.find("for kbm in"), std::string::npos) << no_ov;
  EXPECT_NE(no_ov.find("fetch.inc attn_work[0]"), std::string::npos) << no_ov;
  const std::string no_walk = kernel_ir(attention(2, 2, 4096, 4096, 256, "true"), "ATTN_PERSISTENT=0");
  EXPECT_EQ(no_walk.find("for kbm in"), std::string::npos) << no_walk;
  EXPECT_NE(no_walk.find("wgmma.wait 1"), std::string::npos) << no_walk;  // one CTA per block, as before
  uint64_t seed = 3300;
  for (const char* causal : {"true", "top_left"})
    check_wgmma(attention(2, 1, 200, 300, 128, causal), "", seed++);
  check_wgmma(attention(1, 1, 300, 200, 128, "true", "f16"), "", seed++);
}

// Head dims that are not multiples of 64: the columns as spans of 64-column chunks (128-byte
// swizzle), then 32 columns (64-byte swizzle) and 16 (32-byte), each span its own shared
// tensor, TMA box and descriptor, S's k-steps running across the spans and O += P V one
// wgmma per span. A D that is 8 mod 16 (40, 72, 104, 200, 232; 8 and 24) ends in a
// 16-column span whose last 8 columns are the tensor map's zero fill: Q K^T is unchanged,
// P V's padding columns are never stored (the interpreter fails a read of an unwritten
// output or a write past D). Defaults at every D, and the knob variants at some: thread 0
// issuing, three slots, one and three warpgroups, ATTN_OVERLAP; causal, GQA, f16, odd
// Sq and Sk past one key block.
TEST(AttentionWgmma, EveryMultipleOf8) {
  uint64_t seed = 700;
  const char* masks[] = {"true", "false", "top_left"};
  int m = 0;
  for (int d : {8, 16, 24, 32, 40, 48, 56, 72, 80, 96, 104, 112, 160, 200, 232, 248}) {
    SCOPED_TRACE("D = " + std::to_string(d));
    check_wgmma(attention(2, 1, 70, 150, d, masks[m++ % 3]), "", seed++);
  }
  check_wgmma(attention(4, 2, 33, 17, 40, "true", "f16"), "ATTN_WG=1", seed++);
  check_wgmma(attention(2, 1, 100, 300, 72, "false"), "ATTN_PRODUCER=0,BLOCK_N=32,KV_STAGES=3",
              seed++);
  check_wgmma(attention(2, 2, 129, 77, 80, "true", "bf16", false), "ATTN_WG=3,BLOCK_N=32", seed++);
  check_wgmma(attention(4, 1, 65, 200, 96, "top_left", "f16"), "BLOCK_N=64", seed++);
  check_wgmma(attention(2, 2, 150, 64, 96, "false"), "ATTN_PRODUCER=0", seed++);
  check_wgmma(attention(2, 1, 17, 130, 104, "true"), "ATTN_OVERLAP=1,BLOCK_N=32", seed++);
  check_wgmma(attention(1, 1, 64, 96, 112, "false"), "ATTN_OVERLAP=1,ATTN_WG=1,BLOCK_N=64", seed++);
  check_wgmma(attention(4, 2, 70, 100, 160, "true", "f16"), "BLOCK_N=32,KV_STAGES=3", seed++);
  check_wgmma(attention(2, 1, 33, 65, 200, "false", "bf16", false), "ATTN_WG=1,ATTN_PRODUCER=0",
              seed++);
  check_wgmma(attention(2, 2, 65, 33, 232, "top_left"), "BLOCK_N=16", seed++);
}

// The spans per head dim: widths of 64 k, then 32, then 16 columns, covering D rounded up
// to 16, the zero fill only in the last span and only for D = 8 mod 16.
TEST(AttentionWgmma, SpansCoverTheHeadDim) {
  for (int64_t d = 8; d <= 256; d += 8) {
    SCOPED_TRACE("D = " + std::to_string(d));
    const std::vector<AttentionSpan> spans = attention_spans(d);
    int64_t col = 0, real = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
      const AttentionSpan& sp = spans[i];
      EXPECT_EQ(sp.col, col);
      EXPECT_TRUE(sp.width % 64 == 0 || sp.width == 32 || sp.width == 16) << sp.width;
      EXPECT_TRUE(i == 0 || sp.width < spans[i - 1].width);
      EXPECT_EQ(sp.real, i + 1 < spans.size() ? sp.width : d - col);
      col += sp.width;
      real += sp.real;
    }
    EXPECT_EQ(col, (d + 15) / 16 * 16);
    EXPECT_EQ(real, d);
    EXPECT_LE(spans.size(), 3u);
  }
  EXPECT_EQ(attention_spans(96).size(), 2u);
  EXPECT_EQ(attention_spans(112).size(), 3u);
  EXPECT_EQ(attention_spans(104).back().real, 8);
}

// The kernel's shape at D = 96 and 72: per span a shared tensor, a tensor map with the
// span's box and swizzle, a TMA load at the span's column, S's k-steps per span (scale-d
// 0 only on the first span's first), one P V wgmma per span into its own accumulator, and
// the stores only of the tensor's columns.
TEST(AttentionWgmma, SpanKernelShape) {
  const std::string ir = kernel_ir(attention(8, 2, 1000, 1000, 96, "true"),
                                   "ATTN_WG=2,BLOCK_N=128,ATTN_PERSISTENT=0");
  EXPECT_NE(ir.find("tensor map K_s_tmap: K -> K_s box[64, 128, 1, 1] (innermost first) swizzle 128B"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("tensor map K_s1_tmap: K -> K_s1 box[32, 128, 1, 1] (innermost first) swizzle 64B"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("tma.load K_s1[kb % 2 * 4096] <- K[b, h / 4, kb * 128, 64]"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("block(384)"), std::string::npos) << ir;  // the producer above 64 columns
  EXPECT_NE(ir.find("s_acc <- wgmma_m64n128k16_f32_bf16_ss(Q_s[wg * 4096 + d_k * 16, 64, 1], "
                    "K_s[kb % 2 * 8192 + d_k * 16, 1, 64]) scale_d 0 < d_k"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("s_acc <- wgmma_m64n128k16_f32_bf16_ss(Q_s1[wg * 2048 + d_k * 16, 32, 1], "
                    "K_s1[kb % 2 * 4096 + d_k * 16, 1, 32])  warp"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("o_acc1 <- wgmma_m64n32k16_f32_bf16_rs(s_acc[kk], V_s1[kb % 2 * 4096 + kk * 512, 32, 1])"),
            std::string::npos) << ir;
  // The defaults from 72 to 112 stored columns past kShortQueries query rows:
  // FlashAttention-3's three consumer warpgroups (192 rows) and the producer, 144 keys up
  // to D = 96 and 128 above; D = 160 at 128 keys, D = 192 at 64.
  const int long_q = int(kShortQueries) + 1;
  const std::string def96 = kernel_ir(attention(8, 2, long_q, 1000, 96, "true"), "");
  EXPECT_NE(def96.find("block(512)"), std::string::npos) << def96;
  EXPECT_NE(def96.find("wgmma_m64n144k16_f32_bf16_ss"), std::string::npos) << def96;
  EXPECT_NE(kernel_ir(attention(2, 2, long_q, 100, 112, "false"), "").find("wgmma_m64n128k16_f32_bf16_ss"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, long_q, 100, 112, "false"), "").find("block(512)"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 160, "false"), "").find("wgmma_m64n128k16_f32_bf16_ss"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 192, "false"), "").find("wgmma_m64n64k16_f32_bf16_ss"),
            std::string::npos);
  // D = 128 without the overlap: three warpgroups by 112 keys (H100: 0.93-1.02x cuDNN
  // against two by 128's 0.84-0.92x at 4k and 16k).
  const std::string def128 = kernel_ir(attention(2, 2, long_q, 100, 128, "false"), "ATTN_OVERLAP=0");
  EXPECT_NE(def128.find("block(512)"), std::string::npos) << def128;
  EXPECT_NE(def128.find("wgmma_m64n112k16_f32_bf16_ss"), std::string::npos) << def128;
  // Up to kShortQueries rows: two warpgroups by 128 keys (the 192-row block pads 1024 rows
  // to 1152), the ping-pong at D = 128 only; the three warpgroups' tile where ATTN_WG is
  // given, and for the serving forms.
  for (int sq : {1000, int(kShortQueries)}) {
    const std::string short128 = kernel_ir(attention(2, 2, sq, 100, 128, "true"), "");
    EXPECT_NE(short128.find("block(384)"), std::string::npos) << short128;
    EXPECT_NE(short128.find("wgmma_m64n128k16_f32_bf16_ss"), std::string::npos) << short128;
    EXPECT_NE(short128.find(" bar.arrive "), std::string::npos) << short128;  // the ping-pong
    const std::string short96 = kernel_ir(attention(2, 2, sq, 100, 96, "true"), "");
    EXPECT_NE(short96.find("block(384)"), std::string::npos) << short96;
    EXPECT_NE(short96.find("wgmma_m64n128k16_f32_bf16_ss"), std::string::npos) << short96;
    EXPECT_EQ(short96.find(" bar.arrive "), std::string::npos) << short96;
  }
  EXPECT_NE(kernel_ir(attention(2, 2, 1000, 100, 128, "true"), "ATTN_WG=3").find("wgmma_m64n112k16_f32_bf16_ss"),
            std::string::npos);
  // Short queries against many keys keep the three warpgroups (without the overlap).
  EXPECT_NE(kernel_ir(attention(2, 2, 1000, long_q, 128, "true"), "ATTN_OVERLAP=0").find("wgmma_m64n112k16_f32_bf16_ss"),
            std::string::npos);
  // D = 256: the overlap at 80 keys (both masks); without it 80 keys without a mask, 64
  // with one.
  for (const char* causal : {"false", "true"}) {
    const std::string d256 = kernel_ir(attention(2, 2, 1000, 1000, 256, causal),
                                       std::string(causal) == "true" ? "ATTN_PERSISTENT=0" : "");
    EXPECT_NE(d256.find("wgmma_m64n80k16_f32_bf16_ss"), std::string::npos) << causal;
    EXPECT_NE(d256.find("wgmma.wait 1"), std::string::npos) << causal;  // the overlap
  }
  EXPECT_NE(kernel_ir(attention(2, 2, 1000, 1000, 256, "false"), "ATTN_OVERLAP=0")
                .find("wgmma_m64n80k16_f32_bf16_ss"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 1000, 1000, 256, "true"), "ATTN_OVERLAP=0")
                .find("wgmma_m64n64k16_f32_bf16_ss"),
            std::string::npos);
  // The overlap's default yields to a given knob that rules it out (thread 0 issuing, P
  // packed at the wgmma), instead of refusing it; below 232 columns it stays off.
  // (A causal mask under a given ATTN_PERSISTENT=1 too, below 4096 keys: the walk with the
  // overlap measured 1 % slower at 1k; from 4096 keys see PeeledMaskDefaults.)
  for (const char* knobs : {"ATTN_PRODUCER=0", "ATTN_PACK_P=0", "ATTN_PERSISTENT=1"})
    EXPECT_EQ(kernel_ir(attention(2, 2, 1000, 1000, 256, "true"), knobs).find("wgmma.wait 1"),
              std::string::npos) << knobs;
  EXPECT_EQ(kernel_ir(attention(2, 2, 1000, 1000, 192, "true"), "").find("wgmma.wait 1"),
            std::string::npos);
  // A given BLOCK_M, ATTN_OVERLAP, a BLOCK_N that three warpgroups cannot hold, or
  // D = 64 keep two warpgroups.
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 96, "false"), "BLOCK_M=128").find("block(384)"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 96, "false"), "ATTN_OVERLAP=1,ATTN_PRODUCER=1")
                .find("block(384)"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 128, "false"), "BLOCK_N=176").find("block(384)"),
            std::string::npos);
  EXPECT_NE(kernel_ir(attention(2, 2, 100, 100, 64, "false"), "").find("block(256)"),
            std::string::npos);
  const std::string d72 = kernel_ir(attention(2, 2, 100, 100, 72, "false"), "ATTN_WG=2");
  EXPECT_NE(d72.find("tensor map V_s1_tmap: V -> V_s1 box[16, 128, 1, 1] (innermost first) swizzle 32B"),
            std::string::npos) << d72;
  EXPECT_NE(d72.find("o_acc1 <- wgmma_m64n16k16_f32_bf16_rs"), std::string::npos) << d72;
  EXPECT_NE(d72.find("mbar.arrive.expect_tx [0] 20480B"), std::string::npos) << d72;  // 128 x 80 x 2
}

void expect_refused(const std::string& expr, const std::string& knobs, const std::string& what,
                    const std::string& arch = "sm_90a") {
  try {
    kernel_ir(expr, knobs, arch);
    ADD_FAILURE() << "no error for " << knobs;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// The walk's kernel: a grid of min(units, ATTN_CTAS) CTAs (default the SM count), each
// looping over t_i with the unit's coordinates as lets; no mask: the query block fastest
// (consecutive units share a head's K and V); causal: the query block slowest, from the
// last (longest) down, the causal units padded to 2 x KV_STAGES blocks; Q's slot released
// through its own mbarrier; with ATTN_TMA_STORE one box per warpgroup and 64 columns.
TEST(AttentionWgmma, PersistentKernelShape) {
  const std::string nc = kernel_ir(attention(16, 16, 2000, 2000, 128, "false", "bf16", true, 4),
                                   "ATTN_PERSISTENT=1,ATTN_TMA_STORE=1,ATTN_OVERLAP=0");
  for (const char* part : {"grid(132, 1, 1), block(512)", "mbarriers=8",
                           "for t_i in 0..(704 - blockIdx.x + 131) / 132 reduce no_unroll",
                           "let unit = blockIdx.x + t_i * 132", "let qb = unit % 11",
                           "let h = unit / 11 % 16", "let b = unit / 176",
                           "mbar.wait [7] parity=(t_i + 1) % 2", "mbar.wait [0] parity=t_i % 2",
                           "tensor map O_s_tmap: out -> O_s box[64, 64, 1, 1] (innermost first) swizzle 128B",
                           "tma.store out[b, h, qb * 192 + wg * 64, 64] <- O_s[wg * 8192 + 64] via O_s_tmap",
                           "bulk.wait.read 0"})
    EXPECT_NE(nc.find(part), std::string::npos) << part << "\n" << nc;
  EXPECT_EQ(nc.find("unit_s"), std::string::npos) << nc;  // no hand-off: every unit alike
  // Causal: sections of 16 (head, batch) pairs, whose K and V (4000 keys x 128 x 2 x 2 B
  // each) fit 32 MB, qb from the last down within each.
  const std::string c = kernel_ir(attention(16, 16, 4000, 4000, 128, "true", "bf16", false, 4),
                                  "ATTN_PERSISTENT=1,ATTN_CTAS=20,ATTN_OVERLAP=0");
  for (const char* part : {"grid(20, 1, 1)", "let qb = 20 - unit % 336 / 16",
                           "let h = (unit / 336 * 16 + unit % 336 % 16) % 16",
                           "let b = (unit / 336 * 16 + unit % 336 % 16) / 16",
                           // the stream: the producer's running count, handed over with the unit
                           "unit_s[2] = int 0", "let ring_base = load unit_s[2]",
                           "unit_s[1] = int ring_base", "let unit = load unit_s[0]",
                           "mbar.wait [0] parity=t_i % 2"})
    EXPECT_NE(c.find(part), std::string::npos) << part << "\n" << c;
  EXPECT_EQ(c.find("for kd in"), std::string::npos) << c;  // no unit padded
  // Dynamic: the first unit blockIdx.x, then the counter's next plus the grid; the walk a
  // bound the break ends.
  const std::string dy = kernel_ir(attention(16, 16, 4000, 4000, 128, "true", "bf16", false, 4),
                                   "ATTN_PERSISTENT=1,ATTN_CTAS=20,ATTN_SCHEDULE=dynamic,ATTN_OVERLAP=0");
  for (const char* part : {"let fetched = fetch.inc attn_work[0] wrap 1344 when 0 < t_i",
                           "break if 1344 <= unit", "for t_i in 0..1326 reduce no_unroll",
                           "attn_work: i32[1] temp zeroed"})
    EXPECT_NE(dy.find(part), std::string::npos) << part << "\n" << dy;
  // All 64 pairs fit at 1000 keys: one section (eight query blocks of 128 rows).
  EXPECT_NE(kernel_ir(attention(16, 16, 1000, 1000, 128, "true", "bf16", false, 4), "ATTN_PERSISTENT=1")
                .find("let qb = 7 - unit / 64"),
            std::string::npos);
  // Fewer units than CTAs: the grid is the units.
  EXPECT_NE(kernel_ir(attention(1, 1, 100, 100, 128, "true"), "ATTN_PERSISTENT=1").find("grid(1, 1, 1)"),
            std::string::npos);
  // D = 256: O's buffer does not fit beside Q and the ring, so O goes through Q's slot.
  const std::string d256 = kernel_ir(attention(2, 2, 100, 100, 256, "false"), "ATTN_TMA_STORE=1");
  EXPECT_NE(d256.find("tensor map Q_s_omap: out -> Q_s"), std::string::npos) << d256;
  EXPECT_EQ(d256.find("O_s"), std::string::npos) << d256;
}

// The walk deals every unit to exactly one (CTA, t_i): the unit let and the loop's trip
// count evaluated for every CTA of grids from 1 CTA to more CTAs than units, causal
// (rounds alternating direction, partial last rounds of both parities, L2 sections) and
// not (the plain stride), each unit's (qb, h, b) a distinct cell of the grid it replaces.
TEST(AttentionWgmma, PersistentWalkCoversEveryUnitOnce) {
  for (const char* causal : {"false", "true"})
    for (int ctas : {1, 2, 5, 7, 13, 64, 200}) {
      // 2 batches x 3 heads x ceil(700 / 192) = 4 query blocks (three warpgroups): 24
      // units; 16384 keys (8 MB of K and V a pair): causal sections of 3 pairs.
      CompileState s;
      s.graph = parse_expression(attention(3, 3, 700, 16384, 128, causal, "bf16", false, 2));
      s.knobs = Knobs::parse("ATTN_WG=3,ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_CTAS=" +
                             std::to_string(ctas));
      s.target = Target::for_arch("sm_90a");
      run_pipeline(s);
      const KernelOp& k = s.kernel.kernels.at(0);
      const Stmt* walk = nullptr;
      std::function<void(const Block&)> find = [&](const Block& b) {
        for (const Stmt& st : b) {
          if (walk) return;
          if (st.kind == StmtKind::For && st.var == "t_i") walk = &st;
          else find(st.body);
        }
      };
      find(k.body);
      ASSERT_TRUE(walk) << causal;
      std::map<std::string, Expr> lets;
      for (const Stmt& st : walk->body)
        if (st.kind == StmtKind::Let) lets[st.var] = st.value;
      const int64_t grid = k.grid[0].eval({});
      EXPECT_EQ(grid, std::min(ctas, 24));
      std::set<std::tuple<int64_t, int64_t, int64_t>> cells;
      int64_t dealt = 0;
      for (int64_t c = 0; c < grid; ++c) {
        Expr::Env env = {{"blockIdx.x", c}};
        const int64_t trips = walk->extent.eval(env);
        for (int64_t t = 0; t < trips; ++t, ++dealt) {
          env["t_i"] = t;
          env["unit"] = lets.at("unit").eval(env);
          cells.insert({lets.at("qb").eval(env), lets.at("h").eval(env), lets.at("b").eval(env)});
        }
      }
      EXPECT_EQ(dealt, 24) << causal << " ctas=" << ctas;
      EXPECT_EQ(cells.size(), 24u) << causal << " ctas=" << ctas;
      for (const auto& [qb, h, b] : cells)
        EXPECT_TRUE(qb >= 0 && qb < 4 && h >= 0 && h < 3 && b >= 0 && b < 2);
    }
}

// ATTN_STMATRIX (with the TMA store, its default): O reaches its shared buffer by
// stmatrix.x4, one per 16 columns of a warp's 16 rows, each lane addressing one 16-byte
// row of the swizzled span; 0 keeps the 4-byte stores. Both forms on the interpreter
// over spans of 64, 32 and 16 columns (D = 104: 8 columns past D), O in Q's slot
// (D = 256) and under the walk; the kernel IR's stores; the default's reach (the walk,
// O in Q's slot, D <= 64 without the walk; not varlen, not paged without the walk); the
// knob refused without the TMA store.
TEST(AttentionWgmma, StmatrixEpilogue) {
  uint64_t seed = 2700;
  for (const char* st : {"ATTN_STMATRIX=1", "ATTN_STMATRIX=0"}) {
    SCOPED_TRACE(st);
    const std::string k = std::string(st) + ",ATTN_TMA_STORE=1";
    check_wgmma(attention(2, 2, 130, 90, 104, "true", "f16"),
                k + ",ATTN_PERSISTENT=1,ATTN_CTAS=2,BLOCK_N=32", seed++);
    check_wgmma(attention(2, 1, 77, 100, 64, "false"), k + ",BLOCK_N=32", seed++);
    check_wgmma(attention(2, 1, 150, 100, 256, "top_left"), k, seed++);
  }
  const std::string d128 = attention(2, 2, 300, 300, 128, "false");
  const auto stores = [](const std::string& ir, const std::string& what) {
    size_t n = 0;
    for (size_t at = ir.find(what); at != std::string::npos; at = ir.find(what, at + 1)) ++n;
    return n;
  };
  const std::string with = kernel_ir(d128, "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_TMA_STORE=1");
  EXPECT_NE(with.find("warp copy stmatrix_x4: b16[32, 8] to shared"), std::string::npos) << with;
  // Two 64-column chunks of one span: one stmatrix statement in a loop of 8 (dp).
  EXPECT_EQ(stores(with, "<- stmatrix_x4(y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7])"), 1u) << with;
  EXPECT_NE(with.find("for dp in 0..8"), std::string::npos) << with;
  const std::string without =
      kernel_ir(d128, "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_TMA_STORE=1,ATTN_STMATRIX=0");
  EXPECT_EQ(without.find("stmatrix"), std::string::npos) << without;

  const auto used = [](const std::string& e, const std::string& knobs) {
    CompileState s = wgmma_state(e, knobs);
    run_pipeline(s);
    return s.used_knobs;
  };
  const std::string d64 = attention(32, 32, 1024, 1024, 64, "false", "bf16", false, 16);
  const std::string d256 = attention(8, 8, 1024, 1024, 256, "true", "bf16", false, 16);
  for (const std::string& e : {d64, d256}) {
    const auto k = used(e, "");
    EXPECT_EQ(k.at("ATTN_TMA_STORE"), "1") << e;
    EXPECT_EQ(k.at("ATTN_STMATRIX"), "1") << e;
  }
  EXPECT_EQ(used(d64, "").at("ATTN_PERSISTENT"), "0");
  EXPECT_NE(kernel_ir(d256, "").find("Q_s[(w * 16 + lane / 8 % 2 * 8"), std::string::npos);
  const std::string paged = attention_test::paged_attention(2, 2, 2, 100, 64, 8, 64, 4, "false");
  EXPECT_EQ(used(paged, "").at("ATTN_TMA_STORE"), "0");
  EXPECT_EQ(used(paged, "").at("ATTN_STMATRIX"), "1");  // the copy-out
  const std::string varlen = "attention(Q[300,4,128]:bf16, K[300,4,128]:bf16, V[300,4,128]:bf16, "
                             "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=200)";
  EXPECT_NO_THROW(kernel_ir(varlen, "ATTN_MMA=wgmma,ATTN_STMATRIX=0"));
  // Varlen's default: stmatrix and the copy-out (no TMA store: a box would cross sequences).
  const auto v = used(varlen, "");
  EXPECT_EQ(v.at("ATTN_TMA_STORE"), "0");
  EXPECT_EQ(v.at("ATTN_STMATRIX"), "1");
}

// ATTN_STMATRIX=1 without the TMA store: O by stmatrix into its buffer (or Q's slot), then
// the warpgroup's 16-byte copy-out under the row test. On the interpreter: rows past Sq in
// the last query block, columns past D (D = 104: spans of 64 + 48 columns, 40 real), the
// walk (the meeting before the next unit's writes), O in Q's slot (D = 256: Q's release
// after the copy), no producer, one and three warpgroups.
TEST(AttentionWgmma, StmatrixCopyOut) {
  uint64_t seed = 2800;
  const std::string k = "ATTN_TMA_STORE=0,ATTN_STMATRIX=1";
  check_wgmma(attention(2, 2, 130, 90, 104, "true", "f16"),
              k + ",ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=2,BLOCK_N=32", seed++);
  check_wgmma(attention(2, 1, 77, 100, 64, "false"), k + ",BLOCK_N=32", seed++);
  check_wgmma(attention(2, 1, 77, 100, 64, "false"), k + ",BLOCK_N=32,ATTN_PRODUCER=0", seed++);
  check_wgmma(attention(2, 1, 150, 100, 256, "top_left"), k, seed++);
  check_wgmma(attention(1, 1, 300, 100, 256, "false"), k + ",ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=2",
              seed++);
  check_wgmma(attention(2, 1, 200, 150, 32, "true"), k + ",ATTN_WG=3,ATTN_PRODUCER=1,ATTN_PINGPONG=1,BLOCK_N=32",
              seed++);

  const std::string d128 = attention(2, 2, 300, 300, 128, "false");
  const std::string ir = kernel_ir(d128, "ATTN_PRODUCER=1,ATTN_PERSISTENT=1," + k);
  EXPECT_NE(ir.find("<- stmatrix_x4("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("tma_store"), std::string::npos) << ir;
  // 64 rows x 16 chunks of 8 columns over 128 threads: 8 copies each, 16 bytes wide.
  EXPECT_NE(ir.find("for o_c0 in 0..8"), std::string::npos) << ir;
  CompileState s = wgmma_state(d128, "ATTN_PRODUCER=1,ATTN_PERSISTENT=1," + k);
  run_pipeline(s);
  EXPECT_EQ(s.used_knobs.at("ATTN_STMATRIX"), "1");
  EXPECT_EQ(s.used_knobs.at("ATTN_TMA_STORE"), "0");
}

TEST(AttentionWgmma, PersistentAndTmaStoreRefusals) {
  const std::string e = attention(2, 2, 128, 128, 64, "false");
  expect_refused(e, "ATTN_PERSISTENT=1", "ATTN_PERSISTENT=1 needs ATTN_PRODUCER=1");
  expect_refused(e, "ATTN_CTAS=4", "ATTN_CTAS sizes the persistent grid and ATTN_PERSISTENT is 0");
  // MIN_BLOCKS > 1 with the producer: the setmaxnreg split takes one CTA's whole file
  // (ptxas stopped with C7602 before this refusal); without it, where the accumulators fit.
  expect_refused(attention(2, 2, 300, 300, 128, "false"), "MIN_BLOCKS=2",
                 "MIN_BLOCKS=2 asks for 2 CTAs of 384 threads an SM (80 registers a thread), and "
                 "with ATTN_PRODUCER=1 the producer warpgroup hands its registers");
  expect_refused(attention(2, 2, 300, 300, 128, "false"), "ATTN_PRODUCER=0,ATTN_WG=2,BLOCK_N=128,MIN_BLOCKS=2",
                 "MIN_BLOCKS=2 leaves 128 registers a thread for 2 CTAs of 256 threads an SM, and "
                 "BLOCK_N=128 with D=128 keeps 128 f32 accumulator registers plus ~16 more: lower "
                 "MIN_BLOCKS or BLOCK_N");
  EXPECT_NO_THROW(kernel_ir(attention(2, 2, 300, 300, 64, "false"), "ATTN_PRODUCER=0,MIN_BLOCKS=2"));
  EXPECT_NO_THROW(kernel_ir(attention(2, 2, 300, 300, 128, "false"),
                            "ATTN_PRODUCER=0,ATTN_WG=2,BLOCK_N=96,MIN_BLOCKS=2"));
  // Paged KV walks too (each unit's key count handed over with it).
  EXPECT_NO_THROW(kernel_ir(attention_test::paged_attention(2, 2, 2, 100, 128, 8, 64, 4, "false"),
                            "ATTN_MMA=wgmma,ATTN_PERSISTENT=1"));
  const std::string varlen = "attention(Q[300,4,128]:bf16, K[300,4,128]:bf16, V[300,4,128]:bf16, "
                             "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=200, "
                             "causal=true)";
  EXPECT_NO_THROW(kernel_ir(varlen, "ATTN_MMA=wgmma,ATTN_PERSISTENT=1,ATTN_CTAS=4"));
  expect_refused(varlen, "ATTN_MMA=wgmma,ATTN_TMA_STORE=1",
                 "ATTN_TMA_STORE=1 stores O in boxes of 64 rows, and packed sequences' rows");
  EXPECT_NO_THROW(kernel_ir(varlen, "ATTN_MMA=wgmma"));
  // Spreading the TMA issue over producer warps: under the static walk only (each warp
  // follows the order itself); not with the dynamic schedule's fetch or varlen's scan.
  expect_refused(attention(2, 2, 300, 300, 128, "true"), "ATTN_PERSISTENT=1,ATTN_CTAS=4,ATTN_LOAD_WARPS=2",
                 "ATTN_SCHEDULE=dynamic hands the units out from one thread's fetch: drop "
                 "ATTN_LOAD_WARPS, or set ATTN_SCHEDULE=static");
  expect_refused(varlen, "ATTN_MMA=wgmma,ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_LOAD_WARPS=2",
                 "varlen's walk skips units by one thread's scan: drop ATTN_LOAD_WARPS (or ATTN_PERSISTENT=0)");
  EXPECT_NO_THROW(kernel_ir(attention(2, 2, 300, 300, 128, "true"),
                            "ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_LOAD_WARPS=2"));
  // Decode's split-form knobs mean nothing to this kernel (it does not split the keys):
  // refused, not accepted and ignored; decode shapes keep them (the mma.sync split kernel).
  for (const char* k : {"COMBINE=last_cta", "COMBINE_GROUPS=2"})
    expect_refused(e, k, std::string(k).substr(0, std::string(k).find('=')) +
                             " is a knob of decode attention's split form (the mma.sync kernel over a KV split");
  expect_refused(e, "COMBINE=last_cta", "which does not split the keys: add ATTN_MMA=mma_sync, or drop COMBINE");
  expect_refused(e, "SPLIT_WARPS=2", "SPLIT_WARPS is a knob of attention's mma.sync kernel (k:012)");
  // The mma.sync kernel's knobs (its family's reads that this family neither reads nor
  // honours), refused with the fix.
  for (const char* k : {"Q_IN_REGS=1", "SWIZZLE=xor", "INTERLEAVE_LOADS=0", "KV_COPY=tma", "FRAG_BUFFERS=2",
                        "SOFTMAX=exp", "ZERO_INIT=mma", "STAGE_OUTPUT=1"}) {
    const std::string name = std::string(k).substr(0, std::string(k).find('='));
    expect_refused(e, k, name + " is a knob of attention's mma.sync kernel (k:012)");
    expect_refused(e, k, "and this one is the wgmma kernel (k:013; ATTN_MMA=wgmma, the default on "
                         "sm_90a)");
  }
  // What the family declares it honours passes (the GEMM knobs at their off values, the
  // generic knobs it leaves unread), and WARPS at its warpgroups' count.
  for (const char* k : {"SWAP_AB=0", "SPLITK=1", "CLUSTER_M=1", "PERSISTENT=0", "DEPENDENT_LAUNCH=1",
                        "VECTORIZE=8", "WARPS=8"})
    EXPECT_NO_THROW(kernel_ir(e, k)) << k;
  EXPECT_NO_THROW(kernel_ir(attention(32, 8, 1, 8192, 128, "false"), "SPLIT_WARPS=2,COMBINE=last_cta"));
  expect_refused(e, "ATTN_PERSISTENT=2", "ATTN_PERSISTENT");  // the registry's range
  expect_refused(e, "ATTN_TMA_STORE=2", "ATTN_TMA_STORE");
  EXPECT_NO_THROW(kernel_ir(e, "ATTN_PERSISTENT=1,ATTN_PRODUCER=1,ATTN_CTAS=1"));
  EXPECT_NO_THROW(kernel_ir(e, "ATTN_CTAS=0"));
}

// ATTN_PERSISTENT's default for varlen prefill (measured on the H200, 2026-11-28 and 29):
// at D = 113..128 the overlap tile (2 x 64 rows by 128 keys, the ping-pong) under the
// dynamic walk, peeled, O by stmatrix and the copy-out — under a causal mask (either corner)
// in whichever of the box and packed orders has fewer units, without one in packed order;
// the 3 x 112 tile keeps its
// walk under a causal mask where ATTN_OVERLAP=0 is given. One CTA per query block in other
// tiles (another BLOCK_N given, D = 64 and 96), without the producer, and where the walk is
// given off.
TEST(AttentionWgmma, VarlenWalkDefault) {
  const auto varlen = [](const char* causal, int d, const char* dtype) {
    return "attention(Q[3000," + std::to_string(4) + "," + std::to_string(d) + "]:" + dtype +
           ", K[3000,2," + std::to_string(d) + "]:" + dtype + ", V[3000,2," + std::to_string(d) +
           "]:" + dtype + ", cu_seqlens_q=CQ[5]:i32, cu_seqlens_k=CK[5]:i32, max_seqlen_q=1500, "
           "causal=" + causal + ")";
  };
  const auto used = [](const std::string& e, const std::string& knobs) {
    CompileState s = wgmma_state(e, knobs);
    run_pipeline(s);
    EXPECT_EQ(s.level, Level::Kernel);
    return s.used_knobs;
  };
  // The overlap tile under the dynamic walk, peeled, O by the copy-out: the varlen default at
  // D = 113..128 with either mask.
  const auto expect_overlap_walk = [](const std::map<std::string, std::string>& k) {
    for (const auto& [knob, value] : std::vector<std::pair<const char*, const char*>>{
             {"ATTN_PERSISTENT", "1"}, {"ATTN_SCHEDULE", "dynamic"}, {"ATTN_OVERLAP", "1"},
             {"ATTN_PINGPONG", "1"}, {"ATTN_PEEL_MASK", "1"}, {"ATTN_TMA_STORE", "0"},
             {"ATTN_STMATRIX", "1"}, {"BLOCK_M", "128"}, {"BLOCK_N", "128"}})
      EXPECT_EQ(k.at(knob), value) << knob;
  };
  for (const char* causal : {"true", "top_left"})
    for (int d : {120, 128})
      for (const char* dtype : {"bf16", "f16"}) {
        SCOPED_TRACE(std::string(causal) + " D " + std::to_string(d) + " " + dtype);
        const auto k = used(varlen(causal, d, dtype), "");
        expect_overlap_walk(k);
        const std::string ir = kernel_ir(varlen(causal, d, dtype), "");
        // The packed order: (3000 / 128 + 4) x 4 = 108 units, against 12 query blocks x 4
        // heads x 4 sequences = 192 in the box order; a grid of 108 CTAs.
        for (const char* part : {"grid(108, 1, 1), block(384)", "fetch.inc attn_work[0]",
                                 "wgmma.wait 1", "for kbm in", "pk_span"})
          EXPECT_NE(ir.find(part), std::string::npos) << part << "\n" << ir;
        // ATTN_OVERLAP=0: the 3 x 112 tile under its measured walk (2026-11-28 16:25).
        const auto k3 = used(varlen(causal, d, dtype), "ATTN_OVERLAP=0");
        EXPECT_EQ(k3.at("ATTN_PERSISTENT"), "1");
        EXPECT_EQ(k3.at("ATTN_SCHEDULE"), "dynamic");
        EXPECT_EQ(k3.at("ATTN_PEEL_MASK"), "1");
        EXPECT_EQ(k3.at("BLOCK_M"), "192");
        EXPECT_EQ(k3.at("BLOCK_N"), "112");
        const std::string ir3 = kernel_ir(varlen(causal, d, dtype), "ATTN_OVERLAP=0");
        // 8 query blocks x 4 heads x 4 sequences: 128 units, fewer than the 132 SMs.
        for (const char* part : {"grid(128, 1, 1), block(512)", "fetch.inc attn_work[0]"})
          EXPECT_NE(ir3.find(part), std::string::npos) << part << "\n" << ir3;
      }
  // Without a mask at D = 113..128: the dense form's overlap tile under the dynamic walk in
  // packed order, peeled (2026-11-28 21:07); its units are (Tq / 128 + B) x Hq slots.
  for (int d : {120, 128})
    for (const char* dtype : {"bf16", "f16"}) {
      SCOPED_TRACE(std::string("no mask D ") + std::to_string(d) + " " + dtype);
      const auto k = used(varlen("false", d, dtype), "");
      expect_overlap_walk(k);
      const std::string ir = kernel_ir(varlen("false", d, dtype), "");
      // (3000 / 128 + 4) x 4 = 108 units.
      for (const char* part : {"grid(108, 1, 1), block(384)", "fetch.inc attn_work[0]"})
        EXPECT_NE(ir.find(part), std::string::npos) << part << "\n" << ir;
    }
  // Given a tile or the walk off, the one-CTA grid; D = 64 and 96 unmeasured: as before.
  for (const char* knobs : {"ATTN_OVERLAP=0", "ATTN_WG=3", "ATTN_PERSISTENT=0"})
    EXPECT_EQ(used(varlen("false", 128, "bf16"), knobs).at("ATTN_PERSISTENT"), "0") << knobs;
  for (int d : {64, 96}) {
    EXPECT_EQ(used(varlen("false", d, "bf16"), "").at("ATTN_PERSISTENT"), "0") << d;
    EXPECT_EQ(used(varlen("false", d, "bf16"), "").at("ATTN_OVERLAP"), "0") << d;
  }
  for (int d : {64, 96})
    EXPECT_EQ(used(varlen("true", d, "bf16"), "").at("ATTN_PERSISTENT"), "0") << d;
  for (const char* knobs : {"BLOCK_N=96", "ATTN_OVERLAP=0,ATTN_WG=2", "ATTN_PRODUCER=0",
                            "ATTN_PERSISTENT=0"})
    EXPECT_EQ(used(varlen("true", 128, "bf16"), knobs).at("ATTN_PERSISTENT"), "0") << knobs;
  // The walk given: the overlap tile stays (the walk's overlap shape for varlen).
  for (const char* knobs : {"ATTN_PERSISTENT=1", "ATTN_SCHEDULE=dynamic", "ATTN_WG=2,BLOCK_N=128"})
    EXPECT_EQ(used(varlen("true", 128, "bf16"), knobs).at("ATTN_OVERLAP"), "1") << knobs;
  // Dense attention keeps its own default (the walk with the producer, either mask).
  EXPECT_EQ(used(attention(2, 2, 2000, 2000, 128, "false"), "").at("ATTN_PERSISTENT"), "1");
}

TEST(AttentionWgmma, KnobLimitsAreNamed) {
  const std::string e128 = attention(2, 2, 128, 128, 128, "false");
  expect_refused(e128, "ATTN_MMA=wgmma", "need sm_90a; the target is sm_80", "sm_80");
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=4", "ATTN_WG");  // the registry's range
  expect_refused(e128, "ATTN_MMA=wgmma,BLOCK_M=64,ATTN_WG=2", "BLOCK_M = 64 x ATTN_WG = 128");
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=2,WARPS=4", "4 warps per warpgroup, 8 for ATTN_WG=2");
  expect_refused(e128, "ATTN_MMA=wgmma,BLOCK_N=24", "a multiple of 16 from 16 to 256");
  expect_refused(e128, "ATTN_MMA=wgmma,KV_STAGES=1", "ring of 2 or 3");
  expect_refused(e128, "ATTN_MMA=wgmma,KV_STAGES=3,ATTN_WG=3,BLOCK_N=128", "B of shared memory");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,KV_STAGES=3,ATTN_WG=3"));  // 112 keys fit
  expect_refused(e128, "ATTN_MMA=mma_sync,KV_STAGES=5", "KV_STAGES=5");  // rings of 1 to 4
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_PRODUCER=2", "ATTN_PRODUCER");
  expect_refused(e128, "ATTN_PRODUCER=0,ATTN_OVERLAP=1", "needs ATTN_PRODUCER=1");
  expect_refused(e128, "ATTN_PRODUCER=0,ATTN_PINGPONG=1", "ATTN_PINGPONG=1 needs ATTN_PRODUCER=1");
  expect_refused(e128, "ATTN_WG=1,ATTN_PINGPONG=1", "needs 2 or 3 of them; set ATTN_WG=2 or 3");
  expect_refused(e128, "ATTN_PINGPONG=2", "ATTN_PINGPONG");  // the registry's range
  expect_refused(e128, "ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PACK_P=0",
                 "ATTN_OVERLAP=1 with ATTN_PACK_P=0: the overlap issues the next block's S");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_PACK_P=1"));
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_PINGPONG=1"));
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_PRODUCER=1,ATTN_OVERLAP=1"));
  expect_refused(e128, "ATTN_OVERLAP=0,ATTN_O_UNDER_S=1", "only ATTN_OVERLAP=1 issues before the softmax");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_O_UNDER_S=0"));
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=3,ATTN_PRODUCER=1,BLOCK_N=128",
                 "leaves 160 registers per consumer thread");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,ATTN_WG=3,ATTN_PRODUCER=1"));  // 112 keys
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,ATTN_WG=3,BLOCK_N=64,ATTN_PRODUCER=1"));
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,ATTN_WG=3"));
  // Head dims no wgmma kernel takes, with the fix: pad to a multiple of 8 keeping the
  // scale, or nothing past 256 (on either kernel); the mma.sync kernel's own limit names
  // the wgmma kernel where it takes the head dim.
  expect_refused(attention(2, 2, 128, 128, 20, "false"), "ATTN_MMA=wgmma",
                 "multiples of 8 (Q, K and V arrive by TMA, whose rows are multiples of 16 "
                 "bytes); D = 20: pad the head dim to 24 with zero columns in Q, K and V (Q K^T "
                 "is unchanged; O's extra columns are zero) and keep this attention's scale with "
                 "scale=0.22360679774997896");
  expect_refused(attention(2, 2, 128, 128, 20, "false"), "", "pad the head dim to 32");
  expect_refused(attention(2, 2, 128, 128, 264, "false"), "ATTN_MMA=wgmma",
                 "D = 264: no attention kernel of Loom takes it");
  expect_refused(attention(2, 2, 128, 128, 264, "false"), "", "D = 264: no attention kernel");
  expect_refused(attention(2, 2, 128, 128, 40, "false"), "", "D = 40: on sm_90a the wgmma "
                 "kernel takes it (ATTN_MMA=wgmma, the default there); here pad the head dim "
                 "to 48", "sm_80");
  expect_refused(attention(2, 2, 128, 128, 256, "false"), "ATTN_MMA=wgmma,BLOCK_N=256",
                 "f32 accumulator registers");
  expect_refused(e128, "ATTN_MMA=wgmma,ATTN_WG=3,BLOCK_N=256", "B of shared memory");
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=wgmma,BLOCK_M=192"));
  EXPECT_NO_THROW(kernel_ir(attention(2, 2, 128, 128, 256, "false"), "ATTN_MMA=wgmma"));
  expect_refused(e128, "ATTN_MMA=tcgen05", "ATTN_MMA");
  // The mma.sync kernel's knobs under the default wgmma kernel: refused, naming the fix.
  expect_refused(e128, "SOFTMAX=exp", "add ATTN_MMA=mma_sync");
  expect_refused(e128, "Q_IN_REGS=0,BLOCK_M=128,WARPS=4,BLOCK_N=32", "add ATTN_MMA=mma_sync");
  expect_refused(e128, "BLOCK_M=96", "or use ATTN_MMA=mma_sync");
  // The reverse: the wgmma kernel's knobs where the mma.sync kernel is chosen, refused
  // naming the knob, the kernel and why it was chosen (never silently ignored).
  for (const char* k : {"ATTN_WG=1", "ATTN_PRODUCER=1", "ATTN_OVERLAP=0", "ATTN_PINGPONG=1",
                        "ATTN_PACK_P=1"}) {
    expect_refused(e128, std::string("ATTN_MMA=mma_sync,") + k,
                   std::string(k).substr(0, std::string(k).find('=')) +
                       " is a knob of attention's wgmma kernel (k:013), and this one is the "
                       "mma.sync kernel (k:012; ATTN_MMA=mma_sync asks for it): drop");
    expect_refused(e128, std::string("ATTN_MMA=mma_sync,") + k, ", or use ATTN_MMA=wgmma");
    expect_refused(e128, k, "the only attention kernel for sm_80", "sm_80");
    expect_refused(e128, k, "on an sm_90a target with D a multiple of 8 up to 256", "sm_80");
    // D = 20 has no wgmma kernel: the mma.sync one is sm_90a's default there.
    expect_refused(attention(2, 2, 128, 128, 20, "false"), k, "the default for D = 20");
  }
  EXPECT_NO_THROW(kernel_ir(e128, "ATTN_MMA=mma_sync"));
  EXPECT_NO_THROW(kernel_ir(e128, "", "sm_80"));
  EXPECT_NE(kernel_ir(e128, "BLOCK_M=64").find("block(256)"), std::string::npos);  // 1 + producer
  EXPECT_NE(kernel_ir(e128, "BLOCK_M=192").find("block(512)"), std::string::npos);  // 3 + producer
  EXPECT_NE(kernel_ir(e128, "BLOCK_M=192,BLOCK_N=128,ATTN_PRODUCER=0").find("block(384)"),
            std::string::npos);  // 3, none
}

}  // namespace
}  // namespace loom
