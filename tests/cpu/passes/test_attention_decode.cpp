// Decode attention (attention_decode.h): SPLIT_KV (the key blocks of each query block
// split over CTAs, partial O and LSE combined by attention_combine) and GQA_PACK (a KV
// head's query heads packed into one CTA's rows). Every pass from l:005 on, run on the CPU
// interpreter, computes what l:000's naive loop form computes — O and LSE — for odd Sk,
// Sk not a multiple of the split, Sq in {1, 4, 7}, Sq > Sk (rows with no key, and splits
// with no key of a row), the three masks, GQA 32/8 and MQA, with and without LSE. The
// kernel level runs per lane, both kernels (the split one and the combine).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "attention_exprs.h"
#include "pass_check.h"
#include "passes/pipeline.h"

namespace loom {
namespace {

using attention_test::attention;
using attention_test::kMasks;

CompileState check_decode(const std::string& expr, const std::string& knobs, uint64_t seed,
                          const std::string& arch = "sm_90a",
                          const std::map<std::string, int64_t>& sizes = {}) {
  SCOPED_TRACE(expr + " knobs=" + knobs + " " + arch);
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch(arch);
  Bindings inputs, reference;
  inputs.symbols = sizes;
  const DType out = s.graph.node(s.graph.result()).dtype;
  for (const auto& p : pipeline()) {
    const std::string before = print_level(s, p.to);
    p.run(s);
    passcheck::verify_level(s, p.to);
    if (reference.tensors.empty()) {
      make_random_inputs(s.loop, inputs, seed);
      reference = inputs;
      interpret(s.loop, reference);
      continue;
    }
    if (print_level(s, p.to) == before) continue;
    Bindings got = inputs;
    switch (p.to) {
      case Level::Loop: interpret(s.loop, got); break;
      case Level::Tile: interpret(s.tile, got); break;
      case Level::Kernel: interpret(s.kernel, got); break;
      case Level::Graph: break;
    }
    passcheck::expect_outputs_close(p.to == Level::Kernel ? static_cast<const ProgramBase&>(s.kernel)
                                                          : static_cast<const ProgramBase&>(s.loop),
                                    got, reference, out, "after " + p.id);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(s.level, Level::Kernel);
  return s;
}

std::string used(const CompileState& s, const std::string& k) {
  auto it = s.used_knobs.find(k);
  return it == s.used_knobs.end() ? "" : it->second;
}

// Split-KV over the masks: Sk = 37 and 100 (ragged last block; 7 blocks of 16 in 3 splits
// of 3, 3, 1), Sq 1, 4 and 7, Sq > Sk (bottom-right: rows with no key at all, and rows
// whose keys all lie in the first splits), with and without LSE.
TEST(AttentionDecode, SplitKvMasksAndLengths) {
  const int lengths[][2] = {{1, 37}, {4, 100}, {7, 100}, {7, 5}, {4, 37}};
  uint64_t seed = 1;
  for (const char* causal : kMasks)
    for (auto [sq, sk] : lengths)
      for (bool lse : {true, false}) {
        const CompileState s = check_decode(attention(4, 2, sq, sk, 16, causal, "bf16", lse),
                                            "SPLIT_KV=3,BLOCK_N=16,GQA_PACK=0", seed++);
        if (sk > 32) {
          EXPECT_EQ(used(s, "SPLIT_KV"), "3");
          EXPECT_EQ(s.kernel.kernels.size(), 2u);
        }
      }
}

// The workspace itself: a split that holds no key of a row writes O = 0 and LSE = -inf
// for it, at every level (the combine skips such a split by its index condition, so the
// outputs alone cannot tell), and every other partial is finite. Rows of a CTA that keep
// no key of its split while other rows do are the case a kernel gets wrong by forming
// -inf - -inf (Sq = 7, Sk = 100, 3 splits of 48 keys: causal row 0 keeps keys < 94, so
// split 2, keys 96..99, holds none of its keys).
TEST(AttentionDecode, WorkspaceOfEmptySplits) {
  const int64_t Sq = 7, Sk = 100, per_split = 48;
  for (const char* causal : kMasks)
    for (int64_t sq : {Sq, int64_t(110)}) {
      SCOPED_TRACE(std::string(causal) + " Sq=" + std::to_string(sq));
      CompileState s;
      s.graph = parse_expression(attention(4, 2, int(sq), int(Sk), 16, causal));
      s.knobs = Knobs::parse("SPLIT_KV=3,BLOCK_N=16,GQA_PACK=0,ATTN_MMA=mma_sync");
      s.target = Target::for_arch("sm_90a");
      Bindings inputs;
      for (const auto& p : pipeline()) {
        p.run(s);
        if (inputs.tensors.empty() && s.level == Level::Loop) make_random_inputs(s.loop, inputs, 7);
      }
      auto keys = [&](int64_t i) -> int64_t {
        if (std::string(causal) == "false") return Sk;
        if (std::string(causal) == "top_left") return std::min(Sk, i + 1);
        return std::max<int64_t>(0, i + 1 + Sk - sq);
      };
      for (int level = 0; level < 3; ++level) {
        Bindings got = inputs;
        if (level == 0) {
          // The loop form l:005 left; the later levels keep its workspace names.
          CompileState l;
          l.graph = s.graph;
          l.knobs = s.knobs;
          l.target = s.target;
          for (const auto& p : pipeline())
            if (p.to == Level::Loop) p.run(l);
          interpret(l.loop, got);
        } else if (level == 1) {
          interpret(s.tile, got);
        } else {
          interpret(s.kernel, got);
        }
        const HostTensor& o = got.tensors.at("attn_part_o");
        const HostTensor& lse = got.tensors.at("attn_part_lse");
        ASSERT_EQ(lse.shape, (std::vector<int64_t>{1, 4, sq, 3}));
        int bad = 0;
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t i = 0; i < sq; ++i)
            for (int64_t sp = 0; sp < 3; ++sp) {
              const bool empty = sp * per_split >= keys(i);
              const double x = lse.data[size_t((h * sq + i) * 3 + sp)];
              bool ok = empty ? (std::isinf(x) && x < 0) : std::isfinite(x);
              for (int64_t d = 0; d < 16; ++d) {
                const double v = o.data[size_t(((h * sq + i) * 3 + sp) * 16 + d)];
                ok = ok && (empty ? v == 0.0 : std::isfinite(v));
              }
              if (!ok && bad++ < 5)
                ADD_FAILURE() << "level " << level << " h " << h << " i " << i << " split " << sp
                              << (empty ? " (no key)" : "") << ": lse " << x;
            }
      }
    }
}

// A symbolic key length: the split's blocks per split are ceil(ceil(S / BLOCK_N) / 3)
// at run time, and a split past the end of a short S holds no key (S = 20: two blocks of
// 16 in three splits of one; the third writes O = 0 and LSE = -inf and is skipped).
TEST(AttentionDecode, SymbolicKeyLength) {
  const std::string e = "attention(Q[1,4,3,16]:bf16, K[1,2,S,16]:bf16, V[1,2,S,16]:bf16, "
                        "causal=";
  uint64_t seed = 80;
  for (const char* causal : kMasks)
    for (int64_t sk : {20, 37, 100})
      check_decode(e + causal + ", lse=true)", "SPLIT_KV=3,BLOCK_N=16", seed++, "sm_90a",
                   {{"S", sk}});
}

// A run-time key length gets split-KV by default (sized for long caches: the wave's worth
// of splits), and a short length leaves most splits without a key: S = 20 and 300 under
// the default tile on the interpreter, the masks, GQA packed.
TEST(AttentionDecode, SymbolicKeyLengthSplitsByDefault) {
  const std::string e = "attention(Q[1,8,1,64]:bf16, K[1,2,S,64]:bf16, V[1,2,S,64]:bf16, causal=";
  uint64_t seed = 90;
  for (const char* causal : kMasks)
    for (int64_t sk : {20, 300}) {
      const CompileState s = check_decode(e + causal + ", lse=true)", "", seed++, "sm_90a",
                                          {{"S", sk}});
      EXPECT_GT(std::stoll(used(s, "SPLIT_KV")), 8) << "a run-time S splits for long caches";
      // Sized for long caches: four warp groups and the combine in the last CTA (one
      // kernel); the splits past a short length still arrive.
      EXPECT_EQ(used(s, "SPLIT_WARPS"), "4");
      EXPECT_EQ(used(s, "COMBINE"), "last_cta");
      EXPECT_EQ(s.kernel.kernels.size(), 1u);
    }
}

// More splits than key blocks are clamped (5 blocks: SPLIT_KV=8 runs 5 splits of one).
TEST(AttentionDecode, SplitKvClampedToKeyBlocks) {
  const CompileState s = check_decode(attention(2, 1, 1, 70, 16, "true"),
                                      "SPLIT_KV=8,BLOCK_N=16", 11);
  EXPECT_EQ(used(s, "SPLIT_KV"), "5");
  ASSERT_EQ(s.kernel.kernels.size(), 2u);
  EXPECT_EQ(s.kernel.kernels[1].name, "k_attention_combine");
  // On sm_90a the combine waits for the split kernel as its programmatic dependent.
  EXPECT_TRUE(s.kernel.kernels[1].wait_prior_grid);
  EXPECT_TRUE(s.kernel.kernels[0].trigger_dependents);
}

// The combine over many splits: G = ceil(S / 8) groups of D threads per row, each
// folding every G-th split online, the groups meeting in shared memory. S = 11 (G = 2,
// the last group one split short), 63 (G = 8) and 40 (G = 5, a multiple), causal rows
// whose keys end in the first splits (their later splits skipped, and groups with no
// split of the row at all: m = -inf, weight 0), Sq > Sk (rows with no key), LSE.
TEST(AttentionDecode, CombineOverManySplits) {
  uint64_t seed = 120;
  for (const char* causal : kMasks) {
    for (auto [sq, sk, splits, groups] :
         {std::tuple{1, 350, 11, 2}, std::tuple{7, 1000, 63, 8}, std::tuple{4, 640, 40, 5},
          std::tuple{9, 40, 3, 1}}) {
      const CompileState s =
          check_decode(attention(4, 2, sq, sk, 16, causal), "BLOCK_N=16,GQA_PACK=0,SPLIT_KV=" +
                                                                std::to_string(splits), seed++);
      ASSERT_EQ(used(s, "SPLIT_KV"), std::to_string(splits));
      ASSERT_EQ(s.kernel.kernels.size(), 2u);
      EXPECT_EQ(s.kernel.kernels[1].block_threads, 16 * groups);
    }
    // COMBINE_GROUPS set: one group (every split by one thread per d), and 5 groups of a
    // 63-split row (the last group one split short).
    for (int groups : {1, 5}) {
      const CompileState s = check_decode(
          attention(4, 2, 7, 1000, 16, causal),
          "BLOCK_N=16,GQA_PACK=0,SPLIT_KV=63,COMBINE_GROUPS=" + std::to_string(groups), seed++);
      ASSERT_EQ(s.kernel.kernels.size(), 2u);
      EXPECT_EQ(s.kernel.kernels[1].block_threads, 16 * groups);
    }
  }
}

// GQA packing, alone and with splits: 32 query heads on 8 KV heads (rows = Sq x 4), MQA
// (4 query heads on one: Sq 7 x 4 = 28 rows in one 32-row tile of two warps), f16.
TEST(AttentionDecode, GqaPacking) {
  uint64_t seed = 40;
  for (const char* causal : kMasks) {
    check_decode(attention(32, 8, 1, 37, 16, causal), "GQA_PACK=1,SPLIT_KV=1,BLOCK_N=16", seed++);
    check_decode(attention(32, 8, 4, 45, 16, causal, "f16"), "GQA_PACK=1,SPLIT_KV=2,BLOCK_N=16",
                 seed++);
    check_decode(attention(4, 1, 7, 37, 32, causal), "GQA_PACK=1,SPLIT_KV=3,BLOCK_N=16", seed++);
    check_decode(attention(4, 1, 7, 5, 16, causal, "bf16", true, 2),
                 "GQA_PACK=1,SPLIT_KV=1,BLOCK_N=16", seed++);
  }
}

// The decode defaults: on sm_90a a decode shape takes the mma.sync kernel, packs GQA
// rows (BLOCK_M = Sq x group rounded to m16 atoms) and splits the keys; KV_STAGES=1 and
// the sm_80 target too.
TEST(AttentionDecode, Defaults) {
  const CompileState s = check_decode(attention(8, 2, 4, 600, 32, "true"), "", 60);
  EXPECT_EQ(used(s, "ATTN_MMA"), "mma_sync");
  EXPECT_EQ(used(s, "GQA_PACK"), "1");
  EXPECT_EQ(used(s, "BLOCK_M"), "16");
  EXPECT_EQ(s.kernel.kernels.size(), 2u);
  check_decode(attention(8, 2, 4, 300, 32, "true"), "KV_STAGES=1", 61);
  check_decode(attention(4, 4, 1, 300, 32, "false"), "", 62, "sm_80");
  // Not decode (Sq > 64): the wgmma kernel as before, no split, no packing.
  CompileState big;
  big.graph = parse_expression(attention(4, 2, 65, 300, 64, "false"));
  big.target = Target::for_arch("sm_90a");
  for (const auto& p : pipeline()) p.run(big);
  EXPECT_EQ(used(big, "ATTN_MMA"), "wgmma");
  EXPECT_EQ(big.kernel.kernels.size(), 1u);
}

// KV_STAGES=3 and 4 (rings of three and four K/V blocks, two and three in flight): the
// prologue issues blocks 0 .. S-2, so splits shorter than the ring (1 and 2 blocks: its
// commit groups stay empty past the split's end, the wait counts unchanged) and longer
// ones (the ring wraps: slot kb % S); no split; odd Sk, Sk not a multiple of the split,
// Sq 1, 4, 7, the three masks, GQA 32/8, MQA and LSE. The interpreter retires cp.async
// groups by the wait counts, so a wrong count reads a slot before its copy landed.
TEST(AttentionDecode, DeepKvRing) {
  uint64_t seed = 90;
  for (const char* stages : {"3", "4"}) {
    const std::string ring = std::string("KV_STAGES=") + stages + ",BLOCK_N=16";
    for (const char* causal : kMasks) {
      // 7 blocks in 3 splits of 3, 3, 1; 7 blocks in 7 splits of 1; one split of 7.
      check_decode(attention(4, 2, 1, 100, 16, causal), ring + ",SPLIT_KV=3,GQA_PACK=0", seed++);
      check_decode(attention(4, 2, 7, 100, 16, causal), ring + ",SPLIT_KV=7,GQA_PACK=0", seed++);
      check_decode(attention(4, 2, 4, 37, 16, causal, "bf16", false), ring + ",SPLIT_KV=1",
                   seed++);
      // GQA 32/8 packed, split in 2 splits of 2 blocks and 3 of 6; MQA with 7 rows each.
      check_decode(attention(32, 8, 1, 61, 16, causal), ring + ",GQA_PACK=1,SPLIT_KV=2", seed++);
      check_decode(attention(32, 8, 4, 270, 16, causal, "f16"), ring + ",GQA_PACK=1,SPLIT_KV=3",
                   seed++);
      check_decode(attention(4, 1, 7, 37, 32, causal), ring + ",GQA_PACK=1,SPLIT_KV=2", seed++);
    }
    // Sq > Sk (rows and splits with no key), and the decode defaults' own tile (BLOCK_N
    // = 32 for a one-warp CTA) on sm_80.
    check_decode(attention(4, 2, 7, 5, 16, "true"), ring + ",SPLIT_KV=2,GQA_PACK=0", seed++);
    check_decode(attention(8, 2, 1, 300, 32, "false"), std::string("KV_STAGES=") + stages, seed++,
                 "sm_80");
  }
}

// The split default sizes its wave by the ring's shared memory: a deeper ring leaves fewer
// CTAs per SM, so fewer splits (one-warp CTAs at D = 128, BLOCK_N = 32: (16 + 2·S·32)·256 B
// + 1 KB each, 6, 4 and 3 per SM for S = 2, 3, 4), and every level reads the same count
// (the workspace l:005 declares is the one k:012 and the combine index). One warp group
// (SPLIT_WARPS=1); the default's four groups: SplitDefaultWithSplitWarps.
TEST(AttentionDecode, SplitDefaultFollowsTheRing) {
  auto splits = [](const std::string& knobs) {
    CompileState s;
    s.graph = parse_expression(attention(32, 8, 1, 32768, 128, "false"));
    s.knobs = Knobs::parse(knobs);
    s.target = Target::for_arch("sm_90a");
    for (const auto& p : pipeline()) p.run(s);
    EXPECT_EQ(s.kernel.tensor("attn_part_lse").shape[3].str(), s.used_knobs.at("SPLIT_KV"));
    return std::stoll(s.used_knobs.at("SPLIT_KV"));
  };
  const int64_t sm = Target::for_arch("sm_90a").sm_count;
  // 8 CTAs (one per KV head) before the split; 1024 key blocks of 32.
  auto expect = [&](int64_t per_sm) {
    const int64_t want = sm * per_sm / 8, per = (1024 + want - 1) / want;
    return (1024 + per - 1) / per;
  };
  EXPECT_EQ(splits("KV_STAGES=2,SPLIT_WARPS=1"), expect(6));
  EXPECT_EQ(splits("KV_STAGES=3,SPLIT_WARPS=1"), expect(4));
  EXPECT_EQ(splits("KV_STAGES=4,SPLIT_WARPS=1"), expect(3));
  EXPECT_EQ(splits("SPLIT_WARPS=1"), expect(4));  // decode's default ring: 3 (the H100 A/B)
  EXPECT_EQ(splits(""), expect(1));  // four rings of 3: one CTA per SM
}

// The decode defaults the H100 A/B chose (bench/NOTES.md): a ring of 3, and splits as
// short as one key block while the grid stays within one wave (B = 1, Hkv = 8, 1k keys:
// 32 blocks of 32 keys -> 32 splits of one block, 256 CTAs; 8 splits of 4 ran 1.26x
// slower), but no more splits than a wave holds. The H200 A/B's: four warp groups with
// the combine in the last CTA where the one-group split has splits of 2 blocks or more
// and the row sets leave 2 splits each in a wave of 4-group CTAs (B = 8, Hkv = 8, 1k:
// 2 splits of 16 blocks, 4 per warp; B = 1, 8k: 16 of 16), not at one-block splits (1k
// at B = 1: 32 of one block, one group and the combine kernel).
TEST(AttentionDecode, DefaultsFromTheH100AB) {
  auto run = [](int batch, int sk) {
    CompileState s;
    s.graph = parse_expression(attention(32, 8, 1, sk, 128, "false", "bf16", false, batch));
    s.target = Target::for_arch("sm_90a");
    for (const auto& p : pipeline()) p.run(s);
    return s;
  };
  const CompileState one = run(1, 1024);
  EXPECT_EQ(used(one, "KV_STAGES"), "3");
  EXPECT_EQ(used(one, "SPLIT_KV"), "32");
  EXPECT_EQ(used(one, "SPLIT_WARPS"), "1");
  EXPECT_EQ(used(one, "COMBINE"), "kernel");
  const CompileState eight = run(8, 1024), long_keys = run(1, 8192);
  EXPECT_EQ(used(eight, "SPLIT_KV"), "2");
  EXPECT_EQ(used(eight, "SPLIT_WARPS"), "4");
  EXPECT_EQ(used(long_keys, "SPLIT_KV"), "16");
  EXPECT_EQ(used(long_keys, "SPLIT_WARPS"), "4");
  EXPECT_EQ(used(long_keys, "COMBINE"), "last_cta");
  EXPECT_EQ(long_keys.kernel.kernels.size(), 1u);
  // B = 8, Hkv = 32 (256 row sets) fills the wave alone: one group, 2 splits.
  CompileState wide;
  wide.graph = parse_expression(attention(32, 32, 1, 8192, 128, "false", "bf16", false, 8));
  wide.target = Target::for_arch("sm_90a");
  for (const auto& p : pipeline()) p.run(wide);
  EXPECT_EQ(used(wide, "SPLIT_WARPS"), "1");
  EXPECT_EQ(used(wide, "SPLIT_KV"), "2");
  // sm_80: measured on sm_90 only, one group.
  CompileState a100;
  a100.graph = parse_expression(attention(32, 8, 1, 8192, 128, "false"));
  a100.target = Target::for_arch("sm_80");
  for (const auto& p : pipeline()) p.run(a100);
  EXPECT_EQ(used(a100, "SPLIT_WARPS"), "1");
  // Not decode: the prefill ring stays 2.
  CompileState big;
  big.graph = parse_expression(attention(4, 2, 65, 300, 64, "false"));
  big.knobs = Knobs::parse("ATTN_MMA=mma_sync");
  big.target = Target::for_arch("sm_90a");
  for (const auto& p : pipeline()) p.run(big);
  EXPECT_EQ(used(big, "KV_STAGES"), "2");
}

// Over the decode grid (B 1/8/64, Hkv 32/8, Sq 1/4, Sk 1k..128k, D = 128, and the deeper
// rings) the default split's grid fits one wave of resident CTAs: rounding the split
// count up made a second wave of a few CTAs (B = 1, Hkv = 32: 800 CTAs for 792 slots),
// which costs the kernel's whole time again.
TEST(AttentionDecode, SplitGridFitsOneWave) {
  const Target t = Target::for_arch("sm_90a");
  for (const char* ring : {"", "KV_STAGES=3", "KV_STAGES=4", "SPLIT_WARPS=2", "SPLIT_WARPS=4"})
    for (int b : {1, 8, 64})
      for (int hkv : {32, 8})
        for (int sq : {1, 4})
          for (int sk : {1024, 8192, 32768, 131072}) {
            const std::string e = attention(32, hkv, sq, sk, 128, "false", "bf16", false, b);
            SCOPED_TRACE(e + " " + ring);
            CompileState s;
            s.graph = parse_expression(e);
            s.knobs = Knobs::parse(ring);
            s.target = t;
            for (const auto& p : pipeline()) p.run(s);
            const int64_t splits = std::stoll(s.used_knobs.at("SPLIT_KV"));
            if (splits == 1) continue;
            const int64_t bm = std::stoll(s.used_knobs.at("BLOCK_M")),
                          bn = std::stoll(s.used_knobs.at("BLOCK_N"));
            const int64_t stages = std::stoll(s.used_knobs.at("KV_STAGES"));
            const bool packed = s.used_knobs.count("GQA_PACK") && s.used_knobs.at("GQA_PACK") == "1";
            const int64_t rows = int64_t(sq) * (packed ? 32 / hkv : 1);
            const int64_t row_sets = int64_t(b) * (packed ? hkv : 32) * ((rows + bm - 1) / bm);
            const int64_t sw = std::stoll(s.used_knobs.at("SPLIT_WARPS"));
            const int64_t per_sm =
                std::min<int64_t>(8, 233472 / ((bm + 2 * stages * bn * sw) * 128 * 2 + 1024));
            EXPECT_LE(row_sets * splits, t.sm_count * per_sm)
                << row_sets << " row sets x " << splits << " splits";
          }
}

// SPLIT_WARPS=2, 4: groups of the row warps share a CTA's rows, group k walking key blocks
// k, k + W, .. of the split with its own ring, the groups meeting in shared memory. Splits
// shorter than the groups (1 and 2 blocks: groups with no block at all), longer ones,
// no split, odd Sk, Sq 1, 4, 7 and 40 (causal rows whose keys end before a group's first
// key while other rows of the block keep it: the meet skips that group for them), Sq > Sk
// (rows with no key), the three masks, GQA
// packed (two row warps: BLOCK_M = 32), MQA, the rings 1-3 and LSE.
TEST(AttentionDecode, SplitWarps) {
  uint64_t seed = 200;
  for (const char* warps : {"2", "4"}) {
    const std::string sw = std::string("SPLIT_WARPS=") + warps + ",BLOCK_N=16";
    for (const char* causal : kMasks) {
      // 7 blocks: 3 splits of 3, 3, 1; 7 splits of 1; unsplit.
      check_decode(attention(4, 2, 1, 100, 16, causal), sw + ",SPLIT_KV=3,GQA_PACK=0", seed++);
      check_decode(attention(4, 2, 7, 100, 16, causal), sw + ",SPLIT_KV=7,GQA_PACK=0", seed++);
      check_decode(attention(4, 2, 4, 37, 16, causal, "bf16", false), sw + ",SPLIT_KV=1",
                   seed++);
      check_decode(attention(32, 8, 4, 270, 16, causal, "f16"), sw + ",GQA_PACK=1,SPLIT_KV=3",
                   seed++);
      check_decode(attention(4, 1, 7, 37, 32, causal), sw + ",GQA_PACK=1,SPLIT_KV=2", seed++);
      check_decode(attention(4, 2, 7, 5, 16, causal), sw + ",SPLIT_KV=2,GQA_PACK=0", seed++);
      // 40 rows in one block: causal rows 0..15 keep no key of group 1's first block
      // (keys 16..31), the later rows do; bottom-right with Sq > Sk empties rows 0..9.
      check_decode(attention(4, 2, 40, 100, 16, causal), sw + ",SPLIT_KV=1,GQA_PACK=0", seed++);
      check_decode(attention(4, 2, 40, 100, 16, causal), sw + ",SPLIT_KV=2,GQA_PACK=0", seed++);
      check_decode(attention(4, 2, 40, 30, 16, causal), sw + ",SPLIT_KV=1,GQA_PACK=0", seed++);
      for (const char* ring : {"1", "2", "3"})
        check_decode(attention(4, 2, 4, 300, 16, causal),
                     sw + ",SPLIT_KV=2,GQA_PACK=0,KV_STAGES=" + ring, seed++);
    }
    // Two row warps per group (BLOCK_M = 32), SOFTMAX=exp, sm_80.
    check_decode(attention(32, 8, 7, 90, 16, "true"), sw + ",GQA_PACK=1,SPLIT_KV=2,BLOCK_M=32",
                 seed++);
    check_decode(attention(4, 2, 4, 100, 16, "true"),
                 sw + ",SPLIT_KV=2,GQA_PACK=0,SOFTMAX=exp", seed++);
    check_decode(attention(8, 2, 1, 300, 32, "false"), sw, seed++, "sm_80");
  }
  // The CTA's threads: W groups of the row warps.
  const CompileState s = check_decode(attention(32, 8, 1, 300, 16, "false"),
                                      "SPLIT_WARPS=4,BLOCK_N=16,SPLIT_KV=2", seed++);
  EXPECT_EQ(s.kernel.kernels[0].block_threads, 128);
  EXPECT_EQ(used(s, "SPLIT_WARPS"), "4");
}

// KV_COPY=tma: K and V blocks by TMA boxes (64 columns x BLOCK_N rows, the 128-byte
// swizzle, D = 128 as two chunked boxes) into rings of 2-4 slots, one mbarrier per slot
// and tensor, issued by one thread per warp group. The interpreter checks that no warp
// reads a slot before its phase completed and that the expect_tx bytes match the boxes.
// Odd Sk (the last box past Sk: the map's zero fill), splits shorter than the ring, no
// split, Sq 1, 4 and 7, Sq > Sk, the masks, GQA packed and MQA, SPLIT_WARPS 2 and 4 (each
// group its own ring and barriers), the last-CTA combine and the combine kernel, LSE.
TEST(AttentionDecode, KvCopyTma) {
  uint64_t seed = 700;
  for (const char* causal : kMasks) {
    check_decode(attention(4, 2, 1, 100, 64, causal),
                 "KV_COPY=tma,BLOCK_N=16,SPLIT_KV=3,GQA_PACK=0", seed++);
    check_decode(attention(8, 2, 4, 301, 64, causal),
                 "KV_COPY=tma,BLOCK_N=32,KV_STAGES=4,SPLIT_KV=2,GQA_PACK=1", seed++);
    check_decode(attention(4, 1, 7, 5, 64, causal, "f16"),
                 "KV_COPY=tma,BLOCK_N=16,SPLIT_KV=2,GQA_PACK=0", seed++);
    for (const char* warps : {"2", "4"})
      check_decode(attention(8, 2, 1, 333, 64, causal, "bf16", true),
                   std::string("KV_COPY=tma,BLOCK_N=16,KV_STAGES=3,GQA_PACK=1,SPLIT_KV=3,"
                               "COMBINE=last_cta,SPLIT_WARPS=") + warps,
                   seed++);
  }
  // Rings past cp.async's 4 (KV_STAGES 6 and 8): a ring deeper than a group's blocks, and
  // 63 blocks through a ring of 8 (every slot's phase flips many times).
  check_decode(attention(8, 2, 1, 300, 64, "true"),
               "KV_COPY=tma,BLOCK_N=16,KV_STAGES=6,SPLIT_WARPS=2,SPLIT_KV=2,GQA_PACK=1", seed++);
  check_decode(attention(4, 1, 4, 1000, 64, "top_left"),
               "KV_COPY=tma,BLOCK_N=16,KV_STAGES=8,SPLIT_WARPS=1,SPLIT_KV=1,GQA_PACK=1", seed++);
  // Unsplit, a ring deeper than the blocks; D = 128 (two boxes per block, chunked rows).
  check_decode(attention(4, 4, 1, 40, 64, "false", "bf16", false),
               "KV_COPY=tma,BLOCK_N=16,KV_STAGES=4,SPLIT_KV=1", seed++);
  const CompileState s = check_decode(attention(4, 1, 1, 200, 128, "false"),
                                      "KV_COPY=tma,BLOCK_N=32,SPLIT_KV=2,SPLIT_WARPS=2", seed++);
  const KernelOp& k = s.kernel.kernels[0];
  EXPECT_EQ(used(s, "KV_COPY"), "tma");
  ASSERT_EQ(k.tma.size(), 2u);
  EXPECT_EQ(k.tma[0].box, (std::vector<int64_t>{64, 32, 1, 1}));
  EXPECT_EQ(k.mbarriers, 2 * 3 * 2);  // K and V, rings of 3 (decode's default), two groups
}

// KV_COPY's refusals name the problem and the fix.
TEST(AttentionDecode, KvCopyTmaErrors) {
  auto expect_error = [](const std::string& e, const std::string& knobs, const std::string& part,
                         const std::string& arch = "sm_90a") {
    CompileState s;
    s.graph = parse_expression(e);
    s.target = Target::for_arch(arch);
    try {
      s.knobs = Knobs::parse(knobs);
      for (const auto& p : pipeline()) p.run(s);
      ADD_FAILURE() << knobs << ": no error";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(part), std::string::npos) << err.what();
    }
  };
  const std::string e = attention(8, 2, 1, 300, 64, "false");
  expect_error(e, "KV_COPY=tma", "use KV_COPY=cp_async", "sm_80");
  expect_error(e, "KV_COPY=tma,KV_STAGES=1", "use KV_STAGES=2 or more");
  expect_error(attention(8, 2, 1, 300, 96, "false"), "KV_COPY=tma,SWIZZLE=none",
               "not a multiple of 64");
  expect_error(e, "KV_COPY=bulk", "not one of: cp_async, tma");
  expect_error(e, "KV_STAGES=6", "or KV_COPY=tma for 5 to 8");
  expect_error(e, "KV_COPY=tma,KV_STAGES=6,SPLIT_WARPS=8,BLOCK_N=64",
               "use fewer SPLIT_WARPS, KV_STAGES or BLOCK_N");
  expect_error(attention_test::paged_attention(1, 8, 2, 1, 64, 8, 16, 4, "false"),
               "KV_COPY=tma", "paged K/V");
}

// Runs the kernel program twice on the same tensors (the second launch finds the
// counters the first left) and checks both against the loop form; the counters are all
// zero after each.
void expect_two_launches(const CompileState& s, uint64_t seed) {
  Bindings inputs;
  make_random_inputs(s.loop, inputs, seed);
  Bindings reference = inputs;
  interpret(s.loop, reference);
  Bindings got = inputs;
  const DType out = s.graph.node(s.graph.result()).dtype;
  for (int launch = 0; launch < 2; ++launch) {
    interpret(s.kernel, got);
    passcheck::expect_outputs_close(s.kernel, got, reference, out,
                                    "launch " + std::to_string(launch));
    for (const TensorDecl& t : s.kernel.tensors) {
      if (t.name.rfind("attn_split_count", 0) != 0) continue;
      for (double c : got.tensors.at(t.name).data) EXPECT_EQ(c, 0.0) << t.name;
    }
  }
}

// COMBINE=last_cta: one kernel; the CTA that arrives last on its row set's counter
// combines the S partials. The interpreter runs the CTAs last to first, so a kernel that
// assumed which split finishes fails. Splits 2, 3, 11 and 63, causal rows whose keys end
// in the first splits, Sq > Sk (bottom-right rows with no key), GQA packed and MQA, with
// SPLIT_WARPS, with and without LSE; two launches on the same counters (each resets them).
TEST(AttentionDecode, CombineInLastCta) {
  uint64_t seed = 300;
  const std::string last = "COMBINE=last_cta,BLOCK_N=16";
  for (const char* causal : kMasks) {
    for (auto [sq, sk, splits] : {std::tuple{1, 350, 11}, std::tuple{7, 1000, 63},
                                  std::tuple{4, 37, 3}, std::tuple{20, 18, 2}}) {
      for (bool lse : {true, false}) {
        const CompileState s = check_decode(attention(4, 2, sq, sk, 16, causal, "bf16", lse),
                                            last + ",GQA_PACK=0,SPLIT_KV=" +
                                                std::to_string(splits), seed++);
        ASSERT_EQ(s.kernel.kernels.size(), 1u);
        EXPECT_EQ(used(s, "COMBINE"), "last_cta");
        expect_two_launches(s, seed++);
      }
    }
    check_decode(attention(32, 8, 4, 270, 16, causal, "f16"), last + ",GQA_PACK=1,SPLIT_KV=3",
                 seed++);
    check_decode(attention(4, 1, 7, 37, 32, causal), last + ",GQA_PACK=1,SPLIT_KV=2", seed++);
    for (const char* warps : {"2", "4"}) {
      const CompileState s = check_decode(attention(32, 8, 4, 300, 16, causal),
                                          last + ",GQA_PACK=1,SPLIT_KV=3,SPLIT_WARPS=" + warps,
                                          seed++);
      expect_two_launches(s, seed++);
    }
  }
  // The decode defaults' own tile, sm_80, and a run-time key length (splits past a short
  // length hold no key and still arrive).
  check_decode(attention(8, 2, 1, 300, 32, "false"), "COMBINE=last_cta", seed++, "sm_80");
  const std::string e = "attention(Q[1,8,1,64]:bf16, K[1,2,S,64]:bf16, V[1,2,S,64]:bf16, causal=";
  for (int64_t sk : {20, 300}) {
    const CompileState s = check_decode(e + "true, lse=true)", "COMBINE=last_cta", seed++,
                                        "sm_90a", {{"S", sk}});
    EXPECT_EQ(s.kernel.kernels.size(), 1u);
  }
  // No split: nothing to combine, COMBINE not recorded.
  const CompileState one = check_decode(attention(4, 2, 1, 100, 16, "false"),
                                        last + ",SPLIT_KV=1", seed++);
  EXPECT_EQ(used(one, "COMBINE"), "");
}

// The split default with SPLIT_WARPS picks S with W: one wave of CTAs of W rings each, and
// at least W blocks per split (a block per group). B = 1, Hkv = 8, D = 128, rings of 3 on
// an H100 (132 SMs): W = 4 is one 197 KB CTA per SM, so 8k keys take 16 splits of 16
// blocks; 1k keys (32 blocks) 8 splits of 4, not 16 of 2 with half the groups idle; W = 2
// (two CTAs per SM) 32 splits of 8 at 8k and 16 of 2 at 1k.
// COMBINE's default (H200, 2026-11-30): the last CTA only where it folds its row set in one
// pass — 128 threads, a thread per row and 4 columns — and, paged, under 8 splits. Sq = 4
// with GQA 4 is 16 rows x 32 items, four passes: the combine kernel; Sq = 1 one pass; paged
// B = 1, Hkv = 8 at 8k keys has 16 splits: the kernel; B = 8 two: the last CTA. A knob given
// by name still wins.
TEST(AttentionDecode, CombineDefaultByPassesAndPagedSplits) {
  auto run = [](const std::string& expr, const std::string& knobs = "") {
    CompileState s;
    s.graph = parse_expression(expr);
    s.knobs = Knobs::parse(knobs);
    s.target = Target::for_arch("sm_90a");
    for (const auto& p : pipeline()) p.run(s);
    return s;
  };
  const CompileState four = run(attention(32, 8, 4, 8192, 128, "false"));
  EXPECT_EQ(used(four, "SPLIT_WARPS"), "4");
  EXPECT_EQ(used(four, "COMBINE"), "kernel");
  EXPECT_EQ(four.kernel.kernels.size(), 2u);
  EXPECT_EQ(used(run(attention(32, 8, 1, 8192, 128, "false")), "COMBINE"), "last_cta");
  EXPECT_EQ(used(run(attention(32, 32, 4, 8192, 128, "false")), "COMBINE"), "last_cta")
      << "unpacked: 4 rows, one pass";
  EXPECT_EQ(used(run(attention(32, 8, 4, 8192, 128, "false"), "COMBINE=last_cta"), "COMBINE"),
            "last_cta");
  const CompileState paged = run(attention_test::paged_attention(1, 32, 8, 1, 128, 128, 64, 128,
                                                                 "false"));
  EXPECT_EQ(used(paged, "SPLIT_KV"), "16");
  EXPECT_EQ(used(paged, "COMBINE"), "kernel");
  const CompileState paged8 = run(attention_test::paged_attention(8, 32, 8, 1, 128, 1024, 64, 128,
                                                                  "false"));
  EXPECT_EQ(used(paged8, "SPLIT_KV"), "2");
  EXPECT_EQ(used(paged8, "COMBINE"), "last_cta");
}

TEST(AttentionDecode, SplitDefaultWithSplitWarps) {
  auto splits = [](int sk, const std::string& knobs) {
    CompileState s;
    s.graph = parse_expression(attention(32, 8, 1, sk, 128, "false"));
    s.knobs = Knobs::parse(knobs);
    s.target = Target::for_arch("sm_90a");
    for (const auto& p : pipeline()) p.run(s);
    return used(s, "SPLIT_KV");
  };
  ASSERT_EQ(Target::for_arch("sm_90a").sm_count, 132);
  EXPECT_EQ(splits(8192, "SPLIT_WARPS=4"), "16");
  EXPECT_EQ(splits(1024, "SPLIT_WARPS=4"), "8");
  EXPECT_EQ(splits(8192, "SPLIT_WARPS=2"), "32");
  EXPECT_EQ(splits(1024, "SPLIT_WARPS=2"), "16");
  EXPECT_EQ(splits(1024, ""), "32");
}

void expect_error(const std::string& expr, const std::string& knobs, const std::string& part) {
  CompileState s;
  s.graph = parse_expression(expr);
  s.knobs = Knobs::parse(knobs);
  s.target = Target::for_arch("sm_90a");
  try {
    for (const auto& p : pipeline()) p.run(s);
    ADD_FAILURE() << "accepted " << expr << " with " << knobs;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(AttentionDecode, KnobErrors) {
  const std::string e = attention(4, 2, 4, 100, 64, "false");
  expect_error(e, "ATTN_MMA=wgmma,SPLIT_KV=2", "use ATTN_MMA=mma_sync, or drop SPLIT_KV");
  expect_error(e, "ATTN_MMA=wgmma,GQA_PACK=1", "use ATTN_MMA=mma_sync, or drop GQA_PACK");
  expect_error(e, "SPLIT_KV=2,STAGE_OUTPUT=1,GQA_PACK=0", "SPLIT_KV writes f32 partials");
  expect_error(e, "SPLIT_KV=1,STAGE_OUTPUT=1,GQA_PACK=1", "use STAGE_OUTPUT=0, or GQA_PACK=0");
  // KV_STAGES=4 is the mma.sync kernel's ring; the wgmma kernel's takes 2 or 3.
  expect_error(e, "ATTN_MMA=wgmma,KV_STAGES=4", "ring of 2 or 3");
  expect_error(attention(4, 2, 4, 100, 128, "false"), "SPLIT_KV=2,COMBINE_GROUPS=16",
               "at most 1024 threads: use 1 to 8");
  // The registry refuses values outside the knobs' ranges as the list is parsed.
  for (auto [knobs, part] : {std::pair{"SPLIT_WARPS=3", "SPLIT_WARPS=3 must be a power of two"},
                             std::pair{"COMBINE=atomic", "not one of: kernel, last_cta"}}) {
    try {
      Knobs::parse(knobs);
      ADD_FAILURE() << knobs << " accepted";
    } catch (const std::exception& x) {
      EXPECT_NE(std::string(x.what()).find(part), std::string::npos) << x.what();
    }
  }
  expect_error(e, "SPLIT_WARPS=2,STAGE_OUTPUT=1,SPLIT_KV=1,GQA_PACK=0",
               "use STAGE_OUTPUT=0, or SPLIT_WARPS=1");
  expect_error(e, "ATTN_MMA=wgmma,SPLIT_WARPS=2", "or drop SPLIT_WARPS");
  expect_error(e, "SPLIT_WARPS=8,BLOCK_M=128,WARPS=8,GQA_PACK=0", "above 1024");
  expect_error(attention(32, 8, 1, 1000, 128, "false"), "SPLIT_WARPS=8,KV_STAGES=3",
               "use fewer SPLIT_WARPS, KV_STAGES or BLOCK_N");
}

}  // namespace
}  // namespace loom
