// The ladders' knob sets are real schedules: every step of every ladder compiles through
// the pipeline and NVRTC (sm_90a; the mma ladders also sm_80) without local-memory
// spills, the HGEMM ladder's steps compute the product on the Kernel IR interpreter, and
// bad ladder options are errors that say what is allowed. (The GPU run that times them
// is `loom ladder NAME`, scripts/device-check.sh.)
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/cuda.h"
#include "driver/compile.h"
#include "driver/ladder.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "runtime/nvrtc.h"

namespace loom {
namespace {

CompileResult nvrtc(const CompiledProgram& c, const std::string& arch) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  return compile(req, nullptr);
}

// The GEMM ladders (flash, an attention, has its own tests: test_ladder_flash.cpp).
std::vector<Ladder> every_ladder() {
  std::vector<Ladder> out;
  for (const auto& name : ladder_names()) {
    if (name == "flash") continue;
    if (name == "hgemm") {
      out.push_back(make_ladder(name, "", "f16"));
      out.push_back(make_ladder(name, "8192x8192x8192", "bf16"));
    } else if (name == "tf32") {
      out.push_back(make_ladder(name, ""));
      out.push_back(make_ladder(name, "1000x777x333"));  // ragged: no MIN_BLOCKS cap
    } else {
      out.push_back(make_ladder(name, ""));
    }
  }
  return out;
}

TEST(Ladders, EveryStepCompilesWithoutSpills) {
  for (const Ladder& l : every_ladder())
    for (const auto& step : l.steps) {
      const bool mma = step.knobs.find("ATOM=mma") != std::string::npos;
      for (const std::string arch : {"sm_90a", "sm_80"}) {
        if (arch == "sm_80" && !mma) continue;
        if (arch == "sm_80" && step.knobs.find("STAGE=tma") != std::string::npos) continue;
        SCOPED_TRACE(l.name + " / " + step.name + " / " + arch + ": " + step.knobs);
        CompileOptions opt;
        opt.knobs = Knobs::parse(step.knobs);
        opt.target = Target::for_arch(arch);
        CompiledProgram c = compile_expression(l.expression, opt);
        CompileResult r = nvrtc(c, arch);
        ASSERT_FALSE(r.resources.empty()) << r.log;
        for (const auto& [name, rep] : r.resources) {
          EXPECT_EQ(rep.spill_store_bytes, 0) << name;
          EXPECT_EQ(rep.spill_load_bytes, 0) << name;
        }
      }
    }
}

// A step's output on the Kernel IR interpreter and the Loop IR's on the same inputs.
struct Outputs { std::vector<double> loop, kernel; };
Outputs run_step(const std::string& expression, const LadderStep& step, uint64_t seed) {
  CompileOptions opt;
  opt.knobs = Knobs::parse(step.knobs);
  CompiledProgram c = compile_expression(expression, opt);
  Bindings in;
  make_random_inputs(c.state.loop, in, seed);
  Bindings ref = in, got = in;
  interpret(c.state.loop, ref);
  interpret(c.state.kernel, got);
  return {ref.tensors.at("out").data, got.tensors.at("out").data};
}

// Each HGEMM step on a small shape, Kernel IR interpreter against the Loop IR.
TEST(Ladders, HgemmStepsComputeTheProduct) {
  for (const std::string dt : {"f16", "bf16"}) {
    Ladder l = make_ladder("hgemm", "128x128x128", dt);
    EXPECT_EQ(l.expression, "matmul(A[128,128]:" + dt + ", B[128,128]:" + dt + ")");
    for (const auto& step : l.steps) {
      SCOPED_TRACE(l.name + " / " + step.name + ": " + step.knobs);
      const Outputs o = run_step(l.expression, step, 11);
      const auto& a = o.loop;
      const auto& b = o.kernel;
      ASSERT_EQ(a.size(), b.size());
      // Reassociated sums may round the f16/bf16 output to the neighbouring value: one ulp.
      const double ulp = dt == "f16" ? 0x1p-10 : 0x1p-7;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_FALSE(std::isnan(b[i])) << "element " << i << " never written";
        ASSERT_NEAR(a[i], b[i], ulp * std::max(1.0, std::fabs(a[i]))) << "element " << i;
      }
    }
  }
}

// Each TF32 step on a small ragged shape: f32 inputs rounded to tf32 by the atom, so the
// Kernel IR matches the Loop IR with the same rounding only where the Loop IR rounds too;
// compare against the f32 product at tf32's precision (2^-11 relative per product).
TEST(Ladders, Tf32StepsComputeTheProduct) {
  Ladder l = make_ladder("tf32", "72x136x48");
  EXPECT_EQ(l.expression, "matmul(A[72,48]:f32, B[48,136]:f32)");
  for (const auto& step : l.steps) {
    SCOPED_TRACE(step.name + ": " + step.knobs);
    EXPECT_EQ(step.knobs.find("MIN_BLOCKS"), std::string::npos);
    const Outputs o = run_step(l.expression, step, 5);
    const auto& a = o.loop;
    const auto& b = o.kernel;
    ASSERT_EQ(a.size(), b.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_FALSE(std::isnan(b[i])) << "element " << i << " never written";
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += a[i] * a[i];
    }
    // Relative Frobenius error of 48-term dot products of tf32-rounded inputs: ~2^-11;
    // an error in the fragments (a wrong row or lane) would be of order 1.
    EXPECT_LT(std::sqrt(num / den), 2e-3);
  }
  for (const auto& step : make_ladder("tf32", "").steps)
    if (step.name != "Loom default") {
      EXPECT_NE(step.knobs.find("MIN_BLOCKS=2"), std::string::npos);
    }
}

TEST(Ladders, HgemmStepsAreTheArticlesRungs) {
  Ladder l = make_ladder("hgemm", "", "");
  EXPECT_EQ(l.expression, "matmul(A[4096,4096]:f16, B[4096,4096]:f16)");
  std::vector<std::string> names;
  for (const auto& s : l.steps) names.push_back(s.name.substr(0, 3));
  EXPECT_EQ(names, (std::vector<std::string>{"01a", "01b", "02 ", "03 ", "04 ", "05 ", "Loo"}));
  EXPECT_NE(l.steps[0].knobs.find("LDMATRIX=0"), std::string::npos);
  EXPECT_NE(l.steps[2].knobs.find("SWIZZLE=xor"), std::string::npos);
  EXPECT_NE(l.steps[4].knobs.find("FRAG_BUFFERS=2"), std::string::npos);
  EXPECT_NE(l.steps[5].knobs.find("GROUP_M=8"), std::string::npos);
}

TEST(Ladders, BadOptionsAreErrors) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message([] { make_ladder("hgemm", "", "f32"); });
  EXPECT_NE(m.find("f16 or bf16"), std::string::npos) << m;
  m = message([] { make_ladder("sgemm", "", "bf16"); });
  EXPECT_NE(m.find("--dtype applies to"), std::string::npos) << m;
  m = message([] { make_ladder("hgemm", "4096x4096", ""); });
  EXPECT_NE(m.find("MxNxK"), std::string::npos) << m;
  m = message([] { make_ladder("dgemm", "", ""); });
  EXPECT_NE(m.find("hgemm"), std::string::npos) << m;
}

}  // namespace
}  // namespace loom
