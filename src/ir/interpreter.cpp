// CPU interpreter of Loop, Tile and Kernel IR (semantics in interpreter.h): bindings,
// random inputs and the entry points. The machine that runs a body lives in
// interpret_machine.h (resolution: interpret_resolve.cpp, execution:
// interpret_exec.cpp); shared memory and its race checks in interpret_shared.h.
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "ir/error.h"
#include "ir/interpret_machine.h"

namespace loom {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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
    // A symbol spelled apart from a generated name (ProgramBase::symbol_names) may be
    // bound under the name the user wrote.
    const auto user = p.symbol_names.find(s);
    if (it == b.symbols.end() && user != p.symbol_names.end()) it = b.symbols.find(user->second);
    if (it == b.symbols.end())
      throw Error("interpreter: symbol " + s + " has no value; set Bindings::symbols[\"" +
                  (user != p.symbol_names.end() ? user->second : s) + "\"]");
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

// Calls f(dense offset, strided offset) for every element of `shape`, in row-major order.
template <class F>
void for_each_element(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, F&& f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t at = 0;
  for (int64_t dense = 0; dense < n; ++dense) {
    f(dense, at);
    for (size_t d = shape.size(); d-- > 0;) {
      at += strides[d];
      if (++idx[d] < shape[d]) break;
      at -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> eval_all(const std::vector<Expr>& xs, const Expr::Env& symbols) {
  std::vector<int64_t> out;
  for (const Expr& x : xs) out.push_back(x.eval(symbols));
  return out;
}

}  // namespace

namespace interp {

Machine::Machine(const ProgramBase& p, Bindings& b, bool kernel)
    : kernel_(kernel), symbols_(symbol_env(p, b)) {
  for (const TensorDecl& t : p.tensors) {
    TensorSlot slot;
    slot.decl = &t;
    slot.shape = eval_shape(t, symbols_);
    slot.shape_str = shape_string(slot.shape);
    if (t.role == TensorRole::Shared) {
      // Shared tensors are block scratch: they live here, not in Bindings.
      slot.strides = eval_all(t.strides(), symbols_);
      slot.size = t.footprint().eval(symbols_);
      slot.shared = shared_.add(t, slot.size);
      tensors_[t.name] = std::move(slot);
      continue;
    }
    auto it = b.tensors.find(t.name);
    if (it == b.tensors.end()) {
      if (t.role == TensorRole::Input)
        throw Error("interpreter: input tensor " + t.name +
                    " has no data in Bindings::tensors (make_random_inputs fills inputs)");
      it = b.tensors.emplace(t.name, make_tensor(t.dtype, slot.shape, t.zero_init ? 0.0 : kNaN)).first;
    }
    HostTensor& h = it->second;
    if (h.shape != slot.shape)
      throw Error("interpreter: tensor " + t.name + " is declared with shape " +
                  slot.shape_str + " but its HostTensor has shape " + shape_string(h.shape));
    if (h.dtype != t.dtype)
      throw Error("interpreter: tensor " + t.name + " is declared " + dtype_name(t.dtype) +
                  " but its HostTensor holds " + dtype_name(h.dtype));
    if (int64_t(h.data.size()) != h.numel())
      throw Error("interpreter: HostTensor " + t.name + " holds " +
                  std::to_string(h.data.size()) + " values for shape " + slot.shape_str);
    slot.host = &h;
    if (!t.pitched()) {
      // Dense row-major: HostTensor's own layout.
      slot.strides.assign(slot.shape.size(), 1);
      for (size_t i = slot.shape.size(); i-- > 1;)
        slot.strides[i - 1] = slot.strides[i] * slot.shape[i];
      slot.size = h.numel();
      slot.data = h.data.data();
      tensors_[t.name] = std::move(slot);
      continue;
    }
    // A view into a larger buffer: its footprint, NaN between the rows (so a kernel that
    // reads there computes NaN, and finish() sees one that writes there).
    t.check_pitch(symbols_);
    slot.strides = eval_all(t.strides(), symbols_);
    slot.size = slot.shape.empty() || h.numel() == 0 ? 0 : t.footprint().eval(symbols_);
    slot.pitched.assign(size_t(slot.size), kNaN);
    for_each_element(slot.shape, slot.strides, [&](int64_t dense, int64_t at) {
      slot.pitched[size_t(at)] = h.data[size_t(dense)];
    });
    TensorSlot& placed = tensors_[t.name] = std::move(slot);
    placed.data = placed.pitched.data();
  }
}

void Machine::finish() {
  // A zeroed temp (TensorDecl::zero_init: split-K's workspace and tile counters, the
  // attention walk's work counter) starts every launch at zero only because every launch
  // leaves it so: the runtime clears it once.
  if (kernel_)
    for (const auto& [name, ts] : tensors_) {
      if (ts.shared >= 0 || !ts.decl->zero_init) continue;
      for (int64_t i = 0; i < ts.size; ++i)
        if (ts.data[i] != 0.0)
          throw Error("interpreter: the program leaves zeroed temp " + name + " non-zero (element " +
                      std::to_string(i) + " = " + Operand::constant(ts.data[i]).str() +
                      "): the next launch would start from it; the kernel that uses it must "
                      "reset it (the last arrival or fetch)");
    }
  for (auto& entry : tensors_) {
    // Not a structured binding: a lambda below captures the slot, which clang before 16
    // refuses for a binding (the fuzz target's build).
    const std::string& name = entry.first;
    TensorSlot& ts = entry.second;
    if (ts.shared >= 0 || !ts.decl->pitched()) continue;
    std::vector<char> in_view(ts.pitched.size(), 0);
    for_each_element(ts.shape, ts.strides, [&](int64_t dense, int64_t at) {
      ts.host->data[size_t(dense)] = ts.pitched[size_t(at)];
      in_view[size_t(at)] = 1;
    });
    for (size_t i = 0; i < ts.pitched.size(); ++i)
      if (!in_view[i] && !std::isnan(ts.pitched[i]))
        throw Error("interpreter: element " + std::to_string(i) + " of " + name +
                    "'s storage, between the rows of the view " + name + ts.shape_str +
                    ", was written: a write went outside the tensor");
  }
}

void Machine::run_op(const std::string& where, const Block& body) {
  where_ = where;
  ctas_ = cta_threads_ = 1;
  cta_ = 0;
  raw_tf32_fragments_.clear();  // a Loop/Tile op has no wgmma: every tf32 load rounds
  begin_resolution(1, {});
  std::vector<Node> nodes = resolve_block(body);
  ints_.assign(int_dependent_.size(), 0);
  for (const auto& [name, slot] : int_scopes_[0]) ints_[size_t(slot)] = symbols_.at(name);
  vals_.assign(size_t(num_values_), kNaN);
  shared_.begin_block(where_, 1);
  begin_hopper_block();
  run_block(nodes, {0}, 0);
  end_hopper_block();
  shared_.end_block();
}

void Machine::run_kernel(const KernelOp& k) {
  where_ = "kernel " + k.name;
  if (k.block_threads < 1)
    throw Error("interpreter: " + where_ + " has " + std::to_string(k.block_threads) +
                " threads per block");
  const int C = cluster_size(k);
  const size_t T = size_t(k.block_threads);
  const char* builtins[] = {"blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x"};
  begin_resolution(int(T), {builtins, builtins + 4});
  kernel_op_ = &k;
  raw_tf32_fragments_.clear();
  std::function<void(const Block&)> find_raw = [&](const Block& b) {
    for (const Stmt& s : b) {
      if (s.kind == StmtKind::Atom && !s.args.empty())
        if (const WarpAtom* w = find_warp_atom(k, s.atom); w && w->a_truncated)
          raw_tf32_fragments_.insert(s.args[0].name);
      find_raw(s.body);
    }
  };
  find_raw(k.body);
  std::vector<Node> nodes = resolve_block(k.body);

  // A cluster's threads side by side: CTA r's thread i is r * T + i. blockIdx stays
  // uniform in resolution's sense: no statement runs threads of two CTAs together.
  const size_t N = T * size_t(C);
  threads_ = int(N);
  unmet_wait_.assign(N, nullptr);
  ctas_ = C;
  cta_threads_ = int(T);
  cta_ = 0;
  ints_.assign(int_dependent_.size() * N, 0);
  auto row = [&](const std::string& name) { return &ints_[size_t(int_scopes_[0].at(name)) * N]; };
  for (const auto& [name, value] : symbols_) std::fill(row(name), row(name) + N, value);
  for (size_t t = 0; t < N; ++t) row("threadIdx.x")[t] = int64_t(t % T);
  int64_t* block[3] = {row("blockIdx.x"), row("blockIdx.y"), row("blockIdx.z")};
  int64_t g[3];
  for (int d = 0; d < 3; ++d) g[d] = k.grid[d].eval(symbols_);

  std::vector<int> all(T);
  std::iota(all.begin(), all.end(), 0);
  // Tile arrivals pick the CTA that finishes a tile by counting; running the blocks last
  // to first makes a kernel that assumed the last split (or any fixed one) finishes fail.
  bool arrives = false;
  walk(k.body, [&](const Stmt& s) { arrives |= s.kind == StmtKind::TileArrive; });
  auto at = [&](int64_t i, int d) { return arrives ? g[d] - 1 - i : i; };
  for (int64_t zi = 0; zi < g[2]; ++zi)
    for (int64_t yi = 0; yi < g[1]; ++yi)
      for (int64_t xi = 0; xi < g[0]; xi += C) {
        const int64_t z = at(zi, 2), y = at(yi, 1), x = arrives ? g[0] - C - xi : xi;
        for (size_t t = 0; t < N; ++t) block[0][t] = x + int64_t(t / T);
        std::fill(block[1], block[1] + N, y);
        std::fill(block[2], block[2] + N, z);
        const std::string yz = ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
        where_ = "kernel " + k.name +
                 (C == 1 ? " block (" + std::to_string(x) + yz
                         : " cluster of blocks (" + std::to_string(x) + ".." +
                               std::to_string(x + C - 1) + yz);
        vals_.assign(size_t(num_values_) * N, kNaN);
        shared_.begin_block(where_, int(N), k.mbarriers, C);
        std::fill(unmet_wait_.begin(), unmet_wait_.end(), nullptr);
        named_.assign(size_t(C) * kNamedBarriers, NamedBarrier{});
        begin_hopper_block();
        if (C == 1)
          run_block(nodes, all, 0);
        else
          run_cluster(nodes);
        end_named_barriers();
        end_hopper_block();
        shared_.end_block();
      }
}

}  // namespace interp

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void make_random_inputs(const ProgramBase& p, Bindings& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Expr::Env symbols = symbol_env(p, b);
  for (const TensorDecl& t : p.tensors) {
    if (t.role == TensorRole::Shared) continue;
    HostTensor h = make_tensor(t.dtype, eval_shape(t, symbols), t.zero_init ? 0.0 : kNaN);
    // i32 inputs are indices (a block table, key lengths): 0 is valid in every one of
    // them; a test that means other values sets them (attention's paged tests do).
    if (t.role == TensorRole::Input && t.dtype == DType::I32) h.data.assign(h.data.size(), 0.0);
    else if (t.role == TensorRole::Input)
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
  interp::Machine m(p, b, false);
  for (const LoopOp& op : p.ops) m.run_op("op " + op.name, op.body);
  m.finish();
}

void interpret(const TileProgram& p, Bindings& b) {
  interp::Machine m(p, b, false);
  for (const TileOp& op : p.ops) m.run_op("op " + op.name, op.body);
  m.finish();
}

void interpret(const KernelProgram& p, Bindings& b) { interpret(p, b, 0); }

void interpret(const KernelProgram& p, Bindings& b, uint64_t schedule_seed) {
  interp::Machine m(p, b, true);
  m.set_schedule_seed(schedule_seed);
  for (const KernelOp& k : p.kernels) m.run_kernel(k);
  m.finish();
}

}  // namespace loom
