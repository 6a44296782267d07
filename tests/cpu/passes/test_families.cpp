// The kernel families registry (src/passes/families/): its declarations are consistent
// with the knob registry (every knob a family names exists, at legal values; every knob
// is some family's), every ATOM value is served by exactly one GEMM family, the hooks the
// derived code calls are there, and docs/knobs.md's "Knobs by kernel family" table is the
// one the registry generates.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "passes/families/family.h"

namespace loom {
namespace {

TEST(Families, EveryKnobAFamilyNamesExistsAtLegalValues) {
  for (const auto& f : kernel_families())
    for (const auto* list : {&f.reads, &f.honours})
      for (const auto& u : *list) {
        const KnobDef* k = find_knob(u.name);
        ASSERT_NE(k, nullptr) << f.name << " names " << u.name << ", which is no knob";
        for (const auto& v : u.values)
          EXPECT_NO_THROW(Knobs::parse(u.name + "=" + v)) << f.name << ": " << u.name << "=" << v;
      }
}

TEST(Families, EveryKnobIsReadByAFamily) {
  std::set<std::string> read;
  for (const auto& f : kernel_families())
    for (const auto& u : f.reads) read.insert(u.name);
  for (const auto& k : knob_registry())
    EXPECT_TRUE(read.count(k.name)) << k.name << " is read by no kernel family: declare it in "
                                       "the family whose passes read it (src/passes/families/)";
}

TEST(Families, NamesAreUniqueAndEveryAtomHasOneGemmFamily) {
  std::set<std::string> names;
  for (const auto& f : kernel_families()) EXPECT_TRUE(names.insert(f.name).second) << f.name;
  for (const auto& atom : find_knob("ATOM")->choices) {
    int serving = 0;
    for (const auto& f : kernel_families())
      if (f.op == FamilyOp::gemm && f.serves_atom && f.serves_atom(atom)) ++serving;
    EXPECT_EQ(serving, 1) << "ATOM=" << atom;
    EXPECT_TRUE(gemm_family_of_atom(atom).serves_atom(atom)) << atom;
  }
}

TEST(Families, GemmFamiliesHaveTheHooksTheDefaultsCall) {
  int classifiers = 0;
  for (const auto& f : kernel_families()) {
    if (f.op != FamilyOp::gemm) {
      EXPECT_FALSE(f.serves_atom || f.schedule || f.classify || f.claims || f.atom_def) << f.name;
      EXPECT_FALSE(f.chosen_by.empty()) << f.name;
      continue;
    }
    EXPECT_TRUE(f.serves_atom) << f.name;
    EXPECT_TRUE(f.atom_def) << f.name;
    EXPECT_EQ(f.schedule == nullptr, f.schedule_slot == nullptr) << f.name;
    classifiers += f.classify != nullptr;
  }
  EXPECT_EQ(classifiers, 1);
}

// A knob a family reads at some values only is one it refuses at the others only where a
// refusal says so; a knob it honours must not also be one it reads.
TEST(Families, ReadsAndHonoursDoNotOverlap) {
  for (const auto& f : kernel_families())
    for (const auto& h : f.honours) EXPECT_FALSE(f.reads_knob(h.name)) << f.name << ": " << h.name;
}

TEST(Families, DocsTableIsTheRegistrys) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/docs/knobs.md");
  ASSERT_TRUE(in);
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str(), begin = "<!-- families table: generated -->\n",
                    end = "<!-- families table end -->";
  const size_t a = text.find(begin), b = text.find(end);
  ASSERT_NE(a, std::string::npos) << "docs/knobs.md lacks the families table's markers";
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(text.substr(a + begin.size(), b - a - begin.size()), families_knob_table())
      << "docs/knobs.md's families table is stale: paste `loom knobs`'s \"knobs by kernel "
         "family\" table between the markers";
}

}  // namespace
}  // namespace loom
