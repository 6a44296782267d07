#include "driver/ladder.h"

#include <cstdio>
#include <sstream>

#include "bench/report.h"
#include "ir/error.h"

namespace loom {
namespace {

struct Shape { long long m, n, k; };

Shape parse_shape(const std::string& shape) {
  Shape s{};
  if (std::sscanf(shape.c_str(), "%lldx%lldx%lld", &s.m, &s.n, &s.k) != 3 || s.m < 1 ||
      s.n < 1 || s.k < 1)
    throw Error("--shape must be MxNxK with positive sizes, e.g. 4096x4096x4096 (got '" + shape + "')");
  return s;
}

std::string gemm_expr(const Shape& s, const std::string& dtype) {
  return "matmul(A[" + std::to_string(s.m) + "," + std::to_string(s.k) + "]:" + dtype + ", B[" +
         std::to_string(s.k) + "," + std::to_string(s.n) + "]:" + dtype + ")";
}

std::string gemm_expr(const std::string& shape, const std::string& fallback) {
  return shape.empty() ? fallback : gemm_expr(parse_shape(shape), "f32");
}

// The HGEMM article's progression (mma.sync + ldmatrix), each rung one optimization on
// the last, ending at Loom's own mma defaults. 2x2 warps of 4x8 m16n8k16 atoms (128x128
// blocks) throughout, so the rungs differ only in how operands reach the fragments.
void hgemm_steps(Ladder& l, const std::string& dtype) {
  // The article's rungs store C straight from the fragments (EPILOGUE=direct, set so the
  // mma default's staged epilogue does not leak into them); the last step is the default.
  const std::string base = "ATOM=mma_" + dtype + ",WM=2,WN=2,FM=4,FN=8,VECTORIZE=8";
  const std::string padded = base + ",EPILOGUE=direct,BK=32,PAD_SMEM=8";
  const std::string swizzled = base + ",EPILOGUE=direct,BK=32,SWIZZLE=xor";
  l.steps = {
      {"01a direct fragments", padded + ",STAGE=sync,STAGES=1,LDMATRIX=0",
       "each lane loads its fragment values from shared memory one by one (2-byte LDS)"},
      {"01b ldmatrix", padded + ",STAGE=sync,STAGES=1,LDMATRIX=1",
       "one ldmatrix.x4 per A fragment, .x2.trans per B fragment"},
      {"02 XOR swizzle", swizzled + ",STAGE=sync,STAGES=1",
       "Swizzle<B,M,S> from the row length instead of the pad: conflict-free stores and ldmatrix"},
      {"03 multistage", swizzled + ",STAGE=cp_async,STAGES=3",
       "3-deep cp.async ring: global->shared without registers, 2 slabs in flight"},
      {"04 fragment pipelining", swizzled + ",STAGE=cp_async,STAGES=3,FRAG_BUFFERS=2",
       "next atom step's fragments loaded while the current step's mmas run"},
      {"05 block swizzle", swizzled + ",STAGE=cp_async,STAGES=3,FRAG_BUFFERS=2,GROUP_M=8",
       "tiles walked in groups of 8 rows so neighbours share panels in L2"},
      {"Loom default", "ATOM=mma_" + dtype,
       "BK=64 slabs (128-byte A rows: half the L2 requests), 2-deep ring, staged epilogue"},
  };
}

// Issue 6's Hopper progression: wgmma on TMA slabs, then the organization around it.
// Every rung reads 128-byte swizzled 64-deep slabs through a 4-deep ring.
void hopper_steps(Ladder& l, const std::string& dtype) {
  auto base_stages = [&](int stages, const std::string& epilogue) {
    return "ATOM=wgmma_" + dtype + ",STAGE=tma,SWIZZLE=128B,BK=64,STAGES=" +
           std::to_string(stages) + ",GROUP_M=8," + epilogue;
  };
  const std::string base = base_stages(4, "EPILOGUE=direct");
  l.steps = {
      {"1 TMA + wgmma", base + ",WM=1,WN=1,BN=256",
       "one warpgroup, m64n256k16; thread 0 issues the TMA ring, everyone waits, bar.sync per slab"},
      {"2 + warp specialization", base + ",WM=1,WN=1,BN=256,WARP_SPECIALIZE=1",
       "a producer warpgroup feeds the ring (full/empty mbarriers, setmaxnreg); wgmma.wait 1"},
      {"3 + 2 consumer warpgroups", base + ",WM=2,WN=1,BN=256,WARP_SPECIALIZE=1",
       "two consumer warpgroups share each slab: 128x256 blocks"},
      {"4 + persistent", base + ",WM=2,WN=1,BN=256,WARP_SPECIALIZE=1,PERSISTENT=1",
       "one CTA per SM walks the tiles; the producer runs ahead into the next tile"},
      {"4b + ping-pong consumers", base + ",WM=2,WN=1,BN=256,WARP_SPECIALIZE=1,PERSISTENT=1,CONSUMERS=pingpong",
       "each consumer warpgroup owns every other 64x256 tile; mainloops take turns, epilogues overlap the other's math"},
      {"5 + cluster multicast", base + ",WM=2,WN=1,BN=256,WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2",
       "2-CTA clusters along M: each producer loads half of B for both (TMA multicast)"},
      // 2 strip buffers per consumer warpgroup (32 KB) keep the fourth stage (k:053).
      {"6 + TMA-store epilogue",
       base_stages(4, "EPILOGUE=tma_store,EPI_BUFFERS=2") +
           ",WM=2,WN=1,BN=256,WARP_SPECIALIZE=1,PERSISTENT=1,CLUSTER_M=2",
       "each consumer warpgroup writes its half of C in 64-column strips (stmatrix) to 2 "
       "swizzled shared buffers, one thread TMA-stores each strip while the next is written "
       "and the next tile's mainloop runs; STAGES=4"},
  };
}

// The TF32 article's progression (mma.sync m16n8k8 on f32 inputs rounded to tf32), as
// knob sets: 128x128x16 blocks of 2x4 warps of 4x4 atoms, two blocks per SM on aligned
// shapes (the article's __launch_bounds__(256, 2); the bounds guards of ragged shapes
// would spill under that register cap), then Loom's own tf32 default.
void tf32_steps(Ladder& l, bool aligned) {
  const std::string base =
      "ATOM=mma_tf32,WM=2,WN=4,FM=4,FN=4,BK=16,STAGE=cp_async,EPILOGUE=direct,";
  const std::string cap = aligned ? ",MIN_BLOCKS=2" : "";
  l.steps = {
      {"1 transposed B + ldmatrix", base + "STAGES=1,SLAB_B=kinner" + cap,
       "B stored [BN][BK] by 4-byte copies so both operands load with ldmatrix (b32 view)"},
      {"2 swizzle", base + "STAGES=1,SLAB_B=kinner,SWIZZLE=64B" + cap,
       "XOR-swizzled slabs: conflict-free ldmatrix rows"},
      {"3 double buffer + grid swizzle", base + "STAGES=2,SLAB_B=kinner,SWIZZLE=64B,GROUP_M=8" + cap,
       "2-deep cp.async ring; tiles walked in groups of 8 rows"},
      {"4 conflict-free B reads", base + "STAGES=1,SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8" + cap,
       "B kept row-major ([BK][BN], 16-byte copies), read element-wise from rows padded by 8"},
      {"5 double buffer", base + "STAGES=2,SWIZZLE=64B,PAD_KOUTER=8,GROUP_M=8" + cap,
       "the same with a 2-deep ring"},
      {"Loom default", "ATOM=mma_tf32",
       "the shipped tf32 mma default (2x2 warps of 4x8 atoms, BK=32, 3 stages, A swizzled, "
       "B padded, staged epilogue on aligned shapes)"},
  };
}

}  // namespace

std::vector<std::string> ladder_names() {
  return {"sgemm", "splitk", "swizzle", "hgemm", "tf32", "hopper"};
}

Ladder make_ladder(const std::string& name, const std::string& shape, const std::string& dtype) {
  Ladder l;
  l.name = name;
  if (!dtype.empty() && name != "hgemm" && name != "hopper")
    throw Error("--dtype applies to `loom ladder hgemm` and `loom ladder hopper` (f16 or bf16); "
                "the " + name + " ladder's type is fixed");
  if (name == "hopper") {
    const std::string dt = dtype.empty() ? "bf16" : dtype;
    if (dt != "f16" && dt != "bf16")
      throw Error("--dtype for the hopper ladder must be f16 or bf16 (got '" + dt + "')");
    l.name = "hopper (" + dt + ")";
    l.expression = gemm_expr(parse_shape(shape.empty() ? "4096x4096x4096" : shape), dt);
    hopper_steps(l, dt);
  } else if (name == "hgemm") {
    const std::string dt = dtype.empty() ? "f16" : dtype;
    if (dt != "f16" && dt != "bf16")
      throw Error("--dtype for the hgemm ladder must be f16 or bf16 (got '" + dt + "')");
    l.name = "hgemm (" + dt + ")";
    l.expression = gemm_expr(parse_shape(shape.empty() ? "4096x4096x4096" : shape), dt);
    hgemm_steps(l, dt);
  } else if (name == "tf32") {
    const Shape s = parse_shape(shape.empty() ? "4096x4096x4096" : shape);
    l.expression = gemm_expr(s, "f32");
    tf32_steps(l, s.m % 128 == 0 && s.n % 128 == 0);
  } else if (name == "sgemm") {
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
