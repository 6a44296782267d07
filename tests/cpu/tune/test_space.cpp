// The search space: nonempty, holds the shipped defaults as reproducible full knob sets,
// every kept candidate builds, and every knob the registry declares searched is explored
// without the tuner naming it.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "driver/compile.h"
#include "frontend/parser.h"
#include "h100.h"
#include "ir/error.h"
#include "tune/problem.h"
#include "tune/prune.h"
#include "tune/space.h"

namespace loom::tune {
namespace {

using testing::gemm;
using testing::h100;

CompiledProgram build(const Graph& g, const Knobs& k) {
  CompileOptions opt;
  opt.knobs = k;
  opt.target = target_for(Target::for_arch("sm_90a"), h100());
  return compile_graph(g, opt);
}

void expect_sound_space(const Graph& g, const std::vector<std::string>& default_requests) {
  SpaceOptions opt;
  opt.max_candidates = 24;
  Space s = generate_space(g, h100(), Target::for_arch("sm_90a"), opt);
  ASSERT_FALSE(s.kept.empty());
  EXPECT_LE(s.kept.size(), 24 + default_requests.size());
  EXPECT_FALSE(s.pruned.empty());
  for (size_t i = 1; i < s.kept.size(); ++i)
    EXPECT_LE(s.kept[i - 1].predicted_us, s.kept[i].predicted_us) << "ranked best first";

  // The shipped defaults are kept, as full sets that compile to the very kernel `loom
  // run` compiles without them.
  for (const auto& req : default_requests) {
    CompiledProgram def = build(g, Knobs::parse(req));
    bool found = false;
    for (const auto& c : s.kept) {
      if (!c.shipped_default) continue;
      CompiledProgram again = build(g, c.knobs);
      if (again.cuda == def.cuda) found = true;
    }
    EXPECT_TRUE(found) << "shipped default for '" << req << "' missing from the space";
  }
  // Every kept candidate builds through the pipeline, and its knob set is full: feeding
  // it back records the same values.
  std::set<std::string> distinct;
  for (const auto& c : s.kept) {
    SCOPED_TRACE(c.knobs.str());
    EXPECT_TRUE(distinct.insert(c.knobs.str()).second) << "duplicate candidate";
    try {
      CompiledProgram p = build(g, c.knobs);
      EXPECT_FALSE(p.cuda.empty());
      for (const auto& [name, value] : p.state.used_knobs) {
        if (!find_knob(name)) continue;
        EXPECT_EQ(c.knobs.get_str(name, "<unset>"), value) << name;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(Space, F32At4096) {
  Graph g = gemm(4096, 4096, 4096, "f32");
  // Three shipped defaults: SIMT, mma.sync tf32, and wgmma tf32 (B [K, N]: swapped, its
  // transpose in registers, on the TMA schedule).
  expect_sound_space(g, {"", "ATOM=mma_tf32", "ATOM=wgmma_tf32"});
}

TEST(Space, Bf16At4096RanksWgmmaFirst) {
  Graph g = gemm(4096, 4096, 4096, "bf16");
  expect_sound_space(g, {"", "ATOM=mma_bf16", "ATOM=wgmma_bf16"});
  SpaceOptions opt;
  opt.max_candidates = 8;
  Space s = generate_space(g, h100(), Target::for_arch("sm_90a"), opt);
  // On sm_90a wgmma is searched and modelled: its candidates lead the ranking, the
  // default among them, and the best is warp-specialized with two consumer warpgroups.
  ASSERT_GE(s.kept.size(), 2u);
  EXPECT_EQ(s.kept.front().knobs.get_str("ATOM", ""), "wgmma_bf16");
  EXPECT_GT(s.kept.front().predicted_us, 0.0);
  EXPECT_EQ(s.kept.front().knobs.get_str("WARP_SPECIALIZE", ""), "1");
  EXPECT_EQ(s.kept.front().knobs.get_str("WM", ""), "2");
  for (const auto& c : s.kept)
    if (c.plain_default) {
      EXPECT_EQ(c.knobs.get_str("ATOM", ""), "wgmma_bf16");
    }
}

TEST(Space, Sm90WithoutTheArchSuffixSearchesNoWgmma) {
  // Plain sm_90 has neither wgmma nor setmaxnreg: its space is SIMT and mma.sync.
  Graph g = gemm(4096, 4096, 4096, "bf16");
  SpaceOptions opt;
  opt.build_kernels = false;
  Space s = generate_space(g, h100(), Target::for_arch("sm_90"), opt);
  ASSERT_FALSE(s.kept.empty());
  for (const auto& c : s.kept)
    EXPECT_EQ(c.knobs.get_str("ATOM", "fma").rfind("wgmma_", 0), std::string::npos)
        << c.knobs.str();
}

TEST(Space, EverySearchedKnobIsExplored) {
  // No tuner code names these knobs: whatever the registry declares searched for an atom
  // must show up with every declared value among the candidates, kept or pruned.
  SpaceOptions opt;
  opt.max_candidates = 1 << 20;
  opt.build_kernels = false;
  for (const char* dtype : {"f32", "bf16"}) {
    Graph g = gemm(4096, 4096, 4096, dtype);
    Space s = generate_space(g, h100(), Target::for_arch("sm_90a"), opt);
    for (const auto& atom : atom_choices(tune_problem(g), 90)) {
      std::map<std::string, std::set<std::string>> seen;
      auto note = [&](const Knobs& k) {
        if (k.get_str("ATOM", "fma") != atom.knob) return;
        for (const auto& [n, v] : k.values()) seen[n].insert(v);
      };
      for (const auto& c : s.kept) note(c.knobs);
      for (const auto& c : s.pruned) note(c.knobs);
      for (const auto& d : knob_registry())
        for (const auto& v : d.search_values(atom.knob, 90))
          EXPECT_TRUE(seen[d.name].count(v))
              << dtype << " " << atom.knob << ": " << d.name << "=" << v;
    }
  }
}

TEST(Space, SplitKLeadsForATinyGridWithLongK) {
  SpaceOptions opt;
  opt.max_candidates = 8;
  opt.build_kernels = false;
  Space s = generate_space(gemm(128, 128, 16384, "f32"), h100(), Target::for_arch("sm_90a"), opt);
  ASSERT_FALSE(s.kept.empty());
  EXPECT_GT(s.kept.front().knobs.get_int("SPLITK", 1), 1) << s.kept.front().knobs.str();
}

TEST(Space, DecodeShapesKeepSearchedTiles) {
  // M = 1: every searched tile is larger than the problem; the 64-row ones stay legal.
  SpaceOptions opt;
  opt.max_candidates = 8;
  opt.build_kernels = false;
  Space s = generate_space(gemm(1, 4096, 4096, "f16"), h100(), Target::for_arch("sm_90a"), opt);
  size_t searched = 0;
  for (const auto& c : s.kept) searched += c.shipped_default ? 0 : 1;
  EXPECT_EQ(searched, 8u);
}

TEST(Space, AtomsAreRestrictable) {
  SpaceOptions opt;
  opt.max_candidates = 4;
  opt.build_kernels = false;
  opt.atoms = {"fma"};
  Space s = generate_space(gemm(1024, 1024, 1024, "bf16"), h100(), Target::for_arch("sm_90a"), opt);
  for (const auto& c : s.kept) {
    if (c.shipped_default) continue;
    EXPECT_EQ(c.knobs.get_str("ATOM", "fma"), "fma") << c.knobs.str();
  }
  opt.atoms = {"mma_tf32"};
  EXPECT_THROW(generate_space(gemm(64, 64, 64, "bf16"), h100(), Target::for_arch("sm_90a"), opt),
               Error);
}

// Stage 2 (the full pipeline) must not be where the Hopper knobs' refusals are found:
// stage 1 (the rules, and the passes' cluster refusals through t:010: prune.h) finds
// them, so no build, let alone a trial, is spent on them.
// A pruned candidate the stage-1 rules pass was pruned by the pipeline.
void expect_no_hopper_refusals_in_stage_2(const Graph& g, const Space& s) {
  const TuneProblem p = tune_problem(g);
  const auto atoms = atom_choices(p, 90);
  PassRefusals refusals(g, target_for(Target::for_arch("sm_90a"), h100()));
  for (const auto& c : s.pruned) {
    bool hopper = false;
    for (const char* knob : {"CLUSTER_K", "EPILOGUE=tma_store", "EPI_BUFFERS", "WGMMA_A"})
      hopper |= c.reason.find(knob) != std::string::npos;
    if (!hopper) continue;
    for (const auto& a : atoms)
      if (a.knob == c.knobs.get_str("ATOM", "fma")) {
        EXPECT_NE(stage1_violation(p, a, c.knobs, h100(), refusals), "")
            << "the pipeline refused " << c.knobs.str() << ": " << c.reason;
      }
  }
}

TEST(Space, SplitKShapeSearchesClusterK) {
  Graph g = gemm(128, 128, 16384, "bf16");
  expect_sound_space(g, {"", "ATOM=wgmma_bf16"});
  SpaceOptions opt;
  opt.max_candidates = 24;
  Space s = generate_space(g, h100(), Target::for_arch("sm_90a"), opt);
  expect_no_hopper_refusals_in_stage_2(g, s);
  bool cluster_k = false;
  for (const auto& c : s.kept) {
    if (c.knobs.get_int("CLUSTER_K", 1) <= 1) continue;
    cluster_k = true;
    // Its base was made legal for it, not pruned for the defaults of the other knobs.
    EXPECT_EQ(c.knobs.get_str("PERSISTENT", ""), "0") << c.knobs.str();
    EXPECT_EQ(c.knobs.get_str("CLUSTER_M", ""), "1") << c.knobs.str();
    EXPECT_EQ(c.knobs.get_str("EPILOGUE", ""), "direct") << c.knobs.str();
  }
  EXPECT_TRUE(cluster_k) << "no CLUSTER_K candidate kept";
}

TEST(Space, LargeBf16SearchesTheTmaStoreEpilogueAndItsBuffers) {
  Graph g = gemm(4096, 4096, 4096, "bf16");
  SpaceOptions opt;
  opt.max_candidates = 24;
  opt.atoms = {"wgmma_bf16"};
  Space s = generate_space(g, h100(), Target::for_arch("sm_90a"), opt);
  expect_no_hopper_refusals_in_stage_2(g, s);
  std::set<std::string> buffers;
  for (const auto& c : s.kept) {
    const bool tma_store = c.knobs.get_str("EPILOGUE", "") == "tma_store";
    // A dependent knob: set exactly where its condition holds.
    EXPECT_EQ(c.knobs.has("EPI_BUFFERS"), tma_store) << c.knobs.str();
    if (tma_store) buffers.insert(c.knobs.get_str("EPI_BUFFERS", ""));
  }
  EXPECT_TRUE(buffers.count("2")) << "the strip-buffered default is not among the kept";
  // The best-ranked candidate stores through TMA (the model's epilogue term).
  EXPECT_EQ(s.kept.front().knobs.get_str("EPILOGUE", ""), "tma_store") << s.kept.front().knobs.str();
  // EPI_BUFFERS=0 and WGMMA_A=regs were enumerated (kept or pruned).
  bool whole = false, regs = false;
  auto note = [&](const Knobs& k) {
    whole |= k.get_str("EPI_BUFFERS", "") == "0";
    regs |= k.get_str("WGMMA_A", "") == "regs";
  };
  for (const auto& c : s.kept) note(c.knobs);
  for (const auto& c : s.pruned) note(c.knobs);
  EXPECT_TRUE(whole);
  EXPECT_TRUE(regs);
}

// TF32_ROUND shapes only a tf32 A that wgmma reads from registers: a dependent knob, set
// (and searched at both values) exactly where a candidate has WGMMA_A=regs, absent where
// A is shared (the pass records no value there, so a set value would only repeat the
// candidate). The default's value, none, is the base's.
TEST(Space, Tf32RegisterFillsSearchTheirRounding) {
  for (const char* expr : {"matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)",
                           "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)"}) {
    SCOPED_TRACE(expr);
    SpaceOptions opt;
    opt.max_candidates = 1 << 20;
    opt.build_kernels = false;
    opt.atoms = {"wgmma_tf32"};
    const Space s = generate_space(parse_expression(expr), h100(), Target::for_arch("sm_90a"), opt);
    std::map<std::string, size_t> rounding;  // TF32_ROUND value -> register-A candidates
    size_t shared = 0;
    auto note = [&](const Knobs& k) {
      if (!k.has("WGMMA_A")) return;  // pruned before the other knobs were chosen
      const bool regs = k.get_str("WGMMA_A", "") == "regs";
      EXPECT_EQ(k.has("TF32_ROUND"), regs) << k.str();
      if (regs) ++rounding[k.get_str("TF32_ROUND", "")];
      shared += !regs;
    };
    for (const auto& c : s.kept) {
      if (c.shipped_default)
        EXPECT_EQ(c.knobs.get_str("TF32_ROUND", ""), "none") << c.knobs.str();
      else
        note(c.knobs);
    }
    for (const auto& c : s.pruned) note(c.knobs);
    EXPECT_GT(rounding["none"], 0u);
    EXPECT_GT(rounding["rna"], 0u);
    EXPECT_EQ(rounding.size(), 2u);
    EXPECT_GT(shared, 0u);
  }
}

// The Hopper GEMM: the tuner's space covers the organizations the sm_90a defaults use. For each
// shape of its bars, the shipped default (what `loom run` compiles) must be a
// point the enumeration reaches and stage 1 passes — not only a candidate handed to the
// search on top — so that the search can find it, and its neighbours, on its own. The
// sizes (enumerated, passed) are what docs/tuning.md reports.
struct HopperGemmShape {
  std::string expr;
  std::string atom;
};

// bench/suites/hopper-gemm.txt, expression for expression (the suite the lead tunes).
std::vector<HopperGemmShape> hopper_gemm_shapes() {
  std::vector<HopperGemmShape> out;
  for (const char* d : {"bf16", "f16"}) {
    const std::string t = d;
    for (const char* s : {"A[2048,2048]:T, B[2048,2048]:T", "A[4096,4096]:T, B[4096,4096]:T",
                          "A[8192,8192]:T, B[8192,8192]:T", "A[4096,4096]:T, B[4096,14336]:T",
                          "A[8192,1024]:T, B[1024,8192]:T", "A[4096,16384]:T, B[16384,4096]:T"}) {
      std::string e = s;
      for (size_t at; (at = e.find(":T")) != std::string::npos;) e.replace(at, 2, ":" + t);
      out.push_back({"matmul(" + e + ")", "wgmma_" + t});
    }
  }
  // tf32 reads a K-major B (B given transposed), on an explicit ATOM; a row-major B runs
  // swapped with B^T in registers (the default of `:tf32`).
  out.push_back({"matmul(A[4096,4096]:f32, B[4096,4096]:f32.T)", "wgmma_tf32"});
  out.push_back({"matmul(A[4096,4096]:tf32, B[4096,4096]:tf32)", "wgmma_tf32"});
  // Neither K-major: both TMA-staged and transposed in shared memory (SLAB_A / SLAB_B =
  // kinner, which the space sets; BK = 16 and the 64-byte swizzle join as the default's).
  out.push_back({"matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)", "wgmma_tf32"});
  out.push_back({"matmul(A[128,16384]:bf16, B[16384,128]:bf16)", "wgmma_bf16"});
  out.push_back({"linear(X[16,4096]:bf16, W[4096,4096]:bf16)", "wgmma_bf16"});
  out.push_back({"linear(X[64,4096]:bf16, W[4096,4096]:bf16)", "wgmma_bf16"});
  return out;
}

TEST(Space, HopperGemmDefaultsArePointsOfTheSpace) {
  for (const auto& shape : hopper_gemm_shapes()) {
    SCOPED_TRACE(shape.expr);
    SpaceOptions opt;
    opt.max_candidates = 8;
    opt.build_kernels = false;
    opt.atoms = {shape.atom};
    Space s = generate_space(parse_expression(shape.expr), h100(), Target::for_arch("sm_90a"), opt);
    const Candidate* def = nullptr;
    for (const auto& c : s.kept)
      if (c.shipped_default && c.knobs.get_str("ATOM", "") == shape.atom) def = &c;
    ASSERT_NE(def, nullptr) << "no " << shape.atom << " default";
    std::string near;  // what stage 1 said about the default's point, if it saw it
    for (const auto& c : s.pruned) {
      bool same = true;
      for (const auto& [name, value] : c.knobs.values())
        same = same && (!def->knobs.has(name) || def->knobs.get_str(name, "") == value);
      if (same && near.size() < 2000) near += "\n  pruned: " + c.knobs.str() + ": " + c.reason;
    }
    EXPECT_TRUE(def->in_search) << "the default is not a point of the space: "
                                << def->knobs.str() << near;
    std::printf("space %-48s enumerated %6zu  passed %5zu  probes %5zu  default %s\n",
                shape.expr.c_str(), s.enumerated, s.searched, s.refusal_probes,
                def->knobs.str().c_str());
  }
}

// What makes the split-K default a point: the registry searches SPLITK in 1, 4, 16, 64,
// and the default's 11 (clusters over two thirds of the SMs) joins the values because the
// default uses it — for that shape only. The enumerated points are counted, not the
// default handed to the search.
TEST(Space, TheDefaultsValuesJoinTheSearch) {
  SpaceOptions opt;
  opt.max_candidates = 4;
  opt.build_kernels = false;
  opt.atoms = {"wgmma_bf16"};
  Space split = generate_space(gemm(128, 128, 16384, "bf16"), h100(), Target::for_arch("sm_90a"), opt);
  Space square = generate_space(gemm(4096, 4096, 4096, "bf16"), h100(), Target::for_arch("sm_90a"), opt);
  auto splits = [](const Space& s, const std::string& v) {
    size_t n = 0;
    for (const auto& c : s.pruned) n += c.knobs.get_str("SPLITK", "") == v;
    for (const auto& c : s.kept) n += !c.shipped_default && c.knobs.get_str("SPLITK", "") == v;
    return n;
  };
  EXPECT_GT(splits(split, "11"), 0u);
  EXPECT_EQ(splits(square, "11"), 0u);
}

TEST(Space, SymbolicSizesAreRefused) {
  try {
    generate_space(parse_expression("matmul(A[M,K]:f32, B[K,N]:f32)"), h100(),
                   Target::for_arch("sm_90a"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dims"), std::string::npos) << e.what();
  }
}

TEST(Space, BatchedShapesSearchTheWgmmaSpace) {
  // bmm, a shared weight and rank 4 on sm_90a: wgmma candidates are built (the space
  // derives from the atom, the batch only multiplies the units), the plain default among
  // them persistent; the TMA-store epilogue kept for a [B, M, N] output (a rank-3 map) and
  // pruned with its reason for a rank-4 one.
  for (const char* e : {"bmm(A[64,512,640]:f16, B[64,640,512]:f16)",
                        "matmul(A[16,1024,1024]:bf16, W[1024,1024]:bf16)",
                        "matmul(A[2,8,512,1024]:bf16, B[2,8,1024,512]:bf16)"}) {
    SCOPED_TRACE(e);
    SpaceOptions opt;
    opt.max_candidates = 6;
    opt.build_kernels = false;
    opt.atoms = {e[0] == 'b' ? "wgmma_f16" : "wgmma_bf16"};
    Space s = generate_space(parse_expression(e), h100(), Target::for_arch("sm_90a"), opt);
    ASSERT_FALSE(s.kept.empty());
    bool plain = false;
    for (const auto& c : s.kept) {
      EXPECT_EQ(c.knobs.get_str("ATOM", "").rfind("wgmma_", 0), 0u) << c.knobs.str();
      if (c.plain_default) {
        plain = true;
        EXPECT_EQ(c.knobs.get_str("PERSISTENT", ""), "1");
      }
    }
    EXPECT_TRUE(plain);
    bool tma_store_pruned = false;
    for (const auto& p : s.pruned) tma_store_pruned |= p.reason.find("has rank 4") != std::string::npos;
    EXPECT_EQ(tma_store_pruned, std::string(e).find("[2,8,") != std::string::npos);
  }
}

}  // namespace
}  // namespace loom::tune
