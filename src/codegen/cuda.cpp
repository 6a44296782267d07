#include "codegen/cuda.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "atoms/atoms.h"
#include "atoms/wgmma_desc.h"
#include "codegen/wgmma_wrappers.h"
#include "ir/error.h"
#include "ir/f32_constant.h"
#include "ir/realign.h"
#include "passes/analysis.h"

namespace loom {
namespace {

// `text` (the user's expression, knobs) made safe inside a `//` comment: a newline or
// carriage return would end the comment and make the rest code, and a backslash (or the
// trigraph `??/`) before the end of the line would splice the next line (the #include)
// into it. Whitespace escapes stay readable (`\n`); a backslash, a `?` after a `?`, and
// other control and non-ASCII bytes are written as `\xNN`.
std::string comment_text(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c >= 0x20 && c < 0x7f && c != '\\' && !(c == '?' && !out.empty() && out.back() == '?'))
      out += ch;
    else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(c));
      out += hex;
    }
  }
  return out;
}

// An f32 constant as CUDA text that reads back as exactly float(v): the shortest decimal
// that round-trips, or the bits for infinity (a running max starts at -inf) and for
// subnormals (a literal below FLT_MIN is one NVRTC may warn about or refuse as out of
// range; the bits leave no doubt). The frontend refuses
// scalars that overflow f32 or round to 0; a constant Loom derives that does is an error
// here, never a literal NVRTC rejects or a silently different value.
std::string float_literal(double v) {
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  if (const std::string why = f32_constant_problem(v); !why.empty())
    throw Error("codegen: the constant " + std::to_string(v) + " " + why);
  const float f = float(v);
  if (f != 0.0f && std::fabs(f) < std::numeric_limits<float>::min()) {
    char bits[40];
    std::snprintf(bits, sizeof bits, "__int_as_float(0x%08x)", std::bit_cast<uint32_t>(f));
    return bits;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

bool always(const Expr& pred) { return pred.is_const() && pred.const_value() == 1; }

const char* dtype_suffix(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::TF32: return "tf32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F64:
    case DType::I32: break;
  }
  throw Error("codegen: tensors of dtype " + std::string(dtype_name(t)) + " are not supported");
}

class Renderer {
 public:
  Renderer(const KernelProgram& p, std::ostringstream& out) : p_(p), out_(out) {
    idx_ = index_ctype(p);
    symbols_.insert(p.symbols.begin(), p.symbols.end());
  }

  void kernel(const KernelOp& k) {
    k_ = &k;
    out_ << "extern \"C\" __global__ void __launch_bounds__(" << k.block_threads;
    if (k.min_blocks_per_sm > 0) out_ << ", " << k.min_blocks_per_sm;
    out_ << ")";
    // Compile-time cluster dims: the kernel launches as any other (the grid is a whole
    // number of clusters), and the CTAs of a cluster are co-scheduled on one GPC.
    if (k.cluster[0] * k.cluster[1] * k.cluster[2] > 1)
      out_ << " __cluster_dims__(" << k.cluster[0] << ", " << k.cluster[1] << ", " << k.cluster[2]
           << ")";
    out_ << "\n" << k.name << "(";
    for (size_t i = 0; i < k.params.size(); ++i) {
      const std::string& name = k.params[i];
      out_ << (i ? ",\n    " : "");
      if (p_.has_tensor(name)) {
        const TensorDecl& t = p_.tensor(name);
        bool in = t.role == TensorRole::Input;
        out_ << (in ? "const " : "") << dtype_storage_ctype(t.dtype) << "* __restrict__ "
             << tn(name);
      } else {
        out_ << idx_ << " " << (symbols_.count(name) ? cuda_symbol_name(name) : name);
      }
    }
    // A tensor map is read by the copy engine from parameter space: by value, const and
    // __grid_constant__, so taking its address does not copy it to local memory.
    bool first = k.params.empty();
    for (const TmaDescriptor& d : k.tma) {
      out_ << (first ? "" : ",\n    ") << "const __grid_constant__ loom_tensor_map "
           << cuda_tensor_map_name(d.name);
      first = false;
    }
    out_ << ") {\n";
    // Programmatic dependent launch (k:065): this grid may be scheduled while the previous
    // one drains, so nothing may touch memory before the wait; and letting the next grid
    // launch as soon as every CTA of this one runs costs one instruction at the top.
    if (k.wait_prior_grid) line(1, "asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
    if (k.trigger_dependents) line(1, "asm volatile(\"griddepcontrol.launch_dependents;\");");
    find_packed(k);
    // A warp-specialized kernel's roles and warpgroup indices are warp-uniform values that
    // ptxas cannot prove uniform from threadIdx.x; every warp is whole.
    warp_uniform_ = false;
    walk(k.body, [&](const Stmt& x) { warp_uniform_ |= x.kind == StmtKind::Specialize; });
    warp_uniform_ &= k.block_threads % kWarp == 0;
    SharedLayout smem = shared_layout(p_, k);
    const int64_t bytes = kernel_smem_bytes(smem, k);
    if (bytes > 0) {
      line(1, "// ---- shared memory: " + std::to_string(bytes) + " bytes ----");
      if (smem.part_bytes.size() > 1) line(1, "// " + union_note(smem));
      // TMA and wgmma's descriptors swizzle address bits up to 1024 B: a buffer aligned to
      // that sees the same XOR pattern as the tensor-relative offsets Loom computes. A wgmma
      // kernel whose threads fill its swizzled slabs (STAGE=cp_async) has no tensor map
      // but the same need.
      bool wgmma = false, swizzled_shared = false;
      for (const WarpAtom& a : k.warp_atoms) wgmma |= a.threads == 128;
      for (const auto& [name, off] : smem.offset_bytes) swizzled_shared |= p_.tensor(name).swizzle.bits > 0;
      const bool swizzled_wgmma = wgmma && swizzled_shared;
      line(1, std::string("extern __shared__ __align__(") +
                  (k.tma.empty() && !swizzled_wgmma ? "128" : "1024") +
                  ") unsigned char loom_smem[];");
      for (const auto& [name, off] : smem.offset_bytes)
        line(1, std::string(dtype_storage_ctype(p_.tensor(name).dtype)) + "* const " + tn(name) +
                    " = reinterpret_cast<" + dtype_storage_ctype(p_.tensor(name).dtype) +
                    "*>(loom_smem + " + std::to_string(off) + ");");
      bool swizzled_tma = false;
      for (const TmaDescriptor& d : k.tma) swizzled_tma |= d.swizzle_bytes > 0;
      if (swizzled_tma || swizzled_wgmma) line(1, "loom::require_smem_aligned_1024(loom_smem);");
      if (k.mbarriers > 0)
        line(1, "unsigned long long* const loom_mbar = reinterpret_cast<unsigned long long*>("
                "loom_smem + " + std::to_string(mbarrier_offset_bytes(smem)) + ");  // [" +
                    std::to_string(k.mbarriers) + "] mbarriers");
    }
    block(k.body, 1);
    out_ << "}\n";
  }

 private:
  static constexpr int64_t kWarp = 32;
  // `threadIdx.x / c`, c a multiple of the warp size: the same in every lane of a warp.
  static bool warp_index(const Expr& e) {
    return e.kind() == Expr::Kind::FloorDiv && e.lhs().is_var() &&
           e.lhs().var_name() == "threadIdx.x" && e.rhs().is_const() &&
           e.rhs().const_value() > 0 && e.rhs().const_value() % kWarp == 0;
  }
  // A condition made of `threadIdx.x < c` / `c <= threadIdx.x` (c a multiple of the warp
  // size) joined by &&: it holds for all of a warp's threads or none, and stays exact with
  // threadIdx.x replaced by 32 * (the warp's index).
  static bool whole_warps(const Expr& e) {
    const auto tid = [](const Expr& x) { return x.is_var() && x.var_name() == "threadIdx.x"; };
    const auto bound = [](const Expr& x) { return x.is_const() && x.const_value() % kWarp == 0; };
    switch (e.kind()) {
      case Expr::Kind::And: return whole_warps(e.lhs()) && whole_warps(e.rhs());
      case Expr::Kind::Lt: return tid(e.lhs()) && bound(e.rhs());
      case Expr::Kind::Le: return bound(e.lhs()) && tid(e.rhs());
      default: return false;
    }
  }

  // whole_warps' condition over the warp's index, as a value ptxas knows to be uniform.
  static Expr by_warp(const Expr& e) {
    const Expr warp = Expr::var("loom::warp_uniform(threadIdx.x / 32)");
    switch (e.kind()) {
      case Expr::Kind::And: return by_warp(e.lhs()) && by_warp(e.rhs());
      case Expr::Kind::Lt: return warp < Expr(e.rhs().const_value() / kWarp);
      default: return Expr::make(Expr::Kind::Le, Expr(e.lhs().const_value() / kWarp), warp);
    }
  }

  void line(int depth, const std::string& s) { out_ << std::string(size_t(depth) * 2, ' ') << s << "\n"; }

  // ---- spelling: IR names and index expressions as CUDA text ----
  // An index expression: Expr::str()'s text and parentheses (C's), with the symbols spelled
  // as their parameters and the operands of min/max converted to one type (typed).
  std::string ix(const Expr& e) const {
    Expr::Spelling spelling;
    spelling.var = [this](const std::string& v) {
      return symbols_.count(v) ? cuda_symbol_name(v) : v;
    };
    spelling.min_max_operand = [this](const Expr& operand, const std::string& text) {
      return typed(operand, text);
    };
    return e.str(spelling);
  }
  // A tensor's parameter or shared-memory array.
  static std::string tn(const std::string& tensor) { return cuda_tensor_name(tensor); }
  // `e` spelled as a value of the index type. CUDA overloads min and max
  // per type and refuses mixed calls such as min(int, long long): with 64-bit indices
  // (idx_ long long) an int constant, an unsigned builtin (threadIdx.x) or an int helper
  // (loom::warp_uniform) is converted. With 32-bit indices every operand is an int or an
  // unsigned builtin, which CUDA's mixed int/unsigned overloads take as they are.
  std::string as_index(const Expr& e) const { return typed(e, ix(e)); }
  // `text`, the spelling of `e`, as a value of the index type.
  std::string typed(const Expr& e, const std::string& text) const {
    if (idx_ == "int" || wide(e)) return text;
    if (e.is_const()) return text + "LL";
    return "(" + idx_ + ")(" + text + ")";
  }
  // Whether `e` has the 64-bit index type as CUDA reads it: loop variables, lets and size
  // parameters are declared with it; constants are int; builtins are unsigned.
  bool wide(const Expr& e) const {
    switch (e.kind()) {
      case Expr::Kind::Const: return false;
      case Expr::Kind::Var: {
        const std::string& v = e.var_name();
        return v.find('.') == std::string::npos && v.find(':') == std::string::npos;
      }
      case Expr::Kind::Add:
      case Expr::Kind::Sub:
      case Expr::Kind::Mul:
      case Expr::Kind::FloorDiv:
      case Expr::Kind::Mod: return wide(e.lhs()) || wide(e.rhs());
      case Expr::Kind::Min:
      case Expr::Kind::Max: return true;  // as_index converts both operands
      default: return false;              // comparisons and && / || are bool
    }
  }
  std::string element(const std::string& name, const std::vector<Expr>& index) const {
    std::string s = name;
    for (const auto& e : index) s += "[" + ix(e) + "]";
    return s;
  }

  // The parts of a shared-memory union (TensorDecl::overlay) and their sizes, e.g.
  // "union of A_s B_s (56832 B) | out_s (34816 B) - one part at a time, ...".
  std::string union_note(const SharedLayout& smem) const {
    std::map<int, std::string> names;
    for (const auto& t : p_.tensors)
      if (smem.offset_bytes.count(t.name)) names[t.overlay] += t.name + " ";
    std::string note = "union of ";
    for (const auto& [part, bytes] : smem.part_bytes)
      note += (part ? "| " : "") + names[part] + "(" + std::to_string(bytes) + " B) ";
    return note + "- one part at a time, a barrier between them";
  }

  void block(const Block& b, int d) {
    for (size_t i = 0; i < b.size(); ++i) {
      const Stmt& s = b[i];
      // Section markers: the three parts of every generated kernel.
      if (s.kind == StmtKind::Let && s.value.str().rfind("blockIdx", 0) == 0 && !in_sched_) {
        line(d, "// ---- scheduler: the tile this CTA computes ----");
        in_sched_ = true;
      }
      if (s.kind == StmtKind::Let && s.value.uses("threadIdx.x") && !in_thread_) {
        line(d, "// ---- this thread's cells within the tile ----");
        in_thread_ = true;
      }
      // The mainloop is the outermost reduction (and, when pipelined, its prologue —
      // which is why the marker goes before the first copy or reduction at that level).
      if (!in_main_ && reduce_depth_ == 0 &&
          ((s.kind == StmtKind::For && (s.loop_kind == LoopKind::Reduce || s.axis.rfind("copy", 0) == 0)) ||
           s.kind == StmtKind::Stage)) {
        line(d, "// ---- mainloop: accumulate over the reduction ----");
        in_main_ = true;
      }
      // Only after the outermost reduction: a pipelined k_o loop holds code after its k_i.
      if (i > 0 && b[i - 1].kind == StmtKind::For && b[i - 1].loop_kind == LoopKind::Reduce &&
          reduce_depth_ == 0)
        line(d, "// ---- epilogue: fused elementwise ops and the store ----");
      if (size_t n = bit_copy(b, i, d)) {
        i += n - 1;
        continue;
      }
      if (size_t n = packed_compute_pair(b, i, d)) {
        i += n - 1;
        continue;
      }
      if (size_t n = shared_a_wgmmas(b, i, d)) {
        i += n - 1;
        continue;
      }
      stmt(s, d);
    }
  }

  // The register A fragment a wgmma packs from f32 accumulator values (attention's P,
  // k:013), as the call's `a_` initializer; "" where the wgmma does not pack one (A from
  // shared memory, 16-bit register arrays, tf32).
  std::string a_pack(const Stmt& s) const {
    if (s.kind != StmtKind::Atom || !wgmma_variant(s.atom)) return "";
    const WarpAtom* w = find_warp_atom(*k_, s.atom);
    if (!w || w->a_shared || w->a_type == DType::TF32 || packed_.count(s.args.at(0).name))
      return "";
    const Operand& fa = s.args.at(0);
    const std::string pack = w->a_type == DType::F16 ? "loom::pack_f16x2(" : "loom::pack_bf16x2(";
    std::string regs;
    for (int v = 0; v < w->a_values; v += 2)
      regs += std::string(v ? ", " : "") + pack + fragment_value(fa, v) + ", " +
              fragment_value(fa, v + 1) + ")";
    return "const unsigned a_[" + std::to_string(w->a_values / 2) + "] = {" + regs + "};";
  }

  // Consecutive wgmmas that pack the same A fragment from f32 values (O += P V split over
  // N into column spans, k:013): one pack for all of them. ptxas does not merge the
  // repeated cvt (it keeps every packed copy live until the wgmmas retire: 32 registers
  // more per span at BLOCK_N = 128, which spilled). Returns the statements rendered (0:
  // none, fewer than two).
  size_t shared_a_wgmmas(const Block& b, size_t i, int d) {
    const std::string pack = a_pack(b[i]);
    if (pack.empty()) return 0;
    size_t n = 1;
    while (i + n < b.size() && a_pack(b[i + n]) == pack) ++n;
    if (n < 2) return 0;
    line(d, "{  // one A fragment for " + std::to_string(n) + " wgmmas");
    line(d + 1, pack);
    for (size_t j = 0; j < n; ++j) {
      const WarpAtom* w = find_warp_atom(*k_, b[i + j].atom);
      warpgroup_atom(b[i + j], *wgmma_variant(b[i + j].atom), *w, d + 1, true);
    }
    line(d, "}");
    return n;
  }

  // `[alloc v[W]]; v = load T[a]; U[b] = v` where T and U hold the same 16-bit type and
  // nothing else in the block names v (k:054's copy-out): one mov of the bits, not a
  // widening load and a narrowing store. Returns the statements it rendered (0: none).
  size_t bit_copy(const Block& b, size_t i, int d) {
    size_t at = i;
    const bool alloc = b[i].kind == StmtKind::Alloc;
    if (alloc) ++at;
    if (at + 1 >= b.size()) return 0;
    const Stmt& ld = b[at];
    const Stmt& st = b[at + 1];
    if (ld.kind != StmtKind::Load || st.kind != StmtKind::Write || st.atomic_add ||
        !always(ld.pred) || ld.width != st.width || st.args.at(0).name != ld.dst ||
        (alloc && b[i].dst != ld.dst) || alloc == ld.dst_index.empty() || packed_.count(ld.dst))
      return 0;
    if (alloc && (b[i].index.size() != 1 || !b[i].index[0].is_const() ||
                  b[i].index[0].const_value() != ld.width || !ld.dst_index[0].is_const() ||
                  ld.dst_index[0].const_value() != 0 || st.args[0].index.size() != 1 ||
                  !st.args[0].index[0].same_as(ld.dst_index[0])))
      return 0;
    const DType t = p_.tensor(ld.tensor).dtype;
    if ((t != DType::F16 && t != DType::BF16) || p_.tensor(st.tensor).dtype != t) return 0;
    for (size_t j = 0; j < b.size(); ++j) {
      if (j == i || j == at || j == at + 1) continue;
      bool named = false;
      walk(Block{b[j]}, [&](const Stmt& s) {
        named |= s.dst == ld.dst;
        for (const Operand& o : s.args) named |= o.name == ld.dst;
      });
      if (named) return 0;
    }
    const std::string w = ld.width > 1 ? "_v" + std::to_string(ld.width) : "";
    line(d, "loom::mov" + w + "_b16(" + address(st) + ", " + address(ld) + ");");
    return at + 2 - i;
  }

  // `int_offset`: the offset is computed in int even where indices are 64-bit (symbolic
  // shapes) — a shared-memory offset always fits one.
  // A thread's access goes where TensorDecl::physical puts it, as the interpreter's does:
  // rows stored in chunks (row_chunk: wgmma's layout, which threads fill with
  // STAGE=cp_async) are permuted first (shared_offset), then swizzled.
  std::string address_of(const std::string& tensor, const Expr& logical, bool int_offset = false) {
    auto text = [&](const Expr& e) {
      return int_offset && idx_ != "int" ? "int(" + ix(e) + ")" : ix(e);
    };
    const TensorDecl& t = p_.tensor(tensor);
    const Expr offset = shared_offset(tensor, logical);
    if (!t.swizzle.bits) return "&" + tn(tensor) + "[" + text(offset) + "]";
    // swz(inner) + outer (split_for_swizzle): only the lane's part goes through the XOR.
    SwizzleSplit split = split_for_swizzle(offset, t.swizzle);
    std::string off = "loom::swz<" + std::to_string(t.swizzle.bits) + ", " +
                      std::to_string(t.swizzle.base) + ", " + std::to_string(t.swizzle.shift) +
                      ">(" + text(split.inner) + ")";
    if (!(split.outer.is_const() && split.outer.const_value() == 0))
      off += " + " + text(split.outer);
    return "&" + tn(tensor) + "[" + off + "]";
  }
  std::string address(const Stmt& s) { return address_of(s.tensor, s.index.at(0)); }

  // The unswizzled address of flat offset `offset` of a shared tensor, for the copy engine
  // and wgmma descriptors, which apply the swizzle themselves (to address bits: the
  // tensor is 1024-byte aligned). Rows stored in chunks (TensorDecl::row_chunk) are
  // permuted here, as TensorDecl::chunked does.
  std::string shared_address(const std::string& tensor, const Expr& offset) const {
    return "&" + tn(tensor) + "[" + ix(shared_offset(tensor, offset)) + "]";
  }
  // The element offset behind shared_address.
  Expr shared_offset(const std::string& tensor, const Expr& offset) const {
    const TensorDecl& t = p_.tensor(tensor);
    if (t.row_chunk <= 0) return offset;
    const int64_t L = t.shape.back().const_value(), C = t.row_chunk;
    const int64_t R = t.shape.size() >= 2 ? t.shape[t.shape.size() - 2].const_value() : 1;
    // Terms that are whole slabs (a ring slot's origin) pass through: the permutation
    // acts within one R x L slab. Of the rest, terms that are whole rows (multiples of L)
    // give the row; when the others (the column) provably lie in [0, L) they are the
    // column itself, and the permutation is applied to each part alone — the form a
    // thread's copy address needs (o % L of row + column, which ptxas cannot see is the
    // column, cost registers: 124 B of spills in an unrolled copy).
    Expr whole = 0, rows = 0, cols = 0;
    int64_t col_lo = 0, col_hi = 0;
    bool col_known = true;
    for (const Expr& t : sum_terms(distribute_constants(offset))) {
      if (provably_divisible(t, R * L)) {
        whole = whole + t;
      } else if (provably_divisible(t, L)) {
        rows = rows + t;
      } else {
        cols = cols + t;
        const auto r = term_range(t);
        col_known &= r.has_value();
        if (r) col_lo += r->first, col_hi += r->second;
      }
    }
    if (col_known && col_lo >= 0 && col_hi < L) {
      Expr row = 0;  // rows / L, term by term (each term a multiple of L)
      for (const Expr& t : sum_terms(rows)) row = row + exact_div(t, L);
      return distribute_constants(whole + row / R * (R * L) + row % R * C + cols / C * (R * C) +
                                  cols % C);
    }
    const Expr o = rows + cols;
    const Expr physical =
        whole + o / (R * L) * (R * L) + o % L / C * (R * C) + o % (R * L) / L * C + o % C;
    return distribute_constants(physical);
  }

  // t / d for a term t that is a multiple of d: `x / d * d` gives x / d, `x * k` x * (k / d)
  // where d divides k, a constant its quotient; otherwise the division itself.
  static Expr exact_div(const Expr& t, int64_t d) {
    if (t.is_const()) return Expr(t.const_value() / d);
    if (t.kind() == Expr::Kind::Mul && t.rhs().is_const()) {
      const int64_t k = t.rhs().const_value();
      if (k % d == 0) return k == d ? t.lhs() : t.lhs() * (k / d);
      if (t.lhs().kind() == Expr::Kind::FloorDiv && t.lhs().rhs().is_const() &&
          t.lhs().rhs().const_value() == k && d % k == 0)
        return t.lhs().lhs() / d;  // x / k * k / d = x / d for d a multiple of k
    }
    return t / d;
  }

  // The values a term of a non-negative index sum can take, from its shape alone: a
  // constant, `x % m` (x >= 0: Loom's indices are), the variable of an enclosing loop of
  // constant extent, scaled by a constant factor.
  std::optional<std::pair<int64_t, int64_t>> term_range(const Expr& t) const {
    if (t.is_const()) return std::pair{t.const_value(), t.const_value()};
    if (t.is_var())
      if (auto it = loop_extents_.find(t.var_name()); it != loop_extents_.end())
        return std::pair<int64_t, int64_t>{0, it->second - 1};
    if (t.kind() == Expr::Kind::Mod && t.rhs().is_const() && t.rhs().const_value() > 0)
      return std::pair<int64_t, int64_t>{0, t.rhs().const_value() - 1};
    if (t.kind() == Expr::Kind::Mul && t.rhs().is_const() && t.rhs().const_value() >= 0)
      if (auto r = term_range(t.lhs()))
        return std::pair{r->first * t.rhs().const_value(), r->second * t.rhs().const_value()};
    return std::nullopt;
  }

  // A number every value of `e` is a multiple of (its variables being any non-negative
  // integers): 1 when nothing better is known, 0 for the constant 0.
  static int64_t known_multiple(const Expr& e) {
    switch (e.kind()) {
      case Expr::Kind::Const: return e.const_value() < 0 ? -e.const_value() : e.const_value();
      case Expr::Kind::Add:
      case Expr::Kind::Sub:
      case Expr::Kind::Min:
      case Expr::Kind::Max: return std::gcd(known_multiple(e.lhs()), known_multiple(e.rhs()));
      case Expr::Kind::Mul: return known_multiple(e.lhs()) * known_multiple(e.rhs());
      case Expr::Kind::Mod:
        return e.rhs().is_const() ? std::gcd(known_multiple(e.lhs()), e.rhs().const_value()) : 1;
      default: return 1;
    }
  }
  // `offset` (elements of `bytes` each) in 16-byte units, divided term by term so that
  // ptxas sees each term's own scale (k_i * 2, not (... + k_i * 16) * 2 >> 4), or nullopt
  // where a term is not a known multiple of 16 bytes. A term `x % m` with m dividing every
  // value of x is 0 (the chunked layout's column remainder of a chunk-aligned origin).
  static std::optional<Expr> in_16_bytes(const Expr& offset, int64_t bytes) {
    std::vector<Expr> terms;
    std::function<void(const Expr&)> flatten = [&](const Expr& e) {
      if (e.kind() == Expr::Kind::Add) {
        flatten(e.lhs());
        flatten(e.rhs());
      } else {
        terms.push_back(e);
      }
    };
    flatten(offset);
    Expr units = 0;
    for (const Expr& t : terms) {
      if (t.kind() == Expr::Kind::Mod && t.rhs().is_const() &&
          known_multiple(t.lhs()) % t.rhs().const_value() == 0)
        continue;
      if (t.is_const() && t.const_value() * bytes % 16 == 0) {
        units = units + Expr(t.const_value() * bytes / 16);
        continue;
      }
      if (t.kind() != Expr::Kind::Mul || !t.rhs().is_const()) return std::nullopt;
      const int64_t scaled = t.rhs().const_value() * bytes;
      if (scaled % 16 != 0) return std::nullopt;
      units = units + t.lhs() * Expr(scaled / 16);
    }
    return units;
  }

  // An operand as an f32 expression: an immediate, an element of an f32 register array,
  // or a value of a packed 16-bit accumulator, widened from its half of its register.
  std::string operand(const Operand& o) const {
    if (o.is_imm()) return float_literal(o.imm);
    auto it = packed_.find(o.name);
    if (it == packed_.end()) return element(o.name, o.index);
    return std::string("loom::cvt_f32_") + dtype_suffix(it->second.type) + "(" +
           packed_half(o.name, o.index) + ")";
  }

  std::string compute_expr(const Stmt& s) const {
    auto a = [&](int i) { return operand(s.args.at(size_t(i))); };
    switch (s.op) {
      case ScalarOp::Add: return a(0) + " + " + a(1);
      case ScalarOp::Sub: return a(0) + " - " + a(1);
      case ScalarOp::Mul: return a(0) + " * " + a(1);
      case ScalarOp::Div: return a(0) + " / " + a(1);
      case ScalarOp::Max: return "loom::max_nan(" + a(0) + ", " + a(1) + ")";
      case ScalarOp::Min: return "loom::min_nan(" + a(0) + ", " + a(1) + ")";
      case ScalarOp::Neg: return "-" + a(0);
      case ScalarOp::Relu: return "loom::relu(" + a(0) + ")";
      case ScalarOp::Gelu: return "loom::gelu(" + a(0) + ")";
      case ScalarOp::GeluTanh: return "loom::gelu_tanh(" + a(0) + ")";
      case ScalarOp::Silu: return "loom::silu(" + a(0) + ")";
      case ScalarOp::Exp: return "expf(" + a(0) + ")";
      // ex2.approx: the one instruction the online softmax's exponent is in log2 units for.
      case ScalarOp::Exp2: return "loom::ex2_approx_ftz(" + a(0) + ")";
      case ScalarOp::Log: return "logf(" + a(0) + ")";
    }
    return "";
  }
  std::string mbar(const Stmt& s) const { return "&loom_mbar[" + ix(s.value) + "]"; }
  static bool always_zero(const Expr& e) { return e.is_const() && e.const_value() == 0; }
  // A constant multicast mask (the slot releases of k:030 go to every CTA of the cluster).
  static int64_t cluster_mask(const Stmt& s) {
    if (!s.multicast.is_const())
      throw Error("codegen: multicast mask " + s.multicast.str() + " is not a constant");
    return s.multicast.const_value();
  }
  std::string dst(const Stmt& s) const { return element(s.dst, s.dst_index); }
  // A scalar definition declares a const; an array element is assigned.
  std::string def(const Stmt& s) { return s.dst_index.empty() ? "const float " + s.dst : dst(s); }

  void stmt(const Stmt& s, int d) {
    switch (s.kind) {
      case StmtKind::For:
        if (s.unroll) line(d, "#pragma unroll");
        if (s.no_unroll) line(d, "#pragma unroll 1");
        if (s.unroll_by > 1 && !s.unroll && !s.no_unroll)
          line(d, "#pragma unroll " + std::to_string(s.unroll_by));
        line(d, "for (" + idx_ + " " + s.var + " = 0; " + s.var + " < " + ix(s.extent) +
                    "; ++" + s.var + ") {" +
                    (s.tier != Tier::None ? std::string("  // ") + tier_name(s.tier) : ""));
        reduce_depth_ += s.loop_kind == LoopKind::Reduce;
        {
          // The loop's range, for the shared addresses of its body (term_range). A
          // statement's index may name the variable of an enclosing loop only.
          auto outer = loop_extents_.extract(s.var);  // a loop of the same name outside
          if (s.extent.is_const() && s.extent.const_value() > 0)
            loop_extents_[s.var] = s.extent.const_value();
          block(s.body, d + 1);
          loop_extents_.erase(s.var);
          if (outer) loop_extents_.insert(std::move(outer));
        }
        reduce_depth_ -= s.loop_kind == LoopKind::Reduce;
        line(d, "}");
        break;
      case StmtKind::If:
        if (s.break_if()) {  // a statement of its loop's own body (verified)
          line(d, "if (" + ix(s.cond) + ") break;");
          break;
        }
        line(d, "if (" + ix(s.cond) + ") {");
        block(s.body, d + 1);
        line(d, "}");
        break;
      case StmtKind::Let:
        if (s.let_fetch()) {  // the work queue: atom.inc wraps to 0 at old == wrap - 1
          const std::string fetch = "(" + idx_ + ")atomicInc(reinterpret_cast<unsigned*>(" +
                                    address(s) + "), (unsigned)(" + ix(s.value) + ") - 1u)";
          line(d, "const " + idx_ + " " + s.var + " = " +
                      (always(s.pred) ? fetch : "(" + ix(s.pred) + ") ? " + fetch + " : 0") + ";");
          break;
        }
        if (s.let_load() && p_.tensor(s.tensor).role == TensorRole::Shared) {
          // An integer another thread of the block stored (the walk's unit hand-off), read
          // after the barrier that publishes it: a plain shared load (volatile: not cached
          // across the barrier's asm).
          line(d, "const " + idx_ + " " + s.var + " = (" + idx_ + ")*reinterpret_cast<volatile int*>(" +
                      address(s) + ");");
          break;
        }
        if (s.let_load()) {  // an integer read (a block table entry, a length)
          // A C cast: idx_ may be `long long`, which has no functional-cast form.
          line(d, "const " + idx_ + " " + s.var + " = (" + idx_ + ")__ldg(" + address(s) + ");");
          break;
        }
        // A warp's index (threadIdx.x / a multiple of 32) bound where every thread of the
        // block passes: read from lane 0, ptxas knows it is the same across the warp.
        if (warp_uniform_ && d == 1 && warp_index(s.value)) {
          line(d, "const " + idx_ + " " + s.var + " = loom::warp_uniform(" + ix(s.value) + ");");
          break;
        }
        line(d, "const " + idx_ + " " + s.var + " = " + ix(s.value) + ";");
        break;
      case StmtKind::Load: {
        DType dt = p_.tensor(s.tensor).dtype;
        if (is_chunk_load(s)) {  // ir/realign.h: two aligned 16-byte chunks, raw bits
          line(d, "loom::ld_chunks16(&" + dst(s) + ", " + tn(s.tensor) + ", (long long)(" +
                      ix(s.index.at(0)) + "), int(" + ix(s.value) + "), " +
                      extent(s.tensor) + ");");
          break;
        }
        if (packed_.count(s.dst)) {
          packed_load(s, d);
          break;
        }
        // The fill of a truncating tf32 register A (TF32_ROUND=none): the raw f32 bits.
        if (dt == DType::TF32 && raw_tf32_.count(s.dst)) dt = DType::F32;
        if (s.width > 1) {
          if (s.dst_index.empty() || !always(s.pred))
            throw Error("codegen: vector loads need a register-array destination and no "
                        "predicate (" + s.tensor + ")");
          line(d, "loom::ld_v" + std::to_string(s.width) + "_" + dtype_suffix(dt) + "(&" +
                      dst(s) + ", " + address(s) + ");");
          break;
        }
        std::string ld = std::string("loom::ld_") + dtype_suffix(dt) + "(" + address(s) + ")";
        if (!always(s.pred)) ld = "(" + ix(s.pred) + ") ? " + ld + " : 0.0f";
        line(d, def(s) + " = " + ld + ";");
        break;
      }
      case StmtKind::Compute:
        if (packed_.count(s.dst)) {
          packed_compute(s, nullptr, d);
          break;
        }
        line(d, def(s) + " = " + compute_expr(s) + ";");
        break;
      case StmtKind::Init:
        if (packed_.count(s.dst)) {
          packed_init(s, d);
          break;
        }
        line(d, (s.dst_index.empty() ? "float " + s.dst : dst(s)) + " = " + float_literal(s.imm) + ";");
        break;
      case StmtKind::Accum:
        if (s.op == ScalarOp::Add) {
          line(d, dst(s) + " += " + operand(s.args.at(0)) + ";");
          break;
        }
        line(d, dst(s) + " = " +
                    compute_expr(Stmt::Compute(
                        "", s.op, {Operand::value(s.dst, s.dst_index), s.args.at(0)})) +
                    ";");
        break;
      case StmtKind::Atom: {
        if (const AtomDef* wg = wgmma_variant(s.atom)) {
          const WarpAtom* w = find_warp_atom(*k_, s.atom);
          LOOM_CHECK(w, "kernel declares the wgmma it issues");
          warpgroup_atom(s, *wg, *w, d);
          break;
        }
        const AtomDef& a = atom(s.atom);
        if (const WarpAtom* w = find_warp_atom(*k_, s.atom)) {
          warp_atom(s, a, *w, d);
          break;
        }
        if (!always(s.scale_d)) {
          throw Error("codegen: " + s.atom + " with scale_d " + s.scale_d.str() +
                      ": only mma.sync and wgmma atoms take one");
        }
        if (const WarpCopy* c = find_warp_copy(*k_, s.atom); c && c->to_shared) {
          // stmatrix stores .b32 registers of two 16-bit values each (value 2i in the low
          // half of register i): the f32 values are rounded to the tile's type in pairs.
          const DType dt = p_.tensor(s.tensor).dtype;
          if (dt != DType::F16 && dt != DType::BF16)
            throw Error("codegen: " + s.atom + " stores 16-bit values; `" + s.tensor + "` holds " +
                        dtype_name(dt));
          const std::string pack = dt == DType::F16 ? "loom::pack_f16x2(" : "loom::pack_bf16x2(";
          std::string regs;
          for (size_t i = 0; i + 1 < s.args.size(); i += 2)
            regs += (i ? ", " : "") + pack + operand(s.args[i]) + ", " + operand(s.args[i + 1]) + ")";
          line(d, "{");
          line(d + 1, "const unsigned st_r[" + std::to_string(s.args.size() / 2) + "] = {" + regs + "};");
          line(d + 1, a.wrapper + "(" + address_of(s.tensor, s.index.at(0), true) + ", st_r);  // " + a.ptx);
          line(d, "}");
          break;
        }
        if (find_warp_copy(*k_, s.atom)) {
          // ldmatrix fills the fragment's registers (packed b16 pairs, or the raw words of
          // a tf32 fragment's f32 array); this lane gives its row. The instruction takes
          // a 32-bit shared address, and a shared offset always fits an int: with 64-bit
          // indices (symbolic shapes) the row offset is computed in int, not in pairs of
          // registers.
          line(d, a.wrapper + "(" + fragment_regs(s.dst, s.dst_index) + ", " +
                      address_of(s.tensor, s.index.at(0), true) + ");  // " + a.ptx);
          break;
        }
        std::string call = a.wrapper + "(" + dst(s);
        for (const auto& o : s.args) call += ", " + operand(o);
        line(d, call + ");");
        break;
      }
      case StmtKind::Write: {
        DType dt = p_.tensor(s.tensor).dtype;
        if (s.write_int()) {  // an i32 element (verified)
          line(d, "*reinterpret_cast<volatile int*>(" + address(s) + ") = (int)(" + ix(s.value) + ");");
          break;
        }
        if (is_realigned_store(s)) {  // ir/realign.h: the shifted window, one st.shared.v4
          line(d, "loom::st_realign16(" + address(s) + ", &" + element(s.args.at(0).name, s.args.at(0).index) +
                      ", (long long)(" + ix(s.src_index.at(0)) + "), int(" + ix(s.value) + "));");
          break;
        }
        if (!s.args.at(0).is_imm() && packed_.count(s.args.at(0).name)) {
          packed_store(s, d);
          break;
        }
        if (s.remote) {  // verified: 1, 2 or 4 f32 into a cluster CTA's shared tensor
          const TensorDecl& t = p_.tensor(s.tensor);
          if (t.swizzle.bits || t.row_chunk > 0)
            throw Error("codegen: remote store into " + s.tensor + ", whose layout is swizzled or "
                        "chunked; st_async_f32 takes plain offsets");
          const std::string v = s.width > 1 ? "&" + operand(s.args.at(0)) : operand(s.args.at(0));
          line(d, "loom::st_async_v" + std::to_string(s.width) + "_f32(" + tn(s.tensor) +
                      ", unsigned(" + ix(s.index.at(0)) + "), unsigned(" + ix(s.value) +
                      "), &loom_mbar[" + ix(s.mbar) + "], " + v + ");");
          break;
        }
        if (s.atomic_add) {
          if (dt != DType::F32)
            throw Error("codegen: atomic accumulation needs an f32 output (" + s.tensor + " is " +
                        dtype_name(dt) + "); use SPLITK_MODE=reduce");
          if (s.width > 1)
            line(d, "loom::red_add_v" + std::to_string(s.width) + "_f32(" + address(s) + ", &" +
                        operand(s.args.at(0)) + ");");
          else
            line(d, "atomicAdd(" + address(s) + ", " + operand(s.args.at(0)) + ");");
        } else if (s.width > 1) {
          if (s.args.at(0).index.empty())
            throw Error("codegen: vector stores need a register-array value");
          line(d, "loom::st_v" + std::to_string(s.width) + "_" + dtype_suffix(dt) + "(" +
                      address(s) + ", &" + operand(s.args.at(0)) + ");");
        } else {
          line(d, "loom::st_" + std::string(dtype_suffix(dt)) + "(" + address(s) + ", " +
                      operand(s.args.at(0)) + ");");
        }
        break;
      }
      case StmtKind::Alloc: {
        if (chunks_.count(s.dst)) {
          // Chunk registers of the realigned copy: 16-bit elements as raw bits, two per
          // .b32 register (element v in register v/2, half v%2), never converted.
          std::string decl = "unsigned " + s.dst;
          for (size_t i = 0; i + 1 < s.index.size(); ++i) decl += "[" + ix(s.index[i]) + "]";
          decl += "[" + std::to_string(s.index.back().const_value() / kHalves) + "]";
          line(d, decl + ";  // 16-bit chunks, raw");
          break;
        }
        auto it = packed_.find(s.dst);
        if (it != packed_.end()) {
          // Packed fragment: two 16-bit values per .b32 register (see find_packed).
          std::string decl = "unsigned " + s.dst;
          for (size_t i = 0; i + 1 < s.index.size(); ++i) decl += "[" + ix(s.index[i]) + "]";
          decl += "[" + std::to_string(s.index.back().const_value() / kHalves) + "]";
          // Element-wise writes (loads, an accumulator's zeroing) insert one half at a
          // time into the registers.
          line(d, decl + (it->second.elementwise ? " = {}" : "") + ";  // " +
                      dtype_name(it->second.type) + "x2" +
                      (it->second.accumulator ? " accumulators" : "") +
                      ": value v in register v/2, half v%2");
          break;
        }
        std::string decl = "float " + s.dst;
        for (const auto& e : s.index) decl += "[" + ix(e) + "]";
        line(d, decl + ";");
        break;
      }
      case StmtKind::Barrier:
        if (s.named_barrier())
          line(d, std::string(s.named_arrive() ? "loom::bar_arrive(" : "loom::bar_sync(") + ix(s.value) + ", " + std::to_string(int64_t(s.imm)) + ");");
        else
          line(d, "__syncthreads();");
        break;
      case StmtKind::AsyncCopy: {
        int bytes = s.width * dtype_bytes(p_.tensor(s.tensor).dtype);
        std::string src = address_of(s.src, s.src_index.at(0));
        if (!always(s.pred)) src = "(" + ix(s.pred) + ") ? " + src + " : " + tn(s.src);
        line(d, "loom::cp_async_" + std::to_string(bytes) + "(" + address(s) + ", " + src + ", " +
                    (always(s.pred) ? std::string("true") : ix(s.pred)) + ");");
        break;
      }
      case StmtKind::AsyncCommit:
        line(d, "loom::cp_async_commit();");
        break;
      case StmtKind::AsyncWait:
        line(d, "loom::cp_async_wait<" + std::to_string(int(s.imm)) + ">();");
        break;
      case StmtKind::TmaLoad: {
        // Coordinates go innermost first, as the tensor map orders dimensions.
        std::string call = "loom::cp_async_bulk_tensor_" + std::to_string(s.src_index.size()) +
                           "d_global_to_shared(" + shared_address(s.tensor, s.index.at(0)) +
                           ", &" + cuda_tensor_map_name(s.dst) + ", " + mbar(s);
        if (!always_zero(s.multicast)) {
          if (s.src_index.size() < 2 || s.src_index.size() > 4)
            throw Error("codegen: a multicast TMA load of " + std::to_string(s.src_index.size()) +
                        " dimensions (Loom's multicast wrappers take 2 to 4: a GEMM's rows and "
                        "columns under up to two batch dimensions)");
          // A 2-D cluster's mask depends on the CTA's rank digits (k:015: A's cluster row,
          // B's column): an expression, evaluated once per issue.
          const std::string mask = s.multicast.is_const() ? std::to_string(cluster_mask(s))
                                                          : "(" + ix(s.multicast) + ")";
          call = "loom::tma_load_" + std::to_string(s.src_index.size()) + "d_multicast(" + shared_address(s.tensor, s.index.at(0)) + ", &" +
                 cuda_tensor_map_name(s.dst) + ", " + mbar(s) + ", (unsigned short)" + mask;
        }
        for (size_t i = s.src_index.size(); i-- > 0;) call += ", int(" + ix(s.src_index[i]) + ")";
        line(d, call + ");");
        break;
      }
      case StmtKind::MbarInit:
        line(d, "loom::mbarrier_init_shared_b64(" + mbar(s) + ", " + std::to_string(int(s.imm)) +
                    ");");
        break;
      case StmtKind::FenceMbarInit:
        line(d, "loom::fence_mbarrier_init_release_cluster();");
        break;
      case StmtKind::MbarArriveExpectTx:
        line(d, "loom::mbarrier_arrive_expect_tx_shared_b64(" + mbar(s) + ", " +
                    std::to_string(int64_t(s.imm)) + "u);");
        break;
      case StmtKind::MbarWait:
        line(d, "loom::mbarrier_wait_parity_shared_b64(" + mbar(s) + ", " + ix(s.cond) + ");");
        break;
      case StmtKind::MbarArrive:
        if (always_zero(s.multicast)) {
          line(d, "loom::mbarrier_arrive(" + mbar(s) + ");");
          break;
        }
        // One arrival on the barrier of each CTA in the mask (mapa + shared::cluster).
        for (int r = 0; r < 16; ++r)
          if (cluster_mask(s) >> r & 1)
            line(d, "loom::mbarrier_arrive_cluster(" + mbar(s) + ", " + std::to_string(r) + "u);");
        break;
      case StmtKind::LaneReduce: {
        const char* fn = s.op == ScalarOp::Max ? "loom::lane_reduce_max<"
                         : s.op == ScalarOp::Min ? "loom::lane_reduce_min<"
                                                 : "loom::lane_reduce_add<";
        line(d, (s.dst_index.empty() ? "float " + s.dst : dst(s)) + " = " + fn +
                    std::to_string(int(s.imm)) + ">(" + operand(s.args.at(0)) + ");");
        break;
      }
      case StmtKind::TileArrive: {
        const int64_t threads = s.value.const_value();
        const std::string arrivals = std::to_string(int64_t(s.imm)) + ".0f";
        const std::string arrive =
            threads == k_->block_threads
                ? "loom::tile_arrive_block(" + address(s) + ", " + arrivals + ")"
                : "loom::tile_arrive_group(" + address(s) + ", " + arrivals + ", " +
                      std::to_string(threads) + "u)";
        // `when` is uniform over a group: a group that does not arrive skips the barrier.
        const bool always = s.cond.is_const() && s.cond.const_value() != 0;
        line(d, "const " + idx_ + " " + s.var + " = " +
                    (always ? arrive : "(" + ix(s.cond) + ") ? " + arrive + " : 1") + ";");
        break;
      }
      case StmtKind::ClusterSync:
        line(d, s.mode == "relaxed" ? "loom::cluster_arrive_relaxed();" : "loom::cluster_arrive();");
        line(d, "loom::cluster_wait();");
        break;
      case StmtKind::WgmmaFence:
        line(d, "loom::wgmma_fence();");
        break;
      case StmtKind::WgmmaCommit:
        line(d, "loom::wgmma_commit_group();");
        break;
      case StmtKind::WgmmaWait: {
        if (s.args.empty()) {
          line(d, "loom::wgmma_wait_group<" + std::to_string(int(s.imm)) + ">();");
          break;
        }
        std::string after;
        for (const Operand& o : s.args) after += (after.empty() ? "" : ", ") + operand(o);
        line(d, "loom::wgmma_wait_group_after<" + std::to_string(int(s.imm)) + ">(" + after + ");");
        break;
      }
      case StmtKind::FenceProxyAsync:
        line(d, "loom::fence_proxy_async_shared();");
        break;
      case StmtKind::SetMaxNReg:
        line(d, "loom::setmaxnreg_" + s.mode + "<" + std::to_string(int(s.imm)) + ">();");
        break;
      case StmtKind::TmaStore: {
        std::string call = "loom::tma_store_" + std::to_string(s.src_index.size()) + "d(&" +
                           cuda_tensor_map_name(s.dst) +
                           ", " + shared_address(s.tensor, s.index.at(0));
        for (size_t i = s.src_index.size(); i-- > 0;) call += ", int(" + ix(s.src_index[i]) + ")";
        line(d, call + ");");
        break;
      }
      case StmtKind::BulkCommit:
        line(d, "loom::bulk_commit_group();");
        break;
      case StmtKind::BulkWait:
        line(d, "loom::bulk_wait_group_read<" + std::to_string(int(s.imm)) + ">();");
        break;
      case StmtKind::Specialize:
        // The arms' conditions split the block by warp: each warp takes its arm, and the
        // arms run at the same time, handing buffers over through mbarriers.
        line(d, "// ---- warp specialization: " + std::to_string(s.body.size()) + " roles ----");
        for (const Stmt& arm : s.body) {
          if (arm.kind != StmtKind::If || !warp_uniform_ || !whole_warps(arm.cond)) {
            stmt(arm, d);
            continue;
          }
          // The same split by the warp's index, which ptxas knows to be warp-uniform (a
          // shfl from lane 0): the branch is uniform, so the arm's own warp-uniform values
          // (loop counters, ring slots, wgmma descriptors) live in uniform registers.
          line(d, "if (" + ix(by_warp(arm.cond)) + ") {");
          block(arm.body, d + 1);
          line(d, "}");
        }
        break;
      case StmtKind::Stage:
        throw Error("codegen: a Stage bundle reached codegen; k:015_lower_stages must lower it");
    }
  }

  // Register arrays that hold 16-bit mma fragments are declared packed, as the .b32
  // registers ldmatrix writes and mma.sync reads and writes (value v in register v/2,
  // half v%2: the atom table's numbering of fragment values), so none needs an unpack or
  // repack in the mainloop: the A and B operands of f16/bf16 warp atoms, the
  // destinations of b16 warp copies (the b32 view of tf32 fills f32 arrays), and the C/D
  // accumulators of f16-accumulating atoms (ACC=f16). Operand fragments may also be
  // written by element-wise loads (which insert halves); accumulators by their zeroing
  // (Init, likewise) and read, value by value, by the epilogue. Anything else that
  // touches one is an error here rather than a silent reinterpretation.
  // The exception: an A operand that is itself an f32 accumulator of a warp atom
  // (attention's P = the S accumulators, docs/attention.md's C -> A repack) stays f32 and
  // is packed at each mma that reads it (cvt.rn.*x2.f32, one per register).
  // The register arrays a chunk load fills hold raw 16-bit bits (ir/realign.h): only
  // chunk loads and realigned stores may touch them, each from element 0 of a slot; the
  // Alloc's last extent is the 2w elements of two chunks.
  void find_chunk_arrays(const KernelOp& k) {
    chunks_.clear();
    walk(k.body, [&](const Stmt& s) {
      if (!is_chunk_load(s)) return;
      if (dtype_bytes(p_.tensor(s.tensor).dtype) != 2)
        throw Error("codegen: chunk load from " + s.tensor + ", which does not hold 16-bit elements");
      chunks_.insert(s.dst);
    });
    walk(k.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Alloc) {
        if (chunks_.count(s.dst) && (!s.index.back().is_const() || s.index.back().const_value() != 16))
          throw Error("codegen: chunk registers `" + s.dst + "` need a last extent of 16 (two 16-byte chunks)");
        return;
      }
      const bool mine = is_chunk_load(s) || is_realigned_store(s);
      if (is_realigned_store(s) && !chunks_.count(s.args.at(0).name))
        throw Error("codegen: realigned store from `" + s.args.at(0).name + "`, which no chunk load fills");
      if (mine) return;
      auto touches = [&](const std::string& n) { return chunks_.count(n) > 0; };
      bool hit = touches(s.dst);
      for (const Operand& o : s.args) hit |= !o.is_imm() && touches(o.name);
      if (hit)
        throw Error("codegen: `" + s.dst + "` statement touches chunk registers (raw 16-bit bits) "
                    "that only chunk loads and realigned stores may use");
    });
  }

  // The elements of tensor `t`'s storage: a chunk load never reads past them. Its element
  // count, or for a view (TensorDecl::pitch) its footprint: the last rows of a view sit past
  // rows x width, and bounding them by the element count zero-filled them.
  std::string extent(const std::string& t) const {
    const TensorDecl& d = p_.tensor(t);
    return "(long long)(" + ix(d.pitched() ? d.footprint() : d.numel()) + ")";
  }

  void find_packed(const KernelOp& k) {
    find_chunk_arrays(k);
    packed_.clear();
    raw_tf32_.clear();
    rounded_tf32_.clear();
    std::set<std::string> accumulators;
    alloc_extents_.clear();
    walk(k.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Alloc) {
        std::vector<int64_t>& e = alloc_extents_[s.dst];
        e.clear();
        for (const Expr& x : s.index) e.push_back(x.is_const() ? x.const_value() : 0);
      }
      if (s.kind != StmtKind::Atom) return;
      const WarpAtom* w = find_warp_atom(k, s.atom);
      if (w && dtype_bytes(w->acc_type) == 4) accumulators.insert(s.dst);
    });
    walk(k.body, [&](const Stmt& s) {
      if (s.kind != StmtKind::Atom) return;
      if (const WarpAtom* w = find_warp_atom(k, s.atom)) {
        if (w->threads != WarpAtom::kLanes) {
          // wgmma: f32 accumulators; a register A of 16-bit values is packed like mma.sync's.
          // An f32 accumulator as A (attention's P, k:013) is packed at the wgmma instead.
          if (!w->a_shared && dtype_bytes(w->a_type) == 2 &&
              !accumulators.count(s.args.at(0).name))
            packed_.emplace(s.args.at(0).name, Packed{w->a_type});
          if (!w->a_shared && w->a_type == DType::TF32)
            (w->a_truncated ? raw_tf32_ : rounded_tf32_).insert(s.args.at(0).name);
          return;
        }
        if (dtype_bytes(w->a_type) == 2)
          for (const Operand& o : s.args)
            if (!accumulators.count(o.name)) packed_.emplace(o.name, Packed{w->a_type});
        if (dtype_bytes(w->acc_type) == 2) packed_.emplace(s.dst, Packed{w->acc_type, false, true});
      } else if (const WarpCopy* c = find_warp_copy(k, s.atom);
                 c && c->element_bytes == 2 && !c->to_shared) {
        packed_.emplace(s.dst, Packed{p_.tensor(s.tensor).dtype});
      }
    });
    walk(k.body, [&](const Stmt& s) {
      auto first_line = [&] {
        const std::string b = print_block(Block{s});
        return b.substr(0, b.find('\n'));
      };
      auto bad = [&](const std::string& name) {
        auto it = packed_.find(name);
        if (it == packed_.end()) return;
        throw Error("codegen: `" + name + "` holds packed 16-bit mma fragments, which only " +
                    (it->second.accumulator
                         ? "its zeroing, mma.sync and epilogue reads of single values"
                         : "element loads, ldmatrix and mma.sync") +
                    " may touch; found `" + first_line() + "`");
      };
      const bool atom = s.kind == StmtKind::Atom &&
                        (find_warp_atom(k, s.atom) || find_warp_copy(k, s.atom));
      auto it = packed_.find(s.dst);
      // A Compute into an operand fragment converts its f32 result into the value's half
      // (attention's P, converted once after the softmax: k:013 with ATTN_OVERLAP).
      const bool elementwise = it != packed_.end() && s.kind != StmtKind::Alloc && !atom &&
                               (it->second.accumulator ? s.kind == StmtKind::Init
                                                       : s.kind == StmtKind::Load ||
                                                             s.kind == StmtKind::Compute);
      if (elementwise) {
        if (s.dst_index.empty() || !s.dst_index.back().is_const())
          throw Error("codegen: `" + first_line() + "` writes packed fragment `" + s.dst +
                      "` without a constant value index (k:025 emits one per value)");
        it->second.elementwise = true;
        return;
      }
      if (s.kind == StmtKind::Alloc || atom) return;
      bad(s.dst);
      const bool epilogue_read = s.kind == StmtKind::Compute || s.kind == StmtKind::Write;
      for (const Operand& o : s.args) {
        auto a = packed_.find(o.name);
        if (a != packed_.end() && a->second.accumulator && epilogue_read && !o.index.empty() &&
            o.index.back().is_const())
          continue;
        bad(o.name);
      }
    });
    // A tf32 register A is rounded at its fills only where every write to it is a tf32
    // element load (ld_tf32); an ldmatrix fill or an f32 slab leaves the cvt at the wgmma.
    walk(k.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Alloc || (s.kind == StmtKind::Atom && find_warp_atom(k, s.atom)) ||
          !rounded_tf32_.count(s.dst))
        return;
      if (s.kind != StmtKind::Load || is_chunk_load(s) || p_.tensor(s.tensor).dtype != DType::TF32)
        rounded_tf32_.erase(s.dst);
    });
  }

  // `name[index..]` as the 16-bit bits of its value: half index.back() % 2 of register
  // index.back() / 2.
  std::string packed_half(const std::string& name, std::vector<Expr> index) const {
    const int64_t v = index.back().const_value();
    index.back() = Expr(v / kHalves);
    return "loom::b16_half<" + std::to_string(v % kHalves) + ">(" + element(name, index) + ")";
  }

  // A Compute into a packed operand fragment: its f32 result rounded to the fragment's
  // 16-bit type. With `pair` (the Compute of the register's other value, v + 1 after an
  // even v) both go in with one cvt.rn.*x2.f32; alone, into its half.
  void packed_compute(const Stmt& s, const Stmt* pair, int d) {
    const DType t = packed_.at(s.dst).type;
    const std::string pack = t == DType::F16 ? "loom::pack_f16x2(" : "loom::pack_bf16x2(";
    std::vector<Expr> reg = s.dst_index;
    const int64_t v = reg.back().const_value();
    reg.back() = Expr(v / kHalves);
    if (pair) {
      line(d, element(s.dst, reg) + " = " + pack + compute_expr(s) + ", " + compute_expr(*pair) +
                  ");");
      return;
    }
    const std::string bits = "(unsigned short)(" + pack + compute_expr(s) + ", 0.0f) & 0xffffu)";
    line(d, "loom::set_b16_half<" + std::to_string(v % kHalves) + ">(" + element(s.dst, reg) +
                ", " + bits + ");");
  }

  // b[i] and b[i + 1] compute values v (even) and v + 1 of one packed register: one pack.
  size_t packed_compute_pair(const Block& b, size_t i, int d) {
    if (i + 1 >= b.size()) return 0;
    const Stmt &x = b[i], &y = b[i + 1];
    if (x.kind != StmtKind::Compute || y.kind != StmtKind::Compute || x.dst != y.dst ||
        !packed_.count(x.dst) || x.dst_index.empty() || x.dst_index.size() != y.dst_index.size() ||
        !x.dst_index.back().is_const() || !y.dst_index.back().is_const())
      return 0;
    const int64_t v = x.dst_index.back().const_value();
    if (v % kHalves != 0 || y.dst_index.back().const_value() != v + 1) return 0;
    for (size_t j = 0; j + 1 < x.dst_index.size(); ++j)
      if (!x.dst_index[j].same_as(y.dst_index[j])) return 0;
    // y must not read what x writes (it reads f32 values, never the packed fragment).
    for (const Operand& o : y.args)
      if (o.name == x.dst) return 0;
    packed_compute(x, &y, d);
    return 2;
  }

  // An accumulator's zeroing (Init), one value at a time into its half.
  void packed_init(const Stmt& s, int d) {
    const DType t = packed_.at(s.dst).type;
    const float v = float(s.imm);
    const unsigned bits = t == DType::F16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
    if (double(t == DType::F16 ? f16_bits_to_f32(uint16_t(bits)) : bf16_bits_to_f32(uint16_t(bits))) != s.imm)
      throw Error("codegen: `" + s.dst + "` starts at " + float_literal(s.imm) + ", which " +
                  dtype_name(t) + " cannot hold exactly");
    std::vector<Expr> reg = s.dst_index;
    const int64_t v0 = reg.back().const_value();
    reg.back() = Expr(v0 / kHalves);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%04x", bits);
    line(d, "loom::set_b16_half<" + std::to_string(v0 % kHalves) + ">(" + element(s.dst, reg) +
                ", " + hex + ");  // " + float_literal(s.imm));
  }

  // An epilogue store of packed accumulator values. Into a tensor of the accumulator's
  // own type the bits go out as they are: a pair of values (c0,c1 or c2,c3: adjacent
  // columns, one register) as one 4-byte store, a single value as its half. Into any
  // other type each value is widened to f32 and stored as usual.
  void packed_store(const Stmt& s, int d) {
    const Operand& o = s.args.at(0);
    const DType t = p_.tensor(s.tensor).dtype, acc = packed_.at(o.name).type;
    if (s.atomic_add)
      throw Error("codegen: atomic accumulation of packed " + std::string(dtype_name(acc)) +
                  " accumulators into `" + s.tensor + "` (split-K is not built for mma tiles)");
    const int64_t v0 = o.index.back().const_value();
    if (t == acc && s.width == kHalves && v0 % kHalves == 0) {
      std::vector<Expr> reg = o.index;
      reg.back() = Expr(v0 / kHalves);
      const AtomDef* st = vector_copy_atom(MemSpace::Register, MemSpace::Global, 4);
      LOOM_CHECK(st, "the atom table has a 4-byte register -> global store");
      line(d, st->wrapper + "(" + address(s) + ", " + element(o.name, reg) + ");  // " +
                  dtype_name(acc) + "x2, as accumulated");
      return;
    }
    if (t == acc && s.width == 1) {
      line(d, "loom::st_b16(" + address(s) + ", " + packed_half(o.name, o.index) + ");");
      return;
    }
    if (s.width == 1) {
      line(d, "loom::st_" + std::string(dtype_suffix(t)) + "(" + address(s) + ", " + operand(o) +
                  ");");
      return;
    }
    line(d, "{");
    std::string vals;
    for (int i = 0; i < s.width; ++i) {
      Operand e = o;
      e.index.back() = Expr(v0 + i);
      vals += (i ? ", " : "") + operand(e);
    }
    line(d + 1, "const float v_[" + std::to_string(s.width) + "] = {" + vals + "};");
    line(d + 1, "loom::st_v" + std::to_string(s.width) + "_" + dtype_suffix(t) + "(" + address(s) +
                    ", v_);");
    line(d, "}");
  }

  // `&name[prefix..][0]`: the first register of a packed fragment.
  // The first register of fragment name[prefix..]: zeros for every trailing dimension (a
  // fragment may span several, e.g. two m16n8 tiles that one ldmatrix.x4 fills).
  std::string fragment_regs(const std::string& name, std::vector<Expr> prefix) const {
    auto it = alloc_extents_.find(name);
    const size_t rank = it == alloc_extents_.end() ? prefix.size() + 1 : it->second.size();
    while (prefix.size() < rank) prefix.push_back(Expr(0));
    return "&" + element(name, prefix);
  }

  // An element-wise (or vector) load of 16-bit values into a packed fragment: each value
  // goes, as its bits, into its half of its register.
  void packed_load(const Stmt& s, int d) {
    std::vector<Expr> reg = s.dst_index;
    const int64_t v0 = reg.back().const_value();
    auto put = [&](int64_t v, const std::string& bits) {
      reg.back() = Expr(v / kHalves);
      return "loom::set_b16_half<" + std::to_string(v % kHalves) + ">(" + element(s.dst, reg) +
             ", " + bits + ");";
    };
    if (s.width == 1) {
      std::string bits = "*" + address(s);
      if (!always(s.pred)) bits = "(" + ix(s.pred) + ") ? " + bits + " : (unsigned short)0";
      line(d, put(v0, bits));
      return;
    }
    if (!always(s.pred))
      throw Error("codegen: predicated vector load into packed fragment `" + s.dst + "`");
    line(d, "{");
    line(d + 1, "const unsigned short* const p_ = " + address(s) + ";");
    for (int i = 0; i < s.width; ++i) line(d + 1, put(v0 + i, "p_[" + std::to_string(i) + "]"));
    line(d, "}");
  }

  // Value v of fragment operand `o`: the v-th element, row-major, of the array's trailing
  // dimensions after the operand's prefix (one dimension, or several: stmt.h).
  std::string fragment_value(const Operand& o, int v) const {
    std::vector<Expr> idx = o.index;
    auto it = alloc_extents_.find(o.name);
    if (it == alloc_extents_.end() || it->second.size() <= idx.size() + 1) {
      idx.push_back(Expr(v));
      return element(o.name, idx);
    }
    const std::vector<int64_t>& ext = it->second;
    std::vector<Expr> tail;
    for (size_t i = ext.size(); i-- > idx.size();) {
      tail.insert(tail.begin(), Expr(v % ext[i]));
      v /= int(ext[i]);
    }
    idx.insert(idx.end(), tail.begin(), tail.end());
    return element(o.name, idx);
  }

  // A warp atom (mma.sync): Kernel IR fragments are register arrays (value v of a
  // fragment is element v of its trailing dimension); the wrapper takes .b32 registers,
  // two f16/bf16 values per register (lower-numbered value in the low half) or one tf32
  // rounded with cvt.rna. The accumulator fragment is passed as is: float[4] for f32,
  // the packed unsigned[2] of find_packed for f16 (ACC=f16).
  void warp_atom(const Stmt& s, const AtomDef& a, const WarpAtom& w, int d) {
    // scale_d 0 (a zero C operand) is the wrapper's scale-d template argument: its C
    // registers are constant zeros, and D is written without being read first.
    const bool zero_c = !always(s.scale_d);
    if (zero_c && !(s.scale_d.is_const() && s.scale_d.const_value() == 0))
      throw Error("codegen: mma.sync " + a.id + " with scale_d " + s.scale_d.str() +
                  ": mma.sync takes the constant 0 or 1");
    const bool zero_c_ok = a.id == "mma_m16n8k16_f32_f16" || a.id == "mma_m16n8k16_f32_bf16";
    if (zero_c && !zero_c_ok)
      throw Error("codegen: scale_d 0 (a zero C operand) is built for the f32-accumulating "
                  "m16n8k16 mma.sync atoms, not " + a.id + "; zero its accumulator with an Init");
    const std::string wrapper = zero_c ? a.wrapper + "<0>" : a.wrapper;
    const bool half = w.a_type == DType::F16 || w.a_type == DType::BF16;
    auto pack = [&](const Operand& o, int values, const char* reg) {
      std::vector<std::string> lines;
      const std::string fn = w.a_type == DType::F16    ? "loom::pack_f16x2"
                             : w.a_type == DType::BF16 ? "loom::pack_bf16x2"
                                                       : "loom::cvt_rna_tf32";
      auto value = [&](int v) { return fragment_value(o, v); };
      for (int r = 0; r < (half ? values / 2 : values); ++r)
        lines.push_back(std::string(reg) + "[" + std::to_string(r) + "] = " + fn + "(" +
                        (half ? value(2 * r) + ", " + value(2 * r + 1) : value(r)) + ");");
      return lines;
    };
    LOOM_CHECK(w.acc_type == DType::F32 || packed_.count(s.dst),
               "a 16-bit accumulator fragment is declared packed (find_packed)");
    std::vector<Expr> c = s.dst_index;
    c.push_back(Expr(0));
    if (half && !packed_.count(s.args.at(0).name)) {
      // An f32 accumulator read as the A fragment (find_packed): its values pair up into
      // the .b32 registers here; B is packed as usual.
      line(d, "{  // " + a.ptx);
      line(d + 1, "unsigned a_[" + std::to_string(w.a_values / 2) + "];");
      for (const auto& l : pack(s.args.at(0), w.a_values, "a_")) line(d + 1, l);
      line(d + 1, wrapper + "(&" + element(s.dst, c) + ", a_, " +
                      fragment_regs(s.args.at(1).name, s.args.at(1).index) + ");");
      line(d, "}");
      return;
    }
    if (half) {
      // Packed operands (find_packed): the registers go to the wrapper as they are.
      line(d, wrapper + "(&" + element(s.dst, c) + ", " +
                  fragment_regs(s.args.at(0).name, s.args.at(0).index) + ", " +
                  fragment_regs(s.args.at(1).name, s.args.at(1).index) + ");  // " + a.ptx);
      return;
    }
    const int a_regs = half ? w.a_values / 2 : w.a_values, b_regs = half ? w.b_values / 2 : w.b_values;
    line(d, "{  // " + a.ptx);
    line(d + 1, "unsigned a_[" + std::to_string(a_regs) + "], b_[" + std::to_string(b_regs) + "];");
    for (const auto& l : pack(s.args.at(0), w.a_values, "a_")) line(d + 1, l);
    for (const auto& l : pack(s.args.at(1), w.b_values, "b_")) line(d + 1, l);
    line(d + 1, wrapper + "(&" + element(s.dst, c) + ", a_, b_);");
    line(d, "}");
  }

  // A warpgroup atom (wgmma): the accumulator fragment is the register array's trailing
  // dimension (N/2 f32 values, bound by reference), A and B shared tiles become matrix
  // descriptors (wgmma_operand_desc), and scale-d is the statement's: 1 accumulates, and
  // `0 < k_o` on a slab's first atom step makes the tile's first k-step D = A·B, which
  // replaces the zeroing (the wrapper turns it into the predicate operand with setp).
  // A register A (the _rs variant) is the fragment's 4 .b32 registers: the packed array
  // itself for f16/bf16, the f32 values rounded with cvt.rna for tf32 (as mma.sync's), or
  // their raw bits with TF32_ROUND=none (WarpAtom::a_truncated).
  // `packed_a`: the caller declared the A fragment `a_` (shared_a_wgmmas).
  void warpgroup_atom(const Stmt& s, const AtomDef& a, const WarpAtom& w, int d,
                      bool packed_a = false) {
    if (!w.b_shared)
      throw Error("codegen: " + a.id + " with B from registers: wgmma reads B from shared memory");
    const WgmmaOperandDesc db = wgmma_operand_desc(s.args.at(1), false);
    const std::string scale_d = always(s.scale_d) ? "1" : "int(" + ix(s.scale_d) + ")";
    // The wrappers take the accumulator as one float[N/2]; an array that keeps more
    // dimensions after the statement's prefix (attention's S, [N/16][2][4], whose k16
    // slices are O += P V's A fragments) is the same registers in the same order.
    std::string acc = element(s.dst, s.dst_index);
    if (auto it = alloc_extents_.find(s.dst);
        it != alloc_extents_.end() && it->second.size() > s.dst_index.size() + 1)
      acc = "reinterpret_cast<float (&)[" + std::to_string(w.c_values) + "]>(" + acc + ")";
    if (!w.a_shared) {
      const Operand& fa = s.args.at(0);
      const std::string call = "loom::" + w.id +
                               (w.a_type == DType::TF32 ? std::string()
                                                         : "<" + std::to_string(db.transpose) + ">") +
                               "(" + acc + ", ";
      if (w.a_type != DType::TF32 && packed_.count(fa.name)) {
        line(d, call + element(fa.name, fa.index) + ", " + db.text + ", " + scale_d + ");  // " +
                    a.ptx);
        return;
      }
      if (packed_a) {
        line(d, call + "a_, " + db.text + ", " + scale_d + ");  // " + a.ptx);
        return;
      }
      // tf32 (cvt.rna per value), or 16-bit A from f32 accumulator values (attention's P:
      // cvt.rn.*x2.f32 per pair of values, value 2i in the low half of register i).
      std::string regs;
      const std::string pack = w.a_type == DType::F16 ? "loom::pack_f16x2(" : "loom::pack_bf16x2(";
      const int per_reg = w.a_type == DType::TF32 ? 1 : 2;
      // WarpAtom::a_truncated (TF32_ROUND=none), or values its fills rounded already: the
      // bits as they are, no cvt.
      const std::string tf32 = w.a_truncated || rounded_tf32_.count(fa.name)
                                   ? "__float_as_uint("
                                   : "loom::cvt_rna_tf32(";
      for (int v = 0; v < w.a_values; v += per_reg)
        regs += std::string(v ? ", " : "") +
                (per_reg == 1 ? tf32 + fragment_value(fa, v) + ")"
                              : pack + fragment_value(fa, v) + ", " + fragment_value(fa, v + 1) + ")");
      line(d, "{  // " + a.ptx);
      line(d + 1, "const unsigned a_[" + std::to_string(w.a_values / per_reg) + "] = {" + regs + "};");
      line(d + 1, call + "a_, " + db.text + ", " + scale_d + ");");
      line(d, "}");
      return;
    }
    const WgmmaOperandDesc da = wgmma_operand_desc(s.args.at(0), true);
    line(d, "loom::" + w.id +
                (w.a_type == DType::TF32 ? std::string()
                                          : "<" + std::to_string(da.transpose) + ", " +
                                                std::to_string(db.transpose) + ">") +
                "(" + acc + ", " + da.text + ", " + db.text + ", " +
                scale_d + ");  // " + a.ptx);
  }

  struct WgmmaOperandDesc {
    std::string text;   // the descriptor expression
    int transpose = 0;  // imm-trans: 1 when the tile is MN-major
  };

  WgmmaOperandDesc wgmma_operand_desc(const Operand& o, bool is_a) const {
    const TensorDecl& t = p_.tensor(o.name);
    LOOM_CHECK(o.index.size() == 3 && o.index[1].is_const() && o.index[2].is_const(),
               "a wgmma shared operand is {origin, row stride, col stride}");
    const WgmmaDescFields f =
        wgmma_desc_for(t, is_a ? WgmmaOperand::A : WgmmaOperand::B, o.index[1].const_value(),
                       o.index[2].const_value());
    WgmmaOperandDesc out;
    out.transpose = f.transposed ? 1 : 0;
    // The base descriptor does not depend on the loop variables, so ptxas computes it once;
    // each wgmma then pays one add of its byte offset (wgmma_desc_advance), not the
    // address's encoding (mask, shift, or) for both operands.
    const std::string base = "loom::wgmma_desc(" + tn(o.name) + ", " + std::to_string(f.lbo_bytes) +
                             ", " + std::to_string(f.sbo_bytes) + ", " +
                             std::to_string(f.swizzle_mode) + ")";
    const Expr offset = shared_offset(o.name, o.index[0]);
    if (std::optional<Expr> units = in_16_bytes(offset, dtype_bytes(t.dtype)))
      out.text = "loom::wgmma_desc_add(" + base + ", unsigned(" + ix(*units) + "))";
    else
      out.text = "loom::wgmma_desc_advance(" + base + ", unsigned(" + ix(offset) + ") * " +
                 std::to_string(dtype_bytes(t.dtype)) + "u)";
    return out;
  }

  const KernelProgram& p_;
  const KernelOp* k_ = nullptr;
  // Values per packed .b32 register: two 16-bit halves.
  static constexpr int kHalves = 2;
  struct Packed {
    DType type;
    bool elementwise = false;  // written one value at a time (declared zeroed)
    bool accumulator = false;  // an mma's C/D fragment (ACC=f16)
  };
  std::map<std::string, Packed> packed_;  // packed fragment arrays (find_packed)
  // tf32 register A arrays of wgmma (find_packed): raw_tf32_ those of a truncating atom
  // (WarpAtom::a_truncated: their fills load the raw f32 bits, ld_f32); rounded_tf32_
  // those whose every fill is a tf32 load (ld_tf32 rounds with cvt.rna already, so the
  // wgmma passes the bits on without a second cvt).
  std::set<std::string> raw_tf32_, rounded_tf32_;
  std::set<std::string> chunks_;  // realigned copies' chunk registers (find_chunk_arrays)
  std::map<std::string, std::vector<int64_t>> alloc_extents_;  // register arrays (find_packed)
  std::ostringstream& out_;
  std::string idx_;
  std::set<std::string> symbols_;  // problem-size symbols: kernel parameters (cuda_symbol_name)
  bool in_sched_ = false, in_thread_ = false, in_main_ = false;
  bool warp_uniform_ = false;  // the kernel is warp-specialized (whole warps)
  int reduce_depth_ = 0;  // reduce loops enclosing the statement being rendered
  std::map<std::string, int64_t> loop_extents_;  // enclosing loops of constant extent
};

}  // namespace

std::string cuda_tensor_name(const std::string& tensor) { return "loom_t_" + tensor; }
std::string cuda_symbol_name(const std::string& symbol) { return "loom_d_" + symbol; }
std::string cuda_tensor_map_name(const std::string& map) { return "loom_m_" + map; }

namespace {

// The names the renderer prints as they are (loop, let and copy variables, registers)
// must not take the form of a spelled tensor, symbol or map. User names cannot start with
// `loom_` (the frontend refuses them), so only one derived from the tensor `loom` could,
// e.g. a pass appending `_t_x` to it: an error here rather than two declarations of one
// identifier, or a variable silently read as a parameter.
void refuse_reserved_spellings(const KernelOp& k) {
  auto check = [&](const std::string& name) {
    for (const char* reserved : {"loom_t_", "loom_d_", "loom_m_"})
      if (name.rfind(reserved, 0) == 0)
        throw Error("codegen: kernel " + k.name + " names a variable or register `" + name +
                    "`, which reads as a tensor, symbol or tensor map in CUDA (those are "
                    "spelled " + reserved + "...); rename the tensor `loom`");
  };
  walk(k.body, [&](const Stmt& s) {
    if (!s.var.empty()) check(s.var);
    if (!s.dst.empty() && s.kind != StmtKind::TmaLoad && s.kind != StmtKind::TmaStore) check(s.dst);
    for (const StageCopy& c : s.copies)
      for (const std::string& v : c.vars) check(v);
  });
}

}  // namespace

const char* index_ctype(const ProgramBase& p) {
  for (const auto& t : p.tensors) {
    // A view's offsets reach its footprint (its pitch), not just its element count.
    Expr n = t.pitched() ? t.footprint() : t.numel();
    if (!n.is_const() || n.const_value() >= (int64_t(1) << 31)) return "long long";
  }
  return "int";
}

std::string render_cuda(const KernelProgram& p, const RenderOptions& opt) {
  std::ostringstream out;
  out << "// Generated by Loom.";
  if (!opt.header_comment.empty()) out << " " << comment_text(opt.header_comment);
  out << "\n#include \"" << kDeviceHeaderName << "\"\n";
  // wgmma wrappers have one variant per N (N/2 accumulator registers in the asm operand
  // list), so the ones a kernel uses are generated here rather than stored in the header.
  std::set<std::string> wgmma;
  for (const auto& k : p.kernels)
    for (const WarpAtom& w : k.warp_atoms)
      if (w.threads != WarpAtom::kLanes && wgmma.insert(w.id).second) {
        bool rs = false;
        const AtomDef* a = wgmma_variant(w.id, &rs);
        LOOM_CHECK(a, "a warpgroup atom names a wgmma variant");
        out << "\n" << wgmma_wrapper_source(*a, rs);
      }
  for (const auto& k : p.kernels) {
    refuse_reserved_spellings(k);
    out << "\n";
    Renderer(p, out).kernel(k);
  }
  return out.str();
}

}  // namespace loom
