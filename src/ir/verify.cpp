// Verifiers of the three loop-nest levels (the invariants are listed in stmt.h and in
// program.h). They run between passes, so a message must let the pass author find the
// statement: each names the level, the op or kernel, the offending statement as it
// prints, and the rule it broke.
#include <set>

#include "ir/error.h"
#include "ir/program.h"

namespace loom {
namespace {

enum class Level { Loop, Tile, Kernel };

const char* level_name(Level l) {
  switch (l) {
    case Level::Loop: return "Loop IR";
    case Level::Tile: return "Tile IR";
    case Level::Kernel: return "Kernel IR";
  }
  return "?";
}

// Kernel IR indices are in terms of these; the launch binds them.
const std::set<std::string> kBuiltins = {"blockIdx.x", "blockIdx.y", "blockIdx.z",
                                         "threadIdx.x"};

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

// Checks one op's or kernel's body. Scopes are lexical: a For or If body opens one, a
// Let binds until the end of its block, a scalar is visible after its definition in its
// block and in the blocks nested there.
class BodyChecker {
 public:
  BodyChecker(const ProgramBase& p, Level level, std::string where)
      : p_(p), level_(level), where_(std::move(where)),
        symbols_(p.symbols.begin(), p.symbols.end()) {}

  void check(const Block& body) { check_block(body); }
  const std::set<std::string>& written() const { return written_; }
  const std::set<std::string>& used() const { return used_; }

 private:
  struct ScalarDef { bool by_init; };

  [[noreturn]] void fail(const Stmt& s, const std::string& rule) const {
    throw Error(std::string(level_name(level_)) + " verifier: " + where_ + ": `" +
                first_line(s) + "`: " + rule);
  }

  bool int_bound(const std::string& v) const {
    if (symbols_.count(v)) return true;
    if (level_ == Level::Kernel && kBuiltins.count(v)) return true;
    for (const std::string& x : int_vars_)
      if (x == v) return true;
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

  void bind_int(const Stmt& s, const char* what) {
    if (s.var.empty()) fail(s, std::string(what) + " has no variable name");
    if (symbols_.count(s.var)) fail(s, std::string(what) + " `" + s.var + "` shadows a symbol");
    if (kBuiltins.count(s.var))
      fail(s, std::string(what) + " `" + s.var + "` shadows a launch builtin");
    for (const std::string& x : int_vars_)
      if (x == s.var)
        fail(s, std::string(what) + " `" + s.var +
                    "` is already bound by an enclosing loop or let; rename it");
    int_vars_.push_back(s.var);
  }

  const ScalarDef* find_scalar(const std::string& name) const {
    for (auto it = scalars_.rbegin(); it != scalars_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  void use_operands(const Stmt& s) const {
    for (const Operand& a : s.args)
      if (!a.is_imm() && !find_scalar(a.name))
        fail(s, "value `" + a.name + "` is used before it is defined in an enclosing scope");
  }

  void define(const Stmt& s, bool by_init) {
    if (s.dst.empty()) fail(s, "statement defines no value (empty dst)");
    scalars_.back()[s.dst] = ScalarDef{by_init};
  }

  void check_access(const Stmt& s) {
    if (!p_.has_tensor(s.tensor)) fail(s, "tensor `" + s.tensor + "` is not declared");
    used_.insert(s.tensor);
    const TensorDecl& t = p_.tensor(s.tensor);
    size_t want = level_ == Level::Kernel ? 1 : t.shape.size();
    if (s.index.size() != want)
      fail(s, "has " + std::to_string(s.index.size()) + " indices but " + s.tensor + " needs " +
                  std::to_string(want) +
                  (level_ == Level::Kernel ? " (Kernel IR accesses are flat offsets)"
                                           : " (its rank)"));
    for (const Expr& i : s.index) check_expr(s, i, "index");
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

  void check_block(const Block& b) {
    scalars_.emplace_back();
    size_t ints = int_vars_.size();
    for (const Stmt& s : b) check_stmt(s);
    int_vars_.resize(ints);
    scalars_.pop_back();
  }

  void check_stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::For: {
        check_tier(s);
        check_expr(s, s.extent, "loop extent");
        bind_int(s, "loop variable");
        Tier saved = deepest_tier_;
        if (s.tier != Tier::None && s.tier > deepest_tier_) deepest_tier_ = s.tier;
        check_block(s.body);
        deepest_tier_ = saved;
        int_vars_.pop_back();
        break;
      }
      case StmtKind::If:
        check_expr(s, s.cond, "condition");
        check_block(s.body);
        break;
      case StmtKind::Let:
        if (level_ != Level::Kernel)
          fail(s, std::string("Let appears only in Kernel IR, not in ") + level_name(level_));
        check_expr(s, s.value, "let value");
        bind_int(s, "let variable");
        break;
      case StmtKind::Load:
        check_access(s);
        define(s, false);
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
        use_operands(s);
        const ScalarDef* d = find_scalar(s.dst);
        if (!d || !d->by_init)
          fail(s, "accumulator `" + s.dst +
                      "` is not initialized by an Init earlier in this or an enclosing block");
        break;
      }
      case StmtKind::Write:
        check_access(s);
        if (p_.tensor(s.tensor).role == TensorRole::Input)
          fail(s, "writes input tensor `" + s.tensor + "`; inputs are read-only");
        if (s.args.size() != 1) fail(s, "a write stores exactly one operand");
        use_operands(s);
        written_.insert(s.tensor);
        break;
      case StmtKind::Atom:
        if (level_ != Level::Kernel)
          fail(s, std::string("Atom appears only in Kernel IR, not in ") + level_name(level_));
        if (s.atom.empty()) fail(s, "atom statement names no atom");
        use_operands(s);
        if (!find_scalar(s.dst))
          fail(s, "atom accumulator `" + s.dst + "` is not defined in an enclosing scope");
        break;
    }
  }

  const ProgramBase& p_;
  Level level_;
  std::string where_;
  std::set<std::string> symbols_;
  std::vector<std::string> int_vars_;                    // loop and let variables in scope
  std::vector<std::map<std::string, ScalarDef>> scalars_;  // one map per open block
  Tier deepest_tier_ = Tier::None;
  std::set<std::string> written_, used_;
};

void verify_decls(const ProgramBase& p, Level level) {
  const std::string pre = std::string(level_name(level)) + " verifier: ";
  std::set<std::string> symbols;
  for (const std::string& s : p.symbols)
    if (!symbols.insert(s).second) throw Error(pre + "symbol `" + s + "` is declared twice");
  std::set<std::string> names;
  for (const TensorDecl& t : p.tensors) {
    if (!names.insert(t.name).second)
      throw Error(pre + "tensor `" + t.name + "` is declared twice");
    if (symbols.count(t.name))
      throw Error(pre + "tensor `" + t.name + "` has the name of a symbol");
    for (const Expr& d : t.shape) {
      std::set<std::string> vars;
      d.collect_vars(vars);
      for (const std::string& v : vars)
        if (!symbols.count(v))
          throw Error(pre + "shape of tensor `" + t.name + "` uses `" + v +
                      "`, which is not a program symbol; add it to symbols");
    }
  }
}

// Outputs and temps that nothing writes would be read (or returned) as garbage.
void verify_all_written(const ProgramBase& p, Level level, const std::set<std::string>& written) {
  for (const TensorDecl& t : p.tensors)
    if (t.role != TensorRole::Input && !written.count(t.name))
      throw Error(std::string(level_name(level)) + " verifier: " +
                  (t.role == TensorRole::Output ? "output" : "temp") + " tensor `" + t.name +
                  "` is never written; only inputs may be left unwritten (drop its "
                  "declaration if no op needs it)");
}

template <class Op>
void verify_ops(const ProgramBase& p, const std::vector<Op>& ops, Level level) {
  verify_decls(p, level);
  std::set<std::string> written;
  for (const Op& op : ops) {
    const std::string where = "op " + op.name;
    const std::string pre = std::string(level_name(level)) + " verifier: " + where + ": ";
    for (const std::string& in : op.inputs)
      if (!p.has_tensor(in)) throw Error(pre + "input tensor `" + in + "` is not declared");
    if (!p.has_tensor(op.output))
      throw Error(pre + "output tensor `" + op.output + "` is not declared");
    if (p.tensor(op.output).role == TensorRole::Input)
      throw Error(pre + "output `" + op.output + "` is an input tensor; inputs are read-only");
    BodyChecker c(p, level, where);
    c.check(op.body);
    if (!c.written().count(op.output))
      throw Error(pre + "never writes its output `" + op.output + "`");
    written.insert(c.written().begin(), c.written().end());
  }
  verify_all_written(p, level, written);
}

}  // namespace

void verify(const LoopProgram& p) { verify_ops(p, p.ops, Level::Loop); }
void verify(const TileProgram& p) { verify_ops(p, p.ops, Level::Tile); }

void verify(const KernelProgram& p) {
  verify_decls(p, Level::Kernel);
  const std::set<std::string> symbols(p.symbols.begin(), p.symbols.end());
  std::set<std::string> written;
  for (const KernelOp& k : p.kernels) {
    const std::string where = "kernel " + k.name;
    const std::string pre = "Kernel IR verifier: " + where + ": ";
    // 1024 threads per block is the CUDA limit on every architecture Loom targets.
    if (k.block_threads < 1 || k.block_threads > 1024)
      throw Error(pre + "block of " + std::to_string(k.block_threads) +
                  " threads; CUDA allows 1 to 1024");
    if (k.min_blocks_per_sm < 0) throw Error(pre + "min_blocks_per_sm is negative");
    for (const Expr& g : k.grid) {
      std::set<std::string> vars;
      g.collect_vars(vars);
      for (const std::string& v : vars)
        if (!symbols.count(v))
          throw Error(pre + "grid dimension " + g.str() + " uses `" + v +
                      "`, which is not a program symbol");
    }
    std::set<std::string> params;
    for (const std::string& prm : k.params) {
      if (!params.insert(prm).second) throw Error(pre + "parameter `" + prm + "` is listed twice");
      if (!p.has_tensor(prm) && !symbols.count(prm))
        throw Error(pre + "parameter `" + prm + "` is neither a tensor nor a symbol");
    }
    BodyChecker c(p, Level::Kernel, where);
    c.check(k.body);
    for (const std::string& t : c.used())
      if (!params.count(t))
        throw Error(pre + "uses tensor `" + t + "` but does not list it in its parameters");
    for (const std::string& s : p.symbols)
      if (!params.count(s))
        throw Error(pre + "symbol `" + s + "` is missing from its parameters");
    written.insert(c.written().begin(), c.written().end());
  }
  verify_all_written(p, Level::Kernel, written);
}

}  // namespace loom
