// Paged KV (docs/attention.md, "Paged KV"): attention over page pools Kc/Vc [P,Hkv,page,D]
// read through a block table BT[B,maxp]:i32 with per-sequence key lengths L[B]:i32. Both
// loop forms (l:000's unfused form and l:005's online softmax) run on the interpreter and
// are compared, O and LSE, with the fp64 paged reference (bench/reference_attention.h) on
// pages in shuffled order, page sizes 16 and 256, odd lengths, lengths 0 and 1, lengths
// past the table (clamped), GQA 32/8, 4/2 and MQA, the three masks, f16 and bf16. The
// pages no sequence uses are NaN and the table's slots past a sequence's length name
// pages outside the pool, so a read of either fails the comparison or the interpreter's
// bounds check. Every error of the forms' front door names the problem and the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "../passes/attention_exprs.h"
#include "bench/reference_attention.h"
#include "../passes/pass_check.h"
#include "../../gpu/attention_paged_cases.h"
#include "bench/verify_attention.h"
#include "driver/compile.h"
#include "nvrtc_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

struct PagedCase {
  int batch, hq, hkv, sq, d, page, maxp;
  std::vector<int64_t> lens;
  const char* causal = "false";
  const char* dtype = "bf16";
  bool lse = true;
};

Causal causal_of(const std::string& c) {
  return c == "true" ? Causal::BottomRight : c == "top_left" ? Causal::TopLeft : Causal::None;
}

// Shuffled pages: every (sequence, slot) gets its own page of a pool twice the table's
// size, in random order; slots past the sequence's length name page 1 << 20 (outside the
// pool), every page no sequence uses is NaN, and so are the rows of each sequence's last
// page past its length.
void fill_pages(const PagedCase& c, int pages, Bindings& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  HostTensor& bt = b.tensors.at("BT");
  HostTensor& len = b.tensors.at("L");
  std::vector<bool> used(size_t(pages), false);
  for (int s = 0; s < c.batch; ++s) {
    len.data[size_t(s)] = double(c.lens[size_t(s)]);
    const int64_t kept = std::clamp<int64_t>(c.lens[size_t(s)], 0, int64_t(c.maxp) * c.page);
    for (int slot = 0; slot < c.maxp; ++slot) {
      const int64_t pg = order[size_t(s * c.maxp + slot)];
      const bool live = int64_t(slot) * c.page < kept;
      bt.data[size_t(s * c.maxp + slot)] = live ? double(pg) : double(1 << 20);
      if (live) used[size_t(pg)] = true;
    }
  }
  const size_t per_page = size_t(c.hkv) * size_t(c.page) * size_t(c.d);
  for (const char* pool : {"Kc", "Vc"})
    for (int pg = 0; pg < pages; ++pg)
      if (!used[size_t(pg)])
        std::fill_n(b.tensors.at(pool).data.begin() + std::ptrdiff_t(size_t(pg) * per_page),
                    per_page, std::numeric_limits<double>::quiet_NaN());
  // The rows of a sequence's last page past its length are NaN too (a cache's unwritten
  // rows): a kernel that reads them must mask K and keep V out of O (the wgmma kernel loads
  // the whole block and zeroes them; the mma.sync kernel zero-fills).
  for (int s = 0; s < c.batch; ++s) {
    const int64_t kept = std::clamp<int64_t>(c.lens[size_t(s)], 0, int64_t(c.maxp) * c.page);
    if (kept % c.page == 0) continue;
    const int64_t pg = int64_t(bt.data[size_t(s * c.maxp + kept / c.page)]);
    for (const char* pool : {"Kc", "Vc"})
      for (int64_t hk = 0; hk < c.hkv; ++hk)
        for (int64_t r = kept % c.page; r < c.page; ++r)
          std::fill_n(b.tensors.at(pool).data.begin() +
                          std::ptrdiff_t(((pg * c.hkv + hk) * c.page + r) * c.d),
                      c.d, std::numeric_limits<double>::quiet_NaN());
  }
}

void expect_matches(const HostTensor& got, const std::vector<double>& want, double tol,
                    const std::string& ctx) {
  ASSERT_EQ(got.data.size(), want.size()) << ctx;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      ASSERT_EQ(got.data[i], want[i]) << ctx << " [" << i << "]";
      continue;
    }
    ASSERT_FALSE(std::isnan(got.data[i])) << ctx << " [" << i << "] is NaN";
    ASSERT_NEAR(got.data[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << ctx << " [" << i << "]";
  }
}

// Every pass of the pipeline (the loop forms, t:012's tile form, k:012's kernel and the
// split form's combine, per lane) on the same inputs against the paged reference, O and
// LSE, wherever a pass changed its level's program.
void check_paged(const PagedCase& c, const std::string& knobs, uint64_t seed,
                 const std::string& arch = "sm_90a", const char* mma = "mma_sync") {
  const int pages = 2 * c.batch * c.maxp;
  const std::string expr = attention_test::paged_attention(
      c.batch, c.hq, c.hkv, c.sq, c.d, pages, c.page, c.maxp, c.causal, c.dtype, c.lse);
  SCOPED_TRACE(expr + " knobs=" + knobs + " " + arch);
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch(arch);
  Bindings inputs;
  AttentionResult want;
  const DType dt = std::string(c.dtype) == "f16" ? DType::F16 : DType::BF16;
  for (const auto& p : pipeline()) {
    const std::string before = print_level(s, p.to);
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (inputs.tensors.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      fill_pages(c, pages, inputs, seed + 1);
      AttentionShape sh{c.batch, c.hq, c.hkv, c.sq, 0, c.d};
      AttentionAttrs attrs;
      attrs.causal = causal_of(c.causal);
      attrs.scale = 1.0 / std::sqrt(double(c.d));
      std::vector<int64_t> table, lens;
      for (double v : inputs.tensors.at("BT").data) table.push_back(int64_t(v));
      for (double v : inputs.tensors.at("L").data) lens.push_back(int64_t(v));
      want = reference_attention_paged(sh, attrs, pages, c.page, inputs.tensors.at("Q").data,
                                       inputs.tensors.at("Kc").data,
                                       inputs.tensors.at("Vc").data, table, lens);
    } else if (print_level(s, p.to) == before) {
      continue;
    }
    Bindings got = inputs;
    ASSERT_NO_THROW(passcheck::interpret_level(s, p.to, got)) << "after " << p.id;
    const std::string ctx = "after " + p.id;
    expect_matches(got.tensors.at("out"), want.out, passcheck::tolerance(dt), ctx + " O");
    if (c.lse) expect_matches(got.tensors.at("lse"), want.lse, 1e-5, ctx + " LSE");
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(s.level, Level::Kernel);
  EXPECT_EQ(s.used_knobs.at("ATTN_MMA"), mma);
}

// BLOCK_N 16 (a block per page), 64 (four pages per block: the copy reads each row's
// page) and the decode default; with and without splits; lengths 0 and 1.
TEST(AttentionPaged, Page16OddLengthsAndEmptySequences) {
  uint64_t seed = 1;
  for (const char* causal : attention_test::kMasks) {
    check_paged({3, 4, 2, 3, 16, 16, 3, {37, 0, 1}, causal}, "", seed++);
    check_paged({3, 4, 2, 3, 16, 16, 3, {37, 0, 1}, causal}, "BLOCK_N=16,SPLIT_KV=2", seed++);
    check_paged({2, 4, 2, 5, 16, 16, 4, {2, 49}, causal, "f16"},
                "GQA_PACK=0,BLOCK_N=32,SPLIT_KV=3", seed++);
  }
}

TEST(AttentionPaged, Page256AndMqa) {
  uint64_t seed = 11;
  for (const char* causal : attention_test::kMasks) {
    check_paged({2, 4, 1, 5, 16, 256, 2, {300, 17}, causal}, "BLOCK_N=64", seed++);
    check_paged({2, 4, 1, 5, 16, 256, 2, {300, 17}, causal}, "SPLIT_KV=4,KV_STAGES=1", seed++);
    check_paged({2, 4, 1, 5, 16, 256, 2, {300, 17}, causal}, "SPLIT_KV=4,KV_STAGES=3", seed++);
    check_paged({3, 4, 2, 3, 16, 16, 3, {37, 0, 1}, causal}, "BLOCK_N=16,KV_STAGES=4", seed++);
  }
}

TEST(AttentionPaged, Gqa32By8Decode) {
  uint64_t seed = 21;
  for (const char* causal : {"false", "true"}) {
    check_paged({2, 32, 8, 1, 16, 16, 3, {45, 16}, causal}, "", seed++);
    check_paged({2, 32, 8, 1, 16, 16, 3, {45, 16}, causal}, "GQA_PACK=0,SPLIT_KV=2", seed++);
  }
}

// SPLIT_WARPS (warp groups of one CTA on every W-th block, their own rings over the
// pages) and COMBINE=last_cta (the split kernel's last CTA per row set combines): an empty
// sequence (every split holds no key and still arrives), lengths shorter than a split,
// GQA packed, page 16 under blocks of 16 and 32, page 256.
TEST(AttentionPaged, SplitWarpsAndLastCtaCombine) {
  uint64_t seed = 31;
  for (const char* causal : attention_test::kMasks) {
    for (const char* knobs :
         {"BLOCK_N=16,SPLIT_KV=2,SPLIT_WARPS=2", "BLOCK_N=16,SPLIT_KV=3,COMBINE=last_cta",
          "SPLIT_KV=2,SPLIT_WARPS=4,COMBINE=last_cta"})
      check_paged({3, 4, 2, 3, 16, 16, 3, {37, 0, 1}, causal}, knobs, seed++);
    check_paged({2, 32, 8, 1, 16, 16, 3, {45, 16}, causal}, "SPLIT_WARPS=2,COMBINE=last_cta",
                seed++);
    check_paged({2, 4, 1, 5, 16, 256, 2, {300, 17}, causal},
                "SPLIT_KV=4,SPLIT_WARPS=2,COMBINE=last_cta", seed++);
  }
}

// Past the decode shapes (Sq > 64): the prefill defaults of the mma.sync kernel, 64-row
// query blocks, on sm_80 too.
TEST(AttentionPaged, PrefillRowsAndSm80) {
  check_paged({2, 2, 1, 70, 16, 32, 4, {90, 33}, "true"}, "ATTN_MMA=mma_sync", 41);
  check_paged({2, 2, 1, 70, 16, 32, 4, {90, 33}, "top_left"}, "", 42, "sm_80");
  check_paged({2, 4, 2, 3, 16, 16, 3, {37, 0}, "false"}, "SPLIT_KV=2", 43, "sm_80");
}

// The wgmma kernel (k:013, the prefill default on sm_90a) over the pool's 4-D tensor map,
// per lane on the interpreter: one TMA box per page piece of gcd(BLOCK_N, page) rows, each
// with the page the table names. Pages 16, 64 and 256; BLOCK_N below the page (one box per
// block), at it, above it (16-key pages: a box per page) and not dividing it (48 keys over
// 64-key pages: 16-row pieces, as the 3 x 112 tile at D = 128 reads 64-key pages); odd
// lengths, a sequence with no key, a length past the table (clamped), several query blocks
// (Sq = 70 over 64-row warpgroups), Sq != Sk both ways, both issue schemes, GQA 4/2, 32/8
// and MQA, the three masks, bf16 and f16, with and without LSE. Dead slots name a page
// outside the pool (the map's zero fill) and unused pages are NaN, so a wrong page fails.
TEST(AttentionPaged, WgmmaPagesBelowAtAndAboveTheBlock) {
  uint64_t seed = 61;
  for (const char* causal : attention_test::kMasks) {
    check_paged({2, 4, 2, 70, 16, 16, 5, {37, 0}, causal}, "ATTN_WG=1,BLOCK_N=16", seed++,
                "sm_90a", "wgmma");
    check_paged({2, 4, 2, 70, 16, 16, 5, {77, 45}, causal, "f16"}, "ATTN_WG=1,BLOCK_N=32", seed++,
                "sm_90a", "wgmma");
    check_paged({2, 4, 1, 70, 16, 64, 2, {100, 300}, causal}, "ATTN_WG=1,BLOCK_N=48", seed++,
                "sm_90a", "wgmma");
    check_paged({2, 2, 2, 70, 32, 64, 2, {128, 9}, causal, "bf16", false},
                "ATTN_WG=2,BLOCK_N=64,ATTN_PRODUCER=1", seed++, "sm_90a", "wgmma");
    check_paged({1, 2, 1, 100, 16, 256, 1, {70}, causal}, "ATTN_WG=1,BLOCK_N=64", seed++,
                "sm_90a", "wgmma");
    // D = 128's paged default block (96 keys: three 32-row pieces over 64-key pages).
    check_paged({1, 2, 1, 70, 16, 64, 4, {201}, causal}, "ATTN_WG=1,BLOCK_N=96", seed++,
                "sm_90a", "wgmma");
  }
}

// Paged prefill at D = 128 takes the dense form's FlashAttention-3 tile (2 x 64 rows by 128
// keys, the overlap, the ping-pong; H200 2026-11-29: 1.19-1.27x the contiguous form's time
// -> 1.07-1.09x) and O by stmatrix and the copy-out. Without the overlap (or with a given
// BLOCK_N other than 128) the three-warpgroup tile, whose key block is 96 keys (three 32-row
// page pieces; 112, the dense form's, is seven 16-row pieces at every page size), measured
// faster than 112 on the H100.
TEST(AttentionPaged, WgmmaD128Tiles) {
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  const std::string paged = "attention(Q[8,32,2048,128]:bf16, Kc[256,8,64,128]:bf16, "
                            "Vc[256,8,64,128]:bf16, block_table=BT[8,32]:i32, seqlens_k=L[8]:i32)";
  const std::string dense = "attention(Q[8,32,2048,128]:bf16, K[8,8,2048,128]:bf16, "
                            "V[8,8,2048,128]:bf16)";
  const auto used = compile_expression(paged, opt).state.used_knobs;
  EXPECT_EQ(used.at("BLOCK_N"), "128");
  EXPECT_EQ(used.at("ATTN_OVERLAP"), "1");
  EXPECT_EQ(used.at("ATTN_PINGPONG"), "1");
  EXPECT_EQ(used.at("ATTN_STMATRIX"), "1");
  EXPECT_EQ(compile_expression(dense, opt).state.used_knobs.at("BLOCK_N"), "128");
  opt.knobs = Knobs::parse("ATTN_OVERLAP=0");
  EXPECT_EQ(compile_expression(paged, opt).state.used_knobs.at("BLOCK_N"), "96");
  opt.knobs = Knobs::parse("BLOCK_N=112");
  EXPECT_EQ(compile_expression(paged, opt).state.used_knobs.at("ATTN_OVERLAP"), "0");
}

// ATTN_LOAD_WARPS: lane 0 of several producer warps issues a key block's boxes. Paged KV
// with four or more pages a block takes four by default (each warp its pages, their table
// reads its own); fewer pieces than warps spread box by box (64-key pages under 128-key
// blocks at D = 128: four boxes over three warps); one warp is the single issuing thread.
// The interpreter checks the one barrier armed by the first warp and completed by every
// warp's boxes, against the paged reference.
TEST(AttentionPaged, WgmmaLoadWarps) {
  uint64_t seed = 81;
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  // Paged prefill (Sq = Sk = 2048, D 128) over 16-key and 64-key pages.
  const CompiledProgram p16 = compile_expression(
      attention_test::paged_expr(8, 32, 8, 2048, 128, 1024, 16, 128, "false", "bf16", false), opt);
  const CompiledProgram p64 = compile_expression(
      attention_test::paged_expr(8, 32, 8, 2048, 128, 256, 64, 32, "false", "bf16", false), opt);
  EXPECT_EQ(p16.state.used_knobs.at("ATTN_LOAD_WARPS"), "4");
  EXPECT_EQ(p64.state.used_knobs.at("ATTN_LOAD_WARPS"), "1");
  EXPECT_NE(p16.cuda.find("threadIdx.x % 32 == 0 && threadIdx.x < 384"), std::string::npos);
  EXPECT_NE(p16.cuda.find("if (load_warp == 3)"), std::string::npos);
  for (const char* causal : attention_test::kMasks) {
    // 16-key pages under 64-key blocks: four pieces, the default four warps, one each.
    check_paged({2, 4, 2, 70, 16, 16, 5, {77, 45}, causal}, "ATTN_WG=1,ATTN_PRODUCER=1,BLOCK_N=64",
                seed++, "sm_90a", "wgmma");
    // Two pieces of two 64-column boxes over three warps; and the single thread again.
    check_paged({2, 2, 1, 70, 128, 32, 4, {100, 61}, causal},
                "ATTN_WG=1,ATTN_PRODUCER=1,BLOCK_N=64,ATTN_LOAD_WARPS=3", seed++, "sm_90a", "wgmma");
    check_paged({2, 4, 2, 70, 16, 16, 5, {77, 45}, causal},
                "ATTN_WG=1,ATTN_PRODUCER=1,BLOCK_N=64,ATTN_LOAD_WARPS=1", seed++, "sm_90a", "wgmma");
  }
  // The D = 128 tile with the overlap's split release (K one block ahead of V) over 16-key
  // pages, as paged prefill runs by default.
  check_paged({1, 2, 1, 150, 128, 16, 12, {181}, "true"}, "", seed++, "sm_90a", "wgmma");
  check_paged({1, 2, 1, 150, 128, 16, 12, {170}, "false"}, "", seed++, "sm_90a", "wgmma");
}

// Paged KV under the persistent walk (ATTN_PERSISTENT=1): a grid of ATTN_CTAS CTAs walks
// the units, each unit's key count read from seqlens_k by the producer and handed to the
// consumers with the unit (units of differing lengths: the stream, its ring base handed
// over), its pages read through the table as the plain grid reads them. A sequence with no
// key (a unit with no block), odd lengths, the three masks; the static walk with four
// issuing warps (each its own running count) and with one, the dynamic walk, and the D = 128
// tile (the overlap's split release, the ping-pong) over 16-key pages.
TEST(AttentionPaged, WgmmaWalk) {
  uint64_t seed = 91;
  for (const char* causal : attention_test::kMasks) {
    check_paged({2, 4, 2, 70, 16, 16, 5, {77, 0}, causal},
                "ATTN_WG=1,ATTN_PRODUCER=1,BLOCK_N=64,ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,"
                "ATTN_CTAS=3,ATTN_LOAD_WARPS=4", seed++, "sm_90a", "wgmma");
    check_paged({2, 2, 1, 70, 32, 64, 2, {100, 61}, causal},
                "ATTN_WG=2,ATTN_PRODUCER=1,BLOCK_N=64,ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,"
                "ATTN_CTAS=2,ATTN_LOAD_WARPS=1", seed++, "sm_90a", "wgmma");
    check_paged({2, 2, 2, 70, 16, 16, 5, {45, 77}, causal},
                "ATTN_WG=1,ATTN_PRODUCER=1,BLOCK_N=32,ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic,"
                "ATTN_CTAS=2", seed++, "sm_90a", "wgmma");
  }
  check_paged({2, 2, 1, 150, 128, 16, 12, {181, 40}, "false"}, "ATTN_PERSISTENT=1,ATTN_CTAS=2",
              seed++, "sm_90a", "wgmma");
  check_paged({1, 2, 1, 150, 128, 16, 12, {170}, "true"},
              "ATTN_PERSISTENT=1,ATTN_SCHEDULE=static,ATTN_CTAS=2", seed++, "sm_90a", "wgmma");
}

// GQA 32/8 prefill with the defaults (the wgmma kernel from Sq = 65 on sm_90a).
TEST(AttentionPaged, WgmmaGqa32By8Defaults) {
  check_paged({1, 32, 8, 65, 16, 64, 2, {97}, "true"}, "ATTN_WG=1", 71, "sm_90a", "wgmma");
  check_paged({1, 32, 8, 65, 16, 64, 2, {97}, "false"}, "", 72, "sm_90a", "wgmma");
}

// A length past the table is clamped to maxp·page, a negative one to 0 (the reference
// does the same); without LSE the forms write O alone.
TEST(AttentionPaged, LengthsClampedToTheTable) {
  check_paged({2, 2, 2, 3, 16, 16, 2, {40, -3}, "true", "bf16", false}, "", 31);
  check_paged({2, 2, 2, 3, 16, 16, 2, {40, -3}, "false"}, "SPLIT_KV=2,BLOCK_N=16", 32);
}

// The reference itself: a paged sequence equals the dense reference on its gathered keys.
TEST(AttentionPaged, ReferenceMatchesDenseOnGatheredKeys) {
  const int64_t D = 4, page = 2, pages = 4;
  AttentionShape sh{1, 2, 1, 2, 0, D};
  AttentionAttrs attrs;
  attrs.causal = Causal::BottomRight;
  attrs.scale = 0.5;
  std::vector<double> q(size_t(2 * 2 * D)), kc(size_t(pages * page * D)), vc(kc.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(double(i));
  for (size_t i = 0; i < kc.size(); ++i) kc[i] = std::cos(double(i)), vc[i] = std::sin(0.3 * double(i));
  // Keys 0..2 live in pages 3 (keys 0, 1) and 1 (key 2).
  const AttentionResult paged = reference_attention_paged(sh, attrs, pages, page, q, kc, vc,
                                                          {3, 1}, {3});
  std::vector<double> k, v;
  for (int64_t j = 0; j < 3; ++j) {
    const int64_t pg = j < 2 ? 3 : 1;
    for (int64_t d = 0; d < D; ++d) {
      k.push_back(kc[size_t((pg * page + j % page) * D + d)]);
      v.push_back(vc[size_t((pg * page + j % page) * D + d)]);
    }
  }
  sh.Sk = 3;
  const AttentionResult dense = reference_attention(sh, attrs, q, k, v);
  EXPECT_EQ(paged.out, dense.out);
  EXPECT_EQ(paged.lse, dense.lse);
  EXPECT_THROW(reference_attention_paged(sh, attrs, pages, page, q, kc, vc, {4, 1}, {3}), Error);
}

TEST(AttentionPaged, LoopFormsReadThroughTheTable) {
  CompileState s;
  s.graph = parse_expression(attention_test::paged_attention(2, 4, 2, 3, 16, 8, 16, 3, "true"));
  // Unsplit (the decode default splits even 3 key blocks, one per split).
  s.knobs = Knobs::parse("BLOCK_M=4,BLOCK_N=16,SPLIT_KV=1");
  run_pipeline(s, "l:000_lower_graph");
  std::string ir = print(s.loop);
  EXPECT_NE(ir.find("let kv_len = load L[b]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("let kv_page = load BT[b, j / 16]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("k = load Kc[kv_page, h / 2, j % 16, d]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("attn_scores: f32[2, 4, 3, 48]"), std::string::npos) << ir;
  run_pipeline(s, "l:005_online_softmax");
  ir = print(s.loop);
  EXPECT_NE(ir.find("v = load Vc[kv_page, h, (kb * 16 + c) % 16, d]"), std::string::npos) << ir;
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

TEST(AttentionPaged, ErrorsNameTheProblem) {
  const std::string q = "attention(Q[2,4,1,16]:bf16, ";
  const std::string pool = "Kc[8,2,16,16]:bf16, Vc[8,2,16,16]:bf16, ";
  auto has = [](const std::string& msg, const std::string& want) {
    EXPECT_NE(msg.find(want), std::string::npos) << "message: " << msg << "\nwant: " << want;
  };
  has(error_of(q + pool + "block_table=BT[2,3]:f32, seqlens_k=L[2]:i32)"),
      "block_table= is BT[2,3] of dtype f32; it holds page numbers: write it as BT[B,maxp]:i32");
  has(error_of(q + pool + "block_table=BT[2,3]:i32, seqlens_k=L[2,1]:i32)"),
      "seqlens_k= must be rank 1 [B]");
  has(error_of(q + pool + "block_table=BT[6]:i32, seqlens_k=L[2]:i32)"),
      "block_table= must be rank 2 [B,maxp]");
  has(error_of(q + pool + "block_table=BT[3,3]:i32, seqlens_k=L[2]:i32)"),
      "batch sizes (B of Q vs block_table) differ");
  has(error_of(q + pool + "block_table=BT[2,3]:i32, seqlens_k=L[3]:i32)"),
      "batch sizes (B of Q vs seqlens_k) differ");
  has(error_of(q + pool + "block_table=BT[2,3]:i32)"), "block_table= needs seqlens_k= too");
  has(error_of(q + pool + "seqlens_k=L[2]:i32)"), "seqlens_k= needs block_table= too");
  has(error_of(q + pool + "block_table=3, seqlens_k=L[2]:i32)"), "block_table= takes a tensor");
  for (const char* page : {"8", "24", "512", "P"})
    has(error_of(q + "Kc[8,2," + page + ",16]:bf16, Vc[8,2," + page +
                 ",16]:bf16, block_table=BT[2,3]:i32, seqlens_k=L[2]:i32)"),
        std::string("the page size (dim 2 of Kc[8,2,") + page + ",16]) is " + page +
            ", but it must be a power of two from 16 to 256");
  has(error_of(q + "Kc[8,2,16,16]:bf16, Vc[9,2,16,16]:bf16, block_table=BT[2,3]:i32, "
                   "seqlens_k=L[2]:i32)"),
      "page counts (P of K vs V) differ");
  // i32 is for indices only.
  has(error_of("matmul(A[4,4]:i32, B[4,4]:i32)"), "i32 tensors are only attention's block_table=");
  has(error_of("matmul(A[4,4]:f32, B[4,4]:f32, out=i32)"), "out=i32 is not allowed");
  has(error_of("attention(Q[2,4,1,16]:i32, K[2,2,8,16]:i32, V[2,2,8,16]:i32)"),
      "attention takes f16 or bf16");
  // Decode (Sq <= 64) defaults to the mma.sync kernel's split-KV; the wgmma kernel takes
  // it when asked, and refuses the split by name.
  const std::string ok = q + pool + "block_table=BT[2,3]:i32, seqlens_k=L[2]:i32)";
  EXPECT_EQ(error_of(ok, "ATTN_MMA=wgmma"), "");
  has(error_of(ok, "ATTN_MMA=wgmma,SPLIT_KV=2"), "SPLIT_KV");
  // The producer's issuing warps need the producer, and under the walk the static order
  // (each warp walks the units itself).
  has(error_of(ok, "ATTN_MMA=wgmma,ATTN_PRODUCER=0,ATTN_LOAD_WARPS=2"),
      "ATTN_LOAD_WARPS=2 spreads the TMA issue over the producer warpgroup's warps and "
      "ATTN_PRODUCER is 0");
  has(error_of("attention(Q[2,4,300,128]:bf16, K[2,4,300,128]:bf16, V[2,4,300,128]:bf16, causal=true)",
               "ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic,ATTN_LOAD_WARPS=4"),
      "ATTN_SCHEDULE=dynamic hands the units out from one thread's fetch: drop ATTN_LOAD_WARPS, "
      "or set ATTN_SCHEDULE=static");
  has(error_of(ok, "ATTN_MMA=wgmma,ATTN_LOAD_WARPS=5"), "ATTN_LOAD_WARPS");
}


// Every GPU case (tests/gpu/attention_paged_cases.h) compiles with NVRTC for sm_90a (the
// wgmma kernel for prefill, the mma.sync kernel for decode and by name) and sm_80 (the
// mma.sync kernel), ptxas spilling nothing and serializing no wgmma; the source reads the
// lengths once per CTA and the pages through the table.
TEST(AttentionPaged, GpuCasesCompileBothArchs) {
  for (const char* arch : {"sm_90a", "sm_80"})
    for (const auto& c : attention_test::paged_cases()) {
      SCOPED_TRACE(c.expr + " knobs " + c.knobs + " " + arch);
      // The wgmma kernel's knobs name an sm_90a kernel.
      if (std::string(arch) == "sm_80" && (c.knobs.find("ATTN_WG") != std::string::npos ||
                                           c.knobs.find("ATTN_PRODUCER") != std::string::npos ||
                                           c.knobs.find("ATTN_STMATRIX") != std::string::npos ||
                                           c.knobs.find("ATTN_LOAD_WARPS") != std::string::npos ||
                                           c.knobs.find("ATTN_PERSISTENT") != std::string::npos ||
                                           c.knobs.find("ATTN_OVERLAP") != std::string::npos))
        continue;
      CompileOptions opt;
      opt.knobs = Knobs::parse(c.knobs);
      opt.target = Target::for_arch(arch);
      CompiledProgram p = compile_expression(c.expr, opt);
      const bool wgmma = p.state.used_knobs.at("ATTN_MMA") == "wgmma";
      if (std::string(arch) == "sm_80") {
        ASSERT_FALSE(wgmma);
      }
      EXPECT_NE(p.cuda.find("const int kv_len = (int)__ldg(&loom_t_L[b]);"), std::string::npos);
      EXPECT_NE(p.cuda.find("__ldg(&loom_t_BT["), std::string::npos);
      CompileResult r;
      try {
        r = nvrtc_check::compile_source(p.cuda, arch, "attention_paged.cu");
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

// Symbolic sizes (a serving stack's batch, pool and table change per step): 64-bit
// indices, so the integer lets are `long long` and must be cast in C form. Compiles for
// sm_90a with NVRTC.
TEST(AttentionPaged, SymbolicSizesCompile) {
  const std::string expr = "attention(Q[B,8,1,64]:bf16, Kc[P,2,16,64]:bf16, Vc[P,2,16,64]:bf16, "
                           "block_table=BT[B,M]:i32, seqlens_k=L[B]:i32, causal=true, lse=true)";
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  CompiledProgram p = compile_expression(expr, opt);
  EXPECT_NE(p.cuda.find("const long long kv_len = (long long)__ldg(&loom_t_L[b]);"),
            std::string::npos) << p.cuda;
  try {
    nvrtc_check::compile_source(p.cuda, "sm_90a", "attention_paged_symbolic.cu");
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << p.cuda;
  }
}

// Prefill with symbolic sizes on the wgmma kernel: the pool's page count and the table's
// width are run-time sizes of the tensor maps (the executor encodes them per launch), and
// the clamp of a piece's slot reads the table's width. Compiles for sm_90a with NVRTC.
TEST(AttentionPaged, WgmmaSymbolicSizesCompile) {
  const std::string expr = "attention(Q[B,32,1024,128]:bf16, Kc[P,8,64,128]:bf16, "
                           "Vc[P,8,64,128]:bf16, block_table=BT[B,M]:i32, seqlens_k=L[B]:i32, "
                           "causal=true, lse=true)";
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  CompiledProgram p = compile_expression(expr, opt);
  EXPECT_EQ(p.state.used_knobs.at("ATTN_MMA"), "wgmma");
  try {
    nvrtc_check::compile_source(p.cuda, "sm_90a", "attention_paged_wgmma_symbolic.cu");
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << p.cuda;
  }
}

// `loom run`'s inputs for a paged problem: a table of distinct shuffled pages over each
// sequence's length, dead slots -1, unused pages NaN.
TEST(AttentionPaged, RunInputsFillTheTable) {
  const Graph g = parse_expression(attention_test::paged_expr(3, 4, 2, 1, 16, 10, 16, 3, "false",
                                                              "bf16", false));
  CompileState s;
  s.graph = g;
  run_pipeline(s, "l:000_lower_graph");
  Bindings b;
  make_random_inputs(s.loop, b, 5);
  fill_serving_inputs(g, b, 5);
  const HostTensor &bt = b.tensors.at("BT"), &len = b.tensors.at("L");
  std::vector<int> uses(10, 0);
  for (int seq = 0; seq < 3; ++seq) {
    const int64_t n = int64_t(len.data[size_t(seq)]);
    EXPECT_GT(n, 32);
    EXPECT_LE(n, 48);
    for (int slot = 0; slot < 3; ++slot) {
      const int64_t pg = int64_t(bt.data[size_t(seq * 3 + slot)]);
      if (slot * 16 < n) {
        ASSERT_GE(pg, 0);
        ASSERT_LT(pg, 10);
        ++uses[size_t(pg)];
      } else {
        EXPECT_EQ(pg, -1);
      }
    }
  }
  for (int pg = 0; pg < 10; ++pg) {
    EXPECT_LE(uses[size_t(pg)], 1);
    const double first = b.tensors.at("Kc").data[size_t(pg) * 2 * 16 * 16];
    EXPECT_EQ(std::isnan(first), uses[size_t(pg)] == 0) << "page " << pg;
  }
  // A sequence's last page past its length is NaN (K and V, every head); its keys are not.
  for (int seq = 0; seq < 3; ++seq) {
    const int64_t n = int64_t(len.data[size_t(seq)]);
    if (n % 16 == 0) continue;
    const int64_t pg = int64_t(bt.data[size_t(seq * 3 + n / 16)]);
    for (const char* pool : {"Kc", "Vc"})
      for (int64_t hk = 0; hk < 2; ++hk) {
        const auto& x = b.tensors.at(pool).data;
        EXPECT_FALSE(std::isnan(x[size_t(((pg * 2 + hk) * 16 + n % 16 - 1) * 16)])) << seq;
        EXPECT_TRUE(std::isnan(x[size_t(((pg * 2 + hk) * 16 + n % 16) * 16)])) << seq;
      }
  }
}

}  // namespace
}  // namespace loom
