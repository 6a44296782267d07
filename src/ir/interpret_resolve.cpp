// Resolution of statement trees for the interpreter's machine: every integer variable,
// scalar value, register array and tensor name is looked up once per op or kernel, by
// lexical scope (a For, If or Stage body opens one; a Let or a value definition lasts
// to the end of its block), so execution never searches by name.

#include "ir/error.h"
#include "ir/interpret_machine.h"
#include "ir/realign.h"

namespace loom::interp {
namespace {

constexpr AtomImpl kAtoms[] = {
    {"fma_f32", 2, [](double& dst, const double* a) { dst += a[0] * a[1]; }},
};
constexpr bool atoms_fit() {
  for (const AtomImpl& a : kAtoms)
    if (a.arity > kMaxAtomOperands) return false;
  return true;
}
static_assert(atoms_fit(), "an atom has more operands than exec() buffers: raise kMaxAtomOperands");

const AtomImpl* find_atom(const std::string& id) {
  for (const AtomImpl& a : kAtoms)
    if (id == a.id) return &a;
  return nullptr;
}

std::string extents_string(const std::vector<int64_t>& e) {
  std::string s = "[";
  for (size_t i = 0; i < e.size(); ++i) s += (i ? ", " : "") + std::to_string(e[i]);
  return s + "]";
}

}  // namespace

void Machine::begin_resolution(int threads, const std::vector<std::string>& builtins) {
  threads_ = threads;
  int_scopes_.assign(1, {});
  value_scopes_.clear();
  int_dependent_.clear();
  num_values_ = 0;
  for (const auto& [name, value] : symbols_) bind_int(name, false);
  // threadIdx.x is the one source of values that differ between the threads of a block.
  for (const std::string& b : builtins) bind_int(b, b == "threadIdx.x");
}

int Machine::bind_int(const std::string& name, bool thread_dependent) {
  int slot = int(int_dependent_.size());
  int_dependent_.push_back(thread_dependent);
  int_scopes_.back()[name] = slot;
  return slot;
}

IntExpr Machine::compile(const Stmt& s, const Expr& e) {
  auto slot_of = [&](const std::string& v) {
    for (auto it = int_scopes_.rbegin(); it != int_scopes_.rend(); ++it) {
      auto f = it->find(v);
      if (f != it->end()) return f->second;
    }
    fail(s, "index expression " + e.str() + " uses `" + v +
                "`, which is neither an enclosing loop or let variable nor a size symbol");
  };
  auto dependent = [&](int slot) { return bool(int_dependent_[size_t(slot)]); };
  return IntExpr(e, slot_of, dependent);
}

const Machine::ValueDef* Machine::find_value(const std::string& name) const {
  for (auto it = value_scopes_.rbegin(); it != value_scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

ValueRef Machine::value_ref(const Stmt& s, const std::string& name,
                            const std::vector<Expr>& index, bool element) {
  const ValueDef* d = find_value(name);
  if (!d) fail(s, "value " + name + " is used before it is defined");
  ValueRef r;
  r.base = d->base;
  r.name = name;
  r.extents = d->extents;
  if (!element) {
    if (!d->extents.empty())
      fail(s, "`" + name + "` is a register array " + extents_string(d->extents) +
                  "; name one element, e.g. " + name + "[0" +
                  std::string(2 * (d->extents.size() - 1), ' ') + "]");
    return r;
  }
  if (d->extents.empty())
    fail(s, "`" + name + "` is a scalar, not a register array; it has no elements to index");
  if (index.size() != d->extents.size())
    fail(s, std::to_string(index.size()) + " indices for register array `" + name + "` of " +
                extents_string(d->extents));
  for (const Expr& e : index) {
    r.index.push_back(compile(s, e));
    r.uniform = r.uniform && r.index.back().uniform();
  }
  return r;
}

ValueRef Machine::define_scalar(const Stmt& s, const std::string& name) {
  if (name.empty()) fail(s, "statement defines no value (empty dst)");
  const ValueDef* d = find_value(name);
  if (d && !d->extents.empty())
    fail(s, "`" + name + "` is a register array; assign one element of it (dst_index)");
  auto [it, fresh] = value_scopes_.back().try_emplace(name, ValueDef{num_values_, {}});
  if (fresh) ++num_values_;
  ValueRef r;
  r.base = it->second.base;
  r.name = name;
  return r;
}

ValueRef Machine::destination(const Stmt& s, bool defines) {
  ValueRef r = !s.dst_index.empty() ? value_ref(s, s.dst, s.dst_index, true)
               : defines            ? define_scalar(s, s.dst)
                                    : value_ref(s, s.dst, {}, false);
  if (s.width > 1 && r.extents.empty())
    fail(s, "a vector access of width " + std::to_string(s.width) +
                " needs a register-array element as its destination");
  return r;
}

ValueRef Machine::fragment(const Stmt& s, const std::string& name,
                           const std::vector<Expr>& prefix, int values, const char* role) {
  const ValueDef* d = find_value(name);
  const std::string frag = std::string(role) + " fragment `" + name + "`";
  if (!d) fail(s, frag + " is used before it is defined");
  if (d->extents.empty()) fail(s, frag + " is a scalar, not a register array");
  if (prefix.size() >= d->extents.size())
    fail(s, frag + " " + extents_string(d->extents) + " is indexed with " +
                std::to_string(prefix.size()) + " indices; the trailing dimensions must "
                "remain to hold the fragment");
  int64_t count = 1;
  for (size_t i = prefix.size(); i < d->extents.size(); ++i) count *= d->extents[i];
  if (count != values)
    fail(s, frag + " " + extents_string(d->extents) + " selects " + std::to_string(count) +
                " elements; the atom holds " + std::to_string(values) + " per lane");
  ValueRef r;
  r.base = d->base;
  r.name = name;
  r.extents = d->extents;
  for (const Expr& e : prefix) {
    r.index.push_back(compile(s, e));
    r.uniform = r.uniform && r.index.back().uniform();
  }
  return r;
}

TensorSlot& Machine::tensor(const Stmt& s, const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(s, "tensor " + name + " is not declared");
  return it->second;
}

Access Machine::access(const Stmt& s, const std::string& name, const std::vector<Expr>& index,
                       bool flat) {
  Access a;
  a.tensor = &tensor(s, name);
  size_t want = flat ? 1 : a.tensor->shape.size();
  if (index.size() != want)
    fail(s, std::to_string(index.size()) + " indices for " + name + " of shape " +
                a.tensor->shape_str + (flat ? " (Kernel IR uses one flat offset)" : ""));
  for (const Expr& e : index) a.index.push_back(compile(s, e));
  return a;
}

std::vector<Node> Machine::resolve_block(const Block& b) {
  int_scopes_.emplace_back();
  value_scopes_.emplace_back();
  std::vector<Node> out;
  out.reserve(b.size());
  for (const Stmt& s : b) out.push_back(resolve_stmt(s));
  value_scopes_.pop_back();
  int_scopes_.pop_back();
  return out;
}

// A TMA load's or store's global corner and box: one coordinate per dimension of the
// global tensor (n.src), the box from the tensor map the statement names.
void Machine::resolve_tma_box(const Stmt& s, Node& n, const char* what) {
  if (s.src_index.size() != n.src.tensor->shape.size())
    fail(s, std::string(what) + " names " + std::to_string(s.src_index.size()) +
                " coordinates of " + s.src + " of shape " + n.src.tensor->shape_str);
  for (const Expr& e : s.src_index) n.corner.push_back(compile(s, e));
  const TmaDescriptor* d = nullptr;
  if (kernel_op_)
    for (const TmaDescriptor& x : kernel_op_->tma)
      if (x.name == s.dst) d = &x;
  if (!d)
    fail(s, std::string(what) + " uses tensor map " + s.dst + ", which the kernel does not declare");
  if (d->box.size() != s.src_index.size())
    fail(s, "tensor map " + s.dst + " has a box of rank " + std::to_string(d->box.size()));
  n.box.assign(d->box.rbegin(), d->box.rend());
}

Node Machine::resolve_stmt(const Stmt& s) {
  Node n;
  n.s = &s;
  if (s.width < 1) fail(s, "width " + std::to_string(s.width) + " < 1");
  auto operands = [&] {
    for (const Operand& a : s.args) {
      if (a.is_imm()) {
        ValueRef r;
        r.imm = a.imm;
        n.args.push_back(r);
      } else {
        n.args.push_back(value_ref(s, a.name, a.index, !a.index.empty()));
      }
    }
  };
  switch (s.kind) {
    case StmtKind::For:
      n.extent = compile(s, s.extent);
      int_scopes_.emplace_back();
      // A loop runs the same iterations in every thread (checked when it runs), so its
      // variable is uniform even when the extent mentions threadIdx.
      n.var = bind_int(s.var, false);
      atom_loops_ += s.tier == Tier::Atom;
      n.body = resolve_block(s.body);
      atom_loops_ -= s.tier == Tier::Atom;
      int_scopes_.pop_back();
      break;
    case StmtKind::If:
      n.cond = compile(s, s.cond);
      n.body = resolve_block(s.body);
      break;
    case StmtKind::Let:
      if (s.let_load()) {
        n.access = access(s, s.tensor, s.index, kernel_);
        if (s.let_fetch()) {
          if (!kernel_ || n.access.tensor->shared >= 0)
            fail(s, "a fetch is Kernel IR and advances a global counter");
          n.value = compile(s, s.value);
          n.pred = compile(s, s.pred);
        }
        n.var = bind_int(s.var, true);
        break;
      }
      n.value = compile(s, s.value);
      n.var = bind_int(s.var, !n.value.uniform());
      break;
    case StmtKind::Load:
      n.access = access(s, s.tensor, s.index, kernel_);
      n.pred = compile(s, s.pred);
      n.dst = destination(s, true);
      n.raw_tf32 = raw_tf32_fragments_.count(s.dst) > 0;
      if (is_chunk_load(s)) {
        if (!kernel_ || n.access.tensor->shared >= 0)
          fail(s, "a chunk load is Kernel IR and reads a global tensor");
        n.value = compile(s, s.value);
      } else if (!s.mode.empty()) {
        fail(s, "a load's mode is \"chunks\" or none, not \"" + s.mode + "\"");
      }
      break;
    case StmtKind::Write:
      if (s.write_int()) {
        if (!s.args.empty() || s.width != 1) fail(s, "an integer store has no operands and width 1");
        n.access = access(s, s.tensor, s.index, kernel_);
        n.value = compile(s, s.value);
        break;
      }
      if (s.args.size() != 1) fail(s, "a write stores exactly one operand");
      n.access = access(s, s.tensor, s.index, kernel_);
      if (s.remote) {  // st.async: the receiving CTA's rank and its mbarrier slot
        n.value = compile(s, s.value);
        n.mask = compile(s, s.mbar);
      }
      operands();
      n.in_atom_nest = kernel_ && atom_loops_ > 0;
      if (is_realigned_store(s)) {
        if (!kernel_ || n.access.tensor->shared < 0 || s.src_index.size() != 1)
          fail(s, "a realigned store is Kernel IR, writes a shared tensor and names its source offset");
        n.cond = compile(s, s.src_index[0]);
        n.value = compile(s, s.value);
      } else if (!s.mode.empty()) {
        fail(s, "a store's mode is \"realign\" or none, not \"" + s.mode + "\"");
      }
      if (s.width > 1 && n.args[0].extents.empty())
        fail(s, "a vector store of width " + std::to_string(s.width) +
                    " reads consecutive elements of a register array; its operand is not one");
      break;
    case StmtKind::Compute:
      if (int(s.args.size()) != scalar_op_arity(s.op))
        fail(s, "wrong number of operands for " + std::string(scalar_op_name(s.op)));
      operands();
      n.dst = destination(s, true);
      break;
    case StmtKind::Init: n.dst = destination(s, true); break;
    case StmtKind::LaneReduce:
      operands();
      n.dst = destination(s, true);
      break;
    case StmtKind::Accum:
      if (s.args.size() != 1) fail(s, "accumulate takes exactly one operand");
      operands();
      n.dst = destination(s, false);
      break;
    case StmtKind::Atom:
      n.copy = kernel_op_ ? find_warp_copy(*kernel_op_, s.atom) : nullptr;
      if (n.copy) {
        if (threads_ % WarpAtom::kLanes != 0)
          fail(s, "warp copy " + s.atom + " runs on whole warps of 32 lanes but the block has " +
                      std::to_string(threads_) + " threads");
        n.access = access(s, s.tensor, s.index, true);
        if (n.access.tensor->shared < 0)
          fail(s, "warp copy " + s.atom + " accesses shared memory; " + s.tensor + " is not shared");
        if (n.copy->to_shared) {
          if (int(s.args.size()) != n.copy->values)
            fail(s, "warp copy " + s.atom + " stores " + std::to_string(n.copy->values) +
                        " operands per lane, not " + std::to_string(s.args.size()));
          operands();
          break;
        }
        if (!s.args.empty()) fail(s, "warp copy " + s.atom + " takes no operands");
        n.dst = fragment(s, s.dst, s.dst_index, n.copy->values, "dst");
        n.raw_tf32 = raw_tf32_fragments_.count(s.dst) > 0;
        break;
      }
      n.warp = kernel_op_ ? find_warp_atom(*kernel_op_, s.atom) : nullptr;
      if (n.warp) {
        const int size = n.warp->threads;
        if (size < 1 || threads_ % size != 0)
          fail(s, "warp atom " + s.atom + " runs on whole groups of " + std::to_string(size) +
                      " threads but the block has " + std::to_string(threads_) + " threads");
        if (s.args.size() != 2 || s.args[0].is_imm() || s.args[1].is_imm())
          fail(s, "warp atom " + s.atom + " takes two operands (A, B)");
        const bool shared[2] = {n.warp->a_shared, n.warp->b_shared};
        const int values[2] = {n.warp->a_values, n.warp->b_values};
        for (int i = 0; i < 2; ++i) {
          const Operand& o = s.args[size_t(i)];
          const char* role = i == 0 ? "A" : "B";
          if (!shared[i]) {
            n.args.push_back(fragment(s, o.name, o.index, values[i], role));
            continue;
          }
          // {origin, row stride, column stride} of the tile in the shared tensor.
          if (o.index.size() != 3)
            fail(s, std::string(role) + " operand " + o.str() + " of " + s.atom + " is read from "
                        "shared memory and needs {origin, row_stride, col_stride}");
          n.tiles[i].tensor = &tensor(s, o.name);
          if (n.tiles[i].tensor->shared < 0)
            fail(s, std::string(role) + " operand of " + s.atom + " is read from shared memory; " +
                        o.name + " is not a shared tensor");
          for (const Expr& e : o.index) n.tiles[i].index.push_back(compile(s, e));
          n.args.emplace_back();
        }
        n.dst = fragment(s, s.dst, s.dst_index, n.warp->c_values, "C/D");
        n.scale_d = compile(s, s.scale_d);
        break;
      }
      n.atom = find_atom(s.atom);
      if (!n.atom)
        throw Error("interpreter: unknown atom " + s.atom + " in " + where_ +
                    ": neither a one-thread atom the interpreter implements (add it to the "
                    "table in src/ir/interpret_resolve.cpp) nor a warp atom the kernel "
                    "declares (KernelOp::warp_atoms)");
      if (s.args.size() != n.atom->arity)
        fail(s, "atom " + s.atom + " takes " + std::to_string(n.atom->arity) + " operands");
      operands();
      n.dst = destination(s, false);
      break;
    case StmtKind::Alloc: {
      if (s.dst.empty()) fail(s, "alloc names no array");
      if (s.index.empty()) fail(s, "alloc of `" + s.dst + "` has no extents");
      ValueDef d{num_values_, {}};
      n.alloc_size = 1;
      for (const Expr& e : s.index) {
        int64_t v;
        try {
          v = e.eval(symbols_);
        } catch (const Error&) {
          fail(s, "register array extent " + e.str() +
                      " is not a constant: registers are allocated at compile time");
        }
        if (v < 1) fail(s, "register array extent " + e.str() + " = " + std::to_string(v) + " < 1");
        d.extents.push_back(v);
        n.alloc_size *= v;
      }
      num_values_ += int(n.alloc_size);
      value_scopes_.back()[s.dst] = d;
      n.dst.base = d.base;
      n.dst.name = s.dst;
      n.dst.extents = d.extents;
      break;
    }
    case StmtKind::Stage:
      for (const StageCopy& c : s.copies) {
        CopyNode cn;
        cn.copy = &c;
        cn.shared = &tensor(s, c.shared);
        cn.src = &tensor(s, c.src);
        if (cn.shared->shared < 0) fail(s, "stage destination " + c.shared + " is not a shared tensor");
        if (cn.src->shared >= 0) fail(s, "stage source " + c.src + " is a shared tensor, not global");
        if (c.vars.size() != c.extents.size() ||
            c.shared_prefix.size() + c.vars.size() != cn.shared->shape.size())
          fail(s, "stage copy into " + c.shared + " has " +
                      std::to_string(c.shared_prefix.size()) + " prefix indices, " +
                      std::to_string(c.vars.size()) + " variables and " +
                      std::to_string(c.extents.size()) + " extents for a tensor of rank " +
                      std::to_string(cn.shared->shape.size()));
        if (c.src_index.size() != cn.src->shape.size())
          fail(s, "stage copy reads " + c.src + " of shape " + cn.src->shape_str + " with " +
                      std::to_string(c.src_index.size()) + " indices");
        for (const Expr& e : c.shared_prefix) cn.prefix.push_back(compile(s, e));
        for (const Expr& e : c.extents) cn.extents.push_back(compile(s, e));
        int_scopes_.emplace_back();
        for (const std::string& v : c.vars) cn.vars.push_back(bind_int(v, false));
        for (const Expr& e : c.src_index) cn.src_index.push_back(compile(s, e));
        int_scopes_.pop_back();
        // The block fills a stage together: the slab may not depend on the thread.
        for (const IntExpr& e : cn.prefix)
          if (!e.uniform()) fail(s, "stage buffer index " + e.str() + " depends on threadIdx");
        for (const IntExpr& e : cn.extents)
          if (!e.uniform()) fail(s, "stage extent " + e.str() + " depends on threadIdx");
        for (const IntExpr& e : cn.src_index)
          if (!e.uniform()) fail(s, "stage source index " + e.str() + " depends on threadIdx");
        n.copies.push_back(std::move(cn));
      }
      n.body = resolve_block(s.body);
      break;
    case StmtKind::Barrier:
      if (s.named_barrier()) n.value = compile(s, s.value);
      break;
    case StmtKind::AsyncCommit: break;
    case StmtKind::AsyncWait:
      if (s.imm < 0) fail(s, "cp.async.wait keeps a negative number of groups in flight");
      break;
    case StmtKind::AsyncCopy:
      n.access = access(s, s.tensor, s.index, true);
      n.src = access(s, s.src, s.src_index, true);
      if (n.access.tensor->shared < 0)
        fail(s, "cp.async destination " + s.tensor + " is not a shared tensor");
      if (n.src.tensor->shared >= 0)
        fail(s, "cp.async source " + s.src + " is a shared tensor; cp.async reads global memory");
      n.pred = compile(s, s.pred);
      break;
    case StmtKind::TmaLoad: {
      n.access = access(s, s.tensor, s.index, true);
      if (n.access.tensor->shared < 0)
        fail(s, "tma.load destination " + s.tensor + " is not a shared tensor");
      n.src.tensor = &tensor(s, s.src);
      if (n.src.tensor->shared >= 0)
        fail(s, "tma.load source " + s.src + " is a shared tensor; TMA loads read global memory");
      resolve_tma_box(s, n, "tma.load");
      n.value = compile(s, s.value);
      n.mask = compile(s, s.multicast);
      break;
    }
    case StmtKind::MbarInit:
    case StmtKind::MbarArriveExpectTx:
      n.value = compile(s, s.value);
      break;
    case StmtKind::MbarWait:
      n.value = compile(s, s.value);
      n.cond = compile(s, s.cond);
      break;
    case StmtKind::MbarArrive:
      n.value = compile(s, s.value);
      n.mask = compile(s, s.multicast);
      break;
    case StmtKind::ClusterSync:
    case StmtKind::FenceMbarInit:
    case StmtKind::FenceProxyAsync:
    case StmtKind::BulkCommit: break;
    case StmtKind::WgmmaFence:
    case StmtKind::WgmmaCommit:
    case StmtKind::WgmmaWait:
    case StmtKind::SetMaxNReg:
      if (threads_ % 128 != 0)
        fail(s, "this warpgroup instruction runs on whole warpgroups of 128 threads but the "
                "block has " + std::to_string(threads_) + " threads");
      [[fallthrough]];
    case StmtKind::BulkWait:
      if (s.imm < 0) fail(s, "a negative count");
      break;
    case StmtKind::TmaStore: {
      n.access = access(s, s.tensor, s.index, true);
      if (n.access.tensor->shared < 0)
        fail(s, "tma.store source " + s.tensor + " is not a shared tensor");
      n.src.tensor = &tensor(s, s.src);
      if (n.src.tensor->shared >= 0)
        fail(s, "tma.store destination " + s.src + " is a shared tensor; TMA stores write "
                    "global memory");
      resolve_tma_box(s, n, "tma.store");
      break;
    }
    case StmtKind::TileArrive:
      n.access = access(s, s.tensor, s.index, kernel_);
      if (n.access.tensor->shared >= 0)
        fail(s, "tile.arrive counts in global memory; " + s.tensor + " is a shared tensor");
      n.value = compile(s, s.value);
      n.cond = compile(s, s.cond);
      n.var = bind_int(s.var, false);
      break;
    case StmtKind::Specialize:
      for (const Stmt& arm : s.body) {
        if (arm.kind != StmtKind::If) {
          const std::string line = print_block({arm});
          fail(s, "an arm of a specialize is `" + line.substr(0, line.find('\n')) +
                      "`, not an If; each arm is an If whose condition selects its warps");
        }
        n.body.push_back(resolve_stmt(arm));
      }
      break;
  }
  return n;
}

}  // namespace loom::interp
