#include "driver/ladder.h"

#include <cstdio>
#include <sstream>

#include "bench/report.h"
#include "driver/cli_args.h"
#include "frontend/sizes.h"
#include "ir/error.h"

namespace loom {
namespace {

struct Shape { int64_t m, n, k; };

// The `count` extents of an AxBx.. --shape, each checked like any integer option (a size
// beyond int64 is an error, not clamped); `form` is the message for a wrong form.
std::vector<int64_t> parse_extents(const std::string& shape, size_t count, const std::string& form) {
  std::vector<std::string> parts(1);
  for (char c : shape) {
    if (c == 'x') parts.emplace_back();
    else parts.back().push_back(c);
  }
  if (parts.size() != count) throw Error(form + " (got '" + shape + "')");
  std::vector<int64_t> out;
  for (const auto& p : parts) {
    try {
      out.push_back(parse_int_option("--shape", p, 1, kMaxExtent));
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + "; " + form + " (got '" + shape + "')");
    }
  }
  return out;
}

Shape parse_shape(const std::string& shape) {
  auto e = parse_extents(shape, 3, "--shape must be MxNxK with positive sizes, e.g. 4096x4096x4096");
  return {e[0], e[1], e[2]};
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

// The Hopper GEMM progression: wgmma on TMA slabs, then the organization around it.
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

// FlashAttention's forward as the articles build it (shared/seeds 003/004), one knob per
// rung on one tile: 64 query rows over 4 warps (one m16 atom each, Q resident) and
// BLOCK_N keys per block. The base rung loads a whole K (then V) block's fragments before
// its mmas (INTERLEAVE_LOADS=0): BLOCK_N·D/64 more registers per thread, which past
// D = 64 only fits the 255-register budget with 32-key blocks (D = 128, 64 keys: ~300).
// Every rung names all five ladder knobs, so no default of a later rung leaks into an
// earlier one. Rungs 1-7 are the mma.sync kernel (ATTN_MMA=mma_sync: the articles'
// instructions, sm_80+); rung 8 is Loom's default — on sm_90a the wgmma + TMA kernel
// (k:013), elsewhere the mma.sync kernel again.
void flash_steps(Ladder& l, int64_t head_dim) {
  const std::string tile = "ATTN_MMA=mma_sync,BLOCK_M=64,WARPS=4,BLOCK_N=" +
                           std::to_string(head_dim <= 64 ? 64 : head_dim <= 128 ? 32 : 16) + ",";
  auto rung = [&](const std::string& swizzle, int kv_stages, int interleave, int frag_buffers,
                  const std::string& softmax) {
    return tile + "SWIZZLE=" + swizzle + ",KV_STAGES=" + std::to_string(kv_stages) +
           ",INTERLEAVE_LOADS=" + std::to_string(interleave) +
           ",FRAG_BUFFERS=" + std::to_string(frag_buffers) + ",SOFTMAX=" + softmax;
  };
  l.steps = {
      {"1 base", rung("none", 1, 0, 1, "exp"),
       "Q in registers, K/V of one key block at a time in unswizzled shared memory, exp softmax"},
      {"2 + swizzle", rung("xor", 1, 0, 1, "exp"),
       "16-byte chunk c of row r at c ^ (r % 8): conflict-free cp.async stores and ldmatrix"},
      {"3 + eager K/V", rung("xor", 2, 0, 1, "exp"),
       "K/V rings of 2: K(j+1) issued after S = QK(j)^T, V(j+1) after O += PV(j)"},
      {"4 + fragment interleaving", rung("xor", 2, 1, 1, "exp"),
       "each K/V fragment loaded right before the mmas of its k-step, not all up front"},
      {"5 + SMEM->RF double buffering", rung("xor", 2, 1, 2, "exp"),
       "the next k-step's K/V fragments load while the current k-step's mmas run"},
      {"6 + exp2/FMA softmax", rung("xor", 2, 1, 2, "exp2"),
       "scale*log2(e) folded into one FFMA before ex2.approx instead of a multiply and exp"},
      {"7 mma.sync default", "ATTN_MMA=mma_sync",
       "Loom's own mma.sync knob set for the shape (its defaults; see knobs used)"},
      {"8 wgmma + TMA (sm_90)", "",
       "Loom's default: on sm_90a Q/K/V by TMA, S = QK^T and O += PV as warpgroup MMAs "
       "(FlashAttention-3's instructions; elsewhere the mma.sync kernel of rung 7)"},
  };
}

// "BxHxSxD" -> attention over Q, K, V of that shape; `head_dim` gets D.
std::string flash_expr(const std::string& shape, const std::string& dtype, bool causal,
                       int64_t& head_dim) {
  const auto e = parse_extents(shape, 4, "--shape for the flash ladder must be BxHxSxD with "
                               "positive sizes (batch, heads, sequence length, head dim), e.g. "
                               "4x16x4096x128");
  const int64_t b = e[0], h = e[1], s = e[2], d = e[3];
  const std::string t = "[" + std::to_string(b) + "," + std::to_string(h) + "," +
                        std::to_string(s) + "," + std::to_string(d) + "]:" + dtype;
  head_dim = d;
  return "attention(Q" + t + ", K" + t + ", V" + t + ", causal=" + (causal ? "true" : "false") +
         ")";
}

}  // namespace

std::vector<std::string> ladder_names() {
  return {"sgemm", "splitk", "swizzle", "hgemm", "tf32", "hopper", "flash"};
}

Ladder make_ladder(const std::string& name, const std::string& shape, const std::string& dtype,
                   bool causal) {
  Ladder l;
  l.name = name;
  if (!dtype.empty() && name != "hgemm" && name != "hopper" && name != "flash")
    throw Error("--dtype applies to `loom ladder hgemm`, `hopper` and `flash` (f16 or bf16); "
                "the " + name + " ladder's type is fixed");
  if (causal && name != "flash")
    throw Error("--causal applies to `loom ladder flash` only (attention's mask); the " + name +
                " ladder is a GEMM");
  if (name == "flash") {
    // docs/benchmarking.md's attention table at seqlen 4096: 16k tokens, 2048 / D heads.
    const std::string dt = dtype.empty() ? "bf16" : dtype;
    if (dt != "f16" && dt != "bf16")
      throw Error("--dtype for the flash ladder must be bf16 or f16 (got '" + dt + "')");
    l.name = std::string("flash (") + dt + (causal ? ", causal" : "") + ")";
    int64_t head_dim = 0;
    l.expression = flash_expr(shape.empty() ? "4x16x4096x128" : shape, dt, causal, head_dim);
    l.reference = "";
    flash_steps(l, head_dim);
  } else if (name == "hopper") {
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
      if (!r.kernels.empty()) row.knobs_used = r.kernels[0].knobs;
      // Loom is the last backend; a ladder with a reference has it first.
      const size_t expected = l.reference.empty() ? 1 : 2;
      if (!r.verify.passed) {
        row.error = "verification failed: " + r.verify.message;
      } else if (r.backends.size() == expected) {
        row.ok = true;
        if (expected == 2) row.cublas_us = r.backends[0].timing.median_us;
        row.us = r.backends.back().timing.median_us;
        row.tflops = r.flops / (row.us * 1e6);
      } else {
        row.error = "the run timed " + std::to_string(r.backends.size()) + " backends, expected " +
                    std::to_string(expected);
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
  const bool ref = !l.reference.empty();
  std::vector<TextTable::Column> cols = {{"step"}, {"µs", Align::Right}, {"TFLOP/s", Align::Right}};
  if (ref) cols.push_back({"vs " + l.reference, Align::Right});
  cols.push_back({"gain", Align::Right});
  cols.push_back({"what it bought"});
  TextTable t(cols);
  double prev = 0;
  for (const auto& r : rows) {
    std::vector<std::string> cells = {r.step.name};
    if (!r.ok) {
      cells.insert(cells.end(), ref ? 4 : 3, "-");
      cells.push_back("not run: " + r.error.substr(0, r.error.find('\n')));
    } else {
      cells.push_back(format_us(r.us));
      cells.push_back(format_tflops(r.tflops));
      if (ref) cells.push_back(format_ratio(r.cublas_us / r.us));
      // The gain over the last step that ran: a step that did not run is no baseline.
      cells.push_back(prev > 0 ? format_ratio(prev / r.us) : "");
      cells.push_back(r.step.what);
      prev = r.us;
    }
    t.add_row(cells);
  }
  std::ostringstream o;
  o << "ladder " << l.name << ": " << l.expression << "\n" << t.str();
  o << "knobs per step:\n";
  for (const auto& r : rows) {
    o << "  " << r.step.name << ": " << (r.step.knobs.empty() ? "(defaults)" : r.step.knobs);
    if (!r.knobs_used.empty()) o << "\n      used: " << r.knobs_used;
    o << "\n";
  }
  return o.str();
}

}  // namespace loom
