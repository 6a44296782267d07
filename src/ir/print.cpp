// Printers of the three loop-nest levels. The text is the unit of `loom compile -vv`
// (a unified diff per pass), so every statement is one line, children are indented by
// two spaces, and nothing depends on pointer values or hash order: a pass that changes
// one statement changes one line.
#include <set>
#include <sstream>

#include "ir/program.h"
#include "ir/realign.h"

namespace loom {
namespace {

std::string join_exprs(const std::vector<Expr>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i].str();
  return s;
}

std::string join_operands(const std::vector<Operand>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i].str();
  return s;
}

std::string join_names(const std::vector<std::string>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i];
  return s;
}

std::string dst_of(const Stmt& s) {
  if (s.dst_index.empty()) return s.dst;
  return s.dst + "[" + join_exprs(s.dst_index) + "]";
}

std::string width_suffix(const Stmt& s) {
  return s.width > 1 ? ".v" + std::to_string(s.width) : "";
}

std::string pred_suffix(const Stmt& s) {
  return s.pred.is_const() && s.pred.const_value() == 1 ? "" : " if " + s.pred.str();
}

// A cluster mask on a TMA load or an arrive: the CTAs it reaches.
std::string multicast_suffix(const Stmt& s) {
  return s.multicast.is_const() && s.multicast.const_value() == 0
             ? ""
             : "  multicast " + s.multicast.str();
}

std::string copy_line(const StageCopy& c) {
  std::string box;
  for (size_t i = 0; i < c.vars.size(); ++i)
    box += (i ? ", " : "") + c.vars[i] + ":" + c.extents[i].str();
  std::string prefix = c.shared_prefix.empty() ? "" : join_exprs(c.shared_prefix) + "; ";
  return "shared " + c.shared + "[" + prefix + box + "] = " + c.src + "[" + join_exprs(c.src_index) + "]";
}

// The statement's own line, without children and without indentation.
std::string stmt_line(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::For: {
      std::string line = "for " + s.var + " in 0.." + s.extent.str();
      if (s.tier != Tier::None) line += std::string(" ") + tier_name(s.tier);
      if (s.loop_kind == LoopKind::Reduce) line += " reduce";
      if (s.unroll) line += " unroll";
      if (s.no_unroll) line += " no_unroll";
      if (s.unroll_by > 1) line += " unroll_by " + std::to_string(s.unroll_by);
      if (!s.axis.empty() && s.axis != s.var) line += "  # " + s.axis;
      return line;
    }
    case StmtKind::If:
      if (s.break_if()) return "break if " + s.cond.str();
      return "if " + s.cond.str() + ":";
    case StmtKind::Let:
      if (s.let_fetch())
        return "let " + s.var + " = fetch.inc " + s.tensor + "[" + join_exprs(s.index) + "] wrap " +
               s.value.str() + (s.pred.is_const() && s.pred.const_value() == 1 ? "" : " when " + s.pred.str());
      if (s.let_load()) return "let " + s.var + " = load " + s.tensor + "[" + join_exprs(s.index) + "]";
      return "let " + s.var + " = " + s.value.str();
    case StmtKind::Load:
      if (is_chunk_load(s))  // ir/realign.h
        return dst_of(s) + " = load.chunks x" + std::to_string(s.width / 2) + " " + s.tensor +
               "[" + join_exprs(s.index) + "] valid " + s.value.str();
      return dst_of(s) + " = load" + width_suffix(s) + " " + s.tensor + "[" +
             join_exprs(s.index) + "]" + pred_suffix(s);
    case StmtKind::Compute:
      return dst_of(s) + " = " + scalar_op_name(s.op) + "(" + join_operands(s.args) + ")";
    case StmtKind::Init: return dst_of(s) + " = " + Operand::constant(s.imm).str();
    case StmtKind::Accum:
      return dst_of(s) + " <- " + scalar_op_name(s.op) + "(" + dst_of(s) + ", " +
             join_operands(s.args) + ")";
    case StmtKind::Write:
      if (s.write_int()) return s.tensor + "[" + join_exprs(s.index) + "] = int " + s.value.str();
      if (is_realigned_store(s))  // ir/realign.h
        return "store.realign x" + std::to_string(s.width) + " " + s.tensor + "[" +
               join_exprs(s.index) + "] = " + join_operands(s.args) + " from " +
               join_exprs(s.src_index) + " valid " + s.value.str();
      return (s.width > 1 ? "store" + width_suffix(s) + " " : std::string()) + s.tensor + "[" +
             join_exprs(s.index) + "] " + (s.atomic_add ? "+= " : "= ") +
             join_operands(s.args) + (s.atomic_add ? "  atomic" : "") +
             (s.remote ? " @cta(" + s.value.str() + ") async mbar[" + s.mbar.str() + "]" : "");
    case StmtKind::Atom:
      // A copy atom reads a shared tensor at the lane's row instead of operands; a storing
      // one (no dst) writes its operands there.
      if (!s.tensor.empty() && s.dst.empty())
        return s.tensor + "[" + join_exprs(s.index) + "] <- " + s.atom + "(" +
               join_operands(s.args) + ")";
      if (!s.tensor.empty())
        return dst_of(s) + " <- " + s.atom + "(" + s.tensor + "[" + join_exprs(s.index) + "])";
      return dst_of(s) + " <- " + s.atom + "(" + join_operands(s.args) + ")" +
             (s.scale_d.is_const() && s.scale_d.const_value() == 1
                  ? std::string()
                  : " scale_d " + s.scale_d.str());
    case StmtKind::Alloc: return "alloc " + s.dst + "[" + join_exprs(s.index) + "]";
    case StmtKind::Stage: return "stage " + s.mode + ":";
    case StmtKind::Barrier:
      return s.named_barrier() ? (s.named_arrive() ? "bar.arrive " : "bar.sync ") + s.value.str() + ", " + std::to_string(int64_t(s.imm))
                               : "barrier";
    case StmtKind::AsyncCopy:
      return "cp.async " + s.tensor + "[" + join_exprs(s.index) + "] <- " + s.src + "[" +
             join_exprs(s.src_index) + "] x" + std::to_string(s.width) + pred_suffix(s);
    case StmtKind::AsyncCommit: return "cp.async.commit";
    case StmtKind::AsyncWait: return "cp.async.wait " + std::to_string(int(s.imm));
    case StmtKind::TmaLoad:
      return "tma.load " + s.tensor + "[" + join_exprs(s.index) + "] <- " + s.src + "[" +
             join_exprs(s.src_index) + "] via " + s.dst + " mbar[" + s.value.str() + "] " +
             Operand::constant(s.imm).str() + "B" + multicast_suffix(s);
    case StmtKind::MbarInit:
      return "mbar.init [" + s.value.str() + "] arrivals=" + Operand::constant(s.imm).str();
    case StmtKind::FenceMbarInit: return "fence.mbarrier_init";
    case StmtKind::MbarArriveExpectTx:
      return "mbar.arrive.expect_tx [" + s.value.str() + "] " + Operand::constant(s.imm).str() + "B";
    case StmtKind::MbarWait: return "mbar.wait [" + s.value.str() + "] parity=" + s.cond.str();
    case StmtKind::MbarArrive: return "mbar.arrive [" + s.value.str() + "]" + multicast_suffix(s);
    case StmtKind::WgmmaFence: return "wgmma.fence";
    case StmtKind::WgmmaCommit: return "wgmma.commit";
    case StmtKind::WgmmaWait: {
      std::string t = "wgmma.wait " + std::to_string(int(s.imm));
      for (size_t i = 0; i < s.args.size(); ++i) t += (i ? ", " : " after ") + s.args[i].str();
      return t;
    }
    case StmtKind::FenceProxyAsync: return "fence.proxy.async";
    case StmtKind::SetMaxNReg: return "setmaxnreg." + s.mode + " " + std::to_string(int(s.imm));
    case StmtKind::TmaStore:
      return "tma.store " + s.src + "[" + join_exprs(s.src_index) + "] <- " + s.tensor + "[" +
             join_exprs(s.index) + "] via " + s.dst;
    case StmtKind::BulkCommit: return "bulk.commit";
    case StmtKind::BulkWait: return "bulk.wait.read " + std::to_string(int(s.imm));
    case StmtKind::Specialize: return s.per_warpgroup() ? "specialize warpgroups:" : "specialize:";
    case StmtKind::ClusterSync: return s.mode == "relaxed" ? "cluster.sync relaxed" : "cluster.sync";
    case StmtKind::TileArrive:
      return "let " + s.var + " = tile.arrive " + s.tensor + "[" + join_exprs(s.index) + "] of " +
             Operand::constant(s.imm).str() + " (groups of " + s.value.str() + " threads)" +
             (s.cond.is_const() && s.cond.const_value() != 0 ? "" : " when " + s.cond.str());
    case StmtKind::LaneReduce:
      return dst_of(s) + " = lane_reduce." + scalar_op_name(s.op) + ".x" +
             std::to_string(int(s.imm)) + "(" + join_operands(s.args) + ")";
  }
  return "?";
}

// `warp`: ids of the kernel's warp atoms, whose lines end in `  warp` so that a reader
// sees which atoms take whole fragments (print_block has no kernel, so no marks).
void print_stmts(std::ostringstream& os, const Block& b, int indent,
                 const std::set<std::string>& warp = {}) {
  const std::string pad(2 * indent, ' ');
  for (const Stmt& s : b) {
    os << pad << stmt_line(s);
    if (s.kind == StmtKind::Atom && warp.count(s.atom)) os << "  warp";
    os << "\n";
    for (const StageCopy& c : s.copies) os << pad << "  " << copy_line(c) << "\n";
    print_stmts(os, s.body, indent + 1, warp);
  }
}

std::string warp_atom_line(const WarpAtom& w) {
  auto tile = [](DType t, int rows, int cols, int values) {
    return std::string(dtype_name(t)) + "[" + std::to_string(rows) + ", " +
           std::to_string(cols) + "] " + std::to_string(values) + "/lane";
  };
  return "warp atom " + w.id + ": m" + std::to_string(w.m) + "n" + std::to_string(w.n) + "k" +
         std::to_string(w.k) + " A " + tile(w.a_type, w.m, w.k, w.a_values) + ", B " +
         tile(w.b_type, w.k, w.n, w.b_values) + ", C/D " +
         tile(w.acc_type, w.m, w.n, w.c_values) +
         (w.a_truncated ? ", A raw f32 bits (truncated to tf32)" : "");
}

std::string warp_copy_line(const WarpCopy& w) {
  return "warp copy " + w.id + ": b" + std::to_string(8 * w.element_bytes) + "[" +
         std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] " +
         (w.to_shared ? "to" : "from") + " shared, one row per lane, " +
         std::to_string(w.values) + "/lane";
}

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::Input: return "input";
    case TensorRole::Output: return "output";
    case TensorRole::Temp: return "temp";
    case TensorRole::Shared: return "shared";
  }
  return "?";
}

void print_header(std::ostringstream& os, const ProgramBase& p) {
  os << "tensors:\n";
  for (const TensorDecl& t : p.tensors)
  {
    os << "  " << t.name << ": " << dtype_name(t.dtype) << "[" << join_exprs(t.shape) << "] "
       << role_name(t.role);
    if (t.zero_init) os << " zeroed";
    if (t.pitched()) os << " strides=[" << join_exprs(t.strides()) << "]";
    if (t.pad) os << " pad=" << t.pad;
    if (t.swizzle.bits)
      os << " swizzle<" << t.swizzle.bits << "," << t.swizzle.base << "," << t.swizzle.shift << ">";
    if (t.overlay) os << " overlay=" << t.overlay;
    os << "\n";
  }
  if (!p.symbols.empty()) {
    os << "symbols: " << join_names(p.symbols);
    // Spelled apart from a generated name: the name the user wrote.
    for (const auto& [spelled, user] : p.symbol_names) os << "  (" << spelled << " is " << user << ")";
    os << "\n";
  }
}

template <class Op>
std::string print_ops(const ProgramBase& p, const std::vector<Op>& ops, const char* kind) {
  std::ostringstream os;
  print_header(os, p);
  for (const Op& op : ops) {
    os << op.name << " = " << kind << "(" << join_names(op.inputs) << ") -> " << op.output
       << "\n";
    print_stmts(os, op.body, 1);
  }
  return os.str();
}

}  // namespace

std::string print_block(const Block& b, int indent) {
  std::ostringstream os;
  print_stmts(os, b, indent);
  return os.str();
}

std::string print(const LoopProgram& p) { return print_ops(p, p.ops, "LoopOp"); }
std::string print(const TileProgram& p) { return print_ops(p, p.ops, "TileOp"); }

std::string print(const KernelProgram& p) {
  std::ostringstream os;
  print_header(os, p);
  for (const KernelOp& k : p.kernels) {
    os << "kernel " << k.name << "<<<grid(" << k.grid[0].str() << ", " << k.grid[1].str()
       << ", " << k.grid[2].str() << "), block(" << k.block_threads << ")>>>("
       << join_names(k.params) << ")";
    if (k.min_blocks_per_sm > 0) os << " min_blocks=" << k.min_blocks_per_sm;
    if (k.trigger_dependents) os << " triggers_dependents";
    if (k.wait_prior_grid) os << " waits_prior_grid";
    if (k.cluster[0] * k.cluster[1] * k.cluster[2] > 1)
      os << " cluster(" << k.cluster[0] << ", " << k.cluster[1] << ", " << k.cluster[2] << ")";
    if (k.mbarriers > 0) os << " mbarriers=" << k.mbarriers;
    os << "\n";
    for (const TmaDescriptor& d : k.tma) {
      std::string box;
      for (size_t i = 0; i < d.box.size(); ++i) box += (i ? ", " : "") + std::to_string(d.box[i]);
      os << "  tensor map " << d.name << ": " << d.tensor << " -> " << d.shared << " box["
         << box << "] (innermost first)"
         << (d.swizzle_bytes ? " swizzle " + std::to_string(d.swizzle_bytes) + "B" : "") << "\n";
    }
    std::set<std::string> warp;
    for (const WarpAtom& w : k.warp_atoms) {
      os << "  " << warp_atom_line(w) << "\n";
      warp.insert(w.id);
    }
    for (const WarpCopy& w : k.warp_copies) {
      os << "  " << warp_copy_line(w) << "\n";
      warp.insert(w.id);
    }
    print_stmts(os, k.body, 1, warp);
  }
  return os.str();
}

}  // namespace loom
