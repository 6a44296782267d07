// k:025_lower_mma — ATOM nests become mma.sync on per-lane fragments (ATOM=mma_*).
//
// Until here every lane of a warp runs each ATOM nest whole: the warp's accumulators
// acc[FM, FN, AM, AN] and operand tiles in0[FM, AM, AK], in1[FN, AK, AN] are replicated
// in all 32 lanes. An mma.sync instead spreads each tile over the lanes as the atom
// table's fragment layouts say, (lane, value) -> (row, col). Every mma layout is affine
// in the lane's groupID g = lane / 4 and threadID_in_group t = lane % 4 plus a constant
// per value (affine_lane_form), so a nest over two cell variables (x, y) of an operand
// becomes one copy of its body per value v, with x = x_g*g + x_t*t + x_v and
// y = y_g*g + y_t*t + y_v, and every register array indexed [.., x, y] indexed [.., v].
// Steps, for each ATOM nest (found by its loops' axes m, n, k):
//  1. (m, k): the A operand's loads -> one load per A value into in0[.., v] (the A
//     layout; (k, n) likewise with B).
//  2. (m, n): the accumulators' zeroing or the epilogue -> one copy per C value; scalars
//     the body defines get a `_v<v>` suffix so the copies stay single-assignment.
//  3. (m, n, k): `acc[.., m_e, n_e] <- fma_f32(in0[.., m_e, k_e], in1[.., k_e, n_e])` ->
//     `acc[..] <- mma(in0[..], in1[..])`, the warp atom on whole fragments.
//  4. The register arrays of steps 1-3 lose their two cell dimensions for one of `values`,
//     and the kernel declares the warp atom (KernelOp::warp_atoms) for the verifier, the
//     interpreter and codegen.
//  1b. With LDMATRIX=1 (the default), an A or B nest that is one load of a shared slab
//     becomes one warp copy instead: `in0[..] <- ldmatrix_x4(A_s[row start])`. The
//     slab's majorness along the operand tile (which cell variable steps the flat offset
//     by one) picks the plain or .trans variant that ldmatrix_row_starts accepts, and the
//     lane's row start is the table it returns written as an expression of the lane
//     (lane_bits_expr). tf32 fragments take the b32 view of the same instruction
//     (ldmatrix_x4_b32 for A, ldmatrix_x2_b32 for B: a 16-byte row is 4 words, lane l
//     gets word l%4 of row l/4), which has no .trans, so only a slab with K contiguous
//     qualifies (A [BM][BK]; B [BN][BK]: B given transposed or SLAB_B=kinner); the
//     words stay raw in the f32 fragment and codegen rounds them (cvt.rna) at the mma.
//     It falls back to step 1, each reason said where it is checked: a load that is not
//     from a shared slab (STAGE=direct), a slab whose 16-byte rows are not contiguous
//     along the tile (a tf32 operand with M or N contiguous) or not provably 16-byte
//     aligned (a PAD_SMEM that is not a multiple of 8 b16 / 4 b32 elements), or a
//     swizzle that permutes inside 16 bytes.
// No per-kernel index math: the expressions come from the table's layouts alone.
// The atom is the table entry ATOM and ACC name (chosen_mma); with ACC=f16 it accumulates
// in f16, which changes nothing here (its C layout is the f32 one), only what the
// interpreter rounds D to and how codegen declares the accumulators (packed f16x2).
#include <optional>
#include <set>

#include "ir/error.h"
#include "passes/analysis.h"
#include "passes/atom_nest.h"
#include "passes/mma_choice.h"
#include "passes/passes.h"

namespace loom {
namespace {

// An operand's nest as the rewrite needs it: its two cell variables (row, col of the
// operand tile) and the lane-affine expressions of each value's row and column.
struct OperandForm {
  std::string row, col;
  const AffineLaneForm* form;
};

class MmaLowering {
 public:
  MmaLowering(const AtomDef& a, const ProgramBase& p, KernelOp& k, bool ldmatrix)
      : atom_(a),
        p_(p),
        ldmatrix_(ldmatrix),
        a_(affine_lane_form(operand_layout(a, "A"))),
        b_(affine_lane_form(operand_layout(a, "B"))),
        c_(affine_lane_form(operand_layout(a, "C"))),
        k_(k) {}

  void run() {
    bool has_lane = false;
    for (const Stmt& s : k_.body) has_lane |= s.kind == StmtKind::Let && s.var == "lane";
    lower(k_.body, has_lane);
    if (fragments_.empty()) return;
    walk(k_.body, [&](Stmt& s) {
      if (s.kind != StmtKind::Alloc) return;
      auto it = fragments_.find(s.dst);
      if (it == fragments_.end()) return;
      const int values = it->second;
      if (s.index.size() < 2 || !s.index.back().is_const() || !s.index.end()[-2].is_const() ||
          s.index.back().const_value() * s.index.end()[-2].const_value() !=
              int64_t(values) * WarpAtom::kLanes)
        throw Error("k:025_lower_mma: register array `" + s.dst + "` does not end in one atom "
                    "operand's tile (" + std::to_string(values) + " values x 32 lanes)");
      s.index.resize(s.index.size() - 2);
      s.index.push_back(Expr(values));
    });
    if (mma_used_ && !find_warp_atom(k_, atom_.id)) k_.warp_atoms.push_back(warp_atom(atom_));
    for (const std::string& id : copies_used_)
      if (!find_warp_copy(k_, id)) k_.warp_copies.push_back(warp_copy(atom(id)));
  }

 private:
  void lower(Block& b, bool has_lane) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& s = b[i];
      if (s.kind == StmtKind::For && s.tier == Tier::Atom) {
        if (!has_lane)
          throw Error("k:025_lower_mma: kernel '" + k_.name + "' has ATOM loops but no "
                      "`lane` (k:010_bind_hardware binds it for warps without thread loops)");
        Block out = lower_nest(s);
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), out.begin(), out.end());
        i += out.size() - 1;
      } else if (s.kind == StmtKind::For || s.kind == StmtKind::If) {
        lower(s.body, has_lane);
      }
    }
  }

  Block lower_nest(const Stmt& top) {
    const AtomCells c = atom_cells(top, "k:025_lower_mma", atom_.id, atom_.m, atom_.n, atom_.k);
    const Block& body = *c.body;
    const bool m = !c.m.empty(), n = !c.n.empty(), k = !c.k.empty();
    if (m && n && k) return {mma(body, c)};
    if (m && k && !n) return fragment_load(body, {c.m, c.k, &a_}, operand_layout(atom_, "A"));
    if (k && n && !m) return fragment_load(body, {c.k, c.n, &b_}, operand_layout(atom_, "B"));
    if (m && n && !k) return per_value(body, {c.m, c.n, &c_}, true);
    throw Error("k:025_lower_mma: an ATOM nest over " + std::string(m ? "m " : "") +
                (n ? "n " : "") + (k ? "k " : "") +
                "is none of an mma's operands (m k: A, k n: B, m n: C, m n k: the product)");
  }

  // Whether `index` ends in the operand's two cell variables (in either order).
  static bool ends_in_cells(const std::vector<Expr>& index, const OperandForm& f) {
    if (index.size() < 2) return false;
    const Expr &x = index[index.size() - 2], &y = index.back();
    if (!x.is_var() || !y.is_var()) return false;
    return (x.var_name() == f.row && y.var_name() == f.col) ||
           (x.var_name() == f.col && y.var_name() == f.row);
  }

  // Step 1b where it applies, else step 1.
  Block fragment_load(const Block& body, const OperandForm& f, const OperandLayout& frag) {
    if (ldmatrix_)
      if (std::optional<Stmt> ld = ldmatrix_load(body, f, frag)) return {*ld};
    return per_value(body, f, false);
  }

  // Step 1b: the nest's one load as an ldmatrix, or nullopt where it is not legal.
  std::optional<Stmt> ldmatrix_load(const Block& body, const OperandForm& f,
                                    const OperandLayout& frag) {
    if (body.size() != 1) return std::nullopt;
    const Stmt& ld = body[0];
    // A predicated or vector load, or one into something other than the fragment, is not
    // the plain slab read t:040 leaves (the slab is zero-filled and full-size).
    if (ld.kind != StmtKind::Load || ld.width != 1 || !ld.pred.is_const() ||
        ld.pred.const_value() != 1 || ld.index.size() != 1 || !ends_in_cells(ld.dst_index, f))
      return std::nullopt;
    // STAGE=direct: fragments come from global memory, which ldmatrix cannot read.
    const TensorDecl& t = p_.tensor(ld.tensor);
    if (t.role != TensorRole::Shared) return std::nullopt;
    // The atom's elements as stored: b16 pairs for f16/bf16, whole 32-bit words for tf32
    // (whose slab holds f32 or tf32 values), each 16-byte row `row` elements long.
    const int bytes = dtype_bytes(t.dtype);
    const bool b16 = atom_.a_type == DType::F16 || atom_.a_type == DType::BF16;
    if (bytes != (b16 ? 2 : 4)) return std::nullopt;
    const int row = 16 / bytes;
    // ldmatrix reads each row as 16 contiguous bytes: a swizzle must keep row groups
    // whole (its lowest XORed bit at `row` elements or above).
    if (t.swizzle.bits != 0 && (int64_t(1) << t.swizzle.base) < row) return std::nullopt;
    const Expr& e = ld.index[0];
    const std::optional<Major> major = slab_major(e, f, frag, row);
    if (!major) return std::nullopt;
    // One register per matrix: a fragment of v values needs v*bytes/4 matrices. The b32
    // view has no .trans (it would split a word between lanes): a tf32 operand must have
    // K contiguous (A [M][K], B [N][K]); ldmatrix_row_starts refuses the rest.
    const std::string count = std::to_string(frag.values_per_thread * bytes / 4);
    const std::vector<std::string> variants =
        b16 ? std::vector<std::string>{"ldmatrix_x" + count, "ldmatrix_x" + count + "_trans"}
            : std::vector<std::string>{"ldmatrix_x" + count + "_b32"};
    for (const std::string& id : variants) {
      const AtomDef* cp = find_atom(id);
      if (!cp) continue;  // no such count (an x1 of a 2-value fragment)
      std::vector<std::pair<int, int>> starts;
      try {
        starts = ldmatrix_row_starts(*cp, frag, *major);
      } catch (const Error&) {
        continue;  // the other variant (.trans or not) is the one for this majorness
      }
      std::vector<int> rows, cols;
      for (const auto& [r, c] : starts) rows.push_back(r), cols.push_back(c);
      const Expr lane = Expr::var("lane");
      const Expr start = e.substitute({{f.row, lane_bits_expr(rows, lane)},
                                       {f.col, lane_bits_expr(cols, lane)}});
      // Row addresses must be 16-byte aligned: `row` elements from the slab's (128-byte
      // aligned) base. A row stride padded by a non-multiple of `row` breaks that.
      if (!provably_divisible(distribute_constants(start), row)) return std::nullopt;
      note_fragment(ld.dst, frag.values_per_thread);
      copies_used_.insert(cp->id);
      return Stmt::CopyAtom(cp->id, ld.dst,
                            std::vector<Expr>(ld.dst_index.begin(), ld.dst_index.end() - 2),
                            ld.tensor, start);
    }
    return std::nullopt;
  }

  // How the operand tile lies in the slab: Row when the flat offset `e` steps by one
  // along the tile's columns, Col when along its rows, checked over the whole tile for a
  // few values of the other variables (runs of `row` elements must be contiguous);
  // nullopt when neither holds.
  static std::optional<Major> slab_major(const Expr& e, const OperandForm& f,
                                         const OperandLayout& frag, int row_elems) {
    std::set<std::string> vars;
    e.collect_vars(vars);
    auto at = [&](int64_t other, int64_t r, int64_t c) {
      Expr::Env env;
      for (const std::string& v : vars) env[v] = other;
      env[f.row] = r, env[f.col] = c;
      return e.eval(env);
    };
    std::optional<Major> major;
    if (at(0, 0, 1) - at(0, 0, 0) == 1) major = Major::Row;
    else if (at(0, 1, 0) - at(0, 0, 0) == 1) major = Major::Col;
    else return std::nullopt;
    const int64_t n = row_elems;
    for (int64_t other : {0, 1, 3})
      for (int r = 0; r < frag.rows; ++r)
        for (int c = 0; c < frag.cols; ++c) {
          const bool row = *major == Major::Row;
          const int64_t base = row ? at(other, r, c / n * n) : at(other, r / n * n, c);
          if (at(other, r, c) != base + (row ? c % n : r % n)) return std::nullopt;
        }
    return major;
  }

  // Steps 1, 2 and 4's bookkeeping: one copy of `body` per value of the operand.
  Block per_value(const Block& body, const OperandForm& f, bool rename_scalars) {
    const int values = int(f.form->offset.size());
    const Expr lane = Expr::var("lane"), g = lane / 4, t = lane % 4;
    Block out;
    for (int v = 0; v < values; ++v) {
      Block copy = body;
      walk(copy, [&](Stmt& s) {
        auto cell = [&](std::vector<Expr>& index, const std::string& array) {
          if (array.empty() || !ends_in_cells(index, f)) return;
          index.resize(index.size() - 2);
          index.push_back(Expr(v));
          note_fragment(array, values);
        };
        cell(s.dst_index, s.dst);
        for (auto& a : s.args) cell(a.index, a.name);
      });
      const auto [r0, c0] = f.form->offset[size_t(v)];
      substitute_block(copy, {{f.row, g * f.form->row_g + t * f.form->row_t + r0},
                              {f.col, g * f.form->col_g + t * f.form->col_t + c0}});
      if (rename_scalars) suffix_defined_scalars(copy, "_v" + std::to_string(v));
      check_no_cells(copy, f);
      out.insert(out.end(), copy.begin(), copy.end());
    }
    return out;
  }

  // A cell variable left in a register index would be a lane-dependent (non-constant)
  // register index: the nest was not in the form t:030 builds.
  void check_no_cells(const Block& b, const OperandForm& f) const {
    walk(b, [&](const Stmt& s) {
      auto check = [&](const std::vector<Expr>& index, const std::string& array) {
        for (const auto& e : index)
          if (e.uses("lane"))
            throw Error("k:025_lower_mma: `" + array + "` is indexed by the atom cells " +
                        f.row + ", " + f.col + " other than as its last two indices");
      };
      check(s.dst_index, s.dst);
      for (const auto& a : s.args) check(a.index, a.name);
    });
  }

  // Step 3: the product nest holds exactly one fma_f32 on the three operands' cells.
  Stmt mma(const Block& body, const AtomCells& c) {
    const OperandForm fa{c.m, c.k, &a_}, fb{c.k, c.n, &b_}, fc{c.m, c.n, &c_};
    if (body.size() != 1 || body[0].kind != StmtKind::Atom || body[0].atom != "fma_f32" ||
        body[0].args.size() != 2)
      throw Error("k:025_lower_mma: the m n k ATOM nest must hold one fma_f32 (k:020 makes it "
                  "from multiply + accumulate); found `" + print_block(body) + "`");
    const Stmt& fma = body[0];
    const Operand* a = nullptr;
    const Operand* b = nullptr;
    for (const Operand& o : fma.args) {
      if (ends_in_cells(o.index, fa)) a = &o;
      else if (ends_in_cells(o.index, fb)) b = &o;
    }
    if (!a || !b || !ends_in_cells(fma.dst_index, fc))
      throw Error("k:025_lower_mma: `" + print_block(body) + "` does not multiply an A tile [.., " +
                  c.m + ", " + c.k + "] by a B tile [.., " + c.k + ", " + c.n + "] into [.., " +
                  c.m + ", " + c.n + "]");
    auto prefix = [](const std::vector<Expr>& idx) {
      return std::vector<Expr>(idx.begin(), idx.end() - 2);
    };
    note_fragment(a->name, int(a_.offset.size()));
    note_fragment(b->name, int(b_.offset.size()));
    note_fragment(fma.dst, int(c_.offset.size()));
    Stmt out = Stmt::Atom(atom_.id, fma.dst,
                          {Operand::value(a->name, prefix(a->index)),
                           Operand::value(b->name, prefix(b->index))});
    out.dst_index = prefix(fma.dst_index);
    mma_used_ = true;
    return out;
  }

  void note_fragment(const std::string& array, int values) {
    auto [it, fresh] = fragments_.emplace(array, values);
    if (!fresh && it->second != values)
      throw Error("k:025_lower_mma: register array `" + array + "` holds two different atom "
                  "operands (" + std::to_string(it->second) + " and " + std::to_string(values) +
                  " values per lane)");
  }

  const AtomDef& atom_;
  const ProgramBase& p_;
  const bool ldmatrix_;
  const AffineLaneForm a_, b_, c_;
  KernelOp& k_;
  std::map<std::string, int> fragments_;  // register array -> values per lane
  bool mma_used_ = false;
  std::set<std::string> copies_used_;  // ldmatrix variants emitted
};

}  // namespace

Pass pass_lower_mma() {
  return Pass{"k:025_lower_mma", Level::Kernel, Level::Kernel,
              "no ATOM loops: operand tiles are per-lane fragments loaded by the atom's "
              "layouts, and each atom of a warp is one mma.sync the kernel declares",
              {"ATOM", "ACC", "LDMATRIX"},
              [](CompileState& s) {
                const AtomDef* a = chosen_mma(s);
                if (is_wgmma(a)) return;  // k:026 lowers warpgroup atoms
                // Recorded for mma kernels only: SIMT kernels have no fragments.
                const bool ldmatrix = a && s.knob("LDMATRIX", 1) != 0;
                for (auto& k : s.kernel.kernels) {
                  if (a) {
                    MmaLowering(*a, s.kernel, k, ldmatrix).run();
                    continue;
                  }
                  walk(k.body, [&](const Stmt& st) {
                    if (st.kind == StmtKind::For && st.tier == Tier::Atom)
                      throw Error("k:025_lower_mma: kernel '" + k.name + "' has ATOM loops "
                                  "but ATOM=fma names no mma atom to lower them to");
                  });
                }
              }};
}

}  // namespace loom
