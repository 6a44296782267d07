#include "tune/problem.h"

#include <algorithm>

#include "ir/error.h"
#include "passes/families/family.h"

namespace loom::tune {

TuneProblem tune_problem(const Graph& g) {
  for (const auto& n : g.nodes) {
    if (n.kind != OpKind::Matmul) continue;
    const Node& a = g.node(n.inputs[0]);
    for (const auto& d : n.shape)
      if (d.is_sym())
        throw Error("the tuner tunes one shape: dimension " + d.sym +
                    " has no value (bind it, e.g. --dims " + d.sym + "=4096)");
    if (a.shape.back().is_sym())
      throw Error("the tuner tunes one shape: dimension " + a.shape.back().sym +
                  " has no value (bind it, e.g. --dims " + a.shape.back().sym + "=4096)");
    TuneProblem p;
    size_t r = n.shape.size();
    for (size_t i = 0; i + 2 < r; ++i) p.batch *= n.shape[i].value;  // rank 4: B x H
    p.out_rank = r;
    p.M = n.shape[r - 2].value;
    p.N = n.shape[r - 1].value;
    p.K = a.shape.back().value;
    p.in = a.dtype;
    p.out = g.node(g.result()).dtype;
    p.epilogue = g.result() != n.id;
    p.a_transposed = a.transposed;
    p.b_transposed = g.node(n.inputs[1]).transposed;
    return p;
  }
  throw Error("the tuner searches contractions: the expression has no matmul/bmm/linear");
}

TuneProblem as_computed(const TuneProblem& p, const Knobs& k) {
  TuneProblem q = p;
  if (k.get_int("SWAP_AB", 0) == 1) std::swap(q.M, q.N);
  return q;
}

std::vector<AtomChoice> atom_choices(const TuneProblem& p, int cc, bool arch_accelerated) {
  std::vector<AtomChoice> out;
  for (const auto& v : find_knob("ATOM")->choices) {
    if (v == "fma") {
      out.push_back({v, &atom("fma_f32")});
      continue;
    }
    const bool warpgroup = v.rfind("wgmma_", 0) == 0;
    // The atom's family says which targets its kernels need (wgmma: sm_90a).
    if (gemm_family_of_atom(v).tuner_needs_accelerated && !arch_accelerated) continue;
    auto type = parse_dtype(v.substr(v.find('_') + 1));
    if (!type) continue;
    const bool operands_fit = *type == p.in || (*type == DType::TF32 && p.in == DType::F32);
    if (!operands_fit) continue;
    if (warpgroup) {
      const AtomDef* a = wgmma_atom(*type, 256);
      if (a && a->min_sm <= cc) out.push_back({v, a});
      continue;
    }
    for (const AtomDef& a : atom_table())
      if (a.kind == AtomKind::Compute && a.threads == WarpAtom::kLanes && a.a_type == *type &&
          a.acc_type == DType::F32 && a.min_sm <= cc) {
        out.push_back({v, &a});
        break;
      }
  }
  return out;
}

// Threads of a warpgroup: four warps issue one wgmma together.
constexpr int64_t kWarpgroupThreads = 128;

BlockShape block_shape(const Knobs& k, const AtomChoice& a) {
  BlockShape b;
  b.FM = k.get_int("FM", 4);
  b.FN = k.get_int("FN", 4);
  b.stage = k.get_str("STAGE", "sync");
  b.stages = k.get_int("STAGES", 1);
  b.split_k = k.get_int("SPLITK", 1);
  b.pad = k.get_int("PAD_SMEM", 0);
  b.swizzle = k.get_str("SWIZZLE", "none");
  b.persistent = k.get_int("PERSISTENT", 0) == 1;
  b.epilogue = k.get_str("EPILOGUE", "direct");
  b.epi_buffers = k.get_int("EPI_BUFFERS", 0);
  if (a.wgmma()) {
    // Warpgroups of m64nNk atoms: WM x WN consumer warpgroups, FM x FN atoms each.
    b.FM = k.get_int("FM", 1);
    b.FN = k.get_int("FN", 1);
    b.WM = k.get_int("WM", 1);
    b.WN = k.get_int("WN", 1);
    b.BM = b.WM * b.FM * a.atom->m;
    b.BN = k.get_int("BN", 128);
    b.BK = k.get_int("BK", 64);
    b.atom_n = b.WN * b.FN > 0 ? b.BN / (b.WN * b.FN) : 0;
    b.consumer_warpgroups = b.WM * b.WN;
    b.warp_specialized = k.get_int("WARP_SPECIALIZE", 0) == 1;
    b.cluster_m = k.get_int("CLUSTER_M", 1);
    b.cluster_k = k.get_int("CLUSTER_K", 1);
    b.a_regs = k.get_str("WGMMA_A", "smem") == "regs";
    b.threads = (b.consumer_warpgroups + (b.warp_specialized ? 1 : 0)) * kWarpgroupThreads;
    // An m64nN f32 accumulator is 64 x N / 128 registers per thread of the warpgroup.
    b.accumulators = b.FM * b.FN * a.atom->m * b.atom_n / kWarpgroupThreads;
  } else if (a.mma()) {
    b.WM = k.get_int("WM", 2);
    b.WN = k.get_int("WN", 2);
    b.BM = b.WM * b.FM * a.atom->m;
    b.BN = b.WN * b.FN * a.atom->n;
    b.BK = k.get_int("BK", 32);
    b.threads = b.WM * b.WN * WarpAtom::kLanes;
    // A fragment per thread is m*n/32 accumulators per atom (4 for m16n8).
    b.accumulators = b.FM * b.FN * a.atom->m * a.atom->n / WarpAtom::kLanes;
  } else {
    b.BM = k.get_int("BM", 64);
    b.BN = k.get_int("BN", 64);
    b.BK = k.get_int("BK", 16);
    b.WM = k.get_int("WM", 0);
    b.WN = k.get_int("WN", 0);
    b.threads = b.FM > 0 && b.FN > 0 ? (b.BM / b.FM) * (b.BN / b.FN) : 0;
    b.accumulators = b.FM * b.FN;
    b.a_kouter = k.get_int("SLAB_KOUTER", b.stage == "sync" ? 1 : 0) == 1;
  }
  return b;
}

int64_t mainloop_smem_bytes(const BlockShape& b, const TuneProblem& p, const Knobs& k) {
  auto align = [](int64_t v) { return (v + 127) / 128 * 128; };
  const int64_t elem = dtype_bytes(p.in);
  if (b.stage == "direct") return 0;
  // A slab: BM rows of BK (or BK rows of BM), B slab likewise; the pad goes on the inner
  // dimension. The exact layout is the pipeline's; this is within a row's pad of it.
  const int64_t row = b.BK + b.pad;
  int64_t ring = b.stages * (align(b.BM * row * elem) + align(b.BN * row * elem));
  // k:015's transposing stage holds a staged operand twice per slot: the box as TMA lands
  // it and the K-major slab the threads write (SLAB_A / SLAB_B = kinner under STAGE=tma).
  if (b.stage == "tma" && p.a_transposed && k.get_str("SLAB_A", "") == "kinner")
    ring += b.stages * align(b.BM * b.BK * elem);
  if (b.stage == "tma" && !p.b_transposed && k.get_str("SLAB_B", "") == "kinner")
    ring += b.stages * align(b.BN * b.BK * elem);
  int64_t epi =
      k.get_str("EPILOGUE", "direct") == "smem" ? align(b.BM * b.BN * dtype_bytes(p.out)) : 0;
  return std::max(ring, epi) + epilogue_smem_bytes(b, p);
}

int64_t epilogue_smem_bytes(const BlockShape& b, const TuneProblem& p) {
  int64_t bytes = 0;
  if (b.epilogue == "tma_store") {
    const int64_t row = b.BN * dtype_bytes(p.out);
    const int64_t strips = std::max<int64_t>(1, row / kEpiStripBytes);
    // k:053: N buffers hold N strips, at most one tile's, except in a persistent tile
    // loop, where N >= 2 x strips makes a ring of whole tiles' strips across tiles.
    const int64_t n = b.epi_buffers;
    const int64_t held = b.persistent && n >= 2 * strips ? n / strips * strips
                                                         : std::min(n, strips);
    bytes += n > 0 ? held * kEpiStripBytes * b.BM : b.BM * row;
  }
  if (b.cluster_k > 1) bytes += b.BM * (b.BN + kClusterPartialPad) * 4;
  return bytes;
}

}  // namespace loom::tune
