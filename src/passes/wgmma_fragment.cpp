#include "passes/wgmma_fragment.h"

#include <optional>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"

namespace loom {
namespace {

constexpr int kWarpgroup = 128, kWarp = 32;

// Warp 0's 16 rows of the warpgroup "A" layout: the mma.sync fragment ldmatrix fills.
OperandLayout warp_share(const OperandLayout& a) {
  OperandLayout w = a;
  w.rows = a.rows / (kWarpgroup / kWarp);
  return w;
}

// How the tile lies in the slab: Row when the flat offset steps by one along the tile's
// columns (K-major A), Col when along its rows, each run of `run` elements contiguous,
// checked over the fragment's tile for a few values of the other variables; nullopt when
// neither holds.
std::optional<Major> slab_major(const Expr& e, const std::string& row, const std::string& col,
                                int rows, int cols, int run) {
  std::set<std::string> vars;
  e.collect_vars(vars);
  auto at = [&](int64_t other, int64_t r, int64_t c) {
    Expr::Env env;
    for (const std::string& v : vars) env[v] = other;
    env[row] = r, env[col] = c;
    return e.eval(env);
  };
  std::optional<Major> major;
  if (at(0, 0, 1) - at(0, 0, 0) == 1) major = Major::Row;
  else if (at(0, 1, 0) - at(0, 0, 0) == 1) major = Major::Col;
  else return std::nullopt;
  for (int64_t other : {0, 1, 3})
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const bool by_row = *major == Major::Row;
        const int64_t base = by_row ? at(other, r, c / run * run) : at(other, r / run * run, c);
        if (at(other, r, c) != base + (by_row ? c % run : r % run)) return std::nullopt;
      }
  return major;
}

// The ldmatrix form of the fill, or nullopt where none is legal.
std::optional<FragmentFill> ldmatrix_fill(const AtomDef& wgmma, const TensorDecl& slab,
                                          const Stmt& load, const std::string& row,
                                          const std::string& col, const Expr& thread) {
  const OperandLayout& a = operand_layout(wgmma, "A");
  const int bytes = dtype_bytes(slab.dtype);
  const bool b16 = wgmma.a_type == DType::F16 || wgmma.a_type == DType::BF16;
  if (bytes != (b16 ? 2 : 4)) return std::nullopt;
  const int run = 16 / bytes;  // elements of one 16-byte ldmatrix row
  // ldmatrix reads each row as 16 contiguous bytes: the swizzle must move whole 16-byte
  // units, and row chunks (TMA boxes side by side) must not split one.
  if (slab.swizzle.bits != 0 && (int64_t(1) << slab.swizzle.base) < run) return std::nullopt;
  if (slab.row_chunk % run != 0) return std::nullopt;
  const Expr& e = load.index[0];
  const OperandLayout warp = warp_share(a);
  const std::optional<Major> major = slab_major(e, row, col, a.rows, a.cols, run);
  if (!major) return std::nullopt;
  // One 32-bit register per 8x8 matrix (b16) or 8x4 words (b32): 4 for every A fragment.
  const std::string count = std::to_string(a.values_per_thread * bytes / 4);
  const std::vector<std::string> variants =
      b16 ? std::vector<std::string>{"ldmatrix_x" + count, "ldmatrix_x" + count + "_trans"}
          : std::vector<std::string>{"ldmatrix_x" + count + "_b32"};
  const Expr lane = thread % kWarp, warp_row = thread / kWarp * Expr(int64_t(warp.rows));
  for (const std::string& id : variants) {
    const AtomDef* cp = find_atom(id);
    if (!cp) continue;
    std::vector<std::pair<int, int>> starts;
    try {
      starts = ldmatrix_row_starts(*cp, warp, *major);
    } catch (const Error&) {
      continue;  // the other variant (.trans or not) serves this majorness; b32 has none
    }
    std::vector<int> rows, cols;
    for (const auto& [r, c] : starts) rows.push_back(r), cols.push_back(c);
    const Expr start = e.substitute({{row, lane_bits_expr(rows, lane) + warp_row},
                                     {col, lane_bits_expr(cols, lane)}});
    // Row addresses must be 16-byte aligned from the slab's 128-byte aligned base.
    if (!provably_divisible(distribute_constants(start), run)) return std::nullopt;
    FragmentFill f;
    f.copy_id = cp->id;
    f.stmts.push_back(Stmt::CopyAtom(cp->id, load.dst,
                                     std::vector<Expr>(load.dst_index.begin(),
                                                       load.dst_index.end() - 2),
                                     load.tensor, start));
    return f;
  }
  return std::nullopt;
}

// One Load per A value: value v of thread t is element (row, col) = A.map(t, v), which
// is affine in the warp w = t / 32, groupID g = t % 32 / 4 and threadID_in_group
// q = t % 4 (checked on every thread and value).
FragmentFill element_fill(const AtomDef& wgmma, const Stmt& load, const std::string& row,
                          const std::string& col, const Expr& thread) {
  const OperandLayout& a = operand_layout(wgmma, "A");
  auto at = [&](int t, int v) { return a.map(t, v); };
  const auto base = at(0, 0);
  const int rw = at(32, 0).first - base.first, cw = at(32, 0).second - base.second;
  const int rg = at(4, 0).first - base.first, cg = at(4, 0).second - base.second;
  const int rq = at(1, 0).first - base.first, cq = at(1, 0).second - base.second;
  for (int t = 0; t < kWarpgroup; ++t)
    for (int v = 0; v < a.values_per_thread; ++v) {
      const int w = t / 32, g = t % 32 / 4, q = t % 4;
      const std::pair<int, int> got = {rw * w + rg * g + rq * q + at(0, v).first,
                                       cw * w + cg * g + cq * q + at(0, v).second};
      if (got != at(t, v))
        throw Error("wgmma_a_fragment_fill: the A layout of " + wgmma.id + " is not affine in "
                    "the thread's warp, groupID and threadID_in_group (thread " +
                    std::to_string(t) + ", value " + std::to_string(v) + ")");
    }
  const Expr w = thread / 32, g = thread % 32 / 4, q = thread % 4;
  FragmentFill f;
  for (int v = 0; v < a.values_per_thread; ++v) {
    Stmt ld = load;
    ld.dst_index.resize(ld.dst_index.size() - 2);
    ld.dst_index.push_back(Expr(int64_t(v)));
    const auto [r0, c0] = at(0, v);
    Block one = {ld};
    substitute_block(one, {{row, w * rw + g * rg + q * rq + r0}, {col, w * cw + g * cg + q * cq + c0}});
    f.stmts.push_back(one[0]);
  }
  return f;
}

}  // namespace

FragmentFill wgmma_a_fragment_fill(const AtomDef& wgmma, const ProgramBase& p, const Stmt& load,
                                   const std::string& row, const std::string& col,
                                   const Expr& thread) {
  // An M-major A (consecutive rows adjacent in the slab: a swapped row-major B, or A given
  // transposed) is filled like a K-major one: ldmatrix .trans for 16-bit types, one
  // ld.shared per value for tf32. Its slab rows are BM wide, wider than a 128-byte swizzle
  // span from BM = 64 (16-bit) or 32 (tf32) up, so TMA lands them as span-wide chunks
  // (TensorDecl::row_chunk). These fills were refused from 2026-11-22 to 2026-11-27: they
  // computed wrong products on H100 because codegen placed thread accesses of a chunked
  // slab by the swizzle alone, without the chunk permutation the interpreter and the
  // descriptors apply; codegen's address_of now goes through the same layout
  // (TensorDecl::physical), so the fills read what TMA wrote.
  if (std::optional<FragmentFill> f =
          ldmatrix_fill(wgmma, p.tensor(load.tensor), load, row, col, thread))
    return *f;
  return element_fill(wgmma, load, row, col, thread);
}

}  // namespace loom
