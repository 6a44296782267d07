// Which knobs a compile takes: explicit > tuning database (user, then shipped) > the
// shape-class defaults, through the same calls `loom compile` and `loom run` make.
#include <gtest/gtest.h>

#include "codegen/cuda.h"
#include "db_test_util.h"
#include "driver/compile.h"
#include "driver/run.h"
#include "frontend/parser.h"
#include "runtime/nvrtc.h"
#include "tune/shipped.h"
#include "tune/tuned_knobs.h"

namespace {

using namespace loom;
using namespace loom::tune;

const std::string kExpr = "matmul(A[512,512]:f32, B[512,512]:f32)";
const std::string kTuned = "BM=64,BN=32,FM=4,FN=2,BK=8,STAGE=sync,STAGES=2";

DeviceInfo h100() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.sm_count = 132;
  d.cc_major = 9;
  d.runtime_version = 13000;
  d.driver_version = 13000;
  return d;
}

std::string used(const CompiledProgram& c, const std::string& knob) {
  auto it = c.state.used_knobs.find(knob);
  return it == c.state.used_knobs.end() ? "" : it->second;
}

TEST(TunedKnobs, ExplicitBeatsTunedBeatsDefault) {
  CompileOptions opt;
  CompiledProgram def = compile_expression(kExpr, opt);
  EXPECT_EQ(def.knob_source, "default: class medium");
  EXPECT_EQ(used(def, "BM"), "64");
  EXPECT_EQ(used(def, "BN"), "64");

  opt.tuned = Knobs::parse(kTuned);
  opt.tuned_source = "tuned: /tmp/x.db";
  CompiledProgram tuned = compile_expression(kExpr, opt);
  EXPECT_EQ(tuned.knob_source, "tuned: /tmp/x.db");
  EXPECT_EQ(used(tuned, "BN"), "32");
  EXPECT_EQ(used(tuned, "BK"), "8");
  EXPECT_NE(tuned.cuda, def.cuda);

  // An explicit tiling knob replaces the tuned tiling group; the tuned staging stays.
  opt.knobs = Knobs::parse("BM=32,BN=32,FM=2,FN=2");
  CompiledProgram both = compile_expression(kExpr, opt);
  EXPECT_EQ(both.knob_source, "explicit over tuned: /tmp/x.db");
  EXPECT_EQ(used(both, "BM"), "32");
  EXPECT_EQ(used(both, "FN"), "2");
  EXPECT_EQ(used(both, "BK"), "8");

  // A record found for another atom yields to an explicit ATOM.
  opt.knobs = Knobs::parse("ATOM=mma_tf32");
  CompiledProgram atom = compile_expression(kExpr, opt);
  EXPECT_NE(atom.knob_source.find("default: class medium, mma schedule"), std::string::npos)
      << atom.knob_source;
  EXPECT_NE(used(atom, "BK"), "8");
}

TEST(TunedKnobs, UserDatabaseThenShippedThenDefaults) {
  std::string dir = dbtest::scratch_dir();
  Graph g = parse_expression(kExpr);
  TuningKey key = *key_for(g, h100());
  TuningRecord shipped_rec = dbtest::rec(90, "BM=32,BN=32,FM=2,FN=2,BK=16,STAGE=sync,STAGES=2");
  TuningKey shipped_key = key;
  shipped_key.driver = 12080;  // tuned under another driver: still used (same problem)
  std::vector<ShippedDb> shipped = {{"tune/shipped/test.db", parse_db(format_db({{shipped_key, shipped_rec}}))}};
  ASSERT_TRUE(shipped[0].parsed.problems.empty());

  TuningDb db = TuningDb::open(dir + "/tuning.db");
  CompileOptions none;
  choose_tuned_knobs(g, h100(), db, none, {});
  EXPECT_FALSE(none.tuned);
  EXPECT_EQ(none.tuned_source, "no tuning record in " + db.path() + " or the shipped defaults");
  EXPECT_NE(compile_graph(g, none).knob_source.find("default: class medium (no tuning record"),
            std::string::npos);

  CompileOptions from_shipped;
  choose_tuned_knobs(g, h100(), db, from_shipped, shipped);
  ASSERT_TRUE(from_shipped.tuned);
  EXPECT_EQ(from_shipped.tuned->str(), Knobs::parse(shipped_rec.knobs).str());
  EXPECT_EQ(from_shipped.tuned_source, "tuned: shipped tune/shipped/test.db");

  db.record(key, dbtest::rec(80, kTuned));
  CompileOptions from_user;
  choose_tuned_knobs(g, h100(), TuningDb::open(db.path()), from_user, shipped);
  ASSERT_TRUE(from_user.tuned);
  EXPECT_EQ(from_user.tuned->str(), Knobs::parse(kTuned).str());
  EXPECT_EQ(from_user.tuned_source, "tuned: " + db.path());
  EXPECT_EQ(used(compile_graph(g, from_user), "BN"), "32");

  // Another GPU model finds nothing, in either database.
  DeviceInfo h200 = h100();
  h200.name = "NVIDIA H200";
  CompileOptions other;
  choose_tuned_knobs(g, h200, TuningDb::open(db.path()), other, shipped);
  EXPECT_FALSE(other.tuned);
}

// Attention records take the same path: the user's database, then the shipped
// files, then the defaults; the record's knobs are what the attention kernel compiles.
TEST(TunedKnobs, AttentionRecordsAreFoundLikeGemmRecords) {
  std::string dir = dbtest::scratch_dir();
  const std::string expr =
      "attention(Q[2,8,1024,64]:bf16, K[2,8,1024,64]:bf16, V[2,8,1024,64]:bf16, causal=true)";
  Graph g = parse_expression(expr);
  std::string why;
  std::optional<TuningKey> key = key_for(g, h100(), &why);
  ASSERT_TRUE(key) << why;
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  CompileOptions none;
  none.target = Target::for_arch("sm_90a");
  choose_tuned_knobs(g, h100(), db, none, {});
  EXPECT_FALSE(none.tuned);
  const CompiledProgram def = compile_graph(g, none);
  EXPECT_NE(def.knob_source.find("no tuning record"), std::string::npos) << def.knob_source;

  // As the tuner records an mma.sync point on sm_90a, where wgmma is the default kernel.
  const std::string knobs =
      "ATTN_MMA=mma_sync,BLOCK_M=128,BLOCK_N=32,WARPS=8,Q_IN_REGS=0,KV_STAGES=1,SOFTMAX=exp";
  const std::string shipped_knobs = "BLOCK_M=128,BLOCK_N=64,WARPS=8";
  std::vector<ShippedDb> shipped = {
      {"tune/shipped/test.db", parse_db(format_db({{*key, dbtest::rec(90, shipped_knobs)}}))}};
  CompileOptions from_shipped;
  from_shipped.target = none.target;
  choose_tuned_knobs(g, h100(), db, from_shipped, shipped);
  ASSERT_TRUE(from_shipped.tuned);
  EXPECT_EQ(used(compile_graph(g, from_shipped), "BLOCK_M"), "128");
  EXPECT_EQ(used(compile_graph(g, from_shipped), "BLOCK_N"), "64");

  ASSERT_EQ(db.record(*key, dbtest::rec(80, knobs)), TuningDb::Outcome::added);
  TuningDb reopened = TuningDb::open(db.path());
  ASSERT_TRUE(reopened.lookup(*key));
  EXPECT_EQ(reopened.lookup(*key)->knobs, knobs);
  CompileOptions opt;
  opt.target = none.target;
  choose_tuned_knobs(g, h100(), reopened, opt, shipped);
  ASSERT_TRUE(opt.tuned);
  EXPECT_EQ(opt.tuned_source, "tuned: " + db.path());
  const CompiledProgram tuned = compile_graph(g, opt);
  EXPECT_EQ(tuned.knob_source, "tuned: " + db.path());
  EXPECT_EQ(used(tuned, "BLOCK_M"), "128");
  EXPECT_EQ(used(tuned, "BLOCK_N"), "32");
  EXPECT_EQ(used(tuned, "Q_IN_REGS"), "0");
  EXPECT_EQ(used(tuned, "SOFTMAX"), "exp");
  EXPECT_NE(tuned.cuda, def.cuda);
  // An explicit knob still wins over the record.
  opt.knobs = Knobs::parse("BLOCK_N=64");
  EXPECT_EQ(used(compile_graph(g, opt), "BLOCK_N"), "64");
}

TEST(TunedKnobs, ARecordWithUnknownKnobsIsIgnoredWithAWarning) {
  std::string dir = dbtest::scratch_dir();
  Graph g = parse_expression(kExpr);
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  db.record(*key_for(g, h100()), dbtest::rec(80, "BM=64,RETIRED_KNOB=3"));
  CompileOptions opt;
  testing::internal::CaptureStderr();
  choose_tuned_knobs(g, h100(), db, opt, {});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(opt.tuned);
  EXPECT_NE(err.find("RETIRED_KNOB"), std::string::npos) << err;
  // Once per process: the next lookup (a long-running caller compiling the shape again)
  // skips the record as quietly.
  CompileOptions again;
  testing::internal::CaptureStderr();
  choose_tuned_knobs(g, h100(), db, again, {});
  err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(again.tuned);
  EXPECT_EQ(err, "") << "printed once per process";
}

// A record whose knob names are all known but which the pipeline now refuses (here an
// mma.sync attention point written before wgmma became sm_90a's default, so without
// ATTN_MMA=mma_sync; and a GEMM tile the tiling pass refuses) is ignored like a record with
// unknown knobs: one warning naming where it is, its knobs, the pass's error and how to
// clear it, then the defaults. Refused explicit knobs stay an error.
TEST(TunedKnobs, ARecordThePipelineRefusesIsIgnoredWithAWarning) {
  std::string dir = dbtest::scratch_dir();
  const std::string expr =
      "attention(Q[2,8,1024,64]:bf16, K[2,8,1024,64]:bf16, V[2,8,1024,64]:bf16, causal=true)";
  const std::string stale = "BLOCK_M=128,BLOCK_N=32,WARPS=8,Q_IN_REGS=0,KV_STAGES=1,SOFTMAX=exp";
  Graph g = parse_expression(expr);
  TuningDb db = TuningDb::open(dir + "/tuning.db");
  db.record(*key_for(g, h100()), dbtest::rec(80, stale));
  CompileOptions opt;
  opt.target = Target::for_arch("sm_90a");
  choose_tuned_knobs(g, h100(), TuningDb::open(db.path()), opt, {});
  ASSERT_TRUE(opt.tuned) << "known knob names: the lookup itself takes the record";

  CompileOptions plain;
  plain.target = opt.target;
  plain.tuned_source = "--no-db";
  const CompiledProgram def = compile_graph(g, plain);

  testing::internal::CaptureStderr();
  CompiledProgram c;
  ASSERT_NO_THROW(c = compile_graph(g, opt));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.cuda, def.cuda) << "the defaults compile";
  EXPECT_EQ(c.state.used_knobs, def.state.used_knobs);
  EXPECT_NE(c.knob_source.find("default: class"), std::string::npos) << c.knob_source;
  EXPECT_NE(c.knob_source.find("was refused"), std::string::npos) << c.knob_source;
  // One warning: where, which knobs, the pass's own words, and how to clear it.
  EXPECT_NE(err.find("warning: ignoring the tuning record in " + db.path()), std::string::npos) << err;
  EXPECT_NE(err.find(Knobs::parse(stale).str()), std::string::npos) << err;
  EXPECT_NE(err.find("ATTN_MMA"), std::string::npos) << "the pass's error names the fix: " << err;
  EXPECT_NE(err.find("loom db clear"), std::string::npos) << err;
  EXPECT_NE(err.find("--no-db"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << "once: " << err;

  // Valid explicit knobs over the stale record: they apply over the defaults. The record
  // was warned about above, so only knob_source says it again (once per process).
  opt.knobs = Knobs::parse("BLOCK_N=128");
  testing::internal::CaptureStderr();
  CompiledProgram ex;
  ASSERT_NO_THROW(ex = compile_graph(g, opt));
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(used(ex, "BLOCK_N"), "128");
  EXPECT_NE(ex.knob_source.find("was refused"), std::string::npos) << ex.knob_source;
  EXPECT_EQ(err.find("ignoring the tuning record in " + db.path()), std::string::npos) << err;

  // The same knobs given explicitly are refused, with or without the record, and no
  // warning pretends they were dropped.
  for (bool with_record : {true, false}) {
    CompileOptions bad = opt;
    bad.knobs = Knobs::parse(stale);
    if (!with_record) bad.tuned.reset();
    testing::internal::CaptureStderr();
    EXPECT_THROW(compile_graph(g, bad), Error) << with_record;
    err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("ignoring"), std::string::npos) << err;
  }

  // A shipped GEMM record whose tile the tiling pass refuses (FM does not divide BM by
  // the thread grid): the same, and the warning says a new record replaces it.
  Graph gemm = parse_expression(kExpr);
  std::vector<ShippedDb> shipped = {
      {"tune/shipped/test.db",
       parse_db(format_db({{*key_for(gemm, h100()), dbtest::rec(90, "BM=64,BN=64,FM=3,FN=4")}}))}};
  CompileOptions gopt;
  choose_tuned_knobs(gemm, h100(), TuningDb::open(dir + "/empty.db"), gopt, shipped);
  ASSERT_TRUE(gopt.tuned);
  ASSERT_THROW(compile_graph(gemm, [&] {
                 CompileOptions e;
                 e.knobs = *gopt.tuned;
                 return e;
               }()),
               Error) << "the record must be one the pipeline refuses";
  testing::internal::CaptureStderr();
  CompiledProgram gc;
  ASSERT_NO_THROW(gc = compile_graph(gemm, gopt));
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(used(gc, "BM"), "64");
  EXPECT_EQ(used(gc, "BN"), "64");
  EXPECT_NE(err.find("ignoring the tuning record in shipped tune/shipped/test.db"), std::string::npos) << err;
  EXPECT_NE(err.find("loom tune"), std::string::npos) << err;
}

// The cases of tests/gpu/test_tuned_run.cpp, compiled through NVRTC for both targets so a
// broken case fails here rather than only on the GPU machine.
TEST(TunedKnobs, GpuTestCasesCompile) {
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const std::string explicit_knobs : {"", "BK=16"}) {
      CompileOptions opt;
      opt.target = Target::for_arch(arch);
      opt.tuned = Knobs::parse(kTuned);
      opt.knobs = Knobs::parse(explicit_knobs);
      CompiledProgram c = compile_expression("matmul(A[512,384]:f32, B[384,256]:f32)", opt);
      EXPECT_EQ(used(c, "BN"), "32");
      CompileRequest req;
      req.source = c.cuda;
      req.headers = {{kDeviceHeaderName, device_header()}};
      req.arch = arch;
      EXPECT_NO_THROW(compile(req, nullptr)) << arch << " " << explicit_knobs;
    }
}

// A shipped record replaces the shape-class defaults on its card, so a record tuned before
// the wgmma schedules existed pins its shape to them: 1024^3 bf16's mma.sync record of
// 2026-11-22 (16.2 us against cuBLAS's 9.3 on H100, 0.57x) outlived the medium wgmma class
// that now takes it. On Hopper cards a 16-bit record must therefore name a wgmma atom: a
// shape whose best form is mma.sync needs no record (its default is mma.sync already).
TEST(TunedKnobs, ShippedHopperRecordsOfSixteenBitOpsRunWgmma) {
  for (const ShippedDb& s : shipped_dbs())
    for (const DbEntry& e : s.parsed.entries) {
      const bool hopper = e.key.gpu.find("H100") != std::string::npos ||
                          e.key.gpu.find("H200") != std::string::npos;
      const bool sixteen_bit = e.key.op.find("bf16[") != std::string::npos ||
                               e.key.op.find("f16[") != std::string::npos;
      if (!hopper || !sixteen_bit) continue;
      const std::string atom = Knobs::parse(e.rec.knobs).get_str("ATOM", "");
      const bool attention = e.key.op.find("attention") != std::string::npos;
      EXPECT_TRUE(attention || atom.rfind("wgmma_", 0) == 0) << s.file << ": " << e.key.str() << " runs " << atom;
    }
}

TEST(TunedKnobs, ShippedDatabasesVerify) {
  ASSERT_FALSE(shipped_dbs().empty()) << "tune/shipped/*.db are embedded at build time";
  for (const ShippedDb& s : shipped_dbs()) {
    EXPECT_TRUE(s.parsed.problems.empty()) << s.file << ": " << s.parsed.problems[0].what;
    for (const DbEntry& e : s.parsed.entries) EXPECT_NO_THROW(Knobs::parse(e.rec.knobs)) << e.key.str();
  }
}

}  // namespace
