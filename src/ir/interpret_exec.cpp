// Execution of resolved statements for a group of threads in lockstep: each statement
// runs for every active thread before the next one starts (interpreter.h has the
// semantics, interpret_machine.h the state layout).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ir/error.h"
#include "ir/interpret_machine.h"
#include "ir/realign.h"

namespace loom::interp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

// Value slots of a statement's operands, computed once per execution when the element
// is the same for every thread (the common case: register loops are uniform).
struct OperandSlots {
  static constexpr int64_t kImmediate = -1, kPerThread = -2;
  int64_t slot[kMaxAtomOperands];
};

}  // namespace

void Machine::fail(const Stmt& s, const std::string& msg, int thread) const {
  throw Error("interpreter: " + where_ +
              (kernel_ && thread >= 0 ? " " + shared_.who(thread) : "") + ": `" +
              first_line(s) + "`: " + msg);
}

int64_t Machine::slot(const Node& n, const ValueRef& r, int t, int64_t width) const {
  if (r.extents.empty()) return r.base;
  int64_t flat = 0;
  for (size_t d = 0; d < r.index.size(); ++d) {
    int64_t i = eval(r.index[d], t);
    int64_t hi = d + 1 == r.index.size() ? i + width - 1 : i;
    if (i < 0 || hi >= r.extents[d]) [[unlikely]]
      slot_out_of_range(n, r, t, width, d, i);
    flat = flat * r.extents[d] + i;
  }
  return r.base + flat;
}

void Machine::slot_out_of_range(const Node& n, const ValueRef& r, int t, int64_t width,
                                size_t d, int64_t i) const {
  const int64_t hi = d + 1 == r.index.size() ? i + width - 1 : i;
  std::string ext = "[";
  for (size_t k = 0; k < r.extents.size(); ++k)
    ext += (k ? ", " : "") + std::to_string(r.extents[k]);
  fail(*n.s, "index " + std::to_string(d) + " (" + r.index[d].str() + ") = " +
                 std::to_string(i) +
                 (hi != i ? " (+" + std::to_string(width - 1) + " for the vector)" : "") +
                 " is out of range for register array " + r.name + ext + "]",
       t);
}

int64_t Machine::offset(const Node& n, const Access& a, int t, int width, bool flat) const {
  const TensorSlot& ts = *a.tensor;
  if (flat) {
    int64_t v = eval(a.index[0], t);
    if (v < 0 || v + width > ts.size) [[unlikely]]
      offset_out_of_range(n, a, t, width, 0, v, true);
    if (ts.shared >= 0 && ts.decl->pad && ts.shape.size() >= 2) {
      int64_t row = ts.strides[ts.shape.size() - 2];
      // Rows hold shape.back() used columns then the pad: the access stays in the used
      // part exactly when its first column plus width does (the loop finds where not).
      for (int i = 0; v % row + width > ts.shape.back() && i < width; ++i)
        if ((v + i) % row >= ts.shape.back())
          fail(*n.s,
               "offset " + a.index[0].str() + " = " + std::to_string(v + i) +
                   " lands in the row padding of shared tensor " + ts.decl->name + " (column " +
                   std::to_string((v + i) % row) + " of rows of " + std::to_string(row) +
                   " elements, " + std::to_string(ts.shape.back()) + " used)",
               t);
    }
    if (ts.decl->pitched() && ts.shared < 0) {
      // A pitched view's flat offsets include the caller's elements between its rows:
      // an access there reads or writes memory that is not the tensor's.
      for (int i = 0; i < width; ++i) {
        int64_t rest = v + i;
        for (size_t k = 0; k < ts.shape.size(); ++k) {
          const int64_t idx = rest / ts.strides[k];
          rest %= ts.strides[k];
          if (idx >= ts.shape[k])
            fail(*n.s,
                 "offset " + a.index[0].str() + " = " + std::to_string(v + i) +
                     " lands outside the view " + ts.decl->name + ts.shape_str + " (index " +
                     std::to_string(idx) + " of dimension " + std::to_string(k) +
                     " with strides " + [&] {
                       std::string st;
                       for (int64_t x : ts.strides) st += (st.empty() ? "" : ", ") + std::to_string(x);
                       return "[" + st + "]";
                     }() + "): the caller's elements between its rows are not the tensor's",
                 t);
        }
      }
    }
    return v;
  }
  int64_t off = 0;
  for (size_t k = 0; k < a.index.size(); ++k) {
    int64_t i = eval(a.index[k], t);
    bool last = k + 1 == a.index.size();
    int64_t hi = last ? i + width - 1 : i;
    if (i < 0 || hi >= ts.shape[k]) [[unlikely]]
      offset_out_of_range(n, a, t, width, k, i, false);
    off += i * ts.strides[k];
  }
  return off;
}

void Machine::offset_out_of_range(const Node& n, const Access& a, int t, int width, size_t k,
                                  int64_t i, bool flat) const {
  const TensorSlot& ts = *a.tensor;
  const TensorDecl& d = *ts.decl;
  const bool shared = ts.shared >= 0;
  const std::string vec = width > 1 ? " (+" + std::to_string(width - 1) + " for the vector)" : "";
  if (flat)
    fail(*n.s,
         "offset " + a.index[0].str() + " = " + std::to_string(i) + vec +
             " is out of range for " + (shared ? "shared tensor " : "tensor ") + d.name +
             " of shape " + ts.shape_str + " (" + std::to_string(ts.size) + " elements" +
             (shared && d.pad ? ", rows padded by " + std::to_string(d.pad) : "") + ")",
         t);
  const bool last = k + 1 == a.index.size();
  fail(*n.s,
       "index " + std::to_string(k) + " (" + a.index[k].str() + ") = " + std::to_string(i) +
           (last ? vec : "") + " is out of range for " + (shared ? "shared tensor " : "tensor ") +
           d.name + " of shape " + ts.shape_str,
       t);
}

double Machine::load_element(const Node& n, const TensorSlot& ts, int64_t off, int t) {
  double v = ts.shared >= 0 ? shared_.read(ts.shared, off, t, *n.s) : ts.data[size_t(off)];
  return ts.decl->dtype == DType::TF32 && !n.raw_tf32 ? double(round_to_tf32(float(v))) : v;
}

double Machine::operand(const Node& n, size_t i, int t, int64_t plus) const {
  const ValueRef& r = n.args[i];
  if (r.base < 0) return r.imm;
  return vals_[size_t(slot(n, r, t, plus + 1) + plus) * size_t(threads_) + size_t(t)];
}

void Machine::run_block(const std::vector<Node>& nodes, const std::vector<int>& active,
                        size_t depth) {
  for (const Node& n : nodes) {
    exec(n, active, depth);
    if (breaking_) return;  // a break of the loop whose body this is (verified): exec_for stops
  }
}

void Machine::require_all_threads(const Node& n, const std::vector<int>& active,
                                  const char* what) {
  if (int(active.size()) == cta_threads_) return;
  fail(*n.s, std::string(what) + " reached by " + std::to_string(active.size()) + " of the " +
                 std::to_string(cta_threads_) +
                 " threads of the block (it sits under a thread-dependent If): every thread "
                 "must reach it, or the block deadlocks; hoist it out of the If");
}

void Machine::exec(const Node& n, const std::vector<int>& active, size_t depth) {
  const Stmt& s = *n.s;
  const size_t T = size_t(threads_);
  switch (s.kind) {  // the synchronization points of a seeded schedule
    case StmtKind::MbarArrive:
    case StmtKind::MbarArriveExpectTx:
    case StmtKind::MbarWait:
    case StmtKind::TmaLoad:
    case StmtKind::TmaStore:
    case StmtKind::WgmmaWait:
    case StmtKind::BulkWait:
      maybe_yield();
      break;
    case StmtKind::Barrier:
      if (s.named_barrier()) maybe_yield();
      break;
    default:
      break;
  }
  if (wgmma_in_flight_ > 0) check_accumulators(n, active);
  if (rs_wgmma_) note_register_writes(n, active);
  switch (s.kind) {
    case StmtKind::For: exec_for(n, active, depth); break;
    case StmtKind::If: exec_if(n, active, depth); break;
    case StmtKind::Let: {
      int64_t* row = &ints_[size_t(n.var) * T];
      if (s.let_fetch()) {
        exec_fetch(n, active, row);
        break;
      }
      if (s.let_load()) {
        // An integer read: the i32 element, checked to be one (NaN: never written).
        for (int t : active) {
          const double v = load_element(n, *n.access.tensor, offset(n, n.access, t, 1, kernel_), t);
          if (!(std::fabs(v) < 2147483648.0) || v != std::nearbyint(v))
            fail(s, "let " + s.var + " reads " + s.tensor + ", which holds " +
                        std::to_string(v) + " there, not an integer", t);
          row[t] = int64_t(v);
        }
        break;
      }
      if (n.value.uniform()) {
        int64_t v = eval(n.value, active[0]);
        for (int t : active) row[t] = v;
      } else {
        for (int t : active) row[t] = eval(n.value, t);
      }
      break;
    }
    case StmtKind::Load: exec_load(n, active); break;
    case StmtKind::Write: exec_write(n, active); break;
    case StmtKind::Compute:
    case StmtKind::Init:
    case StmtKind::Accum: exec_scalar(n, active); break;
    case StmtKind::Atom:
      // scale-d (stmt.h): wgmma's predicate, or mma.sync's constant 0 or 1.
      if (!(s.scale_d.is_const() && s.scale_d.const_value() == 1) &&
          (n.copy || !n.warp ||
           (n.warp->threads <= WarpAtom::kLanes &&
            !(s.scale_d.is_const() && s.scale_d.const_value() == 0))))
        fail(s, "scale_d " + s.scale_d.str() + " on " + s.atom +
                    ": only wgmma takes a predicate, mma.sync a constant 0 or 1, other atoms none");
      n.copy                                         ? exec_warp_copy(n, active)
      : n.warp && n.warp->threads > WarpAtom::kLanes ? exec_wgmma(n, active)
      : n.warp                                       ? exec_warp_atom(n, active)
                                                     : exec_scalar(n, active);
      // A warpgroup's wgmma needs its four warps: they have all come this far.
      if (n.warp && n.warp->threads > WarpAtom::kLanes) warpgroup_met(active);
      break;
    case StmtKind::Alloc:
      for (int64_t e = 0; e < n.alloc_size; ++e)
        for (int t : active) vals_[size_t(n.dst.base + e) * T + size_t(t)] = kNaN;
      break;
    case StmtKind::Stage: exec_stage(n, active, depth); break;
    case StmtKind::Barrier:
      if (s.named_barrier()) {
        exec_named_barrier(n, active);
        if (!s.named_arrive()) warpgroup_met(active);
        break;
      }
      if (arm_)
        fail(s, "bar.sync 0 inside an arm of a specialize: it waits for every thread of the "
                "block, but the other arms never reach it, so the block deadlocks; hand buffers "
                "between arms through mbarriers (mbar.arrive / mbar.wait)");
      require_all_threads(n, active, "barrier");
      shared_.barrier(cta_);
      warpgroup_met(active);
      break;
    case StmtKind::AsyncCopy: exec_async_copy(n, active); break;
    case StmtKind::AsyncCommit:
      for (int t : active) shared_.async_commit(t);
      break;
    case StmtKind::AsyncWait:
      for (int t : active) shared_.async_wait(t, int(s.imm));
      break;
    case StmtKind::TmaLoad: exec_tma_load(n, active); break;
    case StmtKind::MbarInit:
    case StmtKind::MbarArriveExpectTx:
    case StmtKind::MbarWait: exec_mbarrier(n, active); break;
    // Lockstep execution orders the init before every later use already; mbar() checks
    // the barrier that publishes it to the other threads.
    case StmtKind::FenceMbarInit: break;
    case StmtKind::WgmmaFence:
    case StmtKind::WgmmaCommit:
    case StmtKind::WgmmaWait:
    case StmtKind::SetMaxNReg: exec_wgmma_sync(n, active); break;
    case StmtKind::TmaStore: exec_tma_store(n, active); break;
    case StmtKind::MbarArrive:
    case StmtKind::FenceProxyAsync:
    case StmtKind::BulkCommit:
    case StmtKind::BulkWait: exec_bulk(n, active); break;
    case StmtKind::Specialize: exec_specialize(n, active, depth); break;
    case StmtKind::ClusterSync: exec_cluster_sync(n, active); break;
    case StmtKind::TileArrive: exec_tile_arrive(n, active); break;
    case StmtKind::LaneReduce: exec_lane_reduce(n, active); break;
  }
}

// shfl.sync.bfly over groups of `imm` lanes: every lane of a group gets the group's
// combined value. The operands are all read before any result is written, as the
// shuffles exchange the values the lanes held before the statement.
void Machine::exec_lane_reduce(const Node& n, const std::vector<int>& active) {
  const size_t T = size_t(threads_);
  const int lanes = int(n.s->imm);
  for_each_warp(n, active, [] { return std::string("lane_reduce"); }, [&](int warp) {
    double in[WarpAtom::kLanes];
    for (int lane = 0; lane < WarpAtom::kLanes; ++lane)
      in[lane] = operand(n, 0, warp * WarpAtom::kLanes + lane);
    for (int lane = 0; lane < WarpAtom::kLanes; ++lane) {
      const int first = lane / lanes * lanes;
      double r = in[first];
      for (int l = first + 1; l < first + lanes; ++l) r = eval_scalar_op(n.s->op, r, in[l]);
      const int t = warp * WarpAtom::kLanes + lane;
      vals_[size_t(slot(n, n.dst, t, 1)) * T + size_t(t)] = r;
    }
  });
}

// Blocks run one after another here, so an arrival sees every earlier block's writes;
// what the interpreter checks is who arrives (whole aligned groups of the statement's
// thread count, all at once, as the named barrier in front of the atomic requires; each
// group on one counter with one `when`) and that the counter logic, not the block order,
// picks the CTA that finishes the tile (run_kernel runs the blocks of a kernel with
// arrivals in reverse order). Tile IR runs each block as one thread: every execution is
// one group's arrival.
void Machine::exec_tile_arrive(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const int64_t threads = eval(n.value, active[0]);
  int64_t* row = &ints_[size_t(n.var) * size_t(threads_)];
  // The groups among the active threads, each checked whole and in step.
  // A group is (block, threadIdx.x / threads); Tile IR's one thread is one group.
  auto group_of = [&](int t) -> int64_t {
    return kernel_ ? int64_t(t / cta_threads_) * cta_threads_ + (t % cta_threads_) / threads : 0;
  };
  std::vector<std::vector<int>> groups;
  for (int t : active) {
    if (groups.empty() || group_of(groups.back().front()) != group_of(t)) groups.emplace_back();
    groups.back().push_back(t);
  }
  for (const std::vector<int>& group : groups) {
    const int t0 = group.front();
    if (kernel_) {
      bool whole = int64_t(group.size()) == threads;
      for (size_t i = 0; whole && i < group.size(); ++i)
        whole = (group[i] % cta_threads_) % threads == int64_t(i);
      if (!whole)
        fail(s, "reached by " + std::to_string(group.size()) + " threads of the group of " +
                std::to_string(threads) + " that starts at thread " +
                std::to_string((t0 % cta_threads_) / threads * threads) + ", not by all of "
                "them: the group waits for each other in it, so the others would hang, or "
                "arrive with partial sums still unwritten", t0);
    }
    const bool arriving = eval(n.cond, t0) != 0;
    const int64_t off = offset(n, n.access, t0, 1, kernel_);
    for (int t : group) {
      if (offset(n, n.access, t, 1, kernel_) != off)
        fail(s, "threads of one group arrive on different counters", t);
      if ((eval(n.cond, t) != 0) != arriving)
        fail(s, "threads of one group disagree on `when` " + s.cond.str(), t);
    }
    if (!arriving) {
      for (int t : group) row[t] = 1;
      continue;
    }
    double& counter = n.access.tensor->data[size_t(off)];
    if (std::isnan(counter) || counter < 0 || counter >= s.imm)
      fail(s, "counter " + s.tensor + "[" + std::to_string(off) + "] holds " +
              std::to_string(counter) + " before an arrival, outside [0, " +
              Operand::constant(s.imm).str() + "): it was not cleared, or a tile has more "
              "arrivals than the statement expects");
    counter += 1;
    const bool last = counter == s.imm;
    if (last) counter = 0;
    for (int t : group) row[t] = last ? 1 : 0;
  }
}

void Machine::exec_for(const Node& n, const std::vector<int>& active, size_t depth) {
  const Stmt& s = *n.s;
  int t0 = active[0];
  int64_t extent = eval(n.extent, t0);
  if (!n.extent.uniform())
    for (int t : active) {
      int64_t e = eval(n.extent, t);
      if (e != extent)
        fail(s,
             "loop " + s.var + " has a thread-dependent extent " + s.extent.str() + ": " +
                 std::to_string(extent) + " in thread " + std::to_string(t0) + " but " +
                 std::to_string(e) + " in thread " + std::to_string(t) +
                 "; Kernel IR loops must run the same iterations in every thread of a block "
                 "(guard the body with an If instead)",
             t);
    }
  // Only the running CTA's threads: a peer CTA may be paused inside the same loop. In an
  // arm of a specialize only the arm's own threads: the warpgroups of a `specialize
  // warpgroups` arm run the same loop as tasks of their own, each at its own iteration.
  int64_t* row = &ints_[size_t(n.var) * size_t(threads_) + size_t(cta_ * cta_threads_)];
  int64_t* all = &ints_[size_t(n.var) * size_t(threads_)];
  for (int64_t i = 0; i < extent; ++i) {
    if (arm_)
      for (int t : active) all[t] = i;
    else
      std::fill(row, row + cta_threads_, i);
    run_block(n.body, active, depth);
    if (breaking_) {
      breaking_ = false;
      break;
    }
  }
}

void Machine::exec_if(const Node& n, const std::vector<int>& active, size_t depth) {
  if (n.s->break_if()) {  // a statement of its loop's own body (verified): the loop stops
    const int64_t go = eval(n.cond, active[0]);
    for (int t : active)
      if (eval(n.cond, t) != go)
        fail(*n.s, "break if " + n.s->cond.str() + " is " + std::to_string(go) + " in thread " +
                       std::to_string(active[0]) + " and not in thread " + std::to_string(t) +
                       ": a loop's threads must leave it together",
             t);
    breaking_ = go != 0;
    return;
  }
  if (n.cond.uniform()) {
    if (eval(n.cond, active[0]) != 0) run_block(n.body, active, depth);
    return;
  }
  // A deque keeps each depth's list in place while deeper Ifs add theirs.
  while (pool_->size() <= depth) pool_->emplace_back();
  std::vector<int>& narrowed = (*pool_)[depth];
  narrowed.clear();
  for (int t : active)
    if (eval(n.cond, t) != 0) narrowed.push_back(t);
  if (!narrowed.empty()) run_block(n.body, narrowed, depth + 1);
}

void Machine::exec_load(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  if (is_chunk_load(s)) return exec_chunk_load(n, active);
  const TensorSlot& ts = *n.access.tensor;
  const size_t T = size_t(threads_);
  const int w = s.width;
  const bool predicated = !n.pred.is_one();
  const int64_t uniform_dst = n.dst.uniform ? slot(n, n.dst, active[0], w) : 0;
  for (int t : active) {
    int64_t d = n.dst.uniform ? uniform_dst : slot(n, n.dst, t, w);
    if (predicated && eval(n.pred, t) == 0) {
      for (int i = 0; i < w; ++i) vals_[size_t(d + i) * T + size_t(t)] = 0.0;
      continue;
    }
    int64_t off = offset(n, n.access, t, w, kernel_);
    for (int i = 0; i < w; ++i)
      vals_[size_t(d + i) * T + size_t(t)] = load_element(n, ts, off + i, t);
  }
}

// The work queue's fetch: each active thread in turn (the threads of a CTA run in order,
// and the CTAs one after another: every order of the fetches is one the GPU may take)
// reads the counter and advances it by one, wrapping to 0 at `wrap`. A counter at or past
// its wrap was left so by an earlier launch that fetched more or fewer than `wrap` times,
// or a wrap that differs between fetches: both would hand out units twice or never.
void Machine::exec_fetch(const Node& n, const std::vector<int>& active, int64_t* row) {
  const Stmt& s = *n.s;
  const TensorSlot& ts = *n.access.tensor;
  for (int t : active) {
    if (eval(n.pred, t) == 0) {
      row[t] = 0;
      continue;
    }
    const int64_t wrap = eval(n.value, t);
    if (wrap < 1) fail(s, "fetch.inc wraps at " + std::to_string(wrap) + ", not a positive count", t);
    double& cell = ts.data[size_t(offset(n, n.access, t, 1, kernel_))];
    const int64_t old = int64_t(cell);
    if (!(cell >= 0) || double(old) != cell || old >= wrap)
      fail(s, "counter " + s.tensor + " holds " + std::to_string(cell) + " at a fetch that wraps at " +
                  std::to_string(wrap) + ": a launch before this one did not fetch exactly `wrap` "
                  "times, so the counter was not left at 0",
           t);
    row[t] = old;
    cell = double(old + 1 == wrap ? 0 : old + 1);
  }
}

void Machine::exec_write(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  if (is_realigned_store(s)) return exec_realigned_store(n, active);
  if (s.write_int()) {
    const TensorSlot& ts = *n.access.tensor;
    for (int t : active) {
      const int64_t off = offset(n, n.access, t, 1, kernel_);
      const double v = double(eval(n.value, t));
      if (ts.shared >= 0) shared_.write(ts.shared, off, v, t, s);
      else ts.data[size_t(off)] = v;
    }
    return;
  }
  const TensorSlot& ts = *n.access.tensor;
  const int w = s.width;
  // Copies of one warp-wide cell (Node::in_atom_nest) add once; they must agree.
  std::map<int64_t, double> added;
  const bool once = s.atomic_add && n.in_atom_nest;
  if (s.remote) {  // st.async into CTA `value`'s copy, completing on its mbarrier `mbar`
    for (int t : active) {
      const int64_t off = offset(n, n.access, t, w, kernel_);
      const int cta = remote_target(n, t);
      const int slot = int(eval(n.mask, t));
      for (int i = 0; i < w; ++i) shared_.tma_element(ts.shared, off + i, operand(n, 0, t, i), slot, t, s, cta);
      shared_.tma_complete_tx(slot, 4 * int64_t(w), t, s, cta);
    }
    return;
  }
  for (int t : active) {
    int64_t off = offset(n, n.access, t, w, kernel_);
    for (int i = 0; i < w; ++i) {
      double v = operand(n, 0, t, i);
      if (once) {
        auto [it, first] = added.emplace(off + i, v);
        if (!first) {
          if (it->second != v && !(std::isnan(v) && std::isnan(it->second)))
            fail(s, "lanes running one ATOM nest add different values to element " +
                        std::to_string(off + i) + " of " + ts.decl->name, t);
          continue;
        }
      }
      if (ts.shared >= 0) {
        if (s.atomic_add) shared_.atomic_add(ts.shared, off + i, v, t, s);
        else shared_.write(ts.shared, off + i, v, t, s);
      } else {
        double& cell = ts.data[size_t(off + i)];
        cell = round_to_dtype(ts.decl->dtype, s.atomic_add ? cell + v : v);
      }
    }
  }
}

// The chunk load reads what the GPU's aligned 16-byte loads read: the chunks holding a
// wanted element, up to the tensor's end. Every other register of the slot is NaN, so a
// store that selected an element the load did not provide would show in the result.
void Machine::exec_chunk_load(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const TensorSlot& ts = *n.access.tensor;
  const size_t T = size_t(threads_);
  const int w = s.width / 2;
  const double unread = std::numeric_limits<double>::quiet_NaN();
  for (int t : active) {
    const int64_t d = slot(n, n.dst, t, s.width);
    for (int i = 0; i < s.width; ++i) vals_[size_t(d + i) * T + size_t(t)] = unread;
    const int64_t g = eval(n.access.index[0], t), valid = eval(n.value, t);
    if (valid < 0 || valid > w)
      fail(s, "valid count " + n.value.str() + " = " + std::to_string(valid) + " is outside 0.." +
                  std::to_string(w), t);
    if (valid == 0) continue;  // nothing wanted: no chunk is read, g may be anywhere
    if (g < 0 || g + valid > ts.size)
      fail(s, "wanted elements " + std::to_string(g) + ".." + std::to_string(g + valid - 1) +
                  " (offset " + n.access.index[0].str() + ") are outside tensor " + ts.decl->name +
                  " of " + std::to_string(ts.size) + " elements", t);
    const int64_t a = g - g % w;  // the first chunk: 16-byte aligned (the base is, plan.cpp)
    for (int j = 0; j < 2; ++j) {
      const int64_t c0 = a + j * w;
      if (c0 >= g + valid || c0 + w <= g) continue;  // holds no wanted element: not read
      for (int i = 0; i < w && c0 + i < ts.size; ++i)
        vals_[size_t(d + j * w + i) * T + size_t(t)] = load_element(n, ts, c0 + i, t);
    }
  }
}

// The window at g % w of the slot's chunks into one 16-byte unit, zero from `valid` on.
void Machine::exec_realigned_store(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const TensorSlot& ts = *n.access.tensor;
  const int w = s.width;
  for (int t : active) {
    const int64_t off = offset(n, n.access, t, w, true);
    if (off % w != 0)
      fail(s, "offset " + n.access.index[0].str() + " = " + std::to_string(off) +
                  " does not start a 16-byte unit of " + ts.decl->name +
                  " (one st.shared.v4 writes the realigned window)", t);
    const int64_t g = eval(n.cond, t), valid = eval(n.value, t);
    if (valid < 0 || valid > w)
      fail(s, "valid count " + n.value.str() + " = " + std::to_string(valid) + " is outside 0.." +
                  std::to_string(w), t);
    const int64_t shift = valid > 0 ? ((g % w) + w) % w : 0;
    for (int i = 0; i < w; ++i) {
      const double v = i < valid ? operand(n, 0, t, shift + i) : 0.0;
      shared_.write(ts.shared, off + i, v, t, s);
    }
  }
}

void Machine::exec_scalar(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const size_t T = size_t(threads_);
  const int t0 = active[0];
  OperandSlots ops;
  for (size_t i = 0; i < n.args.size(); ++i)
    ops.slot[i] = n.args[i].base < 0       ? OperandSlots::kImmediate
                  : !n.args[i].uniform     ? OperandSlots::kPerThread
                                           : slot(n, n.args[i], t0, 1);
  auto arg = [&](size_t i, int t) {
    int64_t k = ops.slot[i];
    if (k == OperandSlots::kImmediate) return n.args[i].imm;
    if (k == OperandSlots::kPerThread) k = slot(n, n.args[i], t, 1);
    return vals_[size_t(k) * T + size_t(t)];
  };
  const int64_t uniform_dst = n.dst.uniform ? slot(n, n.dst, t0, 1) : 0;
  bool rows = n.dst.uniform;
  for (size_t i = 0; i < n.args.size(); ++i) rows = rows && ops.slot[i] != OperandSlots::kPerThread;
  if (rows) {
    // Every operand is one slot for all threads (or an immediate): thread t's values are
    // column t of those rows, so each statement kind is one loop over the threads.
    double* d = &vals_[size_t(uniform_dst) * T];
    const double* x[kMaxAtomOperands];
    size_t step[kMaxAtomOperands];  // 0: an immediate, read at every t
    for (size_t i = 0; i < n.args.size(); ++i) {
      const bool imm = ops.slot[i] == OperandSlots::kImmediate;
      x[i] = imm ? &n.args[i].imm : &vals_[size_t(ops.slot[i]) * T];
      step[i] = imm ? 0 : 1;
    }
    auto at = [&](size_t i, int t) { return x[i][size_t(t) * step[i]]; };
    switch (s.kind) {
      case StmtKind::Compute:
        if (n.args.size() == 2 && s.op == ScalarOp::Add)
          for (int t : active) d[t] = at(0, t) + at(1, t);
        else if (n.args.size() == 2 && s.op == ScalarOp::Mul)
          for (int t : active) d[t] = at(0, t) * at(1, t);
        else if (n.args.size() == 2)
          for (int t : active) d[t] = eval_scalar_op(s.op, at(0, t), at(1, t));
        else
          for (int t : active) d[t] = eval_scalar_op(s.op, at(0, t), 0.0);
        return;
      case StmtKind::Init:
        for (int t : active) d[t] = s.imm;
        return;
      case StmtKind::Accum:
        if (s.op == ScalarOp::Add)
          for (int t : active) d[t] = d[t] + at(0, t);
        else
          for (int t : active) d[t] = eval_scalar_op(s.op, d[t], at(0, t));
        return;
      case StmtKind::Atom:
        for (int t : active) {
          double a[kMaxAtomOperands];  // resolution checked the count against the atom
          for (size_t i = 0; i < n.args.size(); ++i) a[i] = at(i, t);
          n.atom->run(d[t], a);
        }
        return;
      default: LOOM_CHECK(false, "exec_scalar on a non-scalar statement");
    }
  }
  for (int t : active) {
    double& dst = vals_[size_t(n.dst.uniform ? uniform_dst : slot(n, n.dst, t, 1)) * T +
                        size_t(t)];
    switch (s.kind) {
      case StmtKind::Compute:
        dst = eval_scalar_op(s.op, arg(0, t), n.args.size() > 1 ? arg(1, t) : 0.0);
        break;
      case StmtKind::Init: dst = s.imm; break;
      case StmtKind::Accum:
        dst = s.op == ScalarOp::Add ? dst + arg(0, t) : eval_scalar_op(s.op, dst, arg(0, t));
        break;
      case StmtKind::Atom: {
        double a[kMaxAtomOperands];  // resolution checked the count against the atom
        for (size_t i = 0; i < n.args.size(); ++i) a[i] = arg(i, t);
        n.atom->run(dst, a);
        break;
      }
      default: LOOM_CHECK(false, "exec_scalar on a non-scalar statement");
    }
  }
}

// mma.sync, one warp at a time: gather A, B and C from the 32 lanes' fragments through
// the atom's maps, D = A·B + C in double, scatter D into every lane's fragment. Inputs
// are rounded to the types the tensor cores read (a register packs f16/bf16 pairs; tf32
// as the cvt.rna that packs the fragment rounds it), C to the accumulator type its
// register holds, D once at the end.
void Machine::exec_warp_atom(const Node& n, const std::vector<int>& active) {
  const WarpAtom& w = *n.warp;
  const size_t T = size_t(threads_);
  constexpr int kLanes = WarpAtom::kLanes;
  // round_to_dtype treats tf32 as its f32 storage; the atom reads the rounded 19 bits.
  auto round_to = [](DType t, double v) {
    return t == DType::TF32 ? double(round_to_tf32(float(v))) : round_to_dtype(t, v);
  };
  std::vector<double> a(size_t(w.m * w.k)), b(size_t(w.k * w.n)), c(size_t(w.m * w.n));
  auto gather = [&](std::vector<double>& tile, int cols,
                    const std::vector<std::pair<int, int>>& map, const ValueRef& r, int values,
                    DType type, int warp) {
    for (int lane = 0; lane < kLanes; ++lane) {
      const int t = warp * kLanes + lane;
      const int64_t first = fragment_slot(n, r, t, values);
      for (int v = 0; v < values; ++v) {
        const auto [row, col] = map[size_t(lane * values + v)];
        tile[size_t(row * cols + col)] = round_to(type, vals_[size_t(first + v) * T + size_t(t)]);
      }
    }
  };
  for_each_warp(n, active, [&] { return "warp atom " + w.id; }, [&](int warp) {
    gather(a, w.k, w.a, n.args[0], w.a_values, w.a_type, warp);
    gather(b, w.n, w.b, n.args[1], w.b_values, w.b_type, warp);
    if (n.s->scale_d.is_const() && n.s->scale_d.const_value() == 0)  // C = 0: D = A·B
      std::fill(c.begin(), c.end(), 0.0);
    else gather(c, w.n, w.c, n.dst, w.c_values, w.acc_type, warp);
    for (int row = 0; row < w.m; ++row)
      for (int col = 0; col < w.n; ++col) {
        double& d = c[size_t(row * w.n + col)];
        for (int k = 0; k < w.k; ++k) d += a[size_t(row * w.k + k)] * b[size_t(k * w.n + col)];
        d = round_to(w.acc_type, d);
      }
    for (int lane = 0; lane < kLanes; ++lane) {
      const int t = warp * kLanes + lane;
      const int64_t first = fragment_slot(n, n.dst, t, w.c_values);
      for (int v = 0; v < w.c_values; ++v) {
        const auto [row, col] = w.c[size_t(lane * w.c_values + v)];
        vals_[size_t(first + v) * T + size_t(t)] = c[size_t(row * w.n + col)];
      }
    }
  });
}

void Machine::for_each_warp(const Node& n, const std::vector<int>& active,
                            const std::function<std::string()>& what,
                            const std::function<void(int)>& fn) {
  for_each_group(n, active, WarpAtom::kLanes, what, fn);
}

void Machine::for_each_group(const Node& n, const std::vector<int>& active, int size,
                             const std::function<std::string()>& what,
                             const std::function<void(int)>& fn) {
  // `active` is in thread order, so a group's active threads are consecutive in it.
  for (size_t i = 0; i < active.size();) {
    const int group = active[i] / size;
    size_t end = i;
    while (end < active.size() && active[end] / size == group) ++end;
    if (end - i != size_t(size)) [[unlikely]] {
      const bool warp = size == WarpAtom::kLanes;
      const std::string unit = warp ? "warp" : "warpgroup";
      const std::string lanes = warp ? "lanes" : "threads";
      fail(*n.s,
           what() + " reached by " + std::to_string(end - i) + " of the " + std::to_string(size) +
               " " + lanes + " of " + unit + " " + std::to_string(group) +
               ": it sits under an If whose condition differs between " + lanes + " of one " +
               unit + ", and the instruction needs every one; make the condition the same "
               "across each " + unit + " (e.g. depend on threadIdx.x / " + std::to_string(size) +
               ") or hoist the " + (warp ? "atom" : "statement") + " out of the If",
           active[i]);
    }
    fn(group);
    i = end;
  }
}

// ldmatrix (stmatrix), one warp at a time: every lane's row address is evaluated and checked (the
// hardware needs each in bounds and 16-byte aligned, and reads the row as 16 contiguous
// bytes, so a swizzle may not permute inside it); stacked row r comes from the address
// of lane row_lane[r], and each lane receives its values by the dst map. The reads are
// the receiving lane's, so the race tracking sees who consumes which element.
void Machine::exec_warp_copy(const Node& n, const std::vector<int>& active) {
  const WarpCopy& w = *n.copy;
  const size_t T = size_t(threads_);
  constexpr int kLanes = WarpAtom::kLanes;
  const TensorSlot& ts = *n.access.tensor;
  const int row_bytes = w.cols * w.element_bytes;
  for_each_warp(n, active, [&] { return "warp copy " + w.id; }, [&](int warp) {
    int64_t start[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      const int t = warp * kLanes + lane;
      const int64_t off = offset(n, n.access, t, w.cols, true);
      if (off * w.element_bytes % row_bytes != 0)
        fail(*n.s,
             "row offset " + n.s->index[0].str() + " = " + std::to_string(off) + " of " +
                 ts.decl->name + " is not " + std::to_string(row_bytes) + "-byte aligned (" +
                 std::to_string(row_bytes / w.element_bytes) + " elements): " + w.id +
                 " reads each row as one aligned 16-byte access; pad rows to a multiple of " +
                 std::to_string(row_bytes / w.element_bytes) + " elements",
             t);
      for (int c = 1; c < w.cols; ++c)
        if (ts.decl->physical(off + c) != ts.decl->physical(off) + c)
          fail(*n.s,
               "the swizzle of " + ts.decl->name + " moves element " + std::to_string(c) +
                   " of the row at " + std::to_string(off) + " away from the row start; " + w.id +
                   " reads the row as 16 contiguous bytes",
               t);
      start[lane] = off;
    }
    if (w.to_shared) {
      // stmatrix: value v of each lane lands at its place of the stacked tile, in the row
      // whose address lane row_lane[row] gave; the writes are the giving lane's.
      for (int lane = 0; lane < kLanes; ++lane) {
        const int t = warp * kLanes + lane;
        for (int v = 0; v < w.values; ++v) {
          const auto [row, col] = w.dst[size_t(lane * w.values + v)];
          const int64_t off = start[w.row_lane[size_t(row)]] + col;
          shared_.write(ts.shared, off, operand(n, size_t(v), t), t, *n.s);
        }
      }
      return;
    }
    for (int lane = 0; lane < kLanes; ++lane) {
      const int t = warp * kLanes + lane;
      const int64_t first = fragment_slot(n, n.dst, t, w.values);
      for (int v = 0; v < w.values; ++v) {
        const auto [row, col] = w.dst[size_t(lane * w.values + v)];
        const int64_t off = start[w.row_lane[size_t(row)]] + col;
        vals_[size_t(first + v) * T + size_t(t)] = load_element(n, ts, off, t);
      }
    }
  });
}

// A Stage is a block-wide copy between two barriers: the block fills each slab (zero
// outside the source, which is what lets M, N, K be any size), then runs the body.
void Machine::exec_stage(const Node& n, const std::vector<int>& active, size_t depth) {
  const Stmt& s = *n.s;
  if (kernel_) require_all_threads(n, active, "stage");
  const size_t T = size_t(threads_);
  const int t0 = active[0];  // resolution checked that the slabs do not depend on it
  shared_.barrier(cta_);
  for (const CopyNode& c : n.copies) {
    const size_t rank = c.vars.size(), np = c.prefix.size();
    // The prefix picks the buffer of a multi-buffered slab.
    int64_t base = 0;
    for (size_t d = 0; d < np; ++d) {
      int64_t i = eval(c.prefix[d], t0);
      if (i < 0 || i >= c.shared->shape[d])
        fail(s, "stage buffer index " + c.prefix[d].str() + " = " + std::to_string(i) +
                    " is out of range for shared tensor " + c.copy->shared + " of shape " +
                    c.shared->shape_str);
      base += i * c.shared->strides[d];
    }
    std::vector<int64_t> extent(rank), point(rank, 0);
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) {
      extent[d] = eval(c.extents[d], t0);
      if (extent[d] > c.shared->shape[np + d])
        fail(s, "stage box of " + c.copy->shared + " is " + c.extents[d].str() + " = " +
                    std::to_string(extent[d]) + " along dimension " + std::to_string(np + d) +
                    " but the shared tensor has shape " + c.shared->shape_str);
      empty = empty || extent[d] <= 0;
    }
    if (empty) continue;
    while (true) {
      int64_t dst = base;
      for (size_t d = 0; d < rank; ++d) {
        ints_[size_t(c.vars[d]) * T + size_t(t0)] = point[d];
        dst += point[d] * c.shared->strides[np + d];
      }
      int64_t src = 0;
      bool inside = true;
      for (size_t d = 0; d < c.src_index.size(); ++d) {
        int64_t i = eval(c.src_index[d], t0);
        inside = inside && i >= 0 && i < c.src->shape[d];
        src += i * c.src->strides[d];
      }
      shared_.fill(c.shared->shared, dst, inside ? c.src->data[size_t(src)] : 0.0, s, cta_);
      size_t d = rank;
      while (d > 0 && ++point[d - 1] == extent[d - 1]) point[--d] = 0;
      if (d == 0) break;
    }
  }
  shared_.barrier(cta_);
  run_block(n.body, active, depth);
}

void Machine::exec_async_copy(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const TensorSlot& dst = *n.access.tensor;
  const TensorSlot& src = *n.src.tensor;
  const int w = s.width;
  const bool predicated = !n.pred.is_one();
  for (int t : active) {
    int64_t off = offset(n, n.access, t, w, true);
    // A false predicate is cp.async's src-size 0: the destination is zero-filled and
    // the source is not touched, so it needs no bounds check.
    bool on = !predicated || eval(n.pred, t) != 0;
    int64_t soff = on ? offset(n, n.src, t, w, true) : 0;
    for (int i = 0; i < w; ++i)
      shared_.async_copy(dst.shared, off + i, on ? src.data[size_t(soff + i)] : 0.0, t, s);
  }
}

// Each issuing thread reads its whole box now (global inputs do not change during a
// kernel); the elements land when a wait observes the phase the load completes. A
// multicast load lands at the same offset in every CTA of its mask and counts its bytes
// on each one's mbarrier `value`.
void Machine::exec_tma_load(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const TensorSlot& dst = *n.access.tensor;
  const TensorSlot& src = *n.src.tensor;
  const size_t rank = n.box.size();
  int64_t elems = 1;
  for (int64_t b : n.box) elems *= b;
  const int64_t bytes = elems * dtype_bytes(dst.decl->dtype);
  if (int64_t(s.imm) != bytes)
    fail(s, "the load announces " + std::to_string(int64_t(s.imm)) + " bytes but its box of " +
                std::to_string(elems) + " " + dtype_name(dst.decl->dtype) + " holds " +
                std::to_string(bytes));
  std::vector<int64_t> corner(rank), point(rank);
  std::vector<double> box(static_cast<size_t>(elems));
  std::vector<int64_t> at(static_cast<size_t>(elems));
  for (int t : active) {
    int64_t origin = offset(n, n.access, t, int(elems), true);
    int slot = int(eval(n.value, t));
    for (size_t d = 0; d < rank; ++d) corner[d] = eval(n.corner[d], t);
    std::fill(point.begin(), point.end(), 0);
    for (int64_t e = 0; e < elems; ++e) {
      int64_t from = 0;
      bool inside = true;
      for (size_t d = 0; d < rank; ++d) {
        int64_t i = corner[d] + point[d];
        inside = inside && i >= 0 && i < src.shape[d];
        from += i * src.strides[d];
      }
      // Out-of-range box elements are the tensor map's OOB fill: zeros.
      box[size_t(e)] = inside ? src.data[size_t(from)] : 0.0;
      at[size_t(e)] = origin + box_offset(dst, point, n.box);
      for (size_t d = rank; d-- > 0;) {
        if (++point[d] < n.box[d]) break;
        point[d] = 0;
      }
    }
    for (int cta : targets(n, t)) {
      for (int64_t e = 0; e < elems; ++e)
        shared_.tma_element(dst.shared, at[size_t(e)], box[size_t(e)], slot, t, s, cta);
      shared_.tma_complete_tx(slot, bytes, t, s, cta);
    }
  }
}

// The shared tensor's (logical) offset of box point `point` from the box's origin: the
// box covers the tensor's last dimensions. Dense boxes step by one element; the boxes of
// a slab stored in chunks (TensorDecl::row_chunk) are one chunk wide, so their rows step
// by the whole row, and physical() then lays each chunk out contiguously.
//
// The box's dimensions of extent 1 hold no step, so they are left out before the match:
// the box's other dimensions, innermost last, step by the shared tensor's innermost
// strides. A box of one head and `rows` tokens over a [T, H, D] tensor ([rows, 1, D],
// varlen attention) then fills [rows, D] as a [1, 1, rows, D] box of a [B, H, S, D] one.
int64_t Machine::box_offset(const TensorSlot& shared, const std::vector<int64_t>& point,
                            const std::vector<int64_t>& box) {
  std::vector<size_t> steps;
  for (size_t d = 0; d < box.size(); ++d)
    if (box[d] > 1) steps.push_back(d);
  if (steps.size() > shared.strides.size())
    throw Error("internal error: a TMA box of " + std::to_string(steps.size()) +
                " dimensions over a shared tensor of rank " +
                std::to_string(shared.strides.size()));
  const size_t np = shared.strides.size() - steps.size();
  int64_t off = 0;
  for (size_t i = 0; i < steps.size(); ++i) off += point[steps[i]] * shared.strides[np + i];
  return off;
}

void Machine::exec_mbarrier(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  if (sched_ && s.kind == StmtKind::MbarWait) wait_in_task(n, active);
  for (int t : active) {
    int slot = int(eval(n.value, t));
    switch (s.kind) {
      case StmtKind::MbarInit: shared_.mbar_init(slot, int(s.imm), t, s); break;
      case StmtKind::MbarArriveExpectTx:
        shared_.mbar_arrive_expect_tx(slot, int64_t(s.imm), t, s);
        break;
      case StmtKind::MbarWait:
        shared_.mbar_wait(slot, int(eval(n.cond, t)), t, s);
        if (kernel_) unmet_wait_[size_t(t)] = &s;
        break;
      default: LOOM_CHECK(false, "exec_mbarrier on a non-mbarrier statement");
    }
  }
}

void Machine::warpgroup_met(const std::vector<int>& active) {
  if (!kernel_) return;
  for (int t : active) unmet_wait_[size_t(t)] = nullptr;
}

// An mbar.arrive by some of a warpgroup's threads (its first, say) stands for the whole
// warpgroup: the barrier counts one arrival per warpgroup. The interpreter runs a
// warpgroup's threads in lockstep, but on the GPU its four warps run apart; a thread of
// the warpgroup that passed an mbar.wait with no meeting since may, on the GPU, not have
// reached that wait yet when the arrival comes. The arrival can then let the barrier it
// hands back complete two phases while that warp still waits for the first, whose parity
// never returns: a hang (or a buffer refilled under a warp still reading it).
void Machine::check_elected_arrival(const Node& n, const std::vector<int>& active) {
  if (!kernel_ || !arm_ || active.empty()) return;
  const int wg0 = active[0] - active[0] % 128;
  std::vector<bool> arriving(128, false);
  for (int t : active) {
    if (t - t % 128 != wg0) return;  // several warpgroups arriving: each its own
    arriving[size_t(t - wg0)] = true;
  }
  // A thread of another warp than the arriving one's if any (lanes of one warp may run
  // apart too, under independent thread scheduling).
  int u = -1;
  for (int v = wg0; v < wg0 + 128 && v < threads_; ++v)
    if (!arriving[size_t(v - wg0)] && unmet_wait_[size_t(v)] &&
        (u < 0 || (u / 32 == active[0] / 32 && v / 32 != active[0] / 32)))
      u = v;
  if (u >= 0) {
    const Stmt* w = unmet_wait_[size_t(u)];
    fail(*n.s,
         shared_.who(active[0]) + " arrives for its warpgroup, and " + shared_.who(u) +
             " of the warpgroup passed `" + first_line(*w) +
             "` with no meeting of the warpgroup since: on the GPU its warps run apart, so "
             "warp " + std::to_string(u % cta_threads_ / 32) + " may not have passed that wait when this "
             "arrival lets the barrier's phases move on (twice, and it waits for a parity "
             "that never returns: a hang; or its buffer is refilled under it). Meet the "
             "warpgroup first (a named barrier over its 128 threads), or arrive after a "
             "wgmma of the warpgroup",
         active[0]);
  }
}

}  // namespace loom::interp
