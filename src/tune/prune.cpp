#include "tune/prune.h"

#include <algorithm>
#include <sstream>

#include "driver/compile.h"
#include "ir/error.h"
#include "ir/register_file.h"
#include "passes/bank_conflicts.h"

namespace loom::tune {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Stops at 2^62: doubling past it overflows and would never reach a larger v.
int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v && p < (int64_t(1) << 62)) p *= 2;
  return p;
}

// tf32 with a K-major A and an N-major B (B [K, N] as given): wgmma reads tf32 shared
// operands K-major only, so the GEMM runs swapped, B^T as wgmma's A from registers
// (which may lie M-major), A^T as its K-major B. The swap is its orientation there,
// whatever M and N are.
bool tf32_swap_orients(const TuneProblem& p) {
  return dtype_bytes(p.in) == 4 && !p.a_transposed && !p.b_transposed;
}

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The share of a GPU's SMs that clusters of 4 or 8 CTAs can occupy at once: clusters do
// not straddle GPCs, and GPCs of 16-18 SMs leave the odd ones out (H100: 15 of 8 = 120 of
// 132 SMs, measured).
constexpr double kClusterSmShare = 0.92;

}  // namespace

std::string tiling_violation(const TuneProblem& given, const AtomChoice& a, const Knobs& k) {
  const TuneProblem p = as_computed(given, k);
  const BlockShape b = block_shape(k, a);
  // The swap pays where a small M would waste most of wgmma's 64 rows (decode); on a
  // square-ish GEMM it is the same work transposed, not worth a measurement.
  if (k.get_int("SWAP_AB", 0) == 1 && (given.M > 128 || given.M >= given.N) &&
      !(a.wgmma() && tf32_swap_orients(given)))
    return "SWAP_AB=1 with M=" + str(given.M) + ", N=" + str(given.N) +
           ": the swap is for a small M against a wide N (M <= 128, M < N), or for tf32 "
           "with a K-major A and an N-major B (B^T becomes wgmma's A, from registers)";
  if (a.wgmma()) {
    if (b.WN * b.FN <= 0 || b.BN % (b.WN * b.FN) != 0 || b.atom_n % 8 != 0 || b.atom_n < 8 ||
        b.atom_n > 256)
      return "BN=" + str(b.BN) + " over WN x FN = " + str(b.WN * b.FN) +
             " warpgroup atoms is not a wgmma N (a multiple of 8 from 8 to 256)";
    if (b.BM > 256 || b.BN > 256)
      return "block tile " + str(b.BM) + "x" + str(b.BN) +
             " (WM x FM x 64 rows) is over 256 on a side: its accumulators alone fill the "
             "consumer warpgroups' registers";
  } else if (a.mma()) {
    if (b.BM > 256 || b.BN > 256)
      return "block tile " + str(b.BM) + "x" + str(b.BN) +
             " (WM x FM x 16, WN x FN x 8) is over 256 on a side: its accumulators alone fill "
             "the SM's register file";
    if (b.threads < 64)
      return str(b.threads) + " threads per block (WM=" + str(b.WM) + ", WN=" + str(b.WN) +
             "): one warp per block cannot overlap its copies with its mmas";
  } else {
    if (b.BM % b.FM != 0 || b.BN % b.FN != 0)
      return "BM=" + str(b.BM) + ", BN=" + str(b.BN) + " are not multiples of FM=" + str(b.FM) +
             ", FN=" + str(b.FN);
    if (b.threads % WarpAtom::kLanes != 0 || b.threads < 64)
      return "(BM/FM) x (BN/FN) = " + str(b.threads) +
             " threads per block: not a whole number of warps, or fewer than 2";
  }
  if (b.threads > 1024) return str(b.threads) + " threads per block; CUDA allows 1024";
  // 255 registers per thread: accumulators beyond half of them leave too few for the
  // fragments and addresses, and ptxas spills (4x8 f32 mma atoms: 128 + fragments = 234).
  if (b.accumulators > 128)
    return str(b.accumulators) + " accumulator registers per thread (" + str(b.FM) + " x " +
           str(b.FN) +
           (a.wgmma() ? " warpgroup atoms of " + str(a.atom->m * b.atom_n / 128) + ")"
            : a.mma() ? " atoms of " + str(a.atom->m * a.atom->n / 32) + ")"
                      : " cells)") +
           ": with fragments they exceed the 255 registers a thread has";
  // __launch_bounds__(threads, MIN_BLOCKS) caps registers at regs_per_sm / (MIN_BLOCKS x
  // threads); a tile that needs more spills (256x256 f32 cells at MIN_BLOCKS=2: 32
  // registers, 2.7 KiB of spills), and the cost model, which takes the cap as given,
  // would rank it first.
  if (const int64_t min_blocks = k.get_int("MIN_BLOCKS", 0); min_blocks > 0 && b.threads > 0) {
    const int64_t cap = launch_regs_per_thread(b.threads, min_blocks);
    const int need = estimate_registers(b, a, k, p);
    if (need > cap)
      return "MIN_BLOCKS=" + str(min_blocks) + " with " + str(b.threads) +
             " threads caps registers at " + str(cap) + " per thread; the tile needs about " +
             str(need) + ", so ptxas would spill";
  }
  // Tiles of 64 stay legal on smaller problems (decode's M = 1): the search has few smaller
  // ones, and the shipped defaults use 64 there too.
  if (b.BM > std::max<int64_t>(64, pow2_at_least(p.M)) ||
      b.BN > std::max<int64_t>(64, pow2_at_least(p.N)))
    return "block tile " + str(b.BM) + "x" + str(b.BN) + " is larger than the problem's " +
           str(p.M) + "x" + str(p.N) + " rounded up to powers of two: most of it would be idle";
  return "";
}

std::string staging_violation(const TuneProblem& given, const AtomChoice& a, const Knobs& k,
                              const DeviceInfo& dev) {
  const TuneProblem p = as_computed(given, k);
  const BlockShape b = block_shape(k, a);
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const int64_t elem = dtype_bytes(p.in);
  if (b.BK > std::max<int64_t>(32, pow2_at_least(p.K)))
    return "BK=" + str(b.BK) + " is deeper than K=" + str(p.K) + " rounded up to a power of two";
  if (a.wgmma()) {
    // TMA where it can address the operands; the threads' copies (STAGE=cp_async) where
    // it cannot: rows that are not whole 16-byte units, or tf32 operands that are not
    // K-major (wgmma reads 32-bit operands K-major only, and a box lands in storage order).
    // The stored rows of A are K (M when given transposed), of B N (K when transposed).
    const int64_t a_row = given.a_transposed ? given.M : given.K;
    const int64_t b_row = given.b_transposed ? given.K : given.N;
    const bool rows16 = a_row * elem % 16 == 0 && b_row * elem % 16 == 0;
    // tf32: the slab wgmma reads as B must be K-major — B given transposed, or A when
    // swapped (SWAP_AB=1: B^T is then wgmma's A, which registers may hold M-major;
    // other_violation checks WGMMA_A for it, a later group of the search).
    const bool tf32_k_major =
        elem != 4 || (k.get_int("SWAP_AB", 0) == 1 ? !given.a_transposed : given.b_transposed);
    if (b.stage != "tma" && b.stage != "cp_async")
      return "ATOM=" + a.knob + " with STAGE=" + b.stage +
             ": wgmma's slabs are filled by TMA or, where TMA cannot address them, cp.async";
    if (b.stage == "cp_async" && rows16 && tf32_k_major)
      return "ATOM=" + a.knob + " with STAGE=cp_async: TMA can load these operands (rows of " +
             "whole 16-byte units, K-major where 32-bit); the threads' copies are for those it "
             "cannot";
    // Unswapped, k:015's transposing stage (SLAB_B=kinner) writes an N-major B K-major
    // after TMA lands it.
    if (b.stage == "tma" && !tf32_k_major &&
        !(k.get_int("SWAP_AB", 0) == 0 && k.get_str("SLAB_B", "") == "kinner"))
      return "ATOM=" + a.knob + " with STAGE=tma: wgmma reads tf32 operands K-major only and "
             "TMA cannot transpose; SLAB_B=kinner transposes in shared memory after it, "
             "STAGE=cp_async while the threads copy";
    // The cp.async producer warpgroup (k:030) feeds one tile per CTA, without clusters.
    if (b.stage == "cp_async" && k.get_int("WARP_SPECIALIZE", 0) == 1 &&
        (k.get_int("PERSISTENT", 0) == 1 || k.get_int("CLUSTER_M", 1) > 1 ||
         k.get_int("CLUSTER_N", 1) > 1))
      return "WARP_SPECIALIZE=1 with STAGE=cp_async: the cp.async producer is built for one "
             "tile per CTA without clusters (PERSISTENT=0, CLUSTER_M=CLUSTER_N=1)";
  }
  // REALIGN=1 changes only the threads' copies of rows of an odd number of 16-bit
  // elements (k:015: TMA and cp.async cannot address them); elsewhere it builds REALIGN=0's
  // kernel, which would be measured twice.
  if (k.get_int("REALIGN", 0) == 1) {
    const int64_t a_row = given.a_transposed ? given.M : given.K;
    const int64_t b_row = given.b_transposed ? given.K : given.N;
    if (elem != 2 || b.stage == "tma" || (a_row % 2 == 0 && b_row % 2 == 0))
      return "REALIGN=1 without rows of an odd number of 16-bit elements that the threads copy "
             "(a 16-bit operand with an odd row length, STAGE other than tma): the kernel is "
             "REALIGN=0's";
  }
  if (a.mma() && b.BK % a.atom->k != 0)
    return "BK=" + str(b.BK) + " is not a multiple of the atom's k=" + str(a.atom->k);
  if (b.split_k * b.cluster_k > 1 && p.K / (b.split_k * b.cluster_k) < 2 * b.BK)
    return "SPLITK=" + str(b.split_k) + " x CLUSTER_K=" + str(b.cluster_k) + " leaves " +
           str(p.K / (b.split_k * b.cluster_k)) + " of K per CTA, under two BK=" + str(b.BK) +
           " slabs";
  if (b.stage == "sync" && b.stages > 2)
    return "STAGE=sync with STAGES=" + str(b.stages) +
           ": register double buffering uses 1 or 2 stages; deeper rings need cp_async or tma";
  if (b.stage == "cp_async" && cc < 80) return "STAGE=cp_async needs sm_80 or newer";
  if (b.stage == "tma") {
    if (cc < 90) return "STAGE=tma needs sm_90 or newer";
    // cuTensorMapEncodeTiled: at most 256 elements per box dimension, the inner one a
    // multiple of 16 bytes, global rows a multiple of 16 bytes.
    for (auto [name, v] : {std::pair<const char*, int64_t>{"BM", b.BM}, {"BN", b.BN}, {"BK", b.BK}})
      if (v > 256)
        return std::string("TMA box dimension ") + name + "=" + str(v) +
               " is over the 256 elements a box dimension may have";
    if (b.BK * elem % 16 != 0 || b.BN * elem % 16 != 0)
      return "TMA boxes need inner dimensions of a multiple of 16 bytes: A's BK=" + str(b.BK) +
             " and B's BN=" + str(b.BN) + " elements of " + str(elem) + " B";
    if (p.K * elem % 16 != 0 || p.N * elem % 16 != 0)
      return "TMA needs global rows of a multiple of 16 bytes: K=" + str(p.K) + ", N=" + str(p.N) +
             " elements of " + str(elem) + " B";
  }
  if (b.swizzle != "none" && b.pad > 0)
    return "SWIZZLE=" + b.swizzle + " with PAD_SMEM=" + str(b.pad) + ": the two do not compose";
  if (b.swizzle == "xor" && (!is_pow2(b.BK * elem) || b.BK * elem < 32))
    return "SWIZZLE=xor needs slab rows of a power of two of at least 32 bytes; BK=" + str(b.BK) +
           " makes " + str(b.BK * elem) + " B";
  const int64_t smem = mainloop_smem_bytes(b, p, k);
  const int64_t beside = epilogue_smem_bytes(b, p);
  if (dev.smem_per_block_optin > 0 && smem > dev.smem_per_block_optin)
    return "needs about " + str(smem) + " B of shared memory (" + str(b.stages) + " stages x (" +
           str(b.BM) + " + " + str(b.BN) + ") rows x " + str(b.BK + b.pad) + " x " + str(elem) +
           " B" + (k.get_str("EPILOGUE", "direct") == "smem" ? ", or the staged epilogue" : "") +
           (beside > 0 ? ", plus " + str(beside) + " B for " +
                             (b.cluster_k > 1 ? std::string("CLUSTER_K's f32 partial tile")
                              : b.epi_buffers > 0 ? "the TMA-store strip buffers"
                                                  : "the TMA-store output tile")
                       : std::string()) +
           "); " + (dev.name.empty() ? std::string("the device") : dev.name) + " allows " +
           str(dev.smem_per_block_optin) + " B per block";
  return "";
}

std::string split_violation(const TuneProblem& given, const AtomChoice& a, const Knobs& k,
                            const DeviceInfo& dev) {
  const TuneProblem p = as_computed(given, k);
  const BlockShape b = block_shape(k, a);
  const int64_t S = b.split_k, c = b.cluster_k;
  if (S <= 1 && c <= 1) return "";
  const std::string split =
      c > 1 ? "SPLITK=" + str(S) + " x CLUSTER_K=" + str(c) : "SPLITK=" + str(S);
  const int64_t tiles = p.batch * ((p.M + b.BM - 1) / b.BM) * ((p.N + b.BN - 1) / b.BN);
  if (tiles >= dev.sm_count)
    return split + " with " + str(tiles) +
           " output tiles: the grid already "
           "fills the " +
           str(dev.sm_count) + " SMs without splitting K";
  // CLUSTER_K's own legality (atom, cluster size, BM, combine mode) is the passes' to
  // refuse (PassRefusals); what is here is whether the split pays on this GPU.
  if (c > 1) {
    // Clusters live within a GPC (16-18 SMs on H100), so clusters of 4 or 8 leave some
    // SMs out: an H100 held only 15 clusters of 8 such CTAs, and 16 ran in two waves,
    // 25.1 us against 16.9 us for 8 (bench/NOTES.md, 2026-11-22, the epilogue).
    const int64_t usable = c > 2 ? int64_t(kClusterSmShare * double(dev.sm_count)) : dev.sm_count;
    const int64_t resident = usable / c;
    if (tiles * S > resident)
      return split + " over " + str(tiles) + " tiles makes " + str(tiles * S) +
             " clusters of " + str(c) + "; about " + str(resident) + " fit on the " +
             str(dev.sm_count) + " SMs at once, so they would run in waves";
  }
  if (tiles * S > 8 * int64_t(dev.sm_count))
    return "SPLITK=" + str(S) + " makes " + str(tiles * S) + " blocks, over 8 per SM";
  if (k.get_str("SPLITK_MODE", "reduce") == "atomic" && (p.out != DType::F32 || p.epilogue))
    return "SPLITK_MODE=atomic needs an f32 output without a fused epilogue";
  return "";
}

std::string other_violation(const TuneProblem& p, const AtomChoice& a, const Knobs& k) {
  const BlockShape b = block_shape(k, a);
  const bool swapped = k.get_int("SWAP_AB", 0) == 1;
  // tf32 on TMA slabs with A in shared memory: the computed A (B^T when swapped) must be
  // K-major; an M-major one goes through registers (staging_violation checks only the
  // computed B: WGMMA_A is a later group of the search).
  if (a.wgmma() && dtype_bytes(p.in) == 4 && b.stage == "tma" && !b.a_regs &&
      !(swapped ? p.b_transposed : !p.a_transposed || k.get_str("SLAB_A", "") == "kinner"))
    return "ATOM=" + a.knob + " with STAGE=tma and WGMMA_A=smem: wgmma reads tf32 shared "
           "operands K-major only, and its A is M-major here (" +
           (swapped ? "SWAP_AB=1 makes A the row-major B, transposed" : "A is given transposed") +
           "): use WGMMA_A=regs" + (swapped ? "" : ", or SLAB_A=kinner (transposed in shared memory)");
  if (b.epilogue == "tma_store") {
    if (!a.wgmma()) return "EPILOGUE=tma_store stores wgmma accumulators: it needs ATOM=wgmma_*";
    if (p.batch != 1 && p.out_rank != 3)
      return "EPILOGUE=tma_store takes a 2-D output or a bmm's [B, M, N]; this one has rank " +
             str(int64_t(p.out_rank));
    // Swapped, each consumer warpgroup's cells are a column band of C and one store
    // statement's cells span its warps' column strips: k:053 takes the whole tile
    // (EPI_BUFFERS=0), not the strip stream.
    if (swapped && b.epi_buffers > 0)
      return "EPILOGUE=tma_store,EPI_BUFFERS=" + str(b.epi_buffers) +
             " with SWAP_AB=1: the swapped kernel stores a transposed tile, whose store "
             "statements span column strips; use EPI_BUFFERS=0 (the whole tile)";
    if (p.N * dtype_bytes(p.out) % 16 != 0)
      return "EPILOGUE=tma_store: output rows of " + str(p.N * dtype_bytes(p.out)) +
             " B are not a multiple of 16 B (a tensor map's stride)";
    if (b.split_k > 1)
      return "EPILOGUE=tma_store with SPLITK=" + str(b.split_k) +
             ": the split kernel stores partial sums (into a workspace, or by atomic adds), "
             "not the output tile";
    if (k.get_str("CONSUMERS", "cooperative") == "pingpong")
      return "EPILOGUE=tma_store with CONSUMERS=pingpong: k:053 takes the epilogue of "
             "consumer arms `threadIdx.x < C`, and ping-pong's second warpgroup owns whole "
             "tiles of its own";
    if (b.epi_buffers > 0 && b.WN > 1)
      return "EPI_BUFFERS=" + str(b.epi_buffers) + " with WN=" + str(b.WN) +
             ": strip buffers belong to one warpgroup column (use WN=1 or EPI_BUFFERS=0)";
  }
  return "";
}

std::string knob_rule_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k,
                                const DeviceInfo& dev) {
  std::string why = tiling_violation(p, atom, k);
  if (why.empty()) why = staging_violation(p, atom, k, dev);
  if (why.empty()) why = split_violation(p, atom, k, dev);
  if (why.empty()) why = other_violation(p, atom, k);
  return why;
}

bool has_cluster(const Knobs& k) {
  return k.get_int("CLUSTER_M", 1) > 1 || k.get_int("CLUSTER_N", 1) > 1 ||
         k.get_int("CLUSTER_K", 1) > 1;
}

std::string PassRefusals::operator()(const Knobs& k) {
  if (!has_cluster(k)) return "";
  auto [it, fresh] = cache_.try_emplace(k.str());
  if (!fresh) return it->second;
  CompileOptions opt;
  opt.knobs = k;
  opt.target = target_;
  opt.stop_after = "t:010_partition_loops";
  try {
    compile_graph(g_, opt);
  } catch (const Error& e) {
    it->second = e.what();
  }
  return it->second;
}

std::string stage1_violation(const TuneProblem& p, const AtomChoice& atom, const Knobs& k,
                             const DeviceInfo& dev, PassRefusals& refusals) {
  std::string why = knob_rule_violation(p, atom, k, dev);
  if (why.empty()) why = refusals(k);
  return why;
}

KernelVerdict check_kernel_ir(const CompileState& s, const DeviceInfo& dev,
                              double max_read_conflict) {
  KernelVerdict v;
  const KernelProgram& kp = s.kernel;
  std::vector<SharedAccessReport> main;  // the kernel with the most shared accesses
  for (const auto& k : kp.kernels) {
    const int64_t smem = kernel_smem_bytes(shared_layout(kp, k), k);
    if (dev.smem_per_block_optin > 0 && smem > dev.smem_per_block_optin) {
      v.reason = "kernel " + k.name + " needs " + str(smem) + " B of shared memory; " +
                 (dev.name.empty() ? std::string("the device") : dev.name) + " allows " +
                 str(dev.smem_per_block_optin) + " B per block";
      return v;
    }
    if (k.block_threads > 0 && dev.max_threads_per_sm > 0 &&
        k.block_threads > dev.max_threads_per_sm) {
      v.reason = "kernel " + k.name + " has " + str(k.block_threads) +
                 " threads per block; an SM holds " + str(dev.max_threads_per_sm);
      return v;
    }
    std::vector<SharedAccessReport> reports = bank_conflicts(kp, k);
    if (reports.size() > main.size()) main = std::move(reports);
  }
  // Sums over the kernel's shared accesses, each counted once: the mainloop's reads and
  // slab writes dominate the statements of a GEMM kernel.
  double rw = 0, ri = 0, ww = 0, wi = 0;
  for (const auto& r : main) {
    if (!r.evaluated) continue;
    const bool read = r.op == "load" || r.op == "ldmatrix";
    (read ? rw : ww) += double(r.wavefronts);
    (read ? ri : wi) += double(r.ideal);
    if (read && r.factor() >= max_read_conflict) {
      std::ostringstream o;
      o << "bank conflicts: " << r.op << " of " << r.tensor << " takes " << r.wavefronts
        << " wavefronts per warp instruction where " << r.ideal << " would do (" << r.factor()
        << "x; the -v table of loom compile shows it)";
      v.reason = o.str();
      return v;
    }
  }
  if (ri > 0) v.smem.reads = rw / ri;
  if (wi > 0) v.smem.writes = ww / wi;
  return v;
}

std::string resource_violation(const CompiledCandidate& c, const DeviceInfo& dev) {
  for (const auto& k : c.kernels) {
    const ResourceReport& r = k.report;
    if (r.spill_store_bytes > 0 || r.spill_load_bytes > 0)
      return "ptxas spills in " + k.name + ": " + str(r.spill_store_bytes) + " B stored, " +
             str(r.spill_load_bytes) + " B loaded (" + str(r.registers) + " registers)";
    if (!r.wgmma_serialized.empty())
      return "ptxas serialized the wgmma of " + k.name + " (" + r.wgmma_serialized +
             "): every product waits for the one before it";
    if (r.registers > 0 && dev.regs_per_sm > 0 &&
        int64_t(r.registers) * k.block_threads > dev.regs_per_sm)
      return k.name + ": " + str(r.registers) + " registers x " + str(k.block_threads) +
             " threads = " + str(int64_t(r.registers) * k.block_threads) + " > the " +
             str(dev.regs_per_sm) + " registers of an SM: no block can be resident";
    if (dev.smem_per_block_optin > 0 && k.smem_bytes + r.shared_bytes > dev.smem_per_block_optin)
      return k.name + " needs " + str(k.smem_bytes + r.shared_bytes) + " B of shared memory; " +
             (dev.name.empty() ? std::string("the device") : dev.name) + " allows " +
             str(dev.smem_per_block_optin) + " B per block";
  }
  return "";
}

void tf32_transposing_slabs(const TuneProblem& given, const AtomChoice& a, Knobs& k) {
  if (!a.wgmma() || dtype_bytes(given.in) != 4 || k.get_str("STAGE", "") != "tma" ||
      k.get_int("SWAP_AB", 0) == 1)
    return;
  if (given.a_transposed) k.set("SLAB_A", "kinner");
  if (!given.b_transposed) k.set("SLAB_B", "kinner");
}

}  // namespace loom::tune
