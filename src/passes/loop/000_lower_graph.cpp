// l:000_lower_graph — Graph -> Loop IR, one LoopOp per graph op.
//
// Steps:
//  1. Declare every Input node as an input tensor with its *storage* shape (a `.T`
//     operand keeps its storage layout; loads permute the indices instead).
//  2. Every non-input node becomes a LoopOp over its output shape: batch loops `b`,
//     then `m`, `n`; a contraction adds the reduce loop `k` around
//     load/load/multiply/accumulate (an operand without batch dims, shared by every
//     entry, is read without the batch index), an elementwise op loads its operands
//     (broadcast dimensions index 0) and applies one scalar op.
//  3. Results between ops are Temp tensors of the accumulator type (f32), so fusing them
//     away later removes no rounding the user asked for; the last op writes `out`.
//  0. A size symbol that a pass of this program would also generate as a name (`m`,
//     `k_i`, `A_s`) is first spelled apart, `loom_sym_m` (passes/symbol_spelling.h).
//  4. Attention becomes three ops, two contractions with a softmax between
//     (attention_loops.h); l:005 fuses them into the online-softmax form.
#include <algorithm>
#include <set>

#include "ir/error.h"
#include "passes/attention_loops.h"
#include "passes/passes.h"
#include "passes/symbol_spelling.h"

namespace loom {
namespace {

struct Namer {
  int values = 0;
  std::string next(const std::string& prefix) { return prefix + std::to_string(values++); }
};

// Loop variables of an output of rank r: b (batch dims), m, n.
std::vector<std::string> output_vars(size_t rank) {
  std::vector<std::string> v;
  for (size_t i = 0; i + 2 < rank; ++i) v.push_back(rank == 3 ? "b" : "b" + std::to_string(i));
  if (rank >= 2) v.push_back("m");
  v.push_back("n");
  return v;
}

std::vector<Expr> exprs(const std::vector<Dim>& dims) {
  std::vector<Expr> e;
  for (const auto& d : dims) e.push_back(d.expr());
  return e;
}

// Wrap `body` in parallel loops over `shape` with variables `vars` (outermost first).
Block parallel_nest(const std::vector<std::string>& vars, const std::vector<Dim>& shape,
                    Block body) {
  for (int i = int(vars.size()) - 1; i >= 0; --i)
    body = {Stmt::For(vars[i], shape[i].expr(), LoopKind::Parallel, vars[i], std::move(body))};
  return body;
}

std::vector<Expr> var_index(const std::vector<std::string>& vars) {
  std::vector<Expr> idx;
  for (const auto& v : vars) idx.push_back(Expr::var(v));
  return idx;
}

// Index of a broadcast operand of shape `op_shape` read at output position `vars`
// (numpy rules: trailing dims align; a size-1 dim reads index 0).
std::vector<Expr> broadcast_index(const std::vector<Dim>& op_shape,
                                  const std::vector<std::string>& vars) {
  std::vector<Expr> idx;
  size_t off = vars.size() - op_shape.size();
  for (size_t i = 0; i < op_shape.size(); ++i) {
    bool unit = !op_shape[i].is_sym() && op_shape[i].value == 1;
    idx.push_back(unit ? Expr(0) : Expr::var(vars[off + i]));
  }
  return idx;
}

class Lowering {
 public:
  explicit Lowering(const Graph& g) : g_(g) {}

  LoopProgram run() {
    p_.symbols = g_.symbols();
    p_.symbol_names = g_.symbol_names;
    for (const auto& n : g_.nodes)
      if (n.kind == OpKind::Input) declare_input(n);
    for (const auto& n : g_.nodes) {
      if (n.kind == OpKind::Input) continue;
      TensorDecl out;
      // A temp's name must not be an input's (an input may be called t2).
      out.name = n.id == g_.result() ? "out" : fresh_tensor("t" + std::to_string(n.id));
      out.dtype = n.id == g_.result() ? n.dtype : DType::F32;
      out.shape = exprs(n.shape);
      out.role = n.id == g_.result() ? TensorRole::Output : TensorRole::Temp;
      if (n.id == g_.result()) out.pitch = g_.out_strides();  // out_pitch=: a view
      tensor_of_[n.id] = out.name;
      p_.tensors.push_back(out);
      if (n.kind == OpKind::Attention) {
        lower_attention(AttentionLoops(g_), p_);
        continue;
      }
      p_.ops.push_back(n.kind == OpKind::Matmul ? contraction(n) : elementwise(n));
    }
    return std::move(p_);
  }

 private:
  void declare_input(const Node& n) {
    tensor_of_[n.id] = n.name;
    if (p_.has_tensor(n.name)) return;  // the same tensor used twice (e.g. A and A.T)
    TensorDecl t;
    t.name = n.name;
    t.dtype = n.dtype;
    t.shape = exprs(n.storage_shape());
    t.pitch = n.storage_strides();  // a view's strides; {} when dense
    t.role = TensorRole::Input;
    p_.tensors.push_back(t);
  }

  std::string fresh_tensor(const std::string& base) const {
    std::string name = base;
    for (int i = 1; p_.has_tensor(name); ++i) name = base + "_" + std::to_string(i);
    return name;
  }

  // Index into an input's storage for logical position (.., row, col).
  std::vector<Expr> operand_index(const Node& in, std::vector<std::string> vars) {
    if (in.transposed) std::swap(vars[vars.size() - 1], vars[vars.size() - 2]);
    return var_index(vars);
  }

  LoopOp contraction(const Node& n) {
    const Node& a = g_.node(n.inputs[0]);
    const Node& b = g_.node(n.inputs[1]);
    auto vars = output_vars(n.shape.size());
    std::vector<std::string> batch(vars.begin(), vars.end() - 2);
    // An operand without batch dims is shared by every batch entry: its index has none.
    auto with = [&](const Node& in, std::vector<std::string> tail) {
      std::vector<std::string> v(batch.end() - long(in.shape.size() - 2), batch.end());
      v.insert(v.end(), tail.begin(), tail.end());
      return v;
    };
    std::string va = names_.next("in"), vb = names_.next("in"), prod = names_.next("v"),
                acc = names_.next("acc");
    Block reduce_body = {
        Stmt::Load(va, tensor_of_[a.id], operand_index(a, with(a, {"m", "k"}))),
        Stmt::Load(vb, tensor_of_[b.id], operand_index(b, with(b, {"k", "n"}))),
        Stmt::Compute(prod, ScalarOp::Mul, {Operand::value(va), Operand::value(vb)}),
        Stmt::Accum(acc, Operand::value(prod)),
    };
    const Dim& k = a.shape.back();
    Block cell = {
        Stmt::Init(acc, 0.0),
        Stmt::For("k", k.expr(), LoopKind::Reduce, "k", std::move(reduce_body)),
        Stmt::Write(tensor_of_[n.id], var_index(vars), Operand::value(acc)),
    };
    LoopOp op;
    op.name = "matmul";
    op.inputs = {tensor_of_[a.id], tensor_of_[b.id]};
    if (op.inputs[0] == op.inputs[1]) op.inputs.pop_back();
    op.output = tensor_of_[n.id];
    op.body = parallel_nest(vars, n.shape, std::move(cell));
    return op;
  }

  LoopOp elementwise(const Node& n) {
    auto vars = output_vars(n.shape.size());
    LoopOp op;
    op.name = scalar_op_name(n.op);
    Block cell;
    std::vector<Operand> args;
    for (int in : n.inputs) {
      const Node& src = g_.node(in);
      std::string v = names_.next("x");
      auto idx = src.kind == OpKind::Input && src.transposed
                     ? operand_index(src, vars)  // full-shape operand stored transposed
                     : broadcast_index(src.shape, vars);
      if (src.kind == OpKind::Input && src.transposed && src.shape.size() != vars.size())
        throw Error("a transposed elementwise operand must have the output's rank: " + src.name);
      cell.push_back(Stmt::Load(v, tensor_of_[in], idx));
      args.push_back(Operand::value(v));
      if (std::find(op.inputs.begin(), op.inputs.end(), tensor_of_[in]) == op.inputs.end())
        op.inputs.push_back(tensor_of_[in]);
    }
    if (n.scalar) args.push_back(Operand::constant(*n.scalar));
    std::string y = names_.next("y");
    cell.push_back(Stmt::Compute(y, n.op, args));
    cell.push_back(Stmt::Write(tensor_of_[n.id], var_index(vars), Operand::value(y)));
    op.output = tensor_of_[n.id];
    op.body = parallel_nest(vars, n.shape, std::move(cell));
    return op;
  }

  const Graph& g_;
  LoopProgram p_;
  Namer names_;
  std::map<int, std::string> tensor_of_;
};

}  // namespace

Pass pass_lower_graph() {
  return Pass{
      "l:000_lower_graph", Level::Graph, Level::Loop,
      "one LoopOp per graph op; loads index storage layouts; temps are f32",
      {},
      [](CompileState& s) {
        spell_symbols_apart(s);
        s.loop = Lowering(s.graph).run();
        s.level = Level::Loop;
      }};
}

}  // namespace loom
