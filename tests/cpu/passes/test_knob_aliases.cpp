// The matmul article's knob names (knob_aliases(), docs/knobs.md): each translates to
// Loom's knob as a list is parsed, with a note saying how; the names the article gives
// another meaning (BM, BN; BK with an mma ATOM_KIND) are refused with the whole list in
// Loom's names, and a list of Loom's own names keeps Loom's meaning.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/error.h"
#include "passes/knobs.h"

namespace loom {
namespace {

std::string error_of(const std::string& list) {
  try {
    Knobs k = Knobs::parse(list);
    ADD_FAILURE() << list << " parsed as " << k.str();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(KnobAliases, EachTranslatesToItsLoomKnob) {
  EXPECT_EQ(Knobs::parse("TMA=1").str(), "STAGE=tma");
  EXPECT_EQ(Knobs::parse("STAGE=11,TMA=1").str(), "STAGE=tma");
  EXPECT_EQ(Knobs::parse("STAGE=11,TMA=0,ASYNC_COPY=0").str(), "STAGE=sync");
  EXPECT_EQ(Knobs::parse("STAGE=11,TMA=0").str(), "STAGE=cp_async");
  EXPECT_EQ(Knobs::parse("ASYNC_COPY=1").str(), "STAGE=cp_async");
  EXPECT_EQ(Knobs::parse("TMA=1,ASYNC_COPY=1").str(), "STAGE=tma");
  EXPECT_EQ(Knobs::parse("STAGE=00").str(), "STAGE=direct");
  EXPECT_EQ(Knobs::parse("STAGE=11").str(), "");  // staged, by the shape's default transport
  EXPECT_EQ(Knobs::parse("PIPELINE_STAGES=0").str(), "PIPELINE=0");
  EXPECT_EQ(Knobs::parse("PIPELINE_STAGES=1").str(), "PIPELINE=1");
  EXPECT_EQ(Knobs::parse("BUFFER_COUNT=3").str(), "STAGES=3");
  EXPECT_EQ(Knobs::parse("ATOM_KIND=mma_m16n8k16_f16").str(), "ATOM=mma_f16");
  EXPECT_EQ(Knobs::parse("ATOM_KIND=mma_m16n8k16_bf16").str(), "ATOM=mma_bf16");
  EXPECT_EQ(Knobs::parse("ATOM_KIND=mma_m16n8k8_tf32").str(), "ATOM=mma_tf32");
  EXPECT_EQ(Knobs::parse("ATOM_KIND=fma").str(), "ATOM=fma");
  EXPECT_EQ(Knobs::parse("ATOM_KIND=wgmma_f16").str(), "ATOM=wgmma_f16");
  EXPECT_EQ(Knobs::parse("ATOMIC_FREE_SPLITK=1").str(), "SPLITK_MODE=reduce");
  EXPECT_EQ(Knobs::parse("ATOMIC_FREE_SPLITK=0").str(), "SPLITK_MODE=atomic");
}

TEST(KnobAliases, SharedNamesPassThroughAndTheNoteSaysWhatWasRead) {
  Knobs k = Knobs::parse("FM=4,FN=4,BK=32,SPLITK=2,GROUP_M=1,PAD_SMEM=1,INTERLEAVE_LOADS=0,"
                         "STAGE=11,TMA=0,PIPELINE_STAGES=0,BUFFER_COUNT=2");
  EXPECT_EQ(k.str(), "FM=4,FN=4,SPLITK=2,GROUP_M=1,BK=32,STAGE=cp_async,STAGES=2,PIPELINE=0,"
                     "PAD_SMEM=1,INTERLEAVE_LOADS=0");
  ASSERT_EQ(k.alias_notes().size(), 1u);
  EXPECT_EQ(k.alias_notes()[0],
            "STAGE=11,TMA=0,PIPELINE_STAGES=0,BUFFER_COUNT=2 -> PIPELINE=0,STAGES=2,STAGE=cp_async");
  EXPECT_TRUE(Knobs::parse("BM=64,FM=4").alias_notes().empty());
  EXPECT_TRUE(has(Knobs::parse("STAGE=11").alias_notes()[0], "STAGE=11 alone keeps the shape's"));
}

TEST(KnobAliases, ALoomListKeepsLoomsMeaningOfBm) {
  EXPECT_EQ(Knobs::parse("BM=16,BN=16,FM=4,FN=4").str(), "BM=16,BN=16,FM=4,FN=4");
  // One cell per thread: the article's threads are Loom's rows, so nothing is refused.
  EXPECT_EQ(Knobs::parse("BM=16,BN=16,FM=1,FN=1,STAGE=11,TMA=0").str(),
            "BM=16,BN=16,FM=1,FN=1,STAGE=cp_async");
}

TEST(KnobAliases, BmAndBnInAnArticleListAreRefusedWithTheLoomList) {
  const std::string e = error_of("BM=8,BN=32,FM=26,FN=4,BK=32,SPLITK=1,TMA=1,STAGE=11");
  EXPECT_TRUE(has(e, "use the article's names (TMA=1,STAGE=11): there BM and BN count threads, "
                     "and Loom's BM and BN count rows and columns of C per thread block")) << e;
  EXPECT_TRUE(has(e, "In Loom's names the list reads BM=208,BN=128,FM=26,FN=4,BK=32,SPLITK=1,"
                     "STAGE=tma")) << e;
  // The Loom list it gives parses, to the same knobs.
  EXPECT_EQ(Knobs::parse("BM=208,BN=128,FM=26,FN=4,BK=32,SPLITK=1,STAGE=tma").str(),
            "BM=208,BN=128,FM=26,FN=4,SPLITK=1,BK=32,STAGE=tma");
  // Without FM the product is left for the user to make.
  const std::string no_fm = error_of("BM=16,TMA=1");
  EXPECT_TRUE(has(no_fm, "there BM counts threads")) << no_fm;
  EXPECT_TRUE(has(no_fm, "reads BM=<16 x FM>,STAGE=tma")) << no_fm;
  // Values no knob can hold are not multiplied (BM=2^63-1 x FM would overflow).
  const std::string huge = error_of("BM=9223372036854775807,FM=26,TMA=1");
  EXPECT_TRUE(has(huge, "reads BM=<9223372036854775807 x FM>,FM=26,STAGE=tma")) << huge;
  EXPECT_TRUE(has(error_of("BN=8,FN=abc,TMA=1"), "reads BN=<8 x FN>,FN=abc,STAGE=tma"));
}

TEST(KnobAliases, BkWithAnMmaAtomKindIsRefusedWithTheLoomList) {
  const std::string e =
      error_of("TMA=0,ATOM_KIND=mma_m16n8k16_f16,BK=2,WM=2,WN=4,FM=4,FN=4,BUFFER_COUNT=3");
  EXPECT_TRUE(has(e, "with ATOM_KIND=mma_m16n8k16_f16 its BK counts k-atoms (16 deep) and Loom's "
                     "counts elements of K")) << e;
  EXPECT_TRUE(has(e, "reads BK=32,WM=2,WN=4,FM=4,FN=4,ATOM=mma_f16,STAGES=3,STAGE=cp_async")) << e;
  EXPECT_TRUE(has(error_of("ATOM_KIND=mma_m16n8k8_tf32,BK=4"), "reads BK=32,ATOM=mma_tf32"));
  // fma's BK counts elements in both.
  EXPECT_EQ(Knobs::parse("ATOM_KIND=fma,BK=32").str(), "ATOM=fma,BK=32");
}

TEST(KnobAliases, ContradictionsAndBadValuesAreErrors) {
  EXPECT_TRUE(has(error_of("STAGE=10"), "stages one operand")) << error_of("STAGE=10");
  EXPECT_TRUE(has(error_of("STAGE=00,TMA=1"), "STAGE=00 stages nothing, so TMA=1 has nothing"));
  EXPECT_TRUE(has(error_of("TMA=2"), "knob TMA=2 is not 0 or 1")) << error_of("TMA=2");
  EXPECT_TRUE(has(error_of("PIPELINE_STAGES=3"), "is not 0 or 1 (the article's switch, read as "
                                                 "Loom's PIPELINE"));
  EXPECT_TRUE(has(error_of("BUFFER_COUNT=99"), "knob STAGES=99 is outside its range"));
  EXPECT_TRUE(has(error_of("ATOM_KIND=mma_m16n8k32_s8"), "not an atom Loom has"));
  const std::string both = error_of("STAGES=3,BUFFER_COUNT=2");
  EXPECT_TRUE(has(both, "knob STAGES=3 and the article's BUFFER_COUNT=2 both set STAGES")) << both;
  const std::string stage = error_of("STAGE=sync,TMA=1");
  EXPECT_TRUE(has(stage, "knob STAGE=sync and the article's TMA=1 both set STAGE")) << stage;
  EXPECT_TRUE(has(error_of("TMA=1,TMA=0"), "knob TMA is given twice"));
  EXPECT_TRUE(has(error_of("STAGE_COUNT=2"), "the matmul article's names TMA, ASYNC_COPY"));
}

TEST(KnobAliases, EnvironmentAndCommandLineEachTranslate) {
  ::setenv("LOOM_KNOBS", "TMA=0,ASYNC_COPY=0", 1);
  Knobs k = Knobs::from_env_and_cli("BUFFER_COUNT=3");
  ::unsetenv("LOOM_KNOBS");
  EXPECT_EQ(k.str(), "STAGE=sync,STAGES=3");
  EXPECT_EQ(k.alias_notes().size(), 2u);
}

TEST(KnobAliases, EveryAliasNamesARegisteredKnob) {
  for (const auto& a : knob_aliases()) {
    EXPECT_NE(find_knob(a.loom), nullptr) << a.name;
    EXPECT_FALSE(a.doc.empty()) << a.name;
    // Only STAGE is both: a Loom knob, and an article alias by its two-digit values.
    if (a.name != "STAGE") {
      EXPECT_EQ(find_knob(a.name), nullptr) << a.name;
    }
  }
}

}  // namespace
}  // namespace loom
