// Statement factories, scalar-op reference semantics and tree-walking helpers.
#include "ir/stmt.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace loom {

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::None: return "none";
    case Tier::Grid: return "grid";
    case Tier::Cluster: return "cluster";
    case Tier::Warpgroup: return "warpgroup";
    case Tier::Warp: return "warp";
    case Tier::Thread: return "thread";
    case Tier::Register: return "register";
    case Tier::Atom: return "atom";
  }
  return "?";
}

const char* loop_kind_name(LoopKind k) {
  return k == LoopKind::Parallel ? "parallel" : "reduce";
}

// Names follow torch's functions (torch.add, torch.subtract, ...), which is what a user
// reading the printed IR next to a PyTorch model expects.
const char* scalar_op_name(ScalarOp op) {
  switch (op) {
    case ScalarOp::Add: return "add";
    case ScalarOp::Sub: return "subtract";
    case ScalarOp::Mul: return "multiply";
    case ScalarOp::Div: return "divide";
    case ScalarOp::Max: return "max";
    case ScalarOp::Min: return "min";
    case ScalarOp::Neg: return "negate";
    case ScalarOp::Relu: return "relu";
    case ScalarOp::Gelu: return "gelu";
    case ScalarOp::GeluTanh: return "gelu_tanh";
    case ScalarOp::Silu: return "silu";
    case ScalarOp::Exp: return "exp";
    case ScalarOp::Exp2: return "exp2";
    case ScalarOp::Log: return "log";
  }
  return "?";
}

int scalar_op_arity(ScalarOp op) {
  switch (op) {
    case ScalarOp::Neg:
    case ScalarOp::Relu:
    case ScalarOp::Gelu:
    case ScalarOp::GeluTanh:
    case ScalarOp::Silu:
    case ScalarOp::Exp:
    case ScalarOp::Exp2:
    case ScalarOp::Log: return 1;
    default: return 2;
  }
}

bool is_accumulate_op(ScalarOp op) {
  return op == ScalarOp::Add || op == ScalarOp::Max || op == ScalarOp::Min ||
         op == ScalarOp::Mul;
}

// NaN propagates through max/min/relu as torch.maximum / torch.relu do; std::max would
// silently drop it depending on argument order and hide an unwritten element.
double eval_scalar_op(ScalarOp op, double a, double b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case ScalarOp::Add: return a + b;
    case ScalarOp::Sub: return a - b;
    case ScalarOp::Mul: return a * b;
    case ScalarOp::Div: return a / b;
    case ScalarOp::Max: return std::isnan(a) || std::isnan(b) ? nan : std::max(a, b);
    case ScalarOp::Min: return std::isnan(a) || std::isnan(b) ? nan : std::min(a, b);
    case ScalarOp::Neg: return -a;
    case ScalarOp::Relu: return std::isnan(a) ? a : (a > 0.0 ? a : 0.0);
    // torch.nn.functional.gelu's default (approximate='none') is the exact erf form.
    case ScalarOp::Gelu: return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
    // approximate='tanh' (GPT-2's, Gemma's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    case ScalarOp::GeluTanh:
      return 0.5 * a * (1.0 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
    case ScalarOp::Silu: return a / (1.0 + std::exp(-a));
    // exp(-inf) = 0 and log(0) = -inf: a masked score and an empty row's sum come out
    // as the softmax defines them, with no special case.
    case ScalarOp::Exp: return std::exp(a);
    case ScalarOp::Exp2: return std::exp2(a);
    case ScalarOp::Log: return std::log(a);
  }
  return nan;
}

// std::to_chars without a format is the shortest text that reads back as the same
// double, so printed IR round-trips immediates exactly (0.5, 2, 1e-05).
std::string Operand::str() const {
  if (!is_imm()) {
    if (index.empty()) return name;
    std::string s = name + "[";
    for (size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + index[i].str();
    return s + "]";
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, imm);
  return std::string(buf, res.ptr);
}

Stmt Stmt::For(std::string var, Expr extent, LoopKind kind, std::string axis,
               std::vector<Stmt> body, Tier tier) {
  Stmt s;
  s.kind = StmtKind::For;
  s.var = std::move(var);
  s.extent = std::move(extent);
  s.loop_kind = kind;
  s.axis = std::move(axis);
  s.body = std::move(body);
  s.tier = tier;
  return s;
}

Stmt Stmt::If(Expr cond, std::vector<Stmt> body) {
  Stmt s;
  s.kind = StmtKind::If;
  s.cond = std::move(cond);
  s.body = std::move(body);
  return s;
}

Stmt Stmt::Let(std::string var, Expr value) {
  Stmt s;
  s.kind = StmtKind::Let;
  s.var = std::move(var);
  s.value = std::move(value);
  return s;
}

Stmt Stmt::LetLoad(std::string var, std::string tensor, std::vector<Expr> index) {
  Stmt s;
  s.kind = StmtKind::Let;
  s.var = std::move(var);
  s.tensor = std::move(tensor);
  s.index = std::move(index);
  return s;
}

Stmt Stmt::LetFetchInc(std::string var, std::string counter, std::vector<Expr> index, Expr wrap,
                       Expr when) {
  Stmt s = LetLoad(std::move(var), std::move(counter), std::move(index));
  s.atomic_add = true;
  s.value = std::move(wrap);
  s.pred = std::move(when);
  return s;
}

Stmt Stmt::WriteInt(std::string tensor, std::vector<Expr> index, Expr value) {
  Stmt s;
  s.kind = StmtKind::Write;
  s.tensor = std::move(tensor);
  s.index = std::move(index);
  s.value = std::move(value);
  s.mode = "int";
  return s;
}

Stmt Stmt::BreakIf(Expr cond) {
  Stmt s = If(std::move(cond), {});
  s.mode = "break";
  return s;
}

Stmt Stmt::Load(std::string dst, std::string tensor, std::vector<Expr> index) {
  Stmt s;
  s.kind = StmtKind::Load;
  s.dst = std::move(dst);
  s.tensor = std::move(tensor);
  s.index = std::move(index);
  return s;
}

Stmt Stmt::Compute(std::string dst, ScalarOp op, std::vector<Operand> args) {
  Stmt s;
  s.kind = StmtKind::Compute;
  s.dst = std::move(dst);
  s.op = op;
  s.args = std::move(args);
  return s;
}

Stmt Stmt::Init(std::string acc, double value) {
  Stmt s;
  s.kind = StmtKind::Init;
  s.dst = std::move(acc);
  s.imm = value;
  return s;
}

Stmt Stmt::Accum(std::string acc, Operand value, ScalarOp op) {
  Stmt s;
  s.kind = StmtKind::Accum;
  s.dst = std::move(acc);
  s.op = op;
  s.args = {std::move(value)};
  return s;
}

Stmt Stmt::Write(std::string tensor, std::vector<Expr> index, Operand value) {
  Stmt s;
  s.kind = StmtKind::Write;
  s.tensor = std::move(tensor);
  s.index = std::move(index);
  s.args = {std::move(value)};
  return s;
}

Stmt Stmt::Atom(std::string atom, std::string dst, std::vector<Operand> args) {
  Stmt s;
  s.kind = StmtKind::Atom;
  s.atom = std::move(atom);
  s.dst = std::move(dst);
  s.args = std::move(args);
  return s;
}

Stmt Stmt::CopyAtom(std::string atom, std::string dst, std::vector<Expr> dst_prefix,
                    std::string shared, Expr row_offset) {
  Stmt s;
  s.kind = StmtKind::Atom;
  s.atom = std::move(atom);
  s.dst = std::move(dst);
  s.dst_index = std::move(dst_prefix);
  s.tensor = std::move(shared);
  s.index = {std::move(row_offset)};
  return s;
}

Stmt Stmt::StoreCopyAtom(std::string atom, std::string shared, Expr row_offset,
                         std::vector<Operand> values) {
  Stmt s;
  s.kind = StmtKind::Atom;
  s.atom = std::move(atom);
  s.tensor = std::move(shared);
  s.index = {std::move(row_offset)};
  s.args = std::move(values);
  return s;
}

// Every statement is rewritten, loop variables of nested Fors included: the passes that
// call this replace a loop variable by its factored form throughout the loop it names.
Stmt Stmt::Alloc(std::string name, std::vector<Expr> extents) {
  Stmt s;
  s.kind = StmtKind::Alloc;
  s.dst = std::move(name);
  s.index = std::move(extents);
  return s;
}

Stmt Stmt::Stage(std::string mode, std::vector<StageCopy> copies, std::vector<Stmt> body) {
  Stmt s;
  s.kind = StmtKind::Stage;
  s.mode = std::move(mode);
  s.copies = std::move(copies);
  s.body = std::move(body);
  return s;
}

Stmt Stmt::Barrier() {
  Stmt s;
  s.kind = StmtKind::Barrier;
  return s;
}

Stmt Stmt::NamedBarrier(Expr id, int threads) {
  Stmt s;
  s.kind = StmtKind::Barrier;
  s.value = std::move(id);
  s.imm = threads;
  return s;
}

Stmt Stmt::NamedBarrierArrive(Expr id, int threads) {
  Stmt s = NamedBarrier(std::move(id), threads);
  s.mode = "arrive";
  return s;
}

Stmt Stmt::AsyncCopy(std::string dst, Expr dst_offset, std::string src, Expr src_offset,
                     int width, Expr pred) {
  Stmt s;
  s.kind = StmtKind::AsyncCopy;
  s.tensor = std::move(dst);
  s.index = {std::move(dst_offset)};
  s.src = std::move(src);
  s.src_index = {std::move(src_offset)};
  s.width = width;
  s.pred = std::move(pred);
  return s;
}

Stmt Stmt::AsyncCommit() {
  Stmt s;
  s.kind = StmtKind::AsyncCommit;
  return s;
}

Stmt Stmt::AsyncWait(int keep_in_flight) {
  Stmt s;
  s.kind = StmtKind::AsyncWait;
  s.imm = keep_in_flight;
  return s;
}

Stmt Stmt::TmaLoad(std::string shared, Expr box_origin, std::string src,
                   std::vector<Expr> corner, std::string descriptor, Expr mbar, int64_t bytes) {
  Stmt s;
  s.kind = StmtKind::TmaLoad;
  s.tensor = std::move(shared);
  s.index = {std::move(box_origin)};
  s.src = std::move(src);
  s.src_index = std::move(corner);
  s.dst = std::move(descriptor);
  s.value = std::move(mbar);
  s.imm = double(bytes);
  return s;
}

Stmt Stmt::MbarInit(Expr mbar, int arrivals) {
  Stmt s;
  s.kind = StmtKind::MbarInit;
  s.value = std::move(mbar);
  s.imm = arrivals;
  return s;
}

Stmt Stmt::FenceMbarInit() {
  Stmt s;
  s.kind = StmtKind::FenceMbarInit;
  return s;
}

Stmt Stmt::MbarArriveExpectTx(Expr mbar, int64_t bytes) {
  Stmt s;
  s.kind = StmtKind::MbarArriveExpectTx;
  s.value = std::move(mbar);
  s.imm = double(bytes);
  return s;
}

Stmt Stmt::MbarWait(Expr mbar, Expr parity) {
  Stmt s;
  s.kind = StmtKind::MbarWait;
  s.value = std::move(mbar);
  s.cond = std::move(parity);
  return s;
}

Stmt Stmt::MbarArrive(Expr mbar) {
  Stmt s;
  s.kind = StmtKind::MbarArrive;
  s.value = std::move(mbar);
  return s;
}

Stmt Stmt::WgmmaFence() {
  Stmt s;
  s.kind = StmtKind::WgmmaFence;
  return s;
}

Stmt Stmt::WgmmaCommit() {
  Stmt s;
  s.kind = StmtKind::WgmmaCommit;
  return s;
}

Stmt Stmt::WgmmaWait(int keep_in_flight, std::vector<Operand> after) {
  Stmt s;
  s.kind = StmtKind::WgmmaWait;
  s.imm = keep_in_flight;
  s.args = std::move(after);
  return s;
}

Stmt Stmt::FenceProxyAsync() {
  Stmt s;
  s.kind = StmtKind::FenceProxyAsync;
  return s;
}

Stmt Stmt::SetMaxNReg(bool increase, int registers) {
  Stmt s;
  s.kind = StmtKind::SetMaxNReg;
  s.mode = increase ? "inc" : "dec";
  s.imm = registers;
  return s;
}

Stmt Stmt::TmaStore(std::string shared, Expr box_origin, std::string dst_tensor,
                    std::vector<Expr> corner, std::string descriptor) {
  Stmt s;
  s.kind = StmtKind::TmaStore;
  s.tensor = std::move(shared);
  s.index = {std::move(box_origin)};
  s.src = std::move(dst_tensor);
  s.src_index = std::move(corner);
  s.dst = std::move(descriptor);
  return s;
}

Stmt Stmt::BulkCommit() {
  Stmt s;
  s.kind = StmtKind::BulkCommit;
  return s;
}

Stmt Stmt::BulkWait(int keep_reading) {
  Stmt s;
  s.kind = StmtKind::BulkWait;
  s.imm = keep_reading;
  return s;
}

Stmt Stmt::Specialize(std::vector<Stmt> arms) {
  Stmt s;
  s.kind = StmtKind::Specialize;
  s.body = std::move(arms);
  return s;
}

Stmt Stmt::ClusterSync(bool relaxed) {
  Stmt s;
  s.kind = StmtKind::ClusterSync;
  if (relaxed) s.mode = "relaxed";
  return s;
}

Stmt Stmt::TileArrive(std::string var, std::string counter, Expr offset, int64_t arrivals,
                      int threads, Expr when) {
  Stmt s;
  s.cond = std::move(when);
  s.kind = StmtKind::TileArrive;
  s.var = std::move(var);
  s.tensor = std::move(counter);
  s.index = {std::move(offset)};
  s.imm = double(arrivals);
  s.value = Expr(threads);
  return s;
}

void substitute_block(Block& b, const std::map<std::string, Expr>& repl) {
  auto sub_all = [&](std::vector<Expr>& v) {
    for (Expr& e : v) e = e.substitute(repl);
  };
  walk(b, [&](Stmt& s) {
    s.extent = s.extent.substitute(repl);
    s.cond = s.cond.substitute(repl);
    s.value = s.value.substitute(repl);
    s.pred = s.pred.substitute(repl);
    s.scale_d = s.scale_d.substitute(repl);
    s.multicast = s.multicast.substitute(repl);
    s.mbar = s.mbar.substitute(repl);
    sub_all(s.index);
    sub_all(s.dst_index);
    sub_all(s.src_index);
    for (Operand& o : s.args) sub_all(o.index);
    for (StageCopy& c : s.copies) {
      sub_all(c.shared_prefix);
      sub_all(c.extents);
      sub_all(c.src_index);
    }
  });
}

void walk(Block& b, const std::function<void(Stmt&)>& fn) {
  for (Stmt& s : b) {
    fn(s);
    walk(s.body, fn);
  }
}

void walk(const Block& b, const std::function<void(const Stmt&)>& fn) {
  for (const Stmt& s : b) {
    fn(s);
    walk(s.body, fn);
  }
}

}  // namespace loom

namespace loom {

Stmt Stmt::LaneReduce(std::string dst, ScalarOp op, Operand value, int lanes) {
  Stmt s;
  s.kind = StmtKind::LaneReduce;
  s.dst = std::move(dst);
  s.op = op;
  s.args = {std::move(value)};
  s.imm = lanes;
  return s;
}

}  // namespace loom
