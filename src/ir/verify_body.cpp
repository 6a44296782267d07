// The statement-level half of the verifiers: one op's or kernel's body against the
// rules of its level (stmt.h lists them; verify.cpp checks declarations and launches).
#include "ir/verify_body.h"

#include "ir/error.h"
#include "ir/realign.h"
#include "ir/register_file.h"

namespace loom::verifier {

const char* level_name(Level l) {
  switch (l) {
    case Level::Loop: return "Loop IR";
    case Level::Tile: return "Tile IR";
    case Level::Kernel: return "Kernel IR";
  }
  return "?";
}

namespace {

// Kernel IR indices are in terms of these; the launch binds them.
const std::set<std::string> kBuiltins = {"blockIdx.x", "blockIdx.y", "blockIdx.z",
                                         "threadIdx.x"};
// Threads of a warpgroup: wgmma and setmaxnreg run on 4 consecutive warps together.
constexpr int kWarpgroup = 128;

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

// Checks one op's or kernel's body. Scopes are lexical: a For, If or Stage body opens
// one, a Let binds until the end of its block, a scalar or register array is visible
// after its definition in its block and in the blocks nested there, and a stage copy's
// box variables only inside that copy.
class BodyChecker {
 public:
  BodyChecker(const ProgramBase& p, Level level, std::string where, const KernelOp* kernel)
      : p_(p), level_(level), where_(std::move(where)), kernel_(kernel),
        symbols_(p.symbols.begin(), p.symbols.end()) {}

  void check(const Block& body) {
    if (kernel_) {
      check_warp_atom_decls();
      check_warp_copy_decls();
    }
    check_block(body);
    if (kernel_) check_register_split();
  }
  const std::set<std::string>& written() const { return written_; }
  const std::set<std::string>& used() const { return used_; }

 private:
  std::vector<Stmt> setmaxnreg_dec_, setmaxnreg_inc_;  // check_register_split
  struct ScalarDef {
    bool by_init = false;
    std::vector<Expr> extents;  // a register array when non-empty
  };
  struct IntVar {
    std::string name;
    bool thread_dependent;  // its value may differ between the threads of a block
  };

  // A warp-specialized kernel's register split (one producer warpgroup decreasing, the
  // others increasing) fits what the block holds at launch: setmaxnreg only moves the
  // block's own registers, and an increase past them waits forever (a hang, not an error).
  void check_register_split() const {
    if (setmaxnreg_dec_.empty() || setmaxnreg_inc_.empty()) return;
    const int64_t threads = kernel_->block_threads, wg = 128;
    const int64_t pool = setmaxnreg_pool(threads, kernel_->min_blocks_per_sm);
    for (const Stmt& dec : setmaxnreg_dec_)
      for (const Stmt& inc : setmaxnreg_inc_) {
        const int64_t total = int64_t(dec.imm) * wg + int64_t(inc.imm) * (threads - wg);
        if (total > pool)
          fail(inc, "setmaxnreg: one warpgroup at " + std::to_string(int64_t(dec.imm)) + " and " +
                        std::to_string(threads - wg) + " threads at " + std::to_string(int64_t(inc.imm)) +
                        " need " + std::to_string(total) + " registers, and a block of " +
                        std::to_string(threads) + " threads holds " + std::to_string(pool) +
                        " at launch (" + std::to_string(launch_regs_per_thread(threads, kernel_->min_blocks_per_sm)) +
                        " a thread): the increase would never complete");
      }
  }

  [[noreturn]] void fail(const Stmt& s, const std::string& rule) const {
    throw Error(std::string(level_name(level_)) + " verifier: " + where_ + ": `" +
                first_line(s) + "`: " + rule);
  }

  // The fragment maps are what the interpreter gathers and scatters by, so each must
  // hold every element of its tile exactly once: 32 lanes x values = rows x cols, all
  // inside the tile, none twice.
  void check_warp_atom_decls() const {
    std::set<std::string> ids;
    for (const WarpAtom& w : kernel_->warp_atoms) {
      auto bad = [&](const std::string& rule) {
        throw Error(std::string(level_name(level_)) + " verifier: " + where_ + ": warp atom `" +
                    w.id + "`: " + rule + " (warp_atom() in src/atoms/atoms.h builds a "
                    "declaration from the atom table)");
      };
      if (w.id.empty()) bad("it has no id");
      if (!ids.insert(w.id).second) bad("it is declared twice in the kernel's warp_atoms");
      if (w.m < 1 || w.n < 1 || w.k < 1)
        bad("shape m" + std::to_string(w.m) + "n" + std::to_string(w.n) + "k" +
            std::to_string(w.k) + " is not positive");
      // mma.sync runs on a warp, wgmma on a warpgroup (4 warps); only wgmma reads an
      // operand straight from shared memory (through a matrix descriptor).
      if (w.threads != WarpAtom::kLanes && w.threads != kWarpgroup)
        bad("it runs on " + std::to_string(w.threads) + " threads; warp atoms run on 32 "
            "(mma.sync) or 128 (wgmma, a warpgroup)");
      if ((w.a_shared || w.b_shared) && w.threads != kWarpgroup)
        bad("it reads an operand from shared memory but runs on " + std::to_string(w.threads) +
            " threads; only warpgroup atoms (wgmma, threads = 128) take shared operands");
      if (w.a_truncated && (w.a_shared || w.a_type != DType::TF32 || w.threads != kWarpgroup))
        bad("its A is marked truncated (raw f32 bits, TF32_ROUND=none), which only a tf32 A "
            "read from registers by a warpgroup atom (wgmma) can be");
      const std::string lanes = std::to_string(w.threads) + " lanes";
      auto check_map = [&](const char* op, const std::vector<std::pair<int, int>>& map,
                           int values, int rows, int cols) {
        const std::string tile = std::to_string(rows) + " x " + std::to_string(cols);
        if (values < 1)
          bad(std::string(op) + " has " + std::to_string(values) + " values per lane");
        if (int64_t(map.size()) != int64_t(w.threads) * values)
          bad(std::string(op) + " map has " + std::to_string(map.size()) + " entries; " + lanes +
              " x " + std::to_string(values) + " values = " +
              std::to_string(int64_t(w.threads) * values) + " expected");
        if (int64_t(map.size()) != int64_t(rows) * cols)
          bad(std::string(op) + " fragments hold " + std::to_string(map.size()) +
              " elements but the " + tile + " tile has " + std::to_string(rows * cols) +
              "; every element must be held exactly once");
        std::vector<int> holder(map.size(), -1);
        for (size_t i = 0; i < map.size(); ++i) {
          const auto [r, c] = map[i];
          const std::string who = "value " + std::to_string(int(i) % values) + " of lane " +
                                  std::to_string(int(i) / values);
          if (r < 0 || r >= rows || c < 0 || c >= cols)
            bad(std::string(op) + " " + who + " is (" + std::to_string(r) + ", " +
                std::to_string(c) + "), outside the " + tile + " tile");
          int& h = holder[size_t(r * cols + c)];
          if (h >= 0)
            bad(std::string(op) + " element (" + std::to_string(r) + ", " + std::to_string(c) +
                ") is held twice: by value " + std::to_string(h % values) + " of lane " +
                std::to_string(h / values) + " and by " + who);
          h = int(i);
        }
      };
      auto check_shared_operand = [&](const char* op, const std::vector<std::pair<int, int>>& map,
                                      int values) {
        if (!map.empty() || values != 0)
          bad(std::string(op) + " is read from shared memory, so it has no fragment: its map "
              "must be empty and its values per lane 0");
      };
      if (w.a_shared) check_shared_operand("A", w.a, w.a_values);
      else check_map("A", w.a, w.a_values, w.m, w.k);
      if (w.b_shared) check_shared_operand("B", w.b, w.b_values);
      else check_map("B", w.b, w.b_values, w.k, w.n);
      check_map("C/D", w.c, w.c_values, w.m, w.n);
    }
  }

  // A warp copy's maps: each stacked row is read from one lane's address, and the
  // lanes receive every element of the stacked tile exactly once.
  void check_warp_copy_decls() const {
    std::set<std::string> ids;
    for (const WarpCopy& w : kernel_->warp_copies) {
      auto bad = [&](const std::string& rule) {
        throw Error(std::string(level_name(level_)) + " verifier: " + where_ + ": warp copy `" +
                    w.id + "`: " + rule + " (warp_copy() in src/atoms/atoms.h builds a "
                    "declaration from the atom table)");
      };
      if (w.id.empty()) bad("it has no id");
      if (!ids.insert(w.id).second || find_warp_atom(*kernel_, w.id))
        bad("it is declared twice in the kernel's warp_atoms / warp_copies");
      // ldmatrix rows are 16 bytes: 8 b16 elements, or 4 32-bit words (its .b32 view).
      if (w.rows < 1 || w.values < 1 || (w.element_bytes != 2 && w.element_bytes != 4) ||
          w.cols * w.element_bytes != 16)
        bad("a stacked tile of " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
            " elements of " + std::to_string(w.element_bytes) + " bytes, " +
            std::to_string(w.values) + " values per lane: ldmatrix moves positive tiles of "
            "16-byte rows of 2- or 4-byte elements");
      if (int64_t(w.row_lane.size()) != w.rows)
        bad("row_lane has " + std::to_string(w.row_lane.size()) + " entries for " +
            std::to_string(w.rows) + " rows");
      for (int l : w.row_lane)
        if (l < 0 || l >= WarpAtom::kLanes) bad("row_lane names lane " + std::to_string(l));
      if (int64_t(w.dst.size()) != int64_t(WarpAtom::kLanes) * w.values ||
          int64_t(w.dst.size()) != int64_t(w.rows) * w.cols)
        bad("dst map has " + std::to_string(w.dst.size()) + " entries; 32 lanes x " +
            std::to_string(w.values) + " values must equal the " + std::to_string(w.rows) +
            " x " + std::to_string(w.cols) + " tile");
      std::set<std::pair<int, int>> seen;
      for (const auto& [r, c] : w.dst)
        if (r < 0 || r >= w.rows || c < 0 || c >= w.cols || !seen.insert({r, c}).second)
          bad("dst element (" + std::to_string(r) + ", " + std::to_string(c) +
              ") is outside the tile or received twice");
    }
  }

  void check_warp_copy(const Stmt& s, const WarpCopy& w) {
    if (kernel_->block_threads % WarpAtom::kLanes != 0)
      fail(s, "warp copy " + w.id + " runs on whole warps of 32 lanes but the block has " +
                  std::to_string(kernel_->block_threads) +
                  " threads; make block_threads a multiple of 32");
    const std::string verb = w.to_shared ? " writes" : " reads";
    if (w.to_shared) {
      if (!s.dst.empty() || int(s.args.size()) != w.values)
        fail(s, "warp copy " + w.id + " stores " + std::to_string(w.values) +
                    " operands per lane and defines nothing; it has " +
                    std::to_string(s.args.size()) + (s.dst.empty() ? "" : " and a dst"));
      for (const Operand& a : s.args)
        if (!a.is_imm()) check_not_fragment(s, a.name, a.index);
      use_operands(s);
    } else if (!s.args.empty()) {
      fail(s, "warp copy " + w.id + " reads shared memory at the lane's row, not operands");
    }
    if (!p_.has_tensor(s.tensor)) fail(s, "tensor `" + s.tensor + "` is not declared");
    const TensorDecl& t = p_.tensor(s.tensor);
    if (t.role != TensorRole::Shared)
      fail(s, "warp copy " + w.id + verb + " shared memory, but `" + s.tensor +
                  "` is not a shared tensor");
    if (dtype_bytes(t.dtype) != w.element_bytes)
      fail(s, "warp copy " + w.id + " moves " + std::to_string(w.element_bytes) +
                  "-byte elements, `" + s.tensor + "` holds " + dtype_name(t.dtype));
    if (s.index.size() != 1)
      fail(s, "warp copy " + w.id + " takes one flat offset (the lane's row start), not " +
                  std::to_string(s.index.size()));
    check_expr(s, s.index[0], "index");
    if (w.to_shared) written_.insert(s.tensor);
    else check_fragment(s, w.id, "dst", s.dst, s.dst_index, w.values);
  }

  // A warp atom's operand is a fragment (stmt.h): a register array and a prefix of its
  // indices whose trailing dimensions hold exactly `values` elements.
  void check_fragment(const Stmt& s, const std::string& id, const std::string& role,
                      const std::string& name, const std::vector<Expr>& prefix,
                      int values) const {
    const std::string frag = role + " fragment `" + name + "`";
    const ScalarDef* d = find_scalar(name);
    if (!d)
      fail(s, frag + " is used before it is defined: declare it with an Alloc in an "
                  "enclosing scope");
    if (d->extents.empty())
      fail(s, frag + " is a scalar; " + id + " reads and writes whole fragments, so it must be "
                  "a register array (e.g. alloc " + name + "[" + std::to_string(values) + "])");
    const size_t rank = d->extents.size();
    if (prefix.size() >= rank)
      fail(s, frag + " of rank " + std::to_string(rank) + " is indexed with " +
                  std::to_string(prefix.size()) + " indices; a fragment operand indexes at most " +
                  std::to_string(rank - 1) + " leading dimensions and the trailing ones hold "
                  "the fragment");
    // Alloc checked that extents are positive constants.
    int64_t count = 1;
    for (size_t i = prefix.size(); i < rank; ++i) count *= d->extents[i].const_value();
    if (count != values)
      fail(s, frag + " selects " + std::to_string(count) + " elements but " + id + " holds " +
                  std::to_string(values) + " values of " + role + " per lane; allocate its "
                  "trailing dimensions with " + std::to_string(values) +
                  " elements (or index a different number of leading dimensions)");
    for (const Expr& i : prefix) check_expr(s, i, "register index");
  }

  void check_warp_atom(const Stmt& s, const WarpAtom& w) const {
    // Every lane of a warp (every thread of a warpgroup, for wgmma) takes part in the
    // instruction; a block that ends mid-warp has lanes that do not exist.
    const bool group = w.threads == kWarpgroup;
    if (kernel_->block_threads % w.threads != 0)
      fail(s, std::string(group ? "warpgroup" : "warp") + " atom " + w.id + " runs on whole " +
                  (group ? "warpgroups of 128 threads" : "warps of 32 lanes") +
                  " but the block has " + std::to_string(kernel_->block_threads) +
                  " threads; make block_threads a multiple of " + std::to_string(w.threads));
    if (s.args.size() != 2)
      fail(s, "warp atom " + w.id + " takes two operands (A and B), not " +
                  std::to_string(s.args.size()));
    for (const Operand& a : s.args)
      if (a.is_imm())
        fail(s, "warp atom " + w.id + " takes fragments or shared tiles, not the immediate " +
                    a.str());
    if (w.a_shared) check_shared_operand(s, w, "A", s.args[0], w.a_type);
    else check_fragment(s, w.id, "A", s.args[0].name, s.args[0].index, w.a_values);
    if (w.b_shared) check_shared_operand(s, w, "B", s.args[1], w.b_type);
    else check_fragment(s, w.id, "B", s.args[1].name, s.args[1].index, w.b_values);
    check_fragment(s, w.id, "C/D", s.dst, s.dst_index, w.c_values);
  }

  // A wgmma operand read from shared memory (stmt.h): the shared tensor and
  // {origin, row stride, column stride}. Codegen encodes the strides into the matrix
  // descriptor at compile time, so they must be constants; the origin may move.
  void check_shared_operand(const Stmt& s, const WarpAtom& w, const char* role,
                            const Operand& o, DType type) const {
    const std::string what = std::string(role) + " operand of " + w.id;
    if (!p_.has_tensor(o.name) || p_.tensor(o.name).role != TensorRole::Shared)
      fail(s, what + " is read from shared memory (WarpAtom::" +
                  (role[0] == 'A' ? "a_shared" : "b_shared") + "), but `" + o.name +
                  "` is not a shared tensor; name the shared tile it reads");
    if (o.index.size() != 3)
      fail(s, what + " names " + std::to_string(o.index.size()) + " expressions; a shared "
                  "operand is `" + o.name + "[origin, row_stride, col_stride]` (3)");
    if (!o.index[1].is_const() || !o.index[2].is_const())
      fail(s, what + " has strides " + o.index[1].str() + ", " + o.index[2].str() +
                  "; the matrix descriptor fixes them at compile time, so they must be constants");
    check_expr(s, o.index[0], "shared operand origin");
    const DType held = p_.tensor(o.name).dtype;
    // The descriptor addresses bytes: tf32 operands read f32 storage, 16-bit ones b16.
    if (dtype_bytes(held) != dtype_bytes(type))
      fail(s, what + " reads " + dtype_name(type) + " elements but `" + o.name + "` holds " +
                  dtype_name(held) + "; stage the operand in the atom's input type");
  }

  // A one-thread atom (fma_f32) names single elements. A register array named by fewer
  // indices than its rank is a fragment, which only a declared warp atom takes.
  void check_not_fragment(const Stmt& s, const std::string& name,
                          const std::vector<Expr>& index) const {
    const ScalarDef* d = find_scalar(name);
    if (d && !d->extents.empty() && index.size() < d->extents.size())
      fail(s, "`" + name + "` names a fragment of a register array, but atom " + s.atom +
                  " is not declared in the kernel's warp_atoms, so it takes single elements; "
                  "declare the warp atom (KernelOp::warp_atoms) or index one element");
  }

  const IntVar* find_int(const std::string& v) const {
    for (const IntVar& x : int_vars_)
      if (x.name == v) return &x;
    return nullptr;
  }

  bool int_bound(const std::string& v) const {
    if (symbols_.count(v)) return true;
    if (level_ == Level::Kernel && kBuiltins.count(v)) return true;
    return find_int(v) != nullptr;
  }

  bool thread_dependent(const Expr& e) const {
    std::set<std::string> vars;
    e.collect_vars(vars);
    for (const std::string& v : vars) {
      if (v == "threadIdx.x") return true;
      const IntVar* x = find_int(v);
      if (x && x->thread_dependent) return true;
    }
    return false;
  }

  void check_expr(const Stmt& s, const Expr& e, const char* what) const {
    std::set<std::string> vars;
    e.collect_vars(vars);
    for (const std::string& v : vars)
      if (!int_bound(v))
        fail(s, std::string(what) + " uses `" + v +
                    "`, which is neither an enclosing loop or let variable nor a program "
                    "symbol");
  }

  void bind_int(const Stmt& s, const std::string& name, const char* what, bool dependent) {
    if (name.empty()) fail(s, std::string(what) + " has no variable name");
    if (symbols_.count(name)) fail(s, std::string(what) + " `" + name + "` shadows a symbol");
    if (kBuiltins.count(name))
      fail(s, std::string(what) + " `" + name + "` shadows a launch builtin");
    if (find_int(name))
      fail(s, std::string(what) + " `" + name +
                  "` is already bound by an enclosing loop or let; rename it");
    int_vars_.push_back(IntVar{name, dependent});
  }

  const ScalarDef* find_scalar(const std::string& name) const {
    for (auto it = scalars_.rbegin(); it != scalars_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  // An element reference `name[index]` (index empty: the scalar `name`).
  void check_value_ref(const Stmt& s, const std::string& name, const std::vector<Expr>& index,
                       const char* what) const {
    const ScalarDef* d = find_scalar(name);
    if (!d && !index.empty())
      fail(s, "`" + name + "` is indexed but no Alloc in an enclosing scope declares it as a "
                  "register array");
    if (!d)
      fail(s, std::string(what) + " `" + name +
                  "` is used before it is defined in an enclosing scope");
    if (index.empty()) {
      if (!d->extents.empty())
        fail(s, "`" + name + "` is a register array; name one of its elements");
      return;
    }
    if (d->extents.empty())
      fail(s, "`" + name + "` is indexed but is not a register array: declare it with an "
                  "Alloc in an enclosing scope");
    if (index.size() != d->extents.size())
      fail(s, "register array `" + name + "` has rank " + std::to_string(d->extents.size()) +
                  " but is indexed with " + std::to_string(index.size()) + " indices");
    for (const Expr& i : index) check_expr(s, i, "register index");
  }

  void use_operands(const Stmt& s) const {
    for (const Operand& a : s.args)
      if (!a.is_imm()) check_value_ref(s, a.name, a.index, "value");
  }

  // Load, Compute, Init: a new scalar, or an element of a register array.
  void define(const Stmt& s, bool by_init) {
    if (s.dst.empty()) fail(s, "statement defines no value (empty dst)");
    if (!s.dst_index.empty()) {
      check_value_ref(s, s.dst, s.dst_index, "register array");
      return;
    }
    const ScalarDef* d = find_scalar(s.dst);
    if (d && !d->extents.empty())
      fail(s, "`" + s.dst + "` is a register array; assign one element of it (dst_index)");
    scalars_.back()[s.dst] = ScalarDef{by_init, {}};
  }

  // The features Tile IR adds to statements: register elements, vector widths,
  // predicates and atomic writes, each on the statement kinds that have them.
  void check_features(const Stmt& s) const {
    bool has_index = !s.dst_index.empty();
    for (const Operand& a : s.args) has_index = has_index || !a.index.empty();
    bool predicated = !(s.pred.is_const() && s.pred.const_value() == 1);
    if (level_ == Level::Loop) {
      if (has_index) fail(s, "register arrays appear from Tile IR on, not in Loop IR");
      if (s.width != 1) fail(s, "vector accesses appear from Tile IR on, not in Loop IR");
      if (predicated) fail(s, "predicated loads appear from Tile IR on, not in Loop IR");
      // Atomic writes are allowed: l:020_split_k decides the combine at the Loop level,
      // and a sequential `+=` means the same there as on the GPU.
      if (s.atomic_add && s.kind != StmtKind::Write) fail(s, "only writes can be atomic");
      return;
    }
    bool moves = s.kind == StmtKind::Load || s.kind == StmtKind::Write ||
                 s.kind == StmtKind::AsyncCopy;
    if (s.width < 1) fail(s, "width " + std::to_string(s.width) + " < 1");
    if (s.width > 1 && !moves) fail(s, "only loads, stores and cp.async have a vector width");
    if (predicated && s.kind != StmtKind::Load && s.kind != StmtKind::AsyncCopy && !s.let_fetch())
      fail(s, "only loads, cp.async and fetches take a predicate");
    if (predicated) check_expr(s, s.pred, "predicate");
    if (!(s.scale_d.is_const() && s.scale_d.const_value() == 1)) {
      // scale-d is a tensor-core atom's (the scalar atoms always accumulate): wgmma's
      // predicate operand, or mma.sync's zero-C form, fixed at compile time.
      const WarpAtom* w = kernel_ && s.kind == StmtKind::Atom && s.tensor.empty()
                              ? find_warp_atom(*kernel_, s.atom)
                              : nullptr;
      if (!w)
        fail(s, "only an mma.sync or wgmma atom takes scale_d; zero the accumulators of " +
                    (s.atom.empty() ? std::string("this statement") : s.atom) +
                    " explicitly instead");
      if (w->threads != kWarpgroup && !(s.scale_d.is_const() && s.scale_d.const_value() == 0))
        fail(s, "mma.sync " + s.atom + " takes scale_d 0 or 1 only, not " + s.scale_d.str() +
                    " (its zero C is a form of the instruction chosen at compile time): peel "
                    "the k-step with scale_d 0 into its own statement, or zero the "
                    "accumulators explicitly");
      check_expr(s, s.scale_d, "scale_d");
    }
    if (s.atomic_add && s.kind != StmtKind::Write && !s.let_fetch())
      fail(s, "only writes and fetches can be atomic");
    bool defines = s.kind == StmtKind::Load || s.kind == StmtKind::Compute ||
                   s.kind == StmtKind::Init || s.kind == StmtKind::Accum ||
                   s.kind == StmtKind::Atom || s.kind == StmtKind::LaneReduce;
    if (!s.dst_index.empty() && !defines)
      fail(s, "this statement writes no value, so it has no register element (dst_index)");
  }

  // A vector access moves `width` consecutive register elements along the last
  // dimension; where the start is a constant, they must fit in the array.
  void check_vector_registers(const Stmt& s, const std::string& name,
                              const std::vector<Expr>& index) const {
    if (s.width == 1) return;
    if (index.empty())
      fail(s, "a vector access of width " + std::to_string(s.width) +
                  " moves consecutive register-array elements; `" + name + "` is not one");
    const ScalarDef* d = find_scalar(name);
    const Expr& last = index.back();
    const Expr& ext = d->extents.back();
    if (last.is_const() && ext.is_const() && last.const_value() + s.width > ext.const_value())
      fail(s, "vector of " + std::to_string(s.width) + " elements from " + name + " index " +
                  last.str() + " overruns its last extent " + ext.str());
  }

  void check_access(const Stmt& s) {
    if (!p_.has_tensor(s.tensor)) fail(s, "tensor `" + s.tensor + "` is not declared");
    const TensorDecl& t = p_.tensor(s.tensor);
    if (t.role != TensorRole::Shared) used_.insert(s.tensor);
    size_t want = level_ == Level::Kernel ? 1 : t.shape.size();
    if (s.index.size() != want)
      fail(s, "has " + std::to_string(s.index.size()) + " indices but " + s.tensor + " needs " +
                  std::to_string(want) +
                  (level_ == Level::Kernel ? " (Kernel IR accesses are flat offsets)"
                                           : " (its rank)"));
    for (const Expr& i : s.index) check_expr(s, i, "index");
  }

  // The realigned copy's two statements (ir/realign.h): Kernel IR, 16-bit elements, the
  // chunk load from a global tensor into a register array of 2w elements per slot, the
  // store from such an array into one 16-byte unit of a shared tensor.
  int realign_width(const Stmt& s, const TensorDecl& t, const char* what) const {
    require_level(s, Level::Kernel, what);
    if (dtype_bytes(t.dtype) != 2)
      fail(s, std::string(what) + " moves 16-bit elements (8 per 16-byte chunk); `" + t.name +
                  "` holds " + dtype_name(t.dtype) + ": use VECTORIZE's copies for it");
    return 16 / dtype_bytes(t.dtype);
  }
  void check_chunk_load(const Stmt& s) {
    if (s.mode != kChunkLoadMode)
      fail(s, "a load's mode is \"" + std::string(kChunkLoadMode) + "\" or none, not \"" + s.mode + "\"");
    const TensorDecl& t = p_.tensor(s.tensor);
    const int w = realign_width(s, t, "a chunk load");
    if (t.role == TensorRole::Shared)
      fail(s, "a chunk load reads global memory; `" + s.tensor + "` is a shared tensor");
    if (s.width != 2 * w)
      fail(s, "a chunk load writes two 16-byte chunks, " + std::to_string(2 * w) +
                  " elements, not " + std::to_string(s.width));
    if (!always_true(s.pred)) fail(s, "a chunk load is not predicated: its valid count bounds it");
    if (s.dst_index.empty() || !s.dst_index.back().is_const() || s.dst_index.back().const_value() != 0)
      fail(s, "a chunk load fills a whole last dimension of its register array from element 0");
    check_expr(s, s.value, "valid count");
  }
  void check_realigned_store(const Stmt& s) {
    if (s.mode != kRealignStoreMode)
      fail(s, "a store's mode is \"" + std::string(kRealignStoreMode) + "\" or none, not \"" + s.mode + "\"");
    const TensorDecl& t = p_.tensor(s.tensor);
    const int w = realign_width(s, t, "a realigned store");
    if (t.role != TensorRole::Shared)
      fail(s, "a realigned store writes shared memory; `" + s.tensor + "` is not a shared tensor");
    if (s.width != w)
      fail(s, "a realigned store writes one 16-byte unit, " + std::to_string(w) +
                  " elements, not " + std::to_string(s.width));
    if (s.atomic_add || s.remote) fail(s, "a realigned store is a plain shared store");
    if (s.args.size() != 1 || s.args[0].is_imm() || s.args[0].index.empty() ||
        !s.args[0].index.back().is_const() || s.args[0].index.back().const_value() != 0)
      fail(s, "a realigned store reads the chunks of a register array slot from element 0");
    const ScalarDef* d = find_scalar(s.args[0].name);
    if (d && !d->extents.empty() && d->extents.back().is_const() &&
        d->extents.back().const_value() < 2 * w)
      fail(s, "a realigned store reads two 16-byte chunks, " + std::to_string(2 * w) +
                  " elements; register array `" + s.args[0].name + "` has a last extent of " +
                  d->extents.back().str());
    if (s.src_index.size() != 1) fail(s, "a realigned store names the one source offset its chunks were loaded for");
    check_expr(s, s.src_index[0], "source offset");
    check_expr(s, s.value, "valid count");
  }
  static bool always_true(const Expr& e) { return e.is_const() && e.const_value() == 1; }

  // An asynchronous store into a cluster CTA's shared tensor (st.async, CLUSTER_K's
  // exchange): f32 elements, one or a vector of 2 or 4, completing on an mbarrier slot.
  void check_remote_store(const Stmt& s) {
    require_level(s, Level::Kernel, "an asynchronous store into a peer CTA's shared memory");
    const TensorDecl& t = p_.tensor(s.tensor);
    if (t.role != TensorRole::Shared)
      fail(s, "a remote store writes a cluster CTA's shared memory; `" + s.tensor + "` is not shared");
    if (t.dtype != DType::F32 || (s.width != 1 && s.width != 2 && s.width != 4))
      fail(s, "a remote store moves 1, 2 or 4 f32 elements (st.async .b32/.v2/.v4); this one moves " +
                  std::to_string(s.width) + " " + dtype_name(t.dtype));
    if (s.atomic_add) fail(s, "a remote store cannot add atomically");
    if (kernel_ && kernel_->cluster[0] <= 1)
      fail(s, "a remote store in kernel " + kernel_->name + ", which launches no clusters "
              "(KernelOp::cluster is {1, 1, 1})");
    if (kernel_ && !(s.mbar.is_const() && s.mbar.const_value() >= 0 &&
                     s.mbar.const_value() < kernel_->mbarriers))
      fail(s, "a remote store completes on mbarrier " + s.mbar.str() + "; kernel " +
                  kernel_->name + " has " + std::to_string(kernel_->mbarriers));
    check_expr(s, s.value, "peer rank");
  }

  void check_tier(const Stmt& s) {
    switch (level_) {
      case Level::Loop:
        if (s.tier != Tier::None)
          fail(s, std::string("Loop IR loops have no tier, this one is ") + tier_name(s.tier));
        break;
      case Level::Tile:
        // Tiers only go down the hierarchy (grid > ... > register): a grid loop inside
        // a thread loop would mean each thread launches blocks.
        if (s.tier != Tier::None && s.tier < deepest_tier_)
          fail(s, std::string("a ") + tier_name(s.tier) + " loop may not be nested inside a " +
                      tier_name(deepest_tier_) + " loop");
        break;
      case Level::Kernel:
        if (s.tier == Tier::Grid || s.tier == Tier::Cluster || s.tier == Tier::Thread)
          fail(s, std::string("Kernel IR has no ") + tier_name(s.tier) +
                      " loops: they must be Let bindings of blockIdx/threadIdx");
        break;
    }
  }

  void require_level(const Stmt& s, Level from, const char* what) const {
    if (level_ >= from) return;
    fail(s, std::string(what) + (from == Level::Kernel ? " appears only in " : " appears from ") +
                level_name(from) + (from == Level::Kernel ? ", not in " : " on, not in ") +
                level_name(level_));
  }

  // bar.sync must be reached by every thread of the block; under a thread-dependent
  // condition some threads skip it and the block hangs (or, on newer GPUs, silently
  // synchronizes the wrong threads).
  void require_converged(const Stmt& s, const char* what) const {
    if (divergent_)
      fail(s, std::string("divergent ") + what + ": it sits inside `" + first_line(*divergent_) +
                  "`, which depends on threadIdx, so not every thread of the block reaches "
                  "it; move it out of the thread-dependent branch or loop");
  }

  void check_block(const Block& b) {
    scalars_.emplace_back();
    size_t ints = int_vars_.size();
    for (const Stmt& s : b) check_stmt(s);
    int_vars_.resize(ints);
    scalars_.pop_back();
  }

  void check_body_under(const Stmt& s, bool divergent) {
    const Stmt* saved = divergent_;
    if (divergent && !divergent_) divergent_ = &s;
    check_block(s.body);
    divergent_ = saved;
  }

  void check_stage(const Stmt& s) {
    require_level(s, Level::Tile, "Stage");
    if (level_ == Level::Kernel) require_converged(s, "stage (a block-wide copy between barriers)");
    if (s.mode != "sync" && s.mode != "cp_async" && s.mode != "tma")
      fail(s, "stage mode `" + s.mode + "` is none of sync, cp_async, tma");
    if (s.copies.empty()) fail(s, "stage copies nothing");
    for (const StageCopy& c : s.copies) {
      if (!p_.has_tensor(c.shared)) fail(s, "stage copy into undeclared tensor `" + c.shared + "`");
      const TensorDecl& sh = p_.tensor(c.shared);
      if (sh.role != TensorRole::Shared)
        fail(s, "stage copy into `" + c.shared + "`, which is not a shared tensor");
      const size_t np = c.shared_prefix.size();
      if (c.vars.size() != c.extents.size() || np + c.vars.size() != sh.shape.size())
        fail(s, "stage copy into `" + c.shared + "` (rank " + std::to_string(sh.shape.size()) +
                    ") has " + std::to_string(np) + " buffer indices, " +
                    std::to_string(c.vars.size()) + " box variables and " +
                    std::to_string(c.extents.size()) +
                    " extents; buffer indices + box variables must equal the rank, one "
                    "extent per variable");
      for (const Expr& e : c.shared_prefix) check_expr(s, e, "stage buffer index");
      for (size_t d = 0; d < c.extents.size(); ++d) {
        check_expr(s, c.extents[d], "stage extent");
        const Expr& dim = sh.shape[np + d];
        if (c.extents[d].is_const() && dim.is_const() &&
            c.extents[d].const_value() > dim.const_value())
          fail(s, "stage box extent " + c.extents[d].str() + " exceeds dimension " +
                      std::to_string(np + d) + " of `" + c.shared + "` (" + dim.str() + ")");
      }
      if (!p_.has_tensor(c.src)) fail(s, "stage copy from undeclared tensor `" + c.src + "`");
      const TensorDecl& src = p_.tensor(c.src);
      if (src.role == TensorRole::Shared)
        fail(s, "stage copy from shared tensor `" + c.src + "`; stages read global memory");
      if (c.src_index.size() != src.shape.size())
        fail(s, "stage copy reads `" + c.src + "` (rank " + std::to_string(src.shape.size()) +
                    ") with " + std::to_string(c.src_index.size()) + " indices");
      size_t ints = int_vars_.size();
      for (const std::string& v : c.vars) bind_int(s, v, "stage box variable", false);
      for (const Expr& i : c.src_index) check_expr(s, i, "stage source index");
      int_vars_.resize(ints);
      written_.insert(c.shared);
      used_.insert(c.src);
    }
    check_block(s.body);
  }

  void check_async_copy(const Stmt& s) {
    require_level(s, Level::Kernel, "cp.async");
    if (!p_.has_tensor(s.tensor)) fail(s, "cp.async into undeclared tensor `" + s.tensor + "`");
    if (!p_.has_tensor(s.src)) fail(s, "cp.async from undeclared tensor `" + s.src + "`");
    const TensorDecl& dst = p_.tensor(s.tensor);
    const TensorDecl& src = p_.tensor(s.src);
    if (dst.role != TensorRole::Shared)
      fail(s, "cp.async writes shared memory; `" + s.tensor + "` is not a shared tensor");
    if (src.role == TensorRole::Shared)
      fail(s, "cp.async reads global memory; `" + s.src + "` is a shared tensor");
    if (s.index.size() != 1 || s.src_index.size() != 1)
      fail(s, "cp.async takes one flat offset for each side");
    check_expr(s, s.index[0], "cp.async offset");
    check_expr(s, s.src_index[0], "cp.async source offset");
    if (dst.dtype != src.dtype)
      fail(s, std::string("cp.async copies bytes, it cannot convert ") + dtype_name(src.dtype) +
                  " to " + dtype_name(dst.dtype));
    // PTX cp.async.ca moves 4, 8 or 16 bytes per instruction (cp-size).
    int bytes = s.width * dtype_bytes(dst.dtype);
    if (bytes != 4 && bytes != 8 && bytes != 16)
      fail(s, "cp.async moves 4, 8 or 16 bytes; " + std::to_string(s.width) + " x " +
                  dtype_name(dst.dtype) + " is " + std::to_string(bytes) + " bytes");
    written_.insert(s.tensor);
    used_.insert(s.src);
  }

  // TMA and mbarriers: Kernel IR only. A box lands in a shared tensor from a global one
  // of the same dtype (the copy engine moves bytes); the descriptor it names and the
  // slots it uses are the kernel's (verify.cpp checks those against the KernelOp).
  void check_tma(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::TmaLoad: {
        require_level(s, Level::Kernel, "tma.load");
        if (!p_.has_tensor(s.tensor)) fail(s, "tma.load into undeclared tensor `" + s.tensor + "`");
        if (!p_.has_tensor(s.src)) fail(s, "tma.load from undeclared tensor `" + s.src + "`");
        const TensorDecl& dst = p_.tensor(s.tensor);
        const TensorDecl& src = p_.tensor(s.src);
        if (dst.role != TensorRole::Shared)
          fail(s, "tma.load writes shared memory; `" + s.tensor + "` is not a shared tensor");
        if (src.role == TensorRole::Shared)
          fail(s, "tma.load reads global memory; `" + s.src + "` is a shared tensor");
        if (dst.dtype != src.dtype)
          fail(s, std::string("tma.load copies bytes, it cannot convert ") +
                      dtype_name(src.dtype) + " to " + dtype_name(dst.dtype));
        if (s.index.size() != 1) fail(s, "tma.load takes one flat box origin in shared memory");
        if (s.src_index.size() != src.shape.size())
          fail(s, "tma.load names a box corner of " + std::to_string(s.src_index.size()) +
                      " coordinates in `" + s.src + "` of rank " +
                      std::to_string(src.shape.size()));
        if (s.dst.empty()) fail(s, "tma.load names no tensor map");
        if (s.imm <= 0 || s.imm != double(int64_t(s.imm)))
          fail(s, "tma.load moves a positive whole number of bytes");
        check_expr(s, s.index[0], "tma.load box origin");
        for (const Expr& e : s.src_index) check_expr(s, e, "tma.load box corner");
        check_expr(s, s.value, "mbarrier slot");
        written_.insert(s.tensor);
        used_.insert(s.src);
        break;
      }
      case StmtKind::MbarInit:
        require_level(s, Level::Kernel, "mbar.init");
        if (s.imm < 1 || s.imm != double(int64_t(s.imm)))
          fail(s, "an mbarrier expects a positive whole number of arrivals per phase");
        check_expr(s, s.value, "mbarrier slot");
        break;
      case StmtKind::FenceMbarInit: require_level(s, Level::Kernel, "fence.mbarrier_init"); break;
      case StmtKind::MbarArriveExpectTx:
        require_level(s, Level::Kernel, "mbar.arrive.expect_tx");
        // The transaction count is 20 bits wide (PTX ISA, mbarrier contents).
        if (s.imm < 0 || s.imm >= double(1 << 20) || s.imm != double(int64_t(s.imm)))
          fail(s, "expect_tx takes a whole number of bytes below 2^20");
        check_expr(s, s.value, "mbarrier slot");
        break;
      case StmtKind::MbarWait:
        require_level(s, Level::Kernel, "mbar.wait");
        check_expr(s, s.value, "mbarrier slot");
        check_expr(s, s.cond, "mbarrier phase parity");
        break;
      default: LOOM_CHECK(false, "check_tma on a non-TMA statement");
    }
  }

  void check_stmt(const Stmt& s) {
    check_features(s);
    if (!(s.multicast.is_const() && s.multicast.const_value() == 0)) check_multicast(s);
    switch (s.kind) {
      case StmtKind::For: {
        check_tier(s);
        check_expr(s, s.extent, "loop extent");
        bool dependent = level_ == Level::Kernel && thread_dependent(s.extent);
        bind_int(s, s.var, "loop variable", dependent);
        Tier saved = deepest_tier_;
        if (s.tier != Tier::None && s.tier > deepest_tier_) deepest_tier_ = s.tier;
        const Block* saved_loop = loop_body_;
        loop_body_ = &s.body;
        check_body_under(s, dependent);
        loop_body_ = saved_loop;
        deepest_tier_ = saved;
        int_vars_.pop_back();
        break;
      }
      case StmtKind::If:
        check_expr(s, s.cond, "condition");
        if (s.break_if()) {
          // `if (cond) break;` leaves its loop: a statement of a For's own body (not under an
          // If or a nested loop, which would make it leave that one or leave it half-way).
          if (!s.body.empty()) fail(s, "a break has no body");
          bool direct = false;
          if (loop_body_)
            for (const Stmt& x : *loop_body_) direct |= &x == &s;
          if (!direct)
            fail(s, "a break is a statement of its loop's own body (not inside an If): move it "
                    "there");
          break;
        }
        if (!s.mode.empty()) fail(s, "an if's mode is \"break\" or none, not \"" + s.mode + "\"");
        check_body_under(s, level_ == Level::Kernel && thread_dependent(s.cond));
        break;
      case StmtKind::Let:
        if (s.let_fetch()) {
          check_fetch(s);
          break;
        }
        if (s.let_load()) {
          // An integer read (a block table, a length): any level, an i32 tensor.
          check_access(s);
          if (p_.tensor(s.tensor).dtype != DType::I32)
            fail(s, "an integer let reads an i32 tensor; `" + s.tensor + "` is " +
                        dtype_name(p_.tensor(s.tensor).dtype));
          bool dependent = false;
          for (const Expr& i : s.index) dependent |= thread_dependent(i);
          bind_int(s, s.var, "let variable", dependent);
          break;
        }
        require_level(s, Level::Tile, "Let");
        check_expr(s, s.value, "let value");
        bind_int(s, s.var, "let variable", thread_dependent(s.value));
        break;
      case StmtKind::Load:
        check_access(s);
        if (!s.mode.empty()) check_chunk_load(s);
        if (s.remote)
          fail(s, "a load from a peer CTA's shared memory (`remote`) is not a Kernel IR form: "
                  "cluster CTAs exchange data by remote stores (st.async) into the reader's "
                  "shared memory");
        define(s, false);
        check_vector_registers(s, s.dst, s.dst_index);
        break;
      case StmtKind::Compute:
        if (int(s.args.size()) != scalar_op_arity(s.op))
          fail(s, std::string(scalar_op_name(s.op)) + " takes " +
                      std::to_string(scalar_op_arity(s.op)) + " operands, not " +
                      std::to_string(s.args.size()));
        use_operands(s);
        define(s, false);
        break;
      case StmtKind::Init:
        define(s, true);
        break;
      case StmtKind::Accum: {
        if (s.args.size() != 1) fail(s, "accumulate takes exactly one operand");
        if (!is_accumulate_op(s.op))
          fail(s, std::string("accumulate combines with add, max, min or multiply, not ") +
                      scalar_op_name(s.op) + " (an order-dependent update is a Compute)");
        use_operands(s);
        if (!s.dst_index.empty()) {
          check_value_ref(s, s.dst, s.dst_index, "accumulator");
          break;
        }
        const ScalarDef* d = find_scalar(s.dst);
        if (!d || !d->by_init || !d->extents.empty())
          fail(s, "accumulator `" + s.dst +
                      "` is not initialized by an Init earlier in this or an enclosing block");
        break;
      }
      case StmtKind::Write:
        check_access(s);
        if (s.write_int()) {
          check_write_int(s);
          break;
        }
        if (!s.mode.empty()) check_realigned_store(s);
        if (s.remote) check_remote_store(s);
        if (p_.tensor(s.tensor).role == TensorRole::Input)
          fail(s, "writes input tensor `" + s.tensor + "`; inputs are read-only");
        if (s.args.size() != 1) fail(s, "a write stores exactly one operand");
        use_operands(s);
        if (!s.args[0].is_imm()) check_vector_registers(s, s.args[0].name, s.args[0].index);
        else if (s.width > 1) fail(s, "a vector store needs a register-array operand");
        written_.insert(s.tensor);
        break;
      case StmtKind::Atom:
        require_level(s, Level::Kernel, "Atom");
        if (s.atom.empty()) fail(s, "atom statement names no atom");
        if (const WarpAtom* w = kernel_ ? find_warp_atom(*kernel_, s.atom) : nullptr) {
          check_warp_atom(s, *w);
          break;
        }
        if (const WarpCopy* w = kernel_ ? find_warp_copy(*kernel_, s.atom) : nullptr) {
          check_warp_copy(s, *w);
          break;
        }
        if (!s.tensor.empty())
          fail(s, "atom " + s.atom + " reads tensor `" + s.tensor + "` but is not declared in "
                      "the kernel's warp_copies; declare it (warp_copy() in src/atoms/atoms.h)");
        for (const Operand& a : s.args)
          if (!a.is_imm()) check_not_fragment(s, a.name, a.index);
        check_not_fragment(s, s.dst, s.dst_index);
        use_operands(s);
        if (!find_scalar(s.dst))
          fail(s, "atom accumulator `" + s.dst + "` is not defined in an enclosing scope");
        check_value_ref(s, s.dst, s.dst_index, "atom accumulator");
        break;
      case StmtKind::Alloc: {
        require_level(s, Level::Tile, "Alloc");
        if (s.dst.empty()) fail(s, "alloc names no register array");
        if (s.index.empty()) fail(s, "register array `" + s.dst + "` has no extents");
        // Registers are allocated when the kernel is compiled.
        for (const Expr& e : s.index)
          if (!e.is_const() || e.const_value() < 1)
            fail(s, "register array extent " + e.str() + " is not a positive constant");
        if (scalars_.back().count(s.dst))
          fail(s, "`" + s.dst + "` is already defined in this block");
        scalars_.back()[s.dst] = ScalarDef{true, s.index};
        break;
      }
      case StmtKind::Stage: check_stage(s); break;
      case StmtKind::Barrier:
        require_level(s, Level::Kernel, "Barrier");
        if (!s.mode.empty() && !s.named_arrive())
          fail(s, "barrier mode `" + s.mode + "`: a barrier is bar.sync, or bar.arrive (mode "
                      "arrive) on a named barrier (id 1..15 and a thread count)");
        if (s.named_barrier()) {
          check_named_barrier(s);
          break;
        }
        if (arm_)
          fail(s, "barrier (bar.sync 0) inside an arm of `" + first_line(*arm_) + "`: it waits "
                      "for every thread of the block, but the other arms never reach it, so the "
                      "block deadlocks; hand buffers between arms through mbarriers "
                      "(mbar.arrive / mbar.wait)");
        require_converged(s, "barrier");
        break;
      case StmtKind::AsyncCopy: check_async_copy(s); break;
      case StmtKind::AsyncCommit: require_level(s, Level::Kernel, "cp.async.commit"); break;
      case StmtKind::AsyncWait:
        require_level(s, Level::Kernel, "cp.async.wait");
        if (s.imm < 0 || s.imm != double(int(s.imm)))
          fail(s, "cp.async.wait keeps a non-negative whole number of groups in flight");
        break;
      case StmtKind::TmaLoad:
      case StmtKind::MbarInit:
      case StmtKind::FenceMbarInit:
      case StmtKind::MbarArriveExpectTx:
      case StmtKind::MbarWait: check_tma(s); break;
      case StmtKind::MbarArrive:
      case StmtKind::WgmmaFence:
      case StmtKind::WgmmaCommit:
      case StmtKind::WgmmaWait:
      case StmtKind::FenceProxyAsync:
      case StmtKind::SetMaxNReg:
      case StmtKind::TmaStore:
      case StmtKind::BulkCommit:
      case StmtKind::BulkWait: check_hopper(s); break;
      case StmtKind::Specialize:
        if (!s.mode.empty() && !s.per_warpgroup())
          fail(s, "specialize mode `" + s.mode + "` is not warpgroups");
        check_specialize(s);
        break;
      case StmtKind::ClusterSync: check_cluster_sync(s); break;
      case StmtKind::TileArrive: check_tile_arrive(s); break;
      case StmtKind::LaneReduce: check_lane_reduce(s); break;
    }
  }

  // A shuffle exchanges registers between the lanes of a warp, which only Kernel IR has.
  void check_lane_reduce(const Stmt& s) {
    require_level(s, Level::Kernel, "lane_reduce");
    const int lanes = int(s.imm);
    if (lanes < 2 || lanes > 32 || (lanes & (lanes - 1)) != 0 || double(lanes) != s.imm)
      fail(s, "lane_reduce combines groups of 2, 4, 8, 16 or 32 lanes (shfl.sync.bfly), not " +
                  Operand::constant(s.imm).str());
    if (s.op != ScalarOp::Add && s.op != ScalarOp::Max && s.op != ScalarOp::Min)
      fail(s, std::string("lane_reduce combines with add, max or min, not ") +
                  scalar_op_name(s.op));
    if (s.args.size() != 1) fail(s, "lane_reduce takes exactly one operand");
    use_operands(s);
    define(s, false);
  }

  // The work queue's fetch (Stmt::LetFetchInc): Kernel IR, a zeroed i32 global temp (the
  // runtime clears it once; the launch's last fetch wraps it back to 0), a wrap and a
  // `when` that are integer expressions.
  void check_fetch(const Stmt& s) {
    require_level(s, Level::Kernel, "fetch.inc");
    check_access(s);
    const TensorDecl& t = p_.tensor(s.tensor);
    if (t.role != TensorRole::Temp || t.dtype != DType::I32 || !t.zero_init)
      fail(s, "the work counter `" + s.tensor + "` must be a zeroed i32 temp (TensorDecl::"
                  "zero_init): the runtime clears it once and the launch's last fetch wraps it to 0");
    check_expr(s, s.value, "fetch wrap");
    check_expr(s, s.pred, "fetch condition");
    if (s.width != 1 || s.remote) fail(s, "a fetch reads one element of this CTA's counter");
    bool dependent = thread_dependent(s.pred);
    for (const Expr& i : s.index) dependent |= thread_dependent(i);
    bind_int(s, s.var, "fetch variable", dependent);
  }

  // An integer store (Stmt::WriteInt): into an i32 tensor, one element, no operands.
  void check_write_int(const Stmt& s) {
    require_level(s, Level::Kernel, "an integer store");
    const TensorDecl& t = p_.tensor(s.tensor);
    if (t.dtype != DType::I32)
      fail(s, "an integer store writes an i32 tensor; `" + s.tensor + "` is " + dtype_name(t.dtype));
    if (t.role == TensorRole::Input) fail(s, "writes input tensor `" + s.tensor + "`; inputs are read-only");
    if (!s.args.empty() || s.width != 1 || s.atomic_add || s.remote)
      fail(s, "an integer store writes one element from its expression, with no operands");
    check_expr(s, s.value, "stored integer");
    written_.insert(s.tensor);
  }

  // Its threads wait for each other in groups (a named barrier per aligned group of `value`
  // threads), and the counter is global f32. Whether every group is whole where it runs,
  // and agrees on its counter and its `when`, depends on the threads that reach it: the
  // interpreter checks that.
  void check_tile_arrive(const Stmt& s) {
    check_access(s);
    const TensorDecl& t = p_.tensor(s.tensor);
    if (t.role != TensorRole::Temp || t.dtype != DType::F32 || !t.zero_init)
      fail(s, "the arrival counter `" + s.tensor + "` must be a zeroed f32 temp (TensorDecl::"
                  "zero_init): the runtime clears it once and the last arrival resets it");
    if (!s.value.is_const() || s.value.const_value() < 1 ||
        (kernel_ && s.value.const_value() > kernel_->block_threads))
      fail(s, "tile.arrive's thread count " + s.value.str() + " is not a constant between 1 and "
                  "the block's threads");
    if (kernel_ && s.value.const_value() < kernel_->block_threads &&
        s.value.const_value() % 32 != 0)
      fail(s, "tile.arrive's groups of " + s.value.str() + " threads wait on a named barrier, "
                  "which counts whole warps: use a multiple of 32");
    if (s.imm < 1 || s.imm != double(int64_t(s.imm)))
      fail(s, "tile.arrive waits for a positive whole number of arrivals");
    bind_int(s, s.var, "tile.arrive variable", false);
  }

  int cluster_ctas() const { return kernel_ ? kernel_->cluster[0] : 1; }

  // A multicast mask names CTAs of the kernel's cluster (bit r = rank r): a TMA load that
  // lands in each of them, or an arrival on each one's mbarrier (stmt.h).
  void check_multicast(const Stmt& s) const {
    if (s.kind != StmtKind::TmaLoad && s.kind != StmtKind::MbarArrive)
      fail(s, "a multicast mask on a statement that is not tma.load or mbar.arrive; only those "
              "reach other CTAs of a cluster");
    require_level(s, Level::Kernel, "a multicast mask");
    const int ctas = cluster_ctas();
    if (ctas == 1)
      fail(s, "multicast mask " + s.multicast.str() + " in a kernel without clusters "
              "(KernelOp::cluster is {1, 1, 1}); drop the mask or launch clusters");
    if (s.multicast.is_const()) {
      const int64_t m = s.multicast.const_value();
      if (m < 0 || (m >> ctas) != 0)
        fail(s, "multicast mask " + s.multicast.str() + " names a CTA beyond the cluster's " +
                    std::to_string(ctas) + " (bits 0.." + std::to_string(ctas - 1) + ")");
    }
    check_expr(s, s.multicast, "multicast mask");
  }

  // bar.sync id, count (PTX ISA 9.7.13.1): the hardware counts arrivals per warp, so the
  // count is whole warps; ids 1..15 (0 is __syncthreads' block-wide barrier, 16 per CTA).
  // Unlike bar.sync 0 it may sit in an arm or under a thread-dependent branch: only its
  // named threads meet there. That exactly `count` threads reach it with each id (and no
  // more) is a property of the run, which the interpreter checks.
  void check_named_barrier(const Stmt& s) const {
    const double n = s.imm;
    if (n != double(int64_t(n)) || int64_t(n) % 32 != 0)
      fail(s, "a named barrier counts whole warps: its thread count " +
                  Operand::constant(n).str() + " is not a multiple of 32");
    if (kernel_ && int64_t(n) > kernel_->block_threads)
      fail(s, "a named barrier for " + std::to_string(int64_t(n)) + " threads in a block of " +
                  std::to_string(kernel_->block_threads) + ": it could never complete");
    check_expr(s, s.value, "barrier id");
    std::optional<Expr::Range> r;
    if (kernel_) r = s.value.bounds({{"threadIdx.x", {0, kernel_->block_threads - 1}}});
    if (s.value.is_const() || r) {
      const int64_t lo = s.value.is_const() ? s.value.const_value() : r->lo;
      const int64_t hi = s.value.is_const() ? s.value.const_value() : r->hi;
      if (lo < 1 || hi > 15)
        fail(s, "named barrier id " + s.value.str() + " may lie outside 1..15 (a CTA has 16 "
                    "barriers and id 0 is the block-wide one of bar.sync 0 / __syncthreads)");
    }
  }

  // barrier.cluster waits for every thread of every CTA of the cluster: like bar.sync it
  // may not sit under a thread-dependent branch, nor in one arm of a specialize.
  void check_cluster_sync(const Stmt& s) const {
    require_level(s, Level::Kernel, "cluster.sync");
    if (cluster_ctas() == 1)
      fail(s, "cluster.sync in a kernel without clusters (KernelOp::cluster is {1, 1, 1}); "
              "use a barrier, or launch clusters");
    if (arm_)
      fail(s, "cluster.sync inside an arm of `" + first_line(*arm_) + "`: every thread of every "
                  "CTA of the cluster must reach it, but the other arms never do; put it before "
                  "or after the specialize");
    require_converged(s, "cluster.sync");
  }

  // The arms run concurrently (stmt.h), each an If that selects its warps. Inside an arm
  // a bar.sync 0 waits for threads of the other arms, which never come; a nested
  // specialize would split an arm the interpreter schedules as one task.
  void check_specialize(const Stmt& s) {
    require_level(s, Level::Tile, "specialize");
    if (arm_)
      fail(s, "specialize inside an arm of `" + first_line(*arm_) + "`: arms do not nest; "
                  "give each role its own arm of the outer specialize");
    if (s.body.empty()) fail(s, "specialize has no arms");
    for (size_t i = 0; i < s.body.size(); ++i) {
      const Stmt& arm = s.body[i];
      if (arm.kind != StmtKind::If)
        fail(s, "arm " + std::to_string(i) + " is `" + first_line(arm) + "`, not an If; every "
                    "arm of a specialize is an If whose condition selects the warps that run it "
                    "(e.g. threadIdx.x / 128 == 0)");
    }
    arm_ = &s;
    for (const Stmt& arm : s.body) check_stmt(arm);
    arm_ = nullptr;
  }

  // Warpgroup-collective statements need the block to consist of whole warpgroups.
  void require_warpgroups(const Stmt& s, const char* what) const {
    if (kernel_ && kernel_->block_threads % kWarpgroup != 0)
      fail(s, std::string(what) + " runs on whole warpgroups of 128 threads but the block has " +
                  std::to_string(kernel_->block_threads) +
                  " threads; make block_threads a multiple of 128");
  }

  // sm_90 statements: Kernel IR only (PTX ISA 9.7.15 wgmma, 9.7.9.25 cp.async.bulk,
  // 9.7.12.15 mbarrier, 9.7.19.5 setmaxnreg).
  void check_hopper(const Stmt& s) {
    const std::string line = first_line(s);
    require_level(s, Level::Kernel, line.substr(0, line.find(' ')).c_str());
    auto whole_count = [&](const char* what) {
      if (s.imm < 0 || s.imm != double(int64_t(s.imm)))
        fail(s, std::string(what) + " keeps a non-negative whole number of groups pending, not " +
                    Operand::constant(s.imm).str());
    };
    switch (s.kind) {
      case StmtKind::MbarArrive: check_expr(s, s.value, "mbarrier slot"); break;
      case StmtKind::WgmmaFence:
      case StmtKind::WgmmaCommit: require_warpgroups(s, line.c_str()); break;
      case StmtKind::WgmmaWait:
        require_warpgroups(s, "wgmma.wait");
        whole_count("wgmma.wait");
        break;
      case StmtKind::BulkWait: whole_count("bulk.wait.read"); break;
      case StmtKind::FenceProxyAsync:
      case StmtKind::BulkCommit: break;
      case StmtKind::SetMaxNReg:
        require_warpgroups(s, "setmaxnreg");
        if (s.mode != "inc" && s.mode != "dec")
          fail(s, "setmaxnreg mode `" + s.mode + "` is neither inc nor dec");
        // PTX ISA: the register count is a multiple of 8 in [24, 256].
        if (s.imm < 24 || s.imm > 256 || s.imm != double(int64_t(s.imm)) ||
            int64_t(s.imm) % 8 != 0)
          fail(s, "setmaxnreg takes a multiple of 8 registers in [24, 256], not " +
                      Operand::constant(s.imm).str());
        (s.mode == "dec" ? setmaxnreg_dec_ : setmaxnreg_inc_).push_back(s);
        break;
      case StmtKind::TmaStore: {
        if (!p_.has_tensor(s.tensor))
          fail(s, "tma.store from undeclared tensor `" + s.tensor + "`");
        if (!p_.has_tensor(s.src)) fail(s, "tma.store into undeclared tensor `" + s.src + "`");
        const TensorDecl& from = p_.tensor(s.tensor);
        const TensorDecl& to = p_.tensor(s.src);
        if (from.role != TensorRole::Shared)
          fail(s, "tma.store reads shared memory; `" + s.tensor + "` is not a shared tensor");
        if (to.role == TensorRole::Shared)
          fail(s, "tma.store writes global memory; `" + s.src + "` is a shared tensor");
        if (to.role == TensorRole::Input)
          fail(s, "tma.store writes input tensor `" + s.src + "`; inputs are read-only");
        if (from.dtype != to.dtype)
          fail(s, std::string("tma.store copies bytes, it cannot convert ") +
                      dtype_name(from.dtype) + " to " + dtype_name(to.dtype));
        if (s.index.size() != 1) fail(s, "tma.store takes one flat box origin in shared memory");
        if (s.src_index.size() != to.shape.size())
          fail(s, "tma.store names a box corner of " + std::to_string(s.src_index.size()) +
                      " coordinates in `" + s.src + "` of rank " + std::to_string(to.shape.size()));
        if (s.dst.empty()) fail(s, "tma.store names no tensor map");
        check_expr(s, s.index[0], "tma.store box origin");
        for (const Expr& e : s.src_index) check_expr(s, e, "tma.store box corner");
        written_.insert(s.src);
        used_.insert(s.src);
        break;
      }
      default: LOOM_CHECK(false, "check_hopper on another statement");
    }
  }

  const ProgramBase& p_;
  Level level_;
  std::string where_;
  const KernelOp* kernel_;  // Kernel IR: the kernel whose body this is
  std::set<std::string> symbols_;
  std::vector<IntVar> int_vars_;                           // loop and let variables in scope
  std::vector<std::map<std::string, ScalarDef>> scalars_;  // one map per open block
  Tier deepest_tier_ = Tier::None;
  const Stmt* divergent_ = nullptr;  // innermost-first thread-dependent If or For, if any
  const Block* loop_body_ = nullptr;  // the innermost For's own body (a break leaves it)
  const Stmt* arm_ = nullptr;        // the specialize whose arm is being checked, if any
  std::set<std::string> written_, used_;
};

}  // namespace

BodyFacts check_body(const ProgramBase& p, Level level, const std::string& where,
                     const Block& body, const KernelOp* kernel) {
  LOOM_CHECK((level == Level::Kernel) == (kernel != nullptr),
             "check_body: Kernel IR bodies are checked with their kernel, other levels without");
  BodyChecker c(p, level, where, kernel);
  c.check(body);
  return BodyFacts{c.written(), c.used()};
}

}  // namespace loom::verifier
