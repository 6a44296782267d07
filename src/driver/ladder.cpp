#include "driver/ladder.h"

#include <cstdio>
#include <sstream>

#include "bench/report.h"
#include "ir/error.h"

namespace loom {
namespace {

std::string gemm_expr(const std::string& shape, const std::string& fallback) {
  if (shape.empty()) return fallback;
  long long m, n, k;
  if (std::sscanf(shape.c_str(), "%lldx%lldx%lld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1)
    throw Error("--shape must be MxNxK with positive sizes, e.g. 4096x4096x4096 (got '" + shape + "')");
  return "matmul(A[" + std::to_string(m) + "," + std::to_string(k) + "]:f32, B[" +
         std::to_string(k) + "," + std::to_string(n) + "]:f32)";
}

}  // namespace

std::vector<std::string> ladder_names() { return {"sgemm", "splitk", "swizzle"}; }

Ladder make_ladder(const std::string& name, const std::string& shape) {
  Ladder l;
  l.name = name;
  if (name == "sgemm") {
    // The compiler article's progression. Each step adds one optimization to the last.
    l.expression = gemm_expr(shape, "matmul(A[4096,4096]:f32, B[4096,4096]:f32)");
    const std::string tile = "BM=128,BN=128,FM=8,FN=8";
    l.steps = {
        {"naive", "BM=16,BN=16,FM=1,FN=1,STAGE=direct,VECTORIZE=1",
         "one cell per thread, operands straight from global memory"},
        {"register tiling", tile + ",STAGE=direct,VECTORIZE=1",
         "8x8 cells per thread as an outer product: 16 loads per 64 FMAs"},
        {"vectorize", tile + ",STAGE=direct,VECTORIZE=4", "B rows as 16-byte loads"},
        {"shared staging", tile + ",STAGE=sync,BK=8,STAGES=1,VECTORIZE=4",
         "A/B slabs loaded once per block into shared memory (A transposed), 2 barriers/step"},
        {"padding", tile + ",STAGE=sync,BK=8,STAGES=1,VECTORIZE=4,PAD_SMEM=4",
         "rows padded so the transposed A stores spread over banks"},
        {"double buffering", tile + ",STAGE=sync,BK=8,STAGES=2,PIPELINE=1,VECTORIZE=4",
         "next slab's global loads in flight during the math, 1 barrier/step"},
        {"cp.async", tile + ",STAGE=cp_async,BK=8,STAGES=1,VECTORIZE=4",
         "global->shared without registers (A keeps storage order)"},
        {"TMA", tile + ",STAGE=tma,BK=8,STAGES=1,VECTORIZE=4",
         "one bulk tensor copy per slab, completion on an mbarrier"},
        {"pipelining", tile + ",STAGE=cp_async,BK=8,STAGES=3,PIPELINE=1,VECTORIZE=4",
         "3-deep cp.async ring: prologue / main loop / drain"},
        {"CTA swizzle", tile + ",STAGE=sync,BK=8,STAGES=2,PIPELINE=1,VECTORIZE=4,GROUP_M=8",
         "tiles walked in groups of 8 rows: neighbours share A/B panels in L2"},
    };
  } else if (name == "splitk") {
    l.expression = gemm_expr(shape, "matmul(A[128,16384]:f32, B[16384,128]:f32)");
    // The split-k class's tile (64x64, 8x4 cells, padded A stores), split further each step.
    const std::string base = "BM=64,BN=64,FM=8,FN=4,STAGE=sync,BK=16,STAGES=2,PAD_SMEM=4";
    for (int s : {1, 4, 16, 32, 64, 128})
      for (std::string mode : {"atomic", "reduce"}) {
        if (s == 1 && mode == "reduce") continue;
        l.steps.push_back({"SPLITK=" + std::to_string(s) + (s > 1 ? " " + mode : ""),
                           base + ",SPLITK=" + std::to_string(s) + ",SPLITK_MODE=" + mode,
                           s == 1 ? "4 output tiles: most SMs idle"
                                  : "K cut into " + std::to_string(s) + " parts, combined by " +
                                        (mode == "atomic" ? "atomic adds into C (vector red on sm_90)"
                                                          : "a second kernel")});
      }
  } else if (name == "swizzle") {
    // An L2-bound case: low-intensity tiles on a square whose panels overflow L2.
    l.expression = gemm_expr(shape, "matmul(A[8192,8192]:f32, B[8192,8192]:f32)");
    const std::string base = "BM=64,BN=64,FM=4,FN=4,STAGE=sync,BK=16,STAGES=2";
    for (int g : {1, 4, 8, 16})
      l.steps.push_back({"GROUP_M=" + std::to_string(g), base + ",GROUP_M=" + std::to_string(g),
                         g == 1 ? "row-major tile order" : "tiles walked in groups of " +
                                                               std::to_string(g) + " rows"});
  } else {
    std::string names;
    for (const auto& n : ladder_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown ladder '" + name + "'; ladders: " + names);
  }
  return l;
}

std::vector<LadderRow> run_ladder(const Ladder& l, const RunOptions& base,
                                  const std::function<void(const LadderRow&)>& progress) {
  std::vector<LadderRow> rows;
  for (const auto& step : l.steps) {
    LadderRow row;
    row.step = step;
    try {
      RunOptions opt = base;
      opt.bench = true;
      opt.knobs = Knobs::parse(step.knobs);
      RunReport r = run_expression(l.expression, opt);
      if (!r.verify.passed) {
        row.error = "verification failed: " + r.verify.message;
      } else if (r.backends.size() == 2) {
        row.ok = true;
        row.cublas_us = r.backends[0].timing.median_us;
        row.us = r.backends[1].timing.median_us;
        row.tflops = r.flops / (row.us * 1e6);
      }
    } catch (const Error& e) {
      row.error = e.what();
    }
    if (progress) progress(row);
    rows.push_back(row);
  }
  return rows;
}

std::string format_ladder(const Ladder& l, const std::vector<LadderRow>& rows) {
  TextTable t({{"step"}, {"µs", Align::Right}, {"TFLOP/s", Align::Right},
               {"vs cuBLAS", Align::Right}, {"gain", Align::Right}, {"what it bought"}});
  double prev = 0;
  for (const auto& r : rows) {
    if (!r.ok) {
      std::string why = r.error.substr(0, r.error.find('\n'));
      t.add_row({r.step.name, "-", "-", "-", "-", "not run: " + why});
      continue;
    }
    t.add_row({r.step.name, format_us(r.us), format_tflops(r.tflops),
               format_ratio(r.cublas_us / r.us), prev > 0 ? format_ratio(prev / r.us) : "",
               r.step.what});
    prev = r.us;
  }
  std::ostringstream o;
  o << "ladder " << l.name << ": " << l.expression << "\n" << t.str();
  o << "knobs per step:\n";
  for (const auto& r : rows) o << "  " << r.step.name << ": " << r.step.knobs << "\n";
  return o.str();
}

}  // namespace loom
