// Attention's search space (attention_space.h): the table's size per target, every knob
// it names known, a value out of range pruned with the reason, every kept candidate a full knob set
// that the pipeline builds (and a sample NVRTC-compiles for sm_90a), the shipped default
// kept and reachable by the search, and the passes' refusals pruned with their messages.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "h100.h"
#include "ir/error.h"
#include "tune/attention_space.h"
#include "tune/compile_pool.h"

namespace loom::tune {
namespace {

using testing::h100;

std::string attention(int64_t d, const std::string& causal = "false") {
  const std::string s = "[2,8,1024," + std::to_string(d) + "]:bf16";
  return "attention(Q" + s + ", K" + s + ", V" + s + ", causal=" + causal + ")";
}

DeviceInfo a100() {
  DeviceInfo d = h100();
  d.name = "NVIDIA A100-SXM4-80GB";
  d.cc_major = 8;
  d.cc_minor = 0;
  d.sm_count = 108;
  d.smem_per_block_optin = 166912;
  return d;
}

const AttentionFamily& family(const std::string& name) {
  for (const auto& f : attention_families())
    if (f.name == name) return f;
  throw Error("no family " + name);
}

// The table's points per target: mma.sync is BLOCK_M 2 x BLOCK_N 3 x WARPS 2 x Q_IN_REGS 2
// x KV_STAGES 2 x SOFTMAX 2 everywhere from sm_80; wgmma is 3 ATTN_WG x 8 BLOCK_N x 2
// KV_STAGES x ATTN_PRODUCER (0, and 1 with ATTN_OVERLAP 0 or 1) on sm_90a only.
TEST(AttentionSpace, TableSizePerTarget) {
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    auto points = attention_points(family("mma_sync"), Target::for_arch(arch));
    EXPECT_EQ(points.size(), 96u) << arch;
    for (const auto& p : points) {
      EXPECT_EQ(p.why_not, "") << arch << " " << p.knobs.str();
      EXPECT_EQ(p.family, "mma_sync");
      // Each is a knob set Knobs::parse accepts as written.
      EXPECT_EQ(Knobs::parse(p.knobs.str()).str(), p.knobs.str());
      EXPECT_EQ(p.knobs.get_str("ATTN_MMA", ""), "mma_sync");
      // The wgmma kernel's knobs: k:012 refuses them, so a point setting one is no point.
      for (const char* k : {"ATTN_WG", "ATTN_PRODUCER", "ATTN_OVERLAP", "ATTN_PINGPONG", "ATTN_PACK_P"})
        EXPECT_FALSE(p.knobs.has(k)) << arch << " " << p.knobs.str();
    }
  }
  EXPECT_TRUE(attention_points(family("wgmma"), Target::for_arch("sm_80")).empty());
  EXPECT_TRUE(attention_points(family("wgmma"), Target::for_arch("sm_90")).empty())
      << "wgmma and setmaxnreg exist on sm_90a only";
  auto wg = attention_points(family("wgmma"), Target::for_arch("sm_90a"));
  // ATTN_PRODUCER=0 leaves ATTN_OVERLAP, ATTN_PINGPONG and ATTN_PERSISTENT at 0;
  // ATTN_PRODUCER=1 takes every pair of the first two; ATTN_PACK_P takes both values where
  // ATTN_OVERLAP=0 and stays 1 with it; ATTN_PERSISTENT both ways with the producer, under
  // it ATTN_SCHEDULE static and dynamic; ATTN_LOAD_WARPS 1 and 4 without the walk and
  // under its static schedule: 60 x (2 + (2 x 2 + 2) x (2 + 2 + 1)).
  EXPECT_EQ(wg.size(), 1920u);
  std::set<std::string> distinct;
  for (const auto& p : wg) {
    distinct.insert(p.asked);
    EXPECT_EQ(p.why_not, "") << p.knobs.str();
    EXPECT_EQ(p.knobs.str(), Knobs::parse(p.asked).str()) << "every knob asked is set";
  }
  EXPECT_EQ(distinct.size(), wg.size()) << "no point enumerated twice";
  EXPECT_TRUE(distinct.count("ATTN_MMA=wgmma,ATTN_WG=3,BLOCK_N=176,KV_STAGES=3,ATTN_PRODUCER=0,"
                             "ATTN_OVERLAP=0,ATTN_PINGPONG=0,ATTN_PACK_P=0,ATTN_PERSISTENT=0,"
                             "ATTN_SCHEDULE=static,ATTN_LOAD_WARPS=1"));
  EXPECT_TRUE(distinct.count("ATTN_MMA=wgmma,ATTN_WG=2,BLOCK_N=112,KV_STAGES=2,ATTN_PRODUCER=1,"
                             "ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_PACK_P=1,ATTN_PERSISTENT=1,"
                             "ATTN_SCHEDULE=dynamic,ATTN_LOAD_WARPS=1"));
  EXPECT_TRUE(distinct.count("ATTN_MMA=wgmma,ATTN_WG=2,BLOCK_N=128,KV_STAGES=2,ATTN_PRODUCER=1,"
                             "ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_PACK_P=1,ATTN_PERSISTENT=0,"
                             "ATTN_SCHEDULE=static,ATTN_LOAD_WARPS=4"));
  EXPECT_TRUE(distinct.count("ATTN_MMA=wgmma,ATTN_WG=2,BLOCK_N=128,KV_STAGES=2,ATTN_PRODUCER=1,"
                             "ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_PACK_P=1,ATTN_PERSISTENT=1,"
                             "ATTN_SCHEDULE=static,ATTN_LOAD_WARPS=4"));
  EXPECT_FALSE(distinct.count("ATTN_MMA=wgmma,ATTN_WG=2,BLOCK_N=128,KV_STAGES=2,ATTN_PRODUCER=1,"
                              "ATTN_OVERLAP=1,ATTN_PINGPONG=1,ATTN_PACK_P=1,ATTN_PERSISTENT=1,"
                              "ATTN_SCHEDULE=dynamic,ATTN_LOAD_WARPS=4"))
      << "the dynamic schedule's fetch refuses the spread issue";
}

// Every knob the table names is one the registry knows, with each value in its range.
TEST(AttentionSpace, EveryTableKnobExists) {
  for (const auto& f : attention_families())
    for (const auto& d : f.dims) {
      ASSERT_TRUE(find_knob(d.knob)) << f.name << ": " << d.knob;
      for (const auto& v : d.values) EXPECT_NO_THROW(Knobs().set(d.knob, v)) << d.knob << "=" << v;
    }
  for (const auto& d : attention_default_variants()) {
    ASSERT_TRUE(find_knob(d.knob)) << d.knob;
    for (const auto& v : d.values) EXPECT_NO_THROW(Knobs().set(d.knob, v)) << d.knob << "=" << v;
  }
}

// A value out of a knob's range (a table edited past the registry) prunes the point with
// the registry's message; the other points are unaffected.
TEST(AttentionSpace, OutOfRangeValuesPruneWithTheReason) {
  AttentionFamily f{"test", 80, false, {{"BLOCK_M", {"64", "999"}}, {"SOFTMAX", {"exp", "exp3"}}}, {}};
  auto points = attention_points(f, Target::for_arch("sm_80"));
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].why_not, "");
  EXPECT_EQ(points[0].knobs.str(), "BLOCK_M=64,SOFTMAX=exp");
  EXPECT_NE(points[1].why_not.find("SOFTMAX=exp3 is not one of"), std::string::npos)
      << points[1].why_not;
  EXPECT_NE(points[2].why_not.find("BLOCK_M=999 is outside its range"), std::string::npos)
      << points[2].why_not;
  EXPECT_NE(points[3].why_not, "");
}

// The space end to end for D = 64 and 128 on sm_90a (H100) and sm_80 (A100): every point
// is accounted for (kept, the same kernel as a kept one, or pruned with a reason), every
// kept candidate is a full knob set that builds to Kernel IR and reproduces itself, and
// the shipped default is kept and is a point of the search.
void expect_sound_space(const std::string& expr, const DeviceInfo& dev, const char* arch) {
  SCOPED_TRACE(expr + " on " + arch);
  Graph g = parse_expression(expr);
  SpaceOptions opt;
  opt.max_candidates = 16;
  opt.threads = 2;
  const Target target = target_for(Target::for_arch(arch), dev);
  Space s = generate_attention_space(g, dev, Target::for_arch(arch), opt);
  ASSERT_FALSE(s.kept.empty());
  EXPECT_LE(s.kept.size(), 16u + 2u);
  EXPECT_GE(s.kept.size(), 8u) << "the mma.sync family alone has more than 8 legal points";
  const size_t variants = attention_default_variants().size();
  const size_t table = [&] {
    size_t n = 0;
    for (const auto& f : attention_families()) n += attention_points(f, target).size();
    return n;
  }();
  // The table, the defaults' values that join it (a dimension's value more), variants.
  EXPECT_GE(s.enumerated, table);
  EXPECT_LE(s.enumerated, 2 * table + 2 * variants);
  EXPECT_LE(s.searched, s.enumerated);
  EXPECT_GE(s.searched + s.pruned.size(), s.enumerated) << "each point kept or pruned";
  for (const auto& p : s.pruned) {
    EXPECT_FALSE(p.reason.empty()) << p.knobs.str();
    // Neither family's points nor the defaults' variants carry the other kernel's knobs.
    EXPECT_EQ(p.reason.find("is a knob of attention's"), std::string::npos) << p.reason;
  }
  // The passes refuse some of the table here (WARPS=8 with BLOCK_M=64: 8-row warps).
  bool warps_refused = false;
  for (const auto& p : s.pruned)
    warps_refused |= p.reason.find("multiple of 16*WARPS") != std::string::npos;
  EXPECT_TRUE(warps_refused);

  int plain = 0;
  std::set<std::string> seen;
  for (const auto& c : s.kept) {
    EXPECT_TRUE(seen.insert(c.knobs.str()).second) << "kept twice: " << c.knobs.str();
    EXPECT_GT(c.predicted_us, 0);
    if (c.shipped_default) {
      EXPECT_TRUE(c.in_search) << "each default is a point of the table: " << c.knobs.str();
    }
    if (c.plain_default) {
      ++plain;
      EXPECT_TRUE(c.shipped_default);
      EXPECT_TRUE(c.in_search) << "the default is a point of the table: " << c.knobs.str();
    }
    const std::string fam = attention_family_of(c.knobs);
    EXPECT_TRUE(std::count(s.atoms.begin(), s.atoms.end(), fam)) << fam;
    if (std::string(arch) != "sm_90a") {
      EXPECT_EQ(fam, "mma_sync");
    }
    if (fam == "mma_sync") {
      for (const char* k : {"ATTN_WG", "ATTN_PRODUCER", "ATTN_OVERLAP", "ATTN_PINGPONG", "ATTN_PACK_P"})
        EXPECT_FALSE(c.knobs.has(k)) << c.knobs.str();
    }
  }
  EXPECT_EQ(plain, 1);

  // A sample rebuilt with exactly its knobs uses exactly them (a full set reproduces).
  for (size_t i : {size_t(0), s.kept.size() / 2, s.kept.size() - 1}) {
    CompileOptions copt;
    copt.knobs = s.kept[i].knobs;
    copt.target = target;
    CompiledProgram prog = compile_graph(g, copt);
    for (const auto& [name, value] : s.kept[i].knobs.values()) {
      auto it = prog.state.used_knobs.find(name);
      ASSERT_NE(it, prog.state.used_knobs.end()) << name;
      EXPECT_EQ(it->second, value) << name;
    }
    EXPECT_FALSE(prog.cuda.empty());
  }
}

TEST(AttentionSpace, D64OnH100) { expect_sound_space(attention(64), h100(), "sm_90a"); }
TEST(AttentionSpace, D128CausalOnH100) {
  expect_sound_space(attention(128, "true"), h100(), "sm_90a");
}
TEST(AttentionSpace, D256OnH100) { expect_sound_space(attention(256), h100(), "sm_90a"); }
// Head dims between the multiples of 64 run the wgmma kernel (column spans of 64, 32 and
// 16): D = 96 is searched like the others; D = 40 (8 mod 16) has no mma.sync kernel, so
// its wgmma points are the whole search and every mma.sync point is pruned naming the
// head dim, and the default it ranks is the wgmma kernel's.
TEST(AttentionSpace, D96CausalOnH100) {
  expect_sound_space(attention(96, "true"), h100(), "sm_90a");
}
TEST(AttentionSpace, D40OnH100WgmmaOnly) {
  Graph g = parse_expression(attention(40));
  SpaceOptions opt;
  opt.max_candidates = 8;
  opt.threads = 2;
  Space s = generate_attention_space(g, h100(), Target::for_arch("sm_90a"), opt);
  ASSERT_GE(s.kept.size(), 4u);
  int plain = 0;
  for (const auto& c : s.kept) {
    EXPECT_EQ(attention_family_of(c.knobs), "wgmma") << c.knobs.str();
    plain += c.plain_default;
  }
  EXPECT_EQ(plain, 1);
  size_t mma_sync_pruned = 0;
  for (const auto& p : s.pruned)
    if (attention_family_of(p.knobs) == "mma_sync") {
      ++mma_sync_pruned;
      EXPECT_NE(p.reason.find("D = 40"), std::string::npos) << p.reason;
    }
  EXPECT_GE(mma_sync_pruned, 96u);
}
TEST(AttentionSpace, D64OnA100) { expect_sound_space(attention(64), a100(), "sm_80"); }
TEST(AttentionSpace, D128OnA100) { expect_sound_space(attention(128), a100(), "sm_80"); }

// A sample of the kept candidates NVRTC-compiles for sm_90a (the tuner compiles them all
// before measuring; a spill there is pruned by ptxas' report, not an error).
TEST(AttentionSpace, KeptCandidatesCompileForSm90a) {
  Graph g = parse_expression(attention(128));
  SpaceOptions opt;
  opt.max_candidates = 4;
  opt.threads = 2;
  Space s = generate_attention_space(g, h100(), Target::for_arch("sm_90a"), opt);
  ASSERT_GE(s.kept.size(), 2u);
  std::vector<Candidate> sample = {s.kept.front(), s.kept.back()};
  auto compiled =
      compile_candidates(g, target_for(Target::for_arch("sm_90a"), h100()), sample, 2, nullptr);
  for (const auto& c : compiled) {
    EXPECT_TRUE(c.ok()) << c.knobs.str() << ": " << c.error;
    EXPECT_FALSE(c.nvrtc.cubin.empty()) << c.knobs.str();
    ASSERT_EQ(c.kernels.size(), 1u);
    EXPECT_GT(c.kernels[0].report.registers, 0);
  }
}

// The families can be chosen (--atoms): only mma.sync, or a family this target lacks.
TEST(AttentionSpace, FamiliesCanBeChosen) {
  Graph g = parse_expression(attention(64));
  SpaceOptions opt;
  opt.max_candidates = 4;
  opt.threads = 2;
  opt.build_kernels = false;
  opt.atoms = {"mma_sync"};
  Space s = generate_attention_space(g, h100(), Target::for_arch("sm_90a"), opt);
  EXPECT_EQ(s.atoms, std::vector<std::string>{"mma_sync"});
  for (const auto& c : s.kept)
    if (!c.shipped_default) {
      EXPECT_EQ(attention_family_of(c.knobs), "mma_sync");
    }
  // Without a build the candidates are the points as enumerated; the ranking is ordered.
  for (size_t i = 1; i < s.kept.size(); ++i)
    EXPECT_LE(s.kept[i - 1].predicted_us, s.kept[i].predicted_us);
  opt.atoms = {"wgmma_bf16"};
  try {
    generate_attention_space(g, h100(), Target::for_arch("sm_90a"), opt);
    ADD_FAILURE() << "a GEMM atom is not an attention family";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--atoms wgmma,mma_sync"), std::string::npos) << e.what();
  }
  EXPECT_THROW(generate_attention_space(parse_expression("matmul(A[64,64]:f32, B[64,64]:f32)"),
                                        h100(), Target::for_arch("sm_90a"), opt),
               Error);
}

// The serving forms (docs/attention.md): paged KV prefill and varlen are searched on both
// kernels like the dense op (their wgmma default a point of the table, every kept point a
// full knob set that builds), and the model reads their grids: varlen's rows are
// max_seqlen_q per sequence (not Q's D), paged K/V bytes the table's pages (not the pool).
TEST(AttentionSpace, ServingFormsOnH100) {
  const std::string paged = "attention(Q[2,8,1024,128]:bf16, Kc[64,2,64,128]:bf16, "
                            "Vc[64,2,64,128]:bf16, block_table=BT[2,16]:i32, seqlens_k=L[2]:i32, "
                            "causal=true)";
  const std::string varlen = "attention(Q[3000,8,64]:bf16, K[3000,2,64]:bf16, V[3000,2,64]:bf16, "
                             "cu_seqlens_q=CQ[4]:i32, cu_seqlens_k=CK[4]:i32, max_seqlen_q=1500)";
  for (const std::string& e : {paged, varlen}) {
    expect_sound_space(e, h100(), "sm_90a");
    Graph g = parse_expression(e);
    SpaceOptions opt;
    opt.max_candidates = 16;
    opt.threads = 2;
    Space s = generate_attention_space(g, h100(), Target::for_arch("sm_90a"), opt);
    std::set<std::string> families;
    for (const auto& c : s.kept) {
      families.insert(attention_family_of(c.knobs));
      if (c.plain_default) {
        EXPECT_EQ(attention_family_of(c.knobs), "wgmma") << e;
      }
    }
    EXPECT_EQ(families.size(), 2u) << e;
  }
  // Varlen: 3 sequences x 8 heads x ceil(1500 / 128) query blocks = 288 CTAs (0.73 of
  // three waves on 132 SMs busy); with max_seqlen_q = 128 the same work in 24 CTAs (0.18
  // of one wave) takes longer. Q's [T, H, D] read as [B, H, S, D] made 3000 x 8 CTAs of
  // D = 64 rows in both, and the two the same.
  const DeviceInfo dev = h100();
  const Knobs wg = Knobs::parse("ATTN_MMA=wgmma,ATTN_WG=2,BLOCK_N=128");
  const double full = predict_attention_us(parse_expression(varlen), wg, dev);
  const std::string one = "attention(Q[3000,8,64]:bf16, K[3000,2,64]:bf16, V[3000,2,64]:bf16, "
                          "cu_seqlens_q=CQ[4]:i32, cu_seqlens_k=CK[4]:i32, max_seqlen_q=128)";
  EXPECT_LT(2 * full, predict_attention_us(parse_expression(one), wg, dev));
  EXPECT_TRUE(std::isfinite(full));
}

// The ranking's model: the grid's last wave counts, and a longer key block costs fewer
// rescales.
TEST(AttentionSpace, PredictionSeesWavesAndKeyBlocks) {
  const DeviceInfo dev = h100();
  Graph g = parse_expression(attention(128));
  const double bn64 = predict_attention_us(g, Knobs::parse("BLOCK_M=64,BLOCK_N=64,WARPS=4"), dev);
  const double bn32 = predict_attention_us(g, Knobs::parse("BLOCK_M=64,BLOCK_N=32,WARPS=4"), dev);
  EXPECT_LT(bn64, bn32);
  // 4 heads of 2112 rows: 132 CTAs of 64 rows fill the 132 SMs once; 68 CTAs of 128 rows
  // leave half of them idle for twice as long.
  const std::string s = "[1,4,2112,128]:bf16";
  Graph w = parse_expression("attention(Q" + s + ", K" + s + ", V" + s + ")");
  EXPECT_LT(predict_attention_us(w, Knobs::parse("BLOCK_M=64,BLOCK_N=64,WARPS=4"), dev),
            predict_attention_us(w, Knobs::parse("BLOCK_M=128,BLOCK_N=64,WARPS=8"), dev));
  // The wgmma walk (ATTN_PERSISTENT=1) hides most of a CTA's fixed cost: ahead of one CTA
  // per query block where a unit has few key blocks (1k tokens), about even at 16k.
  const std::string k1 = "[16,16,1024,128]:bf16", k16 = "[1,16,16384,128]:bf16";
  const std::string wg = "ATTN_MMA=wgmma,ATTN_WG=3,BLOCK_N=112,ATTN_PRODUCER=1";
  for (const std::string& sh : {k1, k16}) {
    Graph x = parse_expression("attention(Q" + sh + ", K" + sh + ", V" + sh + ")");
    const double plain = predict_attention_us(x, Knobs::parse(wg), dev);
    const double walk = predict_attention_us(x, Knobs::parse(wg + ",ATTN_PERSISTENT=1"), dev);
    EXPECT_LT(walk, plain) << sh;
    if (sh == k1) EXPECT_LT(walk, 0.8 * plain);
    else EXPECT_GT(walk, 0.95 * plain);
    // Causal: the static stride measured slower, not ranked ahead; the dynamic schedule
    // (the default under the walk there) ahead, by more at 1k than at 16k.
    Graph c = parse_expression("attention(Q" + sh + ", K" + sh + ", V" + sh + ", causal=true)");
    const double c_plain = predict_attention_us(c, Knobs::parse(wg), dev);
    EXPECT_GE(predict_attention_us(c, Knobs::parse(wg + ",ATTN_PERSISTENT=1,ATTN_SCHEDULE=static"), dev),
              c_plain) << sh;
    const double c_dyn = predict_attention_us(c, Knobs::parse(wg + ",ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic"), dev);
    EXPECT_EQ(c_dyn, predict_attention_us(c, Knobs::parse(wg + ",ATTN_PERSISTENT=1"), dev)) << sh;
    EXPECT_LT(c_dyn, (sh == k1 ? 0.8 : 1.0) * c_plain) << sh;
  }
}

// Decode (Sq <= 64): the space adds the split count around the default's (half, double,
// none), the K/V ring's depth, SPLIT_WARPS and COMBINE, the K/V copy and packing flipped, all of the
// mma.sync family; the model ranks the split,
// packed default ahead of one CTA per row set (8 CTAs on 132 SMs) and of unpacked rows
// (K and V read 4 times).
TEST(AttentionSpace, DecodeSplitAndPackVariants) {
  const DeviceInfo dev = h100();
  Graph g = parse_expression(
      "attention(Q[1,32,1,128]:bf16, K[1,8,8192,128]:bf16, V[1,8,8192,128]:bf16)");
  SpaceOptions opt;
  opt.max_candidates = 1000;  // every built point kept: the variants are looked for
  opt.threads = 2;
  Space s = generate_attention_space(g, dev, Target::for_arch("sm_90a"), opt);
  const Candidate* plain = nullptr;
  for (const auto& c : s.kept)
    if (c.plain_default) plain = &c;
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->knobs.get_str("ATTN_MMA", ""), "mma_sync");
  EXPECT_EQ(plain->knobs.get_str("GQA_PACK", ""), "1");
  const int64_t split = plain->knobs.get_int("SPLIT_KV", 1);
  EXPECT_GT(split, 1);
  std::set<std::string> splits, packs;
  for (const auto& c : s.kept) {
    splits.insert(c.knobs.get_str("SPLIT_KV", ""));
    packs.insert(c.knobs.get_str("GQA_PACK", ""));
  }
  for (int64_t v : {split, split / 2, split * 2, int64_t(1)})
    EXPECT_TRUE(splits.count(std::to_string(v))) << "SPLIT_KV=" << v;
  EXPECT_TRUE(packs.count("0"));
  // The K/V ring's depths (KV_STAGES 2 to 4), each with the default's split and with the
  // split the rule gives that depth (fewer: a deeper ring leaves fewer CTAs per SM).
  const std::string ring = plain->knobs.get_str("KV_STAGES", "");
  std::map<std::string, std::set<int64_t>> ring_splits;
  for (const auto& c : s.kept)
    ring_splits[c.knobs.get_str("KV_STAGES", "")].insert(c.knobs.get_int("SPLIT_KV", 1));
  // The default's four warp groups (SPLIT_WARPS=4) leave no room for four rings of 4
  // (267 KB): ring 4 keeps only its rule's point (two groups).
  for (const char* v : {"2", "3", "4"}) {
    if (v == ring) continue;
    if (std::string(v) != "4") {
      EXPECT_TRUE(ring_splits[v].count(split)) << "KV_STAGES=" << v << " SPLIT_KV=" << split;
    }
    EXPECT_GE(ring_splits[v].size(), std::string(v) == "4" ? 1u : 2u)
        << "KV_STAGES=" << v << ": only the default's split";
  }
  // SPLIT_WARPS 2 and 4 with their rule's split (a CTA of W rings: fewer per SM), each
  // with both combines, and the other combine with the default's split.
  std::set<std::string> warps_combine;
  bool other_combine = false;
  for (const auto& c : s.kept) {
    warps_combine.insert(c.knobs.get_str("SPLIT_WARPS", "1") + "/" +
                         c.knobs.get_str("COMBINE", "kernel"));
    other_combine |= c.knobs.get_str("COMBINE", "") == "last_cta" &&
                     c.knobs.get_int("SPLIT_KV", 1) == split;
  }
  for (const char* v : {"2/kernel", "2/last_cta", "4/kernel", "4/last_cta", "1/last_cta"})
    EXPECT_TRUE(warps_combine.count(v)) << "SPLIT_WARPS/COMBINE " << v;
  EXPECT_TRUE(other_combine);
  // The K/V copy by TMA boxes (KV_COPY=tma) with the default's split.
  bool tma_copy = false;
  for (const auto& c : s.kept)
    tma_copy |= c.knobs.get_str("KV_COPY", "") == "tma" && c.knobs.get_int("SPLIT_KV", 1) == split;
  EXPECT_TRUE(tma_copy);
  Knobs no_split = plain->knobs, no_pack = plain->knobs;
  no_split.set("SPLIT_KV", "1");
  no_pack.set("GQA_PACK", "0");
  EXPECT_LT(plain->predicted_us, predict_attention_us(g, no_split, dev));
  EXPECT_LT(plain->predicted_us, predict_attention_us(g, no_pack, dev));
}

}  // namespace
}  // namespace loom::tune
