// CPU interpreter of Loop, Tile and Kernel IR (semantics in interpreter.h).
//
// Each op body is first resolved once (scalar names to slots by lexical scope, tensor
// names to storage, atom ids to functions) and then executed; resolving per statement
// execution would dominate the run time of the pass property tests. Integer expressions
// are evaluated by Expr::eval so that index arithmetic has exactly one definition.
// Every Load and Write is bounds-checked per dimension: that is how a tiling pass that
// forgot a guard is caught on the CPU.
#include <limits>
#include <optional>
#include <random>

#include "ir/error.h"
#include "ir/interpreter.h"

namespace loom {
namespace {

struct Storage {
  std::string name;
  HostTensor* host = nullptr;
  std::string shape_str;  // for error messages
};

// Atoms the interpreter can execute; `dst` is the accumulator, read and written.
constexpr size_t kMaxAtomOperands = 8;
struct AtomImpl {
  const char* id;
  size_t arity;
  void (*run)(double& dst, const double* args);
};

constexpr AtomImpl kAtoms[] = {
    {"fma_f32", 2, [](double& dst, const double* a) { dst += a[0] * a[1]; }},
};
constexpr bool atoms_fit() {
  for (const AtomImpl& a : kAtoms)
    if (a.arity > kMaxAtomOperands) return false;
  return true;
}
static_assert(atoms_fit(), "an atom has more operands than exec() buffers: raise kMaxAtomOperands");

const AtomImpl& find_atom(const std::string& id) {
  for (const AtomImpl& a : kAtoms)
    if (id == a.id) return a;
  throw Error("interpreter: unknown atom " + id +
              " (add it to the atom table in src/ir/interpreter.cpp)");
}

// A statement with its names resolved.
struct Node {
  const Stmt* s = nullptr;
  int dst = -1;           // scalar slot written (Load, Compute, Init, Accum, Atom)
  std::vector<int> args;  // scalar slot per operand, -1 for an immediate
  Storage* tensor = nullptr;
  const AtomImpl* atom = nullptr;
  std::vector<Node> body;
};

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> eval_shape(const TensorDecl& t, const Expr::Env& symbols) {
  std::vector<int64_t> shape;
  for (const Expr& d : t.shape) {
    int64_t v = d.eval(symbols);
    if (v < 0)
      throw Error("interpreter: tensor " + t.name + " has dimension " + d.str() + " = " +
                  std::to_string(v) + " < 0");
    shape.push_back(v);
  }
  return shape;
}

Expr::Env symbol_env(const ProgramBase& p, const Bindings& b) {
  Expr::Env env;
  for (const std::string& s : p.symbols) {
    auto it = b.symbols.find(s);
    if (it == b.symbols.end())
      throw Error("interpreter: symbol " + s + " has no value; set Bindings::symbols[\"" + s +
                  "\"]");
    env[s] = it->second;
  }
  return env;
}

HostTensor make_tensor(DType dt, std::vector<int64_t> shape, double fill) {
  HostTensor h;
  h.dtype = dt;
  h.shape = std::move(shape);
  h.data.assign(size_t(h.numel()), fill);
  return h;
}

class Machine {
 public:
  // `flat`: Kernel IR, whose accesses are one offset into the row-major storage.
  Machine(const ProgramBase& p, Bindings& b, bool flat) : flat_(flat), env_(symbol_env(p, b)) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const TensorDecl& t : p.tensors) {
      std::vector<int64_t> shape = eval_shape(t, env_);
      auto it = b.tensors.find(t.name);
      if (it == b.tensors.end()) {
        if (t.role == TensorRole::Input)
          throw Error("interpreter: input tensor " + t.name +
                      " has no data in Bindings::tensors (make_random_inputs fills inputs)");
        it = b.tensors.emplace(t.name, make_tensor(t.dtype, shape, nan)).first;
      }
      HostTensor& h = it->second;
      if (h.shape != shape)
        throw Error("interpreter: tensor " + t.name + " is declared with shape " +
                    shape_string(shape) + " but its HostTensor has shape " +
                    shape_string(h.shape));
      if (h.dtype != t.dtype)
        throw Error("interpreter: tensor " + t.name + " is declared " + dtype_name(t.dtype) +
                    " but its HostTensor holds " + dtype_name(h.dtype));
      if (int64_t(h.data.size()) != h.numel())
        throw Error("interpreter: HostTensor " + t.name + " holds " +
                    std::to_string(h.data.size()) + " values for shape " +
                    shape_string(h.shape));
      storage_[t.name] = Storage{t.name, &h, shape_string(shape)};
    }
  }

  void run_op(const std::string& where, const Block& body) {
    where_ = where;
    std::vector<Node> nodes = resolve(body);
    run_block(nodes);
  }

  void run_kernel(const KernelOp& k) {
    where_ = "kernel " + k.name;
    std::vector<Node> nodes = resolve(k.body);
    int64_t g[3];
    for (int d = 0; d < 3; ++d) g[d] = k.grid[d].eval(env_);
    int64_t& bx = env_["blockIdx.x"];
    int64_t& by = env_["blockIdx.y"];
    int64_t& bz = env_["blockIdx.z"];
    int64_t& tx = env_["threadIdx.x"];
    for (bz = 0; bz < g[2]; ++bz)
      for (by = 0; by < g[1]; ++by)
        for (bx = 0; bx < g[0]; ++bx)
          for (tx = 0; tx < k.block_threads; ++tx) run_block(nodes);
    for (const char* v : {"blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x"}) env_.erase(v);
  }

 private:
  [[noreturn]] void fail(const Stmt& s, const std::string& msg) const {
    throw Error("interpreter: " + where_ + ": `" + first_line(s) + "`: " + msg);
  }

  // ---- resolution -------------------------------------------------------------------
  int lookup(const Stmt& s, const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    fail(s, "value " + name + " is used before it is defined");
  }

  // A definition in the current block reuses that block's slot for the name; one in a
  // nested block shadows the outer name until the nested block ends.
  int define(const std::string& name) {
    auto [it, fresh] = scopes_.back().try_emplace(name, num_slots_);
    if (fresh) ++num_slots_;
    return it->second;
  }

  std::vector<Node> resolve_block(const Block& b) {
    scopes_.emplace_back();
    std::vector<Node> out;
    out.reserve(b.size());
    for (const Stmt& s : b) out.push_back(resolve_stmt(s));
    scopes_.pop_back();
    return out;
  }

  std::vector<Node> resolve(const Block& body) {
    scopes_.clear();
    num_slots_ = 0;
    std::vector<Node> nodes = resolve_block(body);
    slots_.assign(size_t(num_slots_), std::numeric_limits<double>::quiet_NaN());
    return nodes;
  }

  Node resolve_stmt(const Stmt& s) {
    Node n;
    n.s = &s;
    for (const Operand& a : s.args) n.args.push_back(a.is_imm() ? -1 : lookup(s, a.name));
    switch (s.kind) {
      case StmtKind::For:
      case StmtKind::If: n.body = resolve_block(s.body); break;
      case StmtKind::Let: break;
      case StmtKind::Load:
      case StmtKind::Write: {
        auto it = storage_.find(s.tensor);
        if (it == storage_.end()) fail(s, "tensor " + s.tensor + " is not declared");
        n.tensor = &it->second;
        size_t want = flat_ ? 1 : it->second.host->shape.size();
        if (s.index.size() != want)
          fail(s, std::to_string(s.index.size()) + " indices for " + s.tensor + " of shape " +
                      it->second.shape_str + (flat_ ? " (Kernel IR uses one flat offset)" : ""));
        if (s.kind == StmtKind::Write && s.args.size() != 1)
          fail(s, "a write stores exactly one operand");
        if (s.kind == StmtKind::Load) n.dst = define(s.dst);
        break;
      }
      case StmtKind::Compute:
        if (int(s.args.size()) != scalar_op_arity(s.op))
          fail(s, "wrong number of operands for " + std::string(scalar_op_name(s.op)));
        n.dst = define(s.dst);
        break;
      case StmtKind::Init: n.dst = define(s.dst); break;
      case StmtKind::Accum:
        if (s.args.size() != 1) fail(s, "accumulate takes exactly one operand");
        n.dst = lookup(s, s.dst);
        break;
      case StmtKind::Atom:
        n.atom = &find_atom(s.atom);
        if (s.args.size() != n.atom->arity)
          fail(s, "atom " + s.atom + " takes " + std::to_string(n.atom->arity) + " operands");
        n.dst = lookup(s, s.dst);
        break;
    }
    return n;
  }

  // ---- execution --------------------------------------------------------------------
  double arg(const Node& n, size_t i) const {
    return n.args[i] < 0 ? n.s->args[i].imm : slots_[size_t(n.args[i])];
  }

  int64_t offset(const Node& n) {
    const Stmt& s = *n.s;
    const HostTensor& h = *n.tensor->host;
    if (flat_) {
      int64_t i = s.index[0].eval(env_);
      if (i < 0 || i >= h.numel())
        fail(s, "offset " + s.index[0].str() + " = " + std::to_string(i) +
                    " is out of range for tensor " + s.tensor + " of shape " +
                    n.tensor->shape_str + " (" + std::to_string(h.numel()) + " elements)");
      return i;
    }
    int64_t off = 0;
    for (size_t d = 0; d < s.index.size(); ++d) {
      int64_t i = s.index[d].eval(env_);
      if (i < 0 || i >= h.shape[d])
        fail(s, "index " + std::to_string(d) + " (" + s.index[d].str() + ") = " +
                    std::to_string(i) + " is out of range for tensor " + s.tensor +
                    " of shape " + n.tensor->shape_str);
      off = off * h.shape[d] + i;
    }
    return off;
  }

  void run_block(const std::vector<Node>& nodes) {
    size_t lets = let_undo_.size();
    for (const Node& n : nodes) exec(n);
    while (let_undo_.size() > lets) {
      auto& [var, old] = let_undo_.back();
      if (old) env_[var] = *old;
      else env_.erase(var);
      let_undo_.pop_back();
    }
  }

  std::optional<int64_t> current(const std::string& var) const {
    auto it = env_.find(var);
    return it == env_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

  void exec(const Node& n) {
    const Stmt& s = *n.s;
    switch (s.kind) {
      case StmtKind::For: {
        int64_t extent = s.extent.eval(env_);
        std::optional<int64_t> old = current(s.var);
        // unordered_map keeps references valid across rehashing, so the body may bind
        // further variables while `v` stays the loop counter.
        int64_t& v = env_[s.var];
        for (int64_t i = 0; i < extent; ++i) {
          v = i;
          run_block(n.body);
        }
        if (old) v = *old;
        else env_.erase(s.var);
        break;
      }
      case StmtKind::If:
        if (s.cond.eval(env_) != 0) run_block(n.body);
        break;
      case StmtKind::Let: {
        int64_t v = s.value.eval(env_);
        let_undo_.emplace_back(s.var, current(s.var));
        env_[s.var] = v;
        break;
      }
      case StmtKind::Load: {
        double v = n.tensor->host->data[size_t(offset(n))];
        if (n.tensor->host->dtype == DType::TF32) v = round_to_tf32(float(v));
        slots_[size_t(n.dst)] = v;
        break;
      }
      case StmtKind::Write: {
        HostTensor& h = *n.tensor->host;
        h.data[size_t(offset(n))] = round_to_dtype(h.dtype, arg(n, 0));
        break;
      }
      case StmtKind::Compute:
        slots_[size_t(n.dst)] =
            eval_scalar_op(s.op, arg(n, 0), n.args.size() > 1 ? arg(n, 1) : 0.0);
        break;
      case StmtKind::Init: slots_[size_t(n.dst)] = s.imm; break;
      case StmtKind::Accum: slots_[size_t(n.dst)] += arg(n, 0); break;
      case StmtKind::Atom: {
        double a[kMaxAtomOperands];  // resolve_stmt checked the count against the atom
        for (size_t i = 0; i < n.args.size(); ++i) a[i] = arg(n, i);
        n.atom->run(slots_[size_t(n.dst)], a);
        break;
      }
    }
  }

  bool flat_;
  Expr::Env env_;  // symbols, loop and let variables, launch builtins
  std::map<std::string, Storage> storage_;
  std::string where_;
  std::vector<std::map<std::string, int>> scopes_;  // resolution only
  int num_slots_ = 0;
  std::vector<double> slots_;
  std::vector<std::pair<std::string, std::optional<int64_t>>> let_undo_;
};

}  // namespace

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void make_random_inputs(const ProgramBase& p, Bindings& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Expr::Env symbols = symbol_env(p, b);
  for (const TensorDecl& t : p.tensors) {
    HostTensor h = make_tensor(t.dtype, eval_shape(t, symbols),
                               std::numeric_limits<double>::quiet_NaN());
    if (t.role == TensorRole::Input)
      for (double& v : h.data) {
        // 53 random bits to [0, 1) by hand: std::uniform_real_distribution differs
        // between standard libraries, and the inputs must be the same everywhere.
        double u = double(rng() >> 11) * 0x1.0p-53;
        v = round_to_dtype(t.dtype, 2.0 * u - 1.0);
      }
    b.tensors[t.name] = std::move(h);
  }
}

void interpret(const LoopProgram& p, Bindings& b) {
  Machine m(p, b, false);
  for (const LoopOp& op : p.ops) m.run_op("op " + op.name, op.body);
}

void interpret(const TileProgram& p, Bindings& b) {
  Machine m(p, b, false);
  for (const TileOp& op : p.ops) m.run_op("op " + op.name, op.body);
}

void interpret(const KernelProgram& p, Bindings& b) {
  Machine m(p, b, true);
  for (const KernelOp& k : p.kernels) m.run_kernel(k);
}

}  // namespace loom
