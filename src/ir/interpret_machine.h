// The interpreter's machine: statement trees resolved once (names to slots), then
// executed for a group of threads in lockstep. Loop and Tile IR run as one thread;
// Kernel IR runs one block of `block_threads` threads at a time (interpreter.h).
//
// Per-thread state is laid out slot-major: integer slot s of thread t is
// ints_[s * threads_ + t], scalar value slot s of thread t is vals_[s * threads_ + t].
// A register array `acc[4, 4]` is 16 consecutive value slots.
//
// A Specialize runs its arms as concurrent tasks (interpret_specialize.cpp): one OS
// thread per arm, of which exactly one runs at a time, switching only when the running
// arm blocks in an mbarrier wait or finishes, so execution stays deterministic and the
// machine's state needs no locks. Each task has its own stack of narrowed thread lists.
//
// A kernel with thread-block clusters (KernelOp::cluster) runs one cluster at a time
// (interpret_cluster.cpp): its C CTAs are tasks of one scheduler, their threads numbered
// across the cluster (CTA r's thread i is r * block_threads + i, so per-thread state
// needs nothing new), and a CTA's Specialize spawns its arms into the same scheduler.
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/interpret_expr.h"
#include "ir/interpret_scheduler.h"
#include "ir/interpret_shared.h"
#include "ir/interpreter.h"

namespace loom::interp {

// Atoms the interpreter can execute; `dst` is the accumulator, read and written.
constexpr size_t kMaxAtomOperands = 8;
// Hardware barriers per CTA (bar.sync ids 0..15, PTX ISA 9.7.13.1).
constexpr size_t kNamedBarriers = 16;
struct AtomImpl {
  const char* id;
  size_t arity;
  void (*run)(double& dst, const double* args);
};

// A tensor as the machine addresses it.
struct TensorSlot {
  const TensorDecl* decl = nullptr;
  std::vector<int64_t> shape, strides;  // evaluated; strides include a shared row pad
  int64_t size = 0;              // flat offsets in [0, size): numel, or footprint if shared
  HostTensor* host = nullptr;    // global tensors
  // Global tensors: their storage, flat offsets in [0, size). A dense tensor's is its
  // HostTensor's data; a pitched one (TensorDecl::pitch) gets `pitched`, its footprint
  // with NaN between the rows, filled from and written back to the dense HostTensor.
  double* data = nullptr;
  std::vector<double> pitched;
  int shared = -1;               // SharedMemory id of a shared tensor
  std::string shape_str;         // "[5, 3]", for messages
};

// A scalar operand or destination: an immediate, a value slot, or one element of a
// register array.
struct ValueRef {
  int base = -1;  // first slot; -1 for an immediate
  double imm = 0.0;
  std::string name;
  std::vector<int64_t> extents;  // register array extents; empty for a scalar
  std::vector<IntExpr> index;
  bool uniform = true;  // the element is the same for every thread
};

struct Access {
  TensorSlot* tensor = nullptr;
  std::vector<IntExpr> index;
};

struct CopyNode {
  const StageCopy* copy = nullptr;
  TensorSlot* shared = nullptr;
  TensorSlot* src = nullptr;
  std::vector<int> vars;  // integer slots of the box variables
  std::vector<IntExpr> prefix, extents, src_index;
};

// A statement with its names resolved.
struct Node {
  const Stmt* s = nullptr;
  int var = -1;  // For, Let: integer slot
  IntExpr extent, cond, value, pred;
  IntExpr scale_d;  // a warpgroup atom's scale-d (Stmt::scale_d)
  ValueRef dst;
  std::vector<ValueRef> args;
  Access access, src;  // Load/Write/AsyncCopy tensor; AsyncCopy source
  const AtomImpl* atom = nullptr;  // a one-thread atom, or
  const WarpAtom* warp = nullptr;  // a warp atom: dst and args are fragments (stmt.h)
  const WarpCopy* copy = nullptr;  // a warp copy (ldmatrix): dst a fragment, access the row
  int64_t alloc_size = 0;
  std::vector<CopyNode> copies;
  IntExpr mask;                 // TmaLoad/MbarArrive: the multicast mask (Stmt::multicast);
                                // a remote Write: its mbarrier slot (Stmt::mbar)
  std::vector<IntExpr> corner;  // TmaLoad/TmaStore: box corner per global dimension
  std::vector<int64_t> box;     // TmaLoad/TmaStore: box extents, outermost first
  // A warpgroup atom's A and B read from shared memory ({origin, row stride, col
  // stride}); tensor null where the operand is a fragment (args).
  Access tiles[2];
  // Kernel IR Write inside an ATOM-tier loop: before k:025/k:026 hand the atom's cells to
  // the lanes, every lane of the warp (warpgroup) runs the nest whole, each holding a copy
  // of the same cells, so an atomic add of a cell is made once, not once per copy.
  bool in_atom_nest = false;
  // A Load or warp copy that fills the register A of a wgmma with WarpAtom::a_truncated:
  // it keeps a tf32 tensor's raw f32 bits (codegen issues no cvt.rna), where other loads
  // of a tf32 tensor round.
  bool raw_tf32 = false;
  std::vector<Node> body;
};

class Machine {
 public:
  // `kernel`: Kernel IR, whose accesses are one flat offset and whose body runs per block.
  Machine(const ProgramBase& p, Bindings& b, bool kernel);
  void run_op(const std::string& where, const Block& body);
  void run_kernel(const KernelOp& k);
  // interpret(.., schedule_seed): seeded interleavings of the specialize arms' warpgroups.
  void set_schedule_seed(uint64_t seed) { schedule_seed_ = seed; }
  // Writes pitched tensors back to their dense HostTensors; throws when a run wrote
  // between the rows of one (outside the view). Call once, after the last run.
  void finish();

 private:
  struct ValueDef {
    int base;
    std::vector<int64_t> extents;
  };

  [[noreturn]] void fail(const Stmt& s, const std::string& msg, int thread = -1) const;

  // ---- resolution (interpret_resolve.cpp) ---------------------------------------
  void begin_resolution(int threads, const std::vector<std::string>& builtins);
  std::vector<Node> resolve_block(const Block& b);
  Node resolve_stmt(const Stmt& s);
  IntExpr compile(const Stmt& s, const Expr& e);
  int bind_int(const std::string& name, bool thread_dependent);
  const ValueDef* find_value(const std::string& name) const;
  ValueRef value_ref(const Stmt& s, const std::string& name, const std::vector<Expr>& index,
                     bool array_element_expected);
  ValueRef define_scalar(const Stmt& s, const std::string& name);
  ValueRef destination(const Stmt& s, bool defines);
  // A warp atom's operand: register array `name` indexed by `prefix`, whose trailing
  // dimensions hold `values` elements.
  ValueRef fragment(const Stmt& s, const std::string& name, const std::vector<Expr>& prefix,
                    int values, const char* role);
  Access access(const Stmt& s, const std::string& tensor, const std::vector<Expr>& index,
                bool flat);
  TensorSlot& tensor(const Stmt& s, const std::string& name);
  void resolve_tma_box(const Stmt& s, Node& n, const char* what);

  // ---- execution (interpret_exec.cpp) -------------------------------------------
  void run_block(const std::vector<Node>& nodes, const std::vector<int>& active, size_t depth);
  void exec(const Node& n, const std::vector<int>& active, size_t depth);
  void exec_for(const Node& n, const std::vector<int>& active, size_t depth);
  void exec_tile_arrive(const Node& n, const std::vector<int>& active);
  void exec_lane_reduce(const Node& n, const std::vector<int>& active);
  void exec_if(const Node& n, const std::vector<int>& active, size_t depth);
  void exec_load(const Node& n, const std::vector<int>& active);
  void exec_write(const Node& n, const std::vector<int>& active);
  void exec_fetch(const Node& n, const std::vector<int>& active, int64_t* row);
  // The realigned copy (ir/realign.h): aligned 16-byte chunks into registers, then the
  // shifted window into one 16-byte unit of a shared slab.
  void exec_chunk_load(const Node& n, const std::vector<int>& active);
  void exec_realigned_store(const Node& n, const std::vector<int>& active);
  void exec_scalar(const Node& n, const std::vector<int>& active);
  void exec_warp_atom(const Node& n, const std::vector<int>& active);
  void exec_warp_copy(const Node& n, const std::vector<int>& active);
  // Runs `fn(warp)` for each warp among `active`, failing when a warp has lanes missing
  // (a warp-collective instruction `what` under a lane-dependent If).
  // `what` names the instruction in the error (built only on failure).
  void for_each_warp(const Node& n, const std::vector<int>& active,
                     const std::function<std::string()>& what, const std::function<void(int)>& fn);
  void exec_stage(const Node& n, const std::vector<int>& active, size_t depth);
  void exec_async_copy(const Node& n, const std::vector<int>& active);
  void exec_tma_load(const Node& n, const std::vector<int>& active);
  static int64_t box_offset(const TensorSlot& shared, const std::vector<int64_t>& point,
                            const std::vector<int64_t>& box);
  void exec_mbarrier(const Node& n, const std::vector<int>& active);
  void require_all_threads(const Node& n, const std::vector<int>& active, const char* what);
  // Runs `fn(group)` for each group of `size` consecutive threads among `active`
  // (group = thread / size), failing when one has threads missing.
  void for_each_group(const Node& n, const std::vector<int>& active, int size,
                      const std::function<std::string()>& what,
                      const std::function<void(int)>& fn);

  // ---- sm_90 forms (interpret_hopper.cpp) ---------------------------------------
  void begin_hopper_block();
  void end_hopper_block();
  void exec_wgmma(const Node& n, const std::vector<int>& active);
  void exec_wgmma_sync(const Node& n, const std::vector<int>& active);  // fence/commit/wait
  void exec_tma_store(const Node& n, const std::vector<int>& active);
  void exec_bulk(const Node& n, const std::vector<int>& active);  // arrive, fences, bulk groups
  // Fails when `n` touches registers an in-flight wgmma is still writing (its
  // accumulators) or reading (a register A fragment).
  void check_accumulators(const Node& n, const std::vector<int>& active);
  // Kernels with register-A wgmma: stamps the registers `n` writes with the writing
  // thread's wgmma.fence count, so that a wgmma reading an A fragment written since the
  // warpgroup's last fence fails (the fence orders those writes before the wgmma).
  void note_register_writes(const Node& n, const std::vector<int>& active);
  void retire_wgmma(size_t op);
  int64_t tile_offset(const Node& n, const Access& a, int t, int64_t r, int64_t c);

  // ---- named barriers (interpret_named_barrier.cpp) ------------------------------
  void exec_named_barrier(const Node& n, const std::vector<int>& active);
  // At the end of a block: a phase left short (bar.arrive's arrivals nobody awaited).
  void end_named_barriers();

  // ---- warp specialization (interpret_specialize.cpp) ----------------------------
  void exec_specialize(const Node& n, const std::vector<int>& active, size_t depth);
  // An mbarrier wait inside a task: blocks the task until every thread's phase is complete.
  void wait_in_task(const Node& n, const std::vector<int>& active);
  // The running task's view of the machine comes back after another task ran.
  void resume(size_t task);

  // ---- thread-block clusters (interpret_cluster.cpp) -----------------------------
  // CTAs per cluster of `k` (checked: 1-D along x, dividing the grid).
  int cluster_size(const KernelOp& k) const;
  void run_cluster(const std::vector<Node>& nodes);
  void exec_cluster_sync(const Node& n, const std::vector<int>& active);
  // The CTAs that thread `t`'s TmaLoad / MbarArrive `n` reaches (its mask; 0: its own),
  // checked against the cluster and against CTAs that already exited.
  std::vector<int> targets(const Node& n, int t);
  // The CTA an asynchronous remote store (st.async) of thread t writes into: its receiver
  // waits for the bytes on its own mbarrier before it reads them or exits, so the store
  // leaves no arrival for cta_exit to settle; a receiver that already exited is an error.
  int remote_target(const Node& n, int t);
  void cta_exit(int cta);
  int64_t eval(const IntExpr& e, int t) const {
    return e.eval(ints_.data(), size_t(threads_), t);
  }
  // Value slot of `r` for thread `t`, checked for `width` elements along the last
  // dimension (a vector access uses the slots that follow).
  int64_t slot(const Node& n, const ValueRef& r, int t, int64_t width) const;
  // The errors of slot() and offset(), out of their hot paths: index d (k) is i.
  [[noreturn, gnu::cold, gnu::noinline]] void slot_out_of_range(
      const Node& n, const ValueRef& r, int t, int64_t width, size_t d, int64_t i) const;
  [[noreturn, gnu::cold, gnu::noinline]] void offset_out_of_range(
      const Node& n, const Access& a, int t, int width, size_t k, int64_t i, bool flat) const;
  double operand(const Node& n, size_t i, int t, int64_t plus = 0) const;
  // First value slot of fragment `r` (resolved by fragment()) for thread `t`.
  int64_t fragment_slot(const Node& n, const ValueRef& r, int t, int values) const {
    return r.base + (slot(n, r, t, 1) - r.base) * values;
  }
  // Checked logical offset of the first of `width` elements an access touches.
  int64_t offset(const Node& n, const Access& a, int t, int width, bool flat) const;
  double load_element(const Node& n, const TensorSlot& ts, int64_t off, int t);

  bool kernel_;
  Expr::Env symbols_;
  std::map<std::string, TensorSlot> tensors_;
  SharedMemory shared_;
  std::string where_;
  const KernelOp* kernel_op_ = nullptr;  // the kernel being run (its tensor maps)
  // The register A arrays of the kernel's wgmmas with WarpAtom::a_truncated: their fills
  // resolve with Node::raw_tf32.
  std::set<std::string> raw_tf32_fragments_;

  // Resolution state.
  std::vector<std::map<std::string, int>> int_scopes_;
  std::vector<std::map<std::string, ValueDef>> value_scopes_;
  std::vector<bool> int_dependent_;  // per integer slot: may differ between threads
  int num_values_ = 0;

  // Execution state.
  int threads_ = 1;
  std::vector<int64_t> ints_;
  std::vector<double> vals_;
  std::deque<std::vector<int>> active_pool_;  // narrowed thread lists, one per If depth
  std::deque<std::vector<int>>* pool_ = &active_pool_;  // the running task's

  // wgmma in flight (interpret_hopper.cpp): its shared reads and the accumulator
  // registers it writes stay in flight until a wgmma.wait retires its group.
  struct Wgmma {
    const Stmt* stmt;
    int reader;                  // SharedMemory reader of its shared operands, or -1
    std::vector<size_t> regs;    // vals_ entries of the accumulators it writes
    bool retired = false;
  };
  struct Warpgroup {
    std::vector<size_t> open;                   // wgmma issued since the last commit
    std::deque<std::vector<size_t>> committed;  // oldest group first
  };
  std::vector<Wgmma> wgmmas_;
  std::vector<Warpgroup> warpgroups_;
  // Per vals_ entry: 1 + the in-flight wgmma writing it (accumulator) or reading it (a
  // register A fragment, which it reads asynchronously too); 0: none.
  std::vector<int32_t> acc_writer_;
  size_t wgmma_in_flight_ = 0;
  // Register-A wgmma: per thread, the wgmma.fences it executed; per vals_ entry, 1 + the
  // writer's fence count at the write (0: never written).
  bool rs_wgmma_ = false;
  std::vector<int32_t> fences_, written_after_;

  Scheduler* sched_ = nullptr;  // set while a Specialize runs its arms, or a cluster its CTAs
  uint64_t schedule_seed_ = 0;  // 0: run each task until it blocks
  // Per thread: the last mbar.wait it passed with no meeting of its warpgroup since (a named
  // barrier or bar.sync it took part in, or a warpgroup's wgmma); null: none. An arrival by
  // some threads of a warpgroup stands for all of them, and on the GPU the other warps may
  // still be before that wait (check_elected_arrival).
  std::vector<const Stmt*> unmet_wait_;
  void check_elected_arrival(const Node& n, const std::vector<int>& active);
  void warpgroup_met(const std::vector<int>& active);
  // Seeded: a synchronization point where the running task may hand the baton on.
  void maybe_yield();
  // Per scheduler task: its narrowed thread lists, its CTA, whether it is an arm.
  struct TaskContext {
    std::deque<std::vector<int>> pool;
    int cta = 0;
    bool arm = false;
  };
  std::deque<TaskContext> contexts_;  // indexed by scheduler task id
  int task_ = -1;                     // the running task
  bool arm_ = false;                  // the running task is an arm of a Specialize
  bool breaking_ = false;             // a break's condition held: its loop stops after the iteration
  int atom_loops_ = 0;                // ATOM-tier loops around the statement being resolved

  // Clusters: CTAs per cluster and threads per CTA; the running task's CTA.
  int ctas_ = 1, cta_threads_ = 1, cta_ = 0;
  int64_t cluster_gen_ = 0;  // cluster.syncs completed in this cluster
  int cluster_arrived_ = 0;  // CTAs waiting in the current cluster.sync
  std::vector<bool> exited_;
  // Per CTA: the latest arrival a peer made on its mbarriers, and in which cluster.sync
  // generation (a CTA may only exit after a
  // cluster.sync that follows it).
  struct RemoteArrival {
    int64_t gen = -1;
    int thread = -1, slot = -1;
    const Stmt* stmt = nullptr;
  };
  std::vector<RemoteArrival> remote_;

  // Named barriers of the running block or cluster, CTA r's id i at r * 16 + i: the
  // threads waiting there (whole warps), the count they expect, how often it completed.
  struct NamedBarrier {
    std::vector<int> waiting;
    // Threads that bar.arrive'd in this phase (they ran on) and the join of their vector
    // clocks at the arrive: what the waiters learn when the phase completes.
    std::vector<int> arrived;
    std::vector<int64_t> released;
    int64_t count = 0;
    int64_t completed = 0;
    const Stmt* stmt = nullptr;
  };
  std::vector<NamedBarrier> named_;
};

}  // namespace loom::interp
