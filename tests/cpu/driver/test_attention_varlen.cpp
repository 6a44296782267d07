// Varlen attention (docs/attention.md, "Serving forms: varlen"): B sequences packed along
// the token axis, Q [Tq,Hq,D] and K/V [Tk,Hkv,D] with cumulative lengths CQ, CK [B+1]:i32
// and max_seqlen_q. Both loop forms (l:000's unfused form, l:005's online softmax, GQA
// packing too) run on the interpreter against the fp64 varlen reference
// (bench/reference_attention.h), O and LSE: odd lengths, sequences with no query or no key,
// Sq > Sk per sequence (bottom-right rows that keep no key), GQA 4/2 and MQA, the three
// masks, bf16 and f16, with and without LSE. The reference is itself checked against the
// dense reference on each sequence. Every error of the form names the problem; the GPU
// kernels refuse it by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../passes/pass_check.h"
#include "../../gpu/attention_varlen_cases.h"
#include "bench/verify_attention.h"
#include "driver/compile.h"
#include "nvrtc_check.h"
#include "bench/reference_attention.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

struct VarlenCase {
  int hq, hkv, d;
  std::vector<int64_t> lens_q, lens_k;
  int max_q;
  const char* causal = "false";
  const char* dtype = "bf16";
  bool lse = true;
};

std::string varlen_expr(const VarlenCase& c, int64_t tq, int64_t tk) {
  auto n = [](int64_t x) { return std::to_string(x); };
  const size_t b1 = c.lens_q.size() + 1;
  return "attention(Q[" + n(tq) + "," + n(c.hq) + "," + n(c.d) + "]:" + c.dtype + ", K[" + n(tk) +
         "," + n(c.hkv) + "," + n(c.d) + "]:" + c.dtype + ", V[" + n(tk) + "," + n(c.hkv) + "," +
         n(c.d) + "]:" + c.dtype + ", cu_seqlens_q=CQ[" + n(int64_t(b1)) +
         "]:i32, cu_seqlens_k=CK[" + n(int64_t(b1)) + "]:i32, max_seqlen_q=" + n(c.max_q) +
         ", causal=" + c.causal + (c.lse ? ", lse=true" : "") + ")";
}

Causal causal_of(const std::string& c) {
  return c == "true" ? Causal::BottomRight : c == "top_left" ? Causal::TopLeft : Causal::None;
}

// Every pass of the pipeline (the loop forms, t:012's tile form and k:012's kernel, per
// lane) against the varlen reference, O and LSE, wherever a pass changed its program.
void check_varlen(const VarlenCase& c, const std::string& knobs, uint64_t seed,
                  const std::string& arch = "sm_90a", const char* mma = "mma_sync",
                  int64_t slack = 0, int schedules = 0, int64_t l2_bytes = 0) {
  std::vector<int64_t> cu_q = {0}, cu_k = {0};
  for (size_t b = 0; b < c.lens_q.size(); ++b) {
    cu_q.push_back(cu_q.back() + c.lens_q[b]);
    cu_k.push_back(cu_k.back() + c.lens_k[b]);
  }
  // K and V have `slack` rows past the last sequence's keys, NaN (a caller's unused
  // capacity): no kernel may let them reach O.
  const int64_t tq = std::max<int64_t>(1, cu_q.back()),
                tk = std::max<int64_t>(1, cu_k.back() + slack);
  const std::string expr = varlen_expr(c, tq, tk);
  SCOPED_TRACE(expr + " knobs=" + knobs + " " + arch);
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch(arch);
  if (l2_bytes > 0) s.target.l2_bytes = l2_bytes;
  Bindings inputs;
  AttentionResult want;
  const DType dt = std::string(c.dtype) == "f16" ? DType::F16 : DType::BF16;
  for (const auto& p : pipeline()) {
    const std::string before = print_level(s, p.to);
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (inputs.tensors.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      for (size_t i = 0; i < cu_q.size(); ++i) {
        inputs.tensors.at("CQ").data[i] = double(cu_q[i]);
        inputs.tensors.at("CK").data[i] = double(cu_k[i]);
      }
      for (const char* t : {"K", "V"}) {
        std::vector<double>& x = inputs.tensors.at(t).data;
        std::fill(x.begin() + std::ptrdiff_t(cu_k.back() * c.hkv * c.d), x.end(),
                  std::numeric_limits<double>::quiet_NaN());
      }
      AttentionShape sh{int64_t(c.lens_q.size()), c.hq, c.hkv, 0, 0, c.d};
      AttentionAttrs attrs;
      attrs.causal = causal_of(c.causal);
      attrs.scale = 1.0 / std::sqrt(double(c.d));
      want = reference_attention_varlen(sh, attrs, c.max_q, inputs.tensors.at("Q").data,
                                        inputs.tensors.at("K").data, inputs.tensors.at("V").data,
                                        cu_q, cu_k);
    } else if (print_level(s, p.to) == before) {
      continue;
    }
    Bindings got = inputs;
    ASSERT_NO_THROW(passcheck::interpret_level(s, p.to, got)) << "after " << p.id;
    auto compare = [&](const HostTensor& t, const std::vector<double>& w, double tol,
                       const char* what) {
      ASSERT_EQ(t.data.size(), w.size()) << p.id << " " << what;
      for (size_t i = 0; i < w.size(); ++i) {
        if (std::isnan(w[i])) continue;  // a row no sequence covers (none here)
        if (std::isinf(w[i])) {
          ASSERT_EQ(t.data[i], w[i]) << "after " << p.id << " " << what << "[" << i << "]";
          continue;
        }
        ASSERT_NEAR(t.data[i], w[i], tol * std::max(1.0, std::fabs(w[i])))
            << "after " << p.id << " " << what << "[" << i << "]";
      }
    };
    compare(got.tensors.at("out"), want.out, passcheck::tolerance(dt), "O");
    if (c.lse) compare(got.tensors.at("lse"), want.lse, 1e-5, "LSE");
    if (::testing::Test::HasFailure()) return;
    // `schedules` seeded interleavings of the kernel's tasks (the producer and each
    // consumer warpgroup): a race on the walk's hand-off or a stop that deadlocks fails.
    if (p.to == Level::Kernel)
      for (int k = 1; k <= schedules; ++k) {
        SCOPED_TRACE("schedule seed " + std::to_string(k));
        Bindings sch = inputs;
        ASSERT_NO_THROW(interpret(s.kernel, sch, uint64_t(k)));
        compare(sch.tensors.at("out"), want.out, passcheck::tolerance(dt), "O");
        if (c.lse) compare(sch.tensors.at("lse"), want.lse, 1e-5, "LSE");
        if (::testing::Test::HasFailure()) return;
      }
  }
  EXPECT_EQ(s.level, Level::Kernel);
  EXPECT_EQ(s.used_knobs.at("ATTN_MMA"), mma);
  // A walk asked for is the walk compiled (its grid: min(units, ATTN_CTAS) CTAs in x).
  if (knobs.find("ATTN_PERSISTENT=1") != std::string::npos) {
    EXPECT_EQ(s.used_knobs.at("ATTN_PERSISTENT"), "1");
    ASSERT_EQ(s.kernel.kernels.size(), 1u);
    EXPECT_TRUE(s.kernel.kernels[0].grid[1].is_const() && s.kernel.kernels[0].grid[1].const_value() == 1);
  }
}

TEST(AttentionVarlen, OddLengthsEmptySequencesAndMasks) {
  uint64_t seed = 1;
  for (const char* causal : {"false", "true", "top_left"}) {
    check_varlen({4, 2, 16, {3, 0, 5, 1}, {7, 4, 1, 0}, 5, causal}, "BLOCK_M=16,BLOCK_N=16", seed++);
    check_varlen({4, 2, 16, {5, 2}, {2, 9}, 5, causal, "f16"}, "", seed++);
    check_varlen({4, 1, 16, {6, 3}, {6, 40}, 6, causal, "bf16", false}, "BLOCK_N=16,KV_STAGES=1",
                 seed++);
    check_varlen({4, 2, 16, {3, 4}, {9, 4}, 4, causal}, "GQA_PACK=1,BLOCK_M=16,BLOCK_N=16", seed++);
    check_varlen({4, 1, 16, {6, 3}, {6, 40}, 6, causal}, "BLOCK_N=16,KV_STAGES=3", seed++);
    check_varlen({4, 2, 16, {3, 0, 5, 1}, {7, 4, 1, 40}, 5, causal},
                 "BLOCK_M=16,BLOCK_N=16,KV_STAGES=4", seed++);
    // SPLIT_WARPS (no split: the groups meet and group 0 stores O): a sequence with no
    // key, one shorter than a group's first block.
    check_varlen({4, 2, 16, {3, 0, 5, 1}, {7, 4, 1, 40}, 5, causal},
                 "BLOCK_M=16,BLOCK_N=16,SPLIT_WARPS=2", seed++);
    check_varlen({4, 1, 16, {6, 3}, {6, 40}, 6, causal}, "BLOCK_N=16,SPLIT_WARPS=4", seed++);
  }
}

// The reference on one sequence equals the dense reference on its rows.
// Several query blocks per sequence (rows past one block, blocks past a short sequence's
// rows: the grid is sized by max_seqlen_q), on sm_80 too.
TEST(AttentionVarlen, SeveralQueryBlocksAndSm80) {
  check_varlen({2, 2, 16, {40, 7, 21}, {33, 50, 5}, 40, "true"}, "BLOCK_M=16,BLOCK_N=16", 41);
  check_varlen({2, 2, 16, {40, 7, 21}, {33, 50, 5}, 40, "top_left"}, "", 42, "sm_80");
  check_varlen({2, 2, 16, {40, 7, 21}, {33, 50, 5}, 40, "false", "f16"}, "", 43);
}

// The wgmma kernel (k:013: the default on sm_90a once max_seqlen_q passes 64), per lane on
// the interpreter: TMA boxes over the 3-D maps of Q, K and V at token q_start + block row
// and kv_start + key, rows past a sequence masked (keys) or not stored (queries), query
// blocks past a short sequence exiting before the mbarriers' setup. Odd lengths, a
// sequence with no query and one with no key, Sq > Sk and Sq < Sk, several query blocks
// per sequence, 1-3 warpgroups, both issue schemes, GQA 4/2 and MQA, the three masks,
// bf16/f16, with and without LSE.
TEST(AttentionVarlen, WgmmaOddLengthsEmptySequencesAndMasks) {
  uint64_t seed = 101;
  for (const char* causal : {"false", "true", "top_left"}) {
    check_varlen({4, 2, 16, {70, 0, 5, 130}, {33, 20, 0, 150}, 130, causal}, "ATTN_WG=1,BLOCK_N=32",
                 seed++, "sm_90a", "wgmma");
    check_varlen({4, 1, 16, {90, 3}, {100, 66}, 90, causal, "f16", false}, "ATTN_WG=1,BLOCK_N=16",
                 seed++, "sm_90a", "wgmma");
    check_varlen({2, 2, 32, {65, 140}, {140, 65}, 140, causal}, "ATTN_WG=2,BLOCK_N=64,ATTN_PRODUCER=1",
                 seed++, "sm_90a", "wgmma");
  }
  check_varlen({4, 2, 16, {70, 1, 200}, {70, 90, 17}, 200, "true"}, "", seed++, "sm_90a", "wgmma");
  // NaN rows of K and V past the last sequence's keys, inside its last key block: the wgmma
  // kernel loads them (the block is one box) and must keep them out of O; the mma.sync
  // kernel zero-fills them.
  for (const char* causal : {"false", "true"}) {
    check_varlen({4, 2, 16, {70, 33}, {50, 45}, 70, causal}, "ATTN_WG=1,BLOCK_N=32", seed++,
                 "sm_90a", "wgmma", 30);
    check_varlen({4, 2, 32, {140, 70}, {100, 85}, 140, causal},
                 "ATTN_WG=2,BLOCK_N=64,ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PINGPONG=1", seed++,
                 "sm_90a", "wgmma", 30);
    check_varlen({4, 2, 16, {70, 33}, {50, 45}, 70, causal}, "ATTN_MMA=mma_sync,BLOCK_N=32", seed++, "sm_90a",
                 "mma_sync", 30);
  }
  // The overlapped schedule and the ping-pong (the interpreter runs each warpgroup as a
  // task) under the early exit of query blocks past a sequence.
  check_varlen({4, 2, 16, {130, 0, 70}, {150, 9, 70}, 130, "true"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PINGPONG=1", seed++,
               "sm_90a", "wgmma");
  check_varlen({4, 2, 16, {130, 0, 70}, {150, 9, 70}, 130, "top_left"},
               "ATTN_WG=3,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PINGPONG=1,KV_STAGES=3", seed++,
               "sm_90a", "wgmma");
}

// The wgmma kernel under the persistent walk (ATTN_PERSISTENT=1): the units (query block,
// head, sequence) of max_seqlen_q's query blocks, longest first, each binding its
// sequence's lengths from the cumulative lengths in both arms; units past their sequence's
// rows skipped by the producer (no hand-off), a last hand-off ending the consumers' walk.
// A few CTAs (ATTN_CTAS=2, 3) so each walks many units of different sequences: odd
// lengths, an empty sequence, one with no key, one shorter than a query block, Sq > Sk and
// Sq < Sk, the three masks, GQA and MQA, 1-3 warpgroups, the overlap and the ping-pong,
// both schedules (static; dynamic's work counter), NaN slack past the last keys.
TEST(AttentionVarlen, WgmmaPersistentWalk) {
  uint64_t seed = 301;
  for (const char* causal : {"false", "true", "top_left"}) {
    check_varlen({4, 2, 16, {70, 0, 5, 130}, {33, 20, 0, 150}, 130, causal},
                 "ATTN_WG=1,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3", seed++,
                 "sm_90a", "wgmma", 30);
    check_varlen({4, 1, 16, {90, 3, 0, 64}, {100, 66, 7, 64}, 90, causal, "f16", false},
                 "ATTN_WG=1,BLOCK_N=16,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=2,"
                 "ATTN_SCHEDULE=dynamic",
                 seed++, "sm_90a", "wgmma");
    check_varlen({2, 2, 32, {65, 140, 1}, {140, 65, 9}, 140, causal},
                 "ATTN_WG=2,BLOCK_N=64,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3", seed++,
                 "sm_90a", "wgmma");
  }
  // D = 16's default tile with the producer, KV_STAGES=3, static and dynamic.
  check_varlen({4, 2, 16, {200, 1, 70, 0, 13}, {70, 90, 200, 5, 0}, 200, "true"},
               "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3", seed++, "sm_90a", "wgmma", 30);
  check_varlen({4, 2, 16, {200, 1, 70, 0, 13}, {70, 90, 200, 5, 0}, 200, "false"},
               "ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=2,ATTN_SCHEDULE=dynamic,KV_STAGES=3", seed++,
               "sm_90a", "wgmma");
  // Seeded interleavings: the hand-off of each real unit, the skipped ones, the stop. 60
  // units (3 query blocks of 64 rows, 4 heads, 5 sequences), 28 real, on 50 CTAs: CTAs
  // 0-39 take one unit each, of the last query block, which only the 130-row sequence
  // has, so most of them skip every unit and hand over only the stop.
  check_varlen({4, 2, 16, {70, 0, 5, 130, 64}, {33, 20, 0, 150, 64}, 130, "true"},
               "ATTN_WG=1,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=50,"
               "ATTN_SCHEDULE=static", seed++, "sm_90a", "wgmma", 30, 6);
  check_varlen({4, 2, 16, {70, 0, 5, 130, 64}, {33, 20, 0, 150, 64}, 130, "false"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3,"
               "ATTN_SCHEDULE=dynamic", seed++, "sm_90a", "wgmma", 0, 6);
  // The peeled mask (its unmasked blocks' count a let of each unit's sequence).
  check_varlen({4, 2, 16, {200, 1, 70, 0, 13}, {70, 90, 200, 5, 0}, 200, "true"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PEEL_MASK=1,ATTN_PERSISTENT=1,ATTN_CTAS=4",
               seed++, "sm_90a", "wgmma", 30);
  // The overlap and the ping-pong under the walk (the interpreter runs each warpgroup as a
  // task), and one CTA walking every unit.
  check_varlen({4, 2, 16, {130, 0, 70}, {150, 9, 70}, 130, "true"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PINGPONG=1,"
               "ATTN_PERSISTENT=1,ATTN_CTAS=3",
               seed++, "sm_90a", "wgmma", 30);
  check_varlen({4, 2, 16, {130, 0, 70}, {150, 9, 70}, 130, "top_left"},
               "ATTN_WG=3,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PINGPONG=1,KV_STAGES=3,"
               "ATTN_PERSISTENT=1,ATTN_CTAS=1,ATTN_SCHEDULE=dynamic",
               seed++, "sm_90a", "wgmma");
}

// Varlen without a mask walks its units in packed order (k:013): sequence by sequence, the
// heads of each, query blocks fastest, a sequence's sequence found by the producer's forward
// scan of cu_seqlens_q and handed to the consumers with the unit. Seven sequences (empty, one
// row, a block exactly, a block plus one, a block less one, several blocks) so that a CTA's
// stride crosses several sequences per unit (50 CTAs) or walks many units of each (1-3),
// both schedules, 64- and 128-row units, the overlap tile with the ping-pong and the peeled
// mask (the varlen default's kernel), NaN slack past the last keys.
TEST(AttentionVarlen, WgmmaPackedWalk) {
  uint64_t seed = 501;
  const std::vector<int64_t> lq = {64, 0, 130, 1, 63, 65, 200}, lk = {64, 9, 130, 1, 70, 0, 200};
  for (const char* ctas : {"1", "3", "50"}) {
    for (const char* schedule : {"static", "dynamic"}) {
      check_varlen({4, 2, 16, lq, lk, 200, "false"},
                   std::string("ATTN_WG=1,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_SCHEDULE=") +
                       schedule + ",ATTN_CTAS=" + ctas,
                   seed++, "sm_90a", "wgmma", 30);
    }
  }
  for (const char* schedule : {"static", "dynamic"})
    check_varlen({4, 2, 16, lq, lk, 200, "false"},
                 std::string("ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PINGPONG=1,"
                             "ATTN_PEEL_MASK=1,ATTN_PERSISTENT=1,ATTN_CTAS=5,ATTN_SCHEDULE=") + schedule,
                 seed++, "sm_90a", "wgmma", 30);
}

// O by stmatrix and the threads' copy-out (ATTN_STMATRIX=1, varlen's default: it cannot take
// the TMA store), and the fragments' 4-byte stores (ATTN_STMATRIX=0): rows past each sequence are left to the next sequence's units, so an off-by-one
// in the row test overwrites a neighbour's first row. Empty sequences, one row, a block
// plus and less one; the packed walk with the overlap tile and the ping-pong, the causal
// box walk, one CTA per query block, no producer; NaN slack past the last keys.
TEST(AttentionVarlen, WgmmaStmatrixCopyOut) {
  uint64_t seed = 601;
  const std::vector<int64_t> lq = {64, 0, 130, 1, 63, 65, 200}, lk = {64, 9, 130, 1, 70, 0, 200};
  check_varlen({4, 2, 16, lq, lk, 200, "false"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_PEEL_MASK=1,"
               "ATTN_PERSISTENT=1,ATTN_CTAS=3,ATTN_SCHEDULE=dynamic,ATTN_STMATRIX=1",
               seed++, "sm_90a", "wgmma", 30);
  check_varlen({4, 2, 16, lq, lk, 200, "true"},
               "ATTN_WG=3,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=2,ATTN_STMATRIX=1",
               seed++, "sm_90a", "wgmma", 30);
  check_varlen({4, 1, 16, {90, 3, 0, 64}, {100, 66, 7, 64}, 90, "top_left", "f16", false},
               "ATTN_WG=1,BLOCK_N=16,ATTN_STMATRIX=1", seed++, "sm_90a", "wgmma");
  check_varlen({4, 2, 16, {70, 1, 200}, {70, 90, 17}, 200, "false"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=0,ATTN_STMATRIX=1", seed++, "sm_90a", "wgmma");
  check_varlen({4, 2, 16, lq, lk, 200, "false"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3,ATTN_STMATRIX=0",
               seed++, "sm_90a", "wgmma", 30);
}

// The default kernel of causal varlen prefill at D = 128 (the overlap tile under the dynamic
// walk, measured on the H200 2026-11-29) and the 3 x 112 tile's walk (ATTN_OVERLAP=0, the
// default before): every unit of an empty sequence, one shorter than a query block and one
// past it, against the reference, both causal corners.
TEST(AttentionVarlen, WgmmaDefaultCausalWalk) {
  uint64_t seed = 401;
  for (const char* knobs : {"", "ATTN_OVERLAP=0"})
    for (const char* causal : {"true", "top_left"})
      check_varlen({1, 1, 128, {200, 0, 7}, {150, 9, 7}, 200, causal}, knobs, seed++, "sm_90a",
                   "wgmma");
}

// Causal varlen walks its units in L2 sections (k:013 causal_section): max_seqlen_q keys per
// sequence stand for its K and V, so 8 sequences of 1024 rows with 16 heads (512 KB per pair)
// walk 64 pairs at a time (the unit's coordinates through `unit % (64 * 8)`), not all 128.
// On the interpreter, a target of 64 KB of L2 (a 40 KB budget): one (head, sequence) pair
// per section at max_seqlen_q 200 and D = 128 (100 KB each), 6 sections, three CTAs; then
// 3 pairs per section (512 KB of L2: 320 KB).
TEST(AttentionVarlen, WgmmaCausalL2Sections) {
  const std::string e = attention_test::varlen_expr(8, 8192, 8192, 16, 16, 128, 1024, "true", "bf16", false);
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  const CompiledProgram p = compile_expression(e, opt);
  EXPECT_EQ(p.state.used_knobs.at("ATTN_PERSISTENT"), "1");
  EXPECT_NE(p.cuda.find("unit % 512"), std::string::npos) << p.cuda;
  EXPECT_EQ(p.cuda.find("pk_span"), std::string::npos) << "the box order: 1024 units, packed 1152";
  uint64_t seed = 701;
  for (const char* causal : {"true", "top_left"})
    check_varlen({2, 2, 128, {200, 0, 130}, {150, 9, 200}, 200, causal}, "ATTN_PERSISTENT=1,ATTN_CTAS=3",
                 seed++, "sm_90a", "wgmma", 30, 0, 64 << 10);
  check_varlen({2, 2, 128, {200, 0, 130}, {150, 9, 200}, 200, "true"}, "ATTN_PERSISTENT=1,ATTN_CTAS=2",
               seed++, "sm_90a", "wgmma", 30, 0, 512 << 10);
}

// Causal varlen under the walk takes whichever numbering has fewer units (the same real ones,
// so fewer skipped): the packed order (each sequence's query blocks from the last down, heads
// fastest; at most one skipped slot per sequence and head) or the box order (max_seqlen_q's
// query blocks for every sequence). On the interpreter, the packed form with skipped slots
// (empty sequences, one row, a block +- 1) under both schedules and 1, 3, 50 CTAs; the
// choice itself on the generated CUDA.
TEST(AttentionVarlen, WgmmaCausalPackedOrder) {
  auto packed = [](const std::string& e, const std::string& knobs) {
    CompileOptions opt;
    opt.knobs = Knobs::parse(knobs);
    opt.target = Target::for_arch("sm_90a");
    return compile_expression(e, opt).cuda.find("pk_span") != std::string::npos;
  };
  using attention_test::varlen_expr;
  // 4096, 2048, .., 128 (8064 tokens): 1104 packed units against 3072 in the box order.
  EXPECT_TRUE(packed(varlen_expr(6, 8064, 8064, 16, 16, 128, 4096, "true", "bf16", false), ""));
  EXPECT_TRUE(packed(varlen_expr(6, 8064, 8064, 16, 16, 128, 4096, "top_left", "bf16", false), ""));
  // 128 x 32: one query block each, 512 box units against 1024 packed.
  EXPECT_FALSE(packed(varlen_expr(32, 4096, 4096, 16, 16, 128, 128, "true", "bf16", false), ""));
  // Three consumer warpgroups (the 3 x 112 tile): the box order (the producer's registers).
  EXPECT_FALSE(packed(varlen_expr(6, 8064, 8064, 16, 16, 128, 4096, "true", "bf16", false), "ATTN_OVERLAP=0"));
  // A run-time token count: packed (its skips are bounded).
  EXPECT_TRUE(packed("attention(Q[T,16,128]:bf16, K[T,16,128]:bf16, V[T,16,128]:bf16, cu_seqlens_q=CQ[7]:i32, "
                     "cu_seqlens_k=CK[7]:i32, max_seqlen_q=4096, causal=true)", ""));

  uint64_t seed = 801;
  const std::vector<int64_t> lq = {64, 0, 130, 1, 63, 65, 200}, lk = {64, 9, 130, 1, 70, 0, 200};
  const std::string e = varlen_expr(7, 523, 539, 4, 2, 16, 200, "true", "bf16", true);
  EXPECT_TRUE(packed(e, "ATTN_WG=1,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_CTAS=3"));
  for (const char* ctas : {"1", "3", "50"})
    for (const char* schedule : {"static", "dynamic"})
      for (const char* causal : {"true", "top_left"})
        check_varlen({4, 2, 16, lq, lk, 200, causal},
                     std::string("ATTN_WG=1,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_PERSISTENT=1,ATTN_SCHEDULE=") +
                         schedule + ",ATTN_CTAS=" + ctas,
                     seed++, "sm_90a", "wgmma", 30);
  check_varlen({4, 2, 16, lq, lk, 200, "true"},
               "ATTN_WG=2,BLOCK_N=32,ATTN_PRODUCER=1,ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_PEEL_MASK=1,"
               "ATTN_PERSISTENT=1,ATTN_CTAS=5,ATTN_SCHEDULE=dynamic",
               seed++, "sm_90a", "wgmma", 30, 4);
}

TEST(AttentionVarlen, ReferenceMatchesDensePerSequence) {
  const int64_t D = 4, Hq = 2, Hkv = 1;
  std::vector<double> q(size_t(5 * Hq * D)), k(size_t(6 * Hkv * D)), v(k.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(double(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(double(i)), v[i] = std::sin(0.7 * double(i));
  AttentionAttrs attrs;
  attrs.causal = Causal::BottomRight;
  attrs.scale = 0.5;
  const AttentionResult r = reference_attention_varlen({2, Hq, Hkv, 0, 0, D}, attrs, 3, q, k, v,
                                                       {0, 2, 5}, {0, 4, 6});
  // Sequence 1: queries 2..4, keys 4..5, in [B,H,S,D] form.
  std::vector<double> qd, kd, vd;
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t i = 2; i < 5; ++i)
      for (int64_t d = 0; d < D; ++d) qd.push_back(q[size_t((i * Hq + h) * D + d)]);
  for (int64_t j = 4; j < 6; ++j)
    for (int64_t d = 0; d < D; ++d) kd.push_back(k[size_t(j * D + d)]), vd.push_back(v[size_t(j * D + d)]);
  const AttentionResult dense = reference_attention({1, Hq, Hkv, 3, 2, D}, attrs, qd, kd, vd);
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(r.lse[size_t((2 + i) * Hq + h)], dense.lse[size_t(h * 3 + i)]);
      for (int64_t d = 0; d < D; ++d)
        EXPECT_EQ(r.out[size_t(((2 + i) * Hq + h) * D + d)], dense.out[size_t((h * 3 + i) * D + d)]);
    }
  // Keys past K's 6 rows.
  EXPECT_THROW(reference_attention_varlen({2, Hq, Hkv, 0, 0, D}, attrs, 3, q, k, v, {0, 2, 5},
                                          {0, 4, 7}),
               Error);
}

TEST(AttentionVarlen, LoopFormsReadTheCumulativeLengths) {
  CompileState s;
  s.graph = parse_expression(varlen_expr({4, 2, 16, {3, 5}, {7, 4}, 5, "true"}, 8, 11));
  s.knobs = Knobs::parse("BLOCK_M=4,BLOCK_N=4");
  run_pipeline(s, "l:000_lower_graph");
  std::string ir = print(s.loop);
  for (const char* want : {"let q_start = load CQ[b]", "let q_end = load CQ[b + 1]",
                           "let kv_start = load CK[b]", "let kv_end = load CK[b + 1]",
                           "q = load Q[q_start + i, h, d]", "k = load K[kv_start + j, h / 2, d]",
                           "lse: f32[8, 4] output", "attn_scores: f32[2, 4, 5, 11]"})
    EXPECT_NE(ir.find(want), std::string::npos) << want << "\n" << ir;
}

std::string error_of(const std::string& expr, const std::string& knobs = "",
                     const std::string& last = "") {
  try {
    CompileState s;
    s.graph = parse_expression(expr);
    s.knobs = Knobs::parse(knobs);
    run_pipeline(s, last);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(AttentionVarlen, ErrorsNameTheProblem) {
  auto has = [](const std::string& msg, const std::string& want) {
    EXPECT_NE(msg.find(want), std::string::npos) << "message: " << msg << "\nwant: " << want;
  };
  const std::string qkv = "attention(Q[8,4,16]:bf16, K[11,2,16]:bf16, V[11,2,16]:bf16, ";
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:f32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=5)"),
      "cu_seqlens_q= is CQ[3] of dtype f32; it holds cumulative sequence lengths");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[4]:i32, max_seqlen_q=5)"),
      "sequence counts (B+1 of cu_seqlens_q vs cu_seqlens_k) differ");
  has(error_of(qkv + "cu_seqlens_q=CQ[3,1]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=5)"),
      "cu_seqlens_q= must be [B+1]:i32");
  has(error_of(qkv + "cu_seqlens_q=CQ[1]:i32, cu_seqlens_k=CK[1]:i32, max_seqlen_q=5)"),
      "B+1 >= 2");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32)"), "missing max_seqlen_q=");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, max_seqlen_q=5)"), "missing cu_seqlens_k=");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=0)"),
      "max_seqlen_q= takes a positive integer");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=2.5)"),
      "max_seqlen_q= takes a positive integer");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=9)"),
      "max_seqlen_q=9 exceeds the packed queries of Q[8,4,16]");
  has(error_of("attention(Q[1,8,4,16]:bf16, K[1,11,2,16]:bf16, V[1,11,2,16]:bf16, "
               "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=5)"),
      "Q must be rank 3 [T,H,D] with cu_seqlens");
  has(error_of(qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=5, "
                     "block_table=BT[2,2]:i32, seqlens_k=L[2]:i32)"),
      "varlen (cu_seqlens_q=) with paged KV (block_table=) is not built");
  has(error_of("attention(Q[8,4,16]:bf16, K[11,2,16]:bf16, V[11,2,16]:bf16)"),
      "Q must be rank 4 [B,H,S,D]");
  const std::string ok = qkv + "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=5)";
  has(error_of(ok, "SPLIT_KV=2", "l:005_online_softmax"),
      "SPLIT_KV=2 with packed sequences (cu_seqlens_q=)");
  // The wgmma kernel takes packed sequences (max_seqlen_q <= 64 defaults to the mma.sync
  // kernel, and asking for wgmma is fine); its knobs' errors still name them.
  EXPECT_EQ(error_of(ok, "ATTN_MMA=wgmma"), "");
  has(error_of(ok, "ATTN_MMA=wgmma,GQA_PACK=1"), "GQA_PACK");
  has(error_of(ok, "STAGE_OUTPUT=1"), "packed sequences' rows are [T, H, D]");
  // Past a decode-sized max_seqlen_q the wgmma kernel is the default: the same refusal, with
  // the one fix that works (not ATTN_MMA=mma_sync, which refuses it too).
  const std::string prefill = "attention(Q[200,4,16]:bf16, K[200,2,16]:bf16, V[200,2,16]:bf16, "
                              "cu_seqlens_q=CQ[3]:i32, cu_seqlens_k=CK[3]:i32, max_seqlen_q=100)";
  has(error_of(prefill, "STAGE_OUTPUT=1"), "packed sequences' rows are [T, H, D] (a row stride "
                                           "of H·D); no attention kernel stages them: drop "
                                           "STAGE_OUTPUT");
}

// Every GPU case (tests/gpu/attention_varlen_cases.h) compiles with NVRTC for sm_90a (the
// wgmma kernel past a decode-sized max_seqlen_q, the mma.sync kernel by name) and sm_80
// (the mma.sync kernel), ptxas spilling nothing and serializing no wgmma.
TEST(AttentionVarlen, GpuCasesCompileBothArchs) {
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const auto& c : attention_test::varlen_cases()) {
      SCOPED_TRACE(c.expr + " knobs " + c.knobs + " " + arch);
      // The wgmma kernel's knobs name an sm_90a kernel.
      if (std::string(arch) == "sm_80" && (c.knobs.find("ATTN_WG") != std::string::npos ||
                                           c.knobs.find("ATTN_PRODUCER") != std::string::npos ||
                                           c.knobs.find("ATTN_PERSISTENT") != std::string::npos ||
                                           c.knobs.find("ATTN_OVERLAP") != std::string::npos ||
                                           c.knobs.find("ATTN_STMATRIX") != std::string::npos))
        continue;
      CompileOptions opt;
      opt.knobs = Knobs::parse(c.knobs);
      opt.target = Target::for_arch(arch);
      CompiledProgram p = compile_expression(c.expr, opt);
      const bool wgmma = p.state.used_knobs.at("ATTN_MMA") == "wgmma";
      if (std::string(arch) == "sm_80") {
        ASSERT_FALSE(wgmma);
      }
      EXPECT_NE(p.cuda.find("const int q_start = (int)__ldg(&loom_t_CQ[b]);"), std::string::npos);
      CompileResult r;
      try {
        r = nvrtc_check::compile_source(p.cuda, arch, "attention_varlen.cu");
      } catch (const Error& e) {
        FAIL() << e.what() << "\n" << p.cuda;
      }
      if (r.resources.empty()) continue;  // NVRTC's cache left no ptxas report
      nvrtc_check::expect_no_spills(p, r);
      if (wgmma) {
        nvrtc_check::expect_wgmma_not_serialized(r);
      }
    }
}

// Symbolic token counts (they change with every batch): 64-bit indices, so the integer
// lets are `long long` and must be cast in C form. Compiles for sm_90a with NVRTC.
TEST(AttentionVarlen, SymbolicTokenCountsCompile) {
  const std::string expr = "attention(Q[T,16,128]:bf16, K[S,16,128]:bf16, V[S,16,128]:bf16, "
                           "cu_seqlens_q=CQ[5]:i32, cu_seqlens_k=CK[5]:i32, max_seqlen_q=1024, "
                           "causal=true)";
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  CompiledProgram p = compile_expression(expr, opt);
  EXPECT_NE(p.cuda.find("const long long q_start = (long long)__ldg(&loom_t_CQ[b]);"),
            std::string::npos) << p.cuda;
  try {
    nvrtc_check::compile_source(p.cuda, "sm_90a", "attention_varlen_symbolic.cu");
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << p.cuda;
  }
}

// `loom run`'s inputs for a packed problem: cumulative lengths from 0, nondecreasing,
// within the tensors, the first sequence max_seqlen_q long.
TEST(AttentionVarlen, RunInputsFillTheLengths) {
  const Graph g = parse_expression(attention_test::varlen_expr(5, 100, 60, 2, 2, 16, 40, "true",
                                                               "bf16", false));
  CompileState s;
  s.graph = g;
  run_pipeline(s, "l:000_lower_graph");
  Bindings b;
  make_random_inputs(s.loop, b, 3);
  fill_serving_inputs(g, b, 3);
  const HostTensor &cq = b.tensors.at("CQ"), &ck = b.tensors.at("CK");
  EXPECT_EQ(cq.data[0], 0.0);
  EXPECT_EQ(ck.data[0], 0.0);
  EXPECT_EQ(cq.data[1], 40.0);
  for (size_t i = 1; i < cq.data.size(); ++i) {
    EXPECT_GE(cq.data[i], cq.data[i - 1]);
    EXPECT_GE(ck.data[i], ck.data[i - 1]);
    EXPECT_LE(cq.data[i] - cq.data[i - 1], 40.0);
  }
  EXPECT_LE(cq.data.back(), 100.0);
  EXPECT_LE(ck.data.back(), 60.0);
  // K and V rows past the last sequence's keys are NaN, the keys themselves are not.
  const size_t row = 2 * 16, end = size_t(ck.data.back());
  for (const char* t : {"K", "V"}) {
    const auto& x = b.tensors.at(t).data;
    ASSERT_LT(end, size_t(60)) << "the fill leaves slack rows here";
    EXPECT_FALSE(std::isnan(x[end * row - 1]));
    EXPECT_TRUE(std::isnan(x[end * row]));
    EXPECT_TRUE(std::isnan(x.back()));
  }
}

}  // namespace
}  // namespace loom
