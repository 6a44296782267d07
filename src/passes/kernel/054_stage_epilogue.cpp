// k:054_stage_epilogue — the accumulator tile reaches global memory through a shared
// tile (EPILOGUE=smem).
//
// The direct epilogue stores each thread's cells where they lie: an mma lane holds two
// adjacent columns of two rows per atom, so one warp store touches 8 rows x 16 bytes
// (half-used 32-byte sectors for f16). Staged, every thread writes its values into a
// shared tile of the block's output, and the block then copies the tile row by row with
// coalesced 16-byte stores, as CUTLASS's epilogues do. Steps, for each kernel whose
// mainloop multiplies (an fma or mma atom: SIMT and tensor-core kernels alike;
// split-K's zero_fill and splitk_reduce keep their stores):
//  1. epilogue_cells (passes/epilogue_cells.h) finds the epilogue's stores and each
//     value's (row, col) in the block tile TM x TN, or refuses (split-K's atomic
//     combine, stores that do not tile a block once).
//  2. The fused ops stay where they are, in fragment order: they already know each
//     value's (row, col) and operands (bias[n], R[m, n]), so the results are bit for bit
//     those of EPILOGUE=direct. The tile holds the output dtype (the value is rounded
//     once, on its way into the tile), half the bytes of f32 for f16/bf16, and the copy
//     out is a plain copy.
//  3. Copy width W: the widest power of two of at most 16 bytes dividing TN for which
//     every row start `base + r * N` is provably a multiple of W (an N that is not, or a
//     symbolic N, gets narrower stores, down to scalars: consecutive lanes then still
//     write consecutive elements), and the output's width too (a view's pitch may be a
//     multiple of W where its width is not: a chunk then crossed N into the caller's
//     columns). The shared reads use the same W.
//  4. The tile `<out>_s[TM, TN]` gets the padding or XOR swizzle that the bank-conflict
//     model (src/passes/bank_conflicts.h) finds cheapest for one warp of each store into
//     it and of the copy's loads (weighted by how often each runs). Where the kernel has
//     other shared tensors the tile is overlay part 1: it reuses their bytes
//     (TensorDecl::overlay), and the block grows only by what the tile needs beyond them.
//  5. Rewrite: `cp.async.wait 0` where copies may be in flight, a barrier where the
//     mainloop's last iteration does not end in one (the slabs must be dead before the
//     tile overwrites them), the stores retargeted to the tile, a barrier, then
//     `for c: e = c * T + threadIdx.x; if in bounds: v = load.vW tile[e / (TN/W), e % (TN/W)
//     * W]; store.vW out[base + row * N + col] = v`, guarded per row and column wherever
//     the direct stores were.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/epilogue_cells.h"
#include "passes/passes.h"
#include "passes/bank_conflicts.h"

namespace loom {
namespace {

class EpilogueStager {
 public:
  EpilogueStager(CompileState& s, KernelOp& k)
      : s_(s), p_(s.kernel), k_(k), c_(epilogue_cells(s.kernel, k)) {}

  void run() {
    choose_width();
    rewrite(choose_layout());
  }

 private:
  // Step 3.
  void choose_width() {
    const int eb = dtype_bytes(c_.out->dtype);
    const Expr n = c_.out->strides()[c_.out->shape.size() - 2];
    width_ = 1;
    const Expr width = c_.out->shape[c_.out->shape.size() - 1];
    for (int64_t w = 16 / eb; w > 1; w /= 2) {
      if (c_.cols % w != 0) continue;
      // A view's row (out_pitch=) may be wider than the output: a chunk must end at N, or
      // it writes the pitch's columns past N, which are not the output's (the caller's).
      if (!provably_divisible(distribute_constants(width), w)) continue;
      Expr row_start = distribute_constants(c_.stores[0].base + Expr::var("row") * n);
      if (!provably_divisible(row_start, w)) continue;
      width_ = int(w);
      break;
    }
  }

  // ---- step 4: the tile's layout ----

  // One warp's wavefronts for `access` (a Write to or Load from the tile) with the
  // enclosing loop variables at 0: the instruction's pattern repeats over the others.
  int64_t wavefronts(const TensorDecl& tile, const Block& lets, const Stmt& access,
                     const std::vector<std::pair<std::string, int64_t>>& loops) const {
    KernelProgram p;
    p.tensors = {tile};
    KernelOp k;
    k.block_threads = std::min(32, k_.block_threads);
    k.body = c_.top_lets;
    k.body.insert(k.body.end(), lets.begin(), lets.end());
    k.body.push_back(access);
    std::map<std::string, Expr> zero;
    for (const auto& [v, e] : loops) zero[v] = Expr(0);
    substitute_block(k.body, zero);
    std::vector<SharedAccessReport> r = bank_conflicts(p, k);
    LOOM_CHECK(r.size() == 1 && r[0].evaluated, "probe of " + tile.name + " was not evaluated");
    return r[0].wavefronts;
  }

  Expr tile_offset(const Expr& row, const Expr& col, const TensorDecl& tile) const {
    return row * tile.strides()[0] + col;
  }

  // Shared-memory cycles of the epilogue with `tile`: each store into it and the copy's
  // load, one warp each, times how often they run.
  int64_t cost(const TensorDecl& tile) const {
    int64_t total = 0;
    for (const EpilogueStore& site : c_.stores) {
      Stmt st = *site.store;
      st.tensor = tile.name;
      st.index = {tile_offset(site.row, site.col, tile)};
      int64_t runs = 1;
      for (const auto& l : site.loops) runs *= l.second;
      total += wavefronts(tile, site.lets, st, site.loops) * runs;
    }
    const Expr e = Expr::var("threadIdx.x");
    const int64_t per_row = c_.cols / width_;
    Stmt ld = Stmt::Load("v", tile.name, {tile_offset(e / per_row, e % per_row * width_, tile)});
    ld.width = width_;
    ld.dst_index = {Expr(0)};
    total += wavefronts(tile, {}, ld, {}) * copy_steps();
    return total;
  }

  int64_t copy_steps() const {
    return (c_.rows * c_.cols / width_ + k_.block_threads - 1) / k_.block_threads;
  }

  TensorDecl choose_layout() const {
    TensorDecl tile;
    tile.name = unique_name(c_.out->name + "_s");
    tile.dtype = c_.out->dtype;
    tile.shape = {Expr(c_.rows), Expr(c_.cols)};
    tile.role = TensorRole::Shared;
    // Every vector access keeps its alignment: rows of a multiple of the widest.
    int64_t unit = width_;
    for (const EpilogueStore& site : c_.stores) unit = std::max<int64_t>(unit, site.store->width);
    const int eb = dtype_bytes(tile.dtype);
    std::vector<TensorDecl> candidates;
    // Pads of whole units up to one bank row (128 B): every row-stride residue mod 32 banks.
    for (int64_t pad = 0; pad == 0 || pad * eb < 128; pad += unit) {
      TensorDecl c = tile;
      c.pad = pad;
      candidates.push_back(c);
    }
    // XOR swizzles of unit-sized groups (the vectors stay whole), for power-of-two rows.
    const int64_t n = c_.rows * c_.cols;
    const int base = int(std::log2(double(unit)));
    if ((c_.cols & (c_.cols - 1)) == 0)
      for (int bits = 1; bits <= 3; ++bits)
        for (int shift = bits; shift <= 10; ++shift) {
          const int64_t span = int64_t(1) << (base + shift + bits);
          if (span > n || n % span != 0) continue;
          TensorDecl c = tile;
          c.swizzle = Swizzle{bits, base, shift};
          candidates.push_back(c);
        }
    // Fewest shared-memory cycles; then the fewest bytes beyond the mainloop's (which the
    // tile reuses for free); then padding, whose addresses fold into immediates where a
    // swizzle costs an XOR per access; then the smaller footprint.
    const int64_t reused = shared_layout(p_, k_).total_bytes;
    auto key = [&](const TensorDecl& c) {
      const int64_t bytes = c.footprint().const_value() * eb;
      return std::make_tuple(cost(c), std::max<int64_t>(0, bytes - reused), c.swizzle.bits,
                             bytes);
    };
    const TensorDecl* best = &candidates[0];
    auto best_key = key(*best);
    for (const TensorDecl& c : candidates) {
      auto k = key(c);
      if (k < best_key) best = &c, best_key = k;
    }
    return *best;
  }

  std::string unique_name(const std::string& want) const {
    std::string name = want;
    for (int i = 2; p_.has_tensor(name); ++i) name = want + std::to_string(i);
    return name;
  }

  // ---- step 5 ----

  void rewrite(TensorDecl tile) {
    const SharedLayout before = shared_layout(p_, k_);
    if (!before.offset_bytes.empty()) {
      int top = 0;
      for (const auto& [part, bytes] : before.part_bytes) top = std::max(top, part);
      tile.overlay = top + 1;
    }
    for (const EpilogueStore& site : c_.stores) {
      site.store->tensor = tile.name;
      site.store->index = {tile_offset(site.row, site.col, tile)};
      // k:040 proved every term of the global offset a multiple of the width; the row
      // stride is a multiple of every width (choose_layout).
      LOOM_CHECK(provably_divisible(distribute_constants(site.store->index[0]), site.store->width),
                 "staged store " + site.store->index[0].str() + " is not aligned to its width");
    }
    Block& body = k_.body;
    Block head;
    bool async = false;
    walk(body, [&](const Stmt& s) { async |= s.kind == StmtKind::AsyncCopy; });
    const bool drained = c_.start > c_.mainloop_end && body[c_.start - 1].kind == StmtKind::AsyncWait &&
                         body[c_.start - 1].imm == 0;
    if (async && !drained) head.push_back(Stmt::AsyncWait(0));
    // A mainloop whose iterations end in a barrier (sync, or cp.async without
    // pipelining) has left the slabs already, unless a wait after it lands copies.
    const Stmt& last = body[c_.mainloop_end - 1];
    const bool left = last.kind == StmtKind::For && !last.body.empty() &&
                      last.body.back().kind == StmtKind::Barrier && c_.start == c_.mainloop_end;
    if (!before.offset_bytes.empty() && !left) head.push_back(Stmt::Barrier());
    body.insert(body.begin() + long(c_.start), head.begin(), head.end());
    body.push_back(Stmt::Barrier());
    body.push_back(copy_out(tile));
    p_.tensors.push_back(tile);  // after the last use of c_.out, which this may move

    const int64_t bytes = kernel_smem_bytes(shared_layout(p_, k_), k_);
    if (bytes > s_.target.smem_per_block)
      throw Error("EPILOGUE=smem: kernel " + k_.name + " needs " + std::to_string(bytes) +
                  " B of shared memory with its " + std::to_string(c_.rows) + " x " +
                  std::to_string(c_.cols) + " staging tile " + tile.name + " (knobs " + s_.knobs.str() +
                  "); this GPU allows " + std::to_string(s_.target.smem_per_block) +
                  " B per block: lower BM or BN, or use EPILOGUE=direct");
  }

  Stmt copy_out(const TensorDecl& tile) const {
    const size_t rank = c_.out->shape.size();
    const int64_t T = k_.block_threads, per_row = c_.cols / width_, units = c_.rows * per_row;
    const std::string cv = tile.name + "_c", ev = tile.name + "_e", vv = tile.name + "_v";
    const Expr e = Expr::var(ev), row = e / per_row, col = e % per_row * width_;
    Expr cond = units % T != 0 ? (e < units) : Expr(1);
    const EpilogueStore* row_guard = nullptr;
    const EpilogueStore* col_guard = nullptr;
    for (const EpilogueStore& site : c_.stores) {
      if (site.row0) row_guard = &site;
      if (site.col0) col_guard = &site;
    }
    // `row < M - row0`, not `row0 + row < M`: the bound is one loop-invariant value, and
    // the latter form made ptxas spill 8 B (sm_80, tf32 bmm 129 x 100 x 72 defaults).
    if (row_guard) cond = cond && (row < c_.out->shape[rank - 2] - *row_guard->row0);
    if (col_guard) cond = cond && (col < c_.out->shape[rank - 1] - *col_guard->col0);

    Block move;
    Stmt ld = Stmt::Load(vv, tile.name, {tile_offset(row, col, tile)});
    Stmt st = Stmt::Write(c_.out->name, {c_.stores[0].base + row * c_.out->strides()[rank - 2] + col},
                          Operand::value(vv));
    if (width_ > 1) {
      move.push_back(Stmt::Alloc(vv, {Expr(width_)}));
      ld.dst_index = {Expr(0)};
      ld.width = st.width = width_;
      st.args[0].index = {Expr(0)};
    }
    move.push_back(ld);
    move.push_back(st);
    Block step = {Stmt::Let(ev, Expr::var(cv) * T + Expr::var("threadIdx.x"))};
    if (cond.is_const()) step.insert(step.end(), move.begin(), move.end());
    else step.push_back(Stmt::If(cond, move));
    // Not a REGISTER loop (nothing in it indexes a register array by its variable), so
    // k:055 leaves it to nvcc: forced unrolling of the 16 steps of the 128 x 128 SIMT
    // default tile made ptxas spill 16 B under MIN_BLOCKS=2's 128 registers.
    return Stmt::For(cv, Expr(copy_steps()), LoopKind::Parallel, "epilogue.store", step);
  }

  CompileState& s_;
  KernelProgram& p_;
  KernelOp& k_;
  const EpilogueCells c_;
  int width_ = 1;
};

// A GEMM kernel: its mainloop multiplies (the SIMT fma atom or a warp mma).
bool multiplies(const KernelOp& k) {
  bool found = false;
  walk(k.body, [&](const Stmt& s) { found |= s.kind == StmtKind::Atom && !find_warp_copy(k, s.atom); });
  return found;
}

}  // namespace

Pass pass_stage_epilogue() {
  return Pass{"k:054_stage_epilogue", Level::Kernel, Level::Kernel,
              "with EPILOGUE=smem every GEMM kernel stores its tile into a shared tile (reusing "
              "the mainloop's bytes after a barrier), then copies it out row by row with "
              "vector stores of up to 16 bytes",
              {"EPILOGUE"},
              [](CompileState& s) {
                const std::string mode = s.knobs.get_str("EPILOGUE", "direct");
                bool gemm = false;
                for (const auto& k : s.kernel.kernels) gemm |= multiplies(k);
                if (!gemm) return;
                s.used_knobs["EPILOGUE"] = mode;
                if (mode != "smem") return;
                for (auto& k : s.kernel.kernels) {
                  // A warp-specialized wgmma kernel's consumers stage in k:053's strips.
                  if (!multiplies(k) || warp_specialized_wgmma(k)) continue;
                  try {
                    EpilogueStager(s, k).run();
                  } catch (const EpilogueRefusal& r) {
                    throw Error("EPILOGUE=smem cannot stage kernel " + k.name + ": " + r.why +
                                "; " + r.fix);
                  }
                }
              }};
}

}  // namespace loom
