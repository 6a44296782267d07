// Shared memory of one thread block as the Kernel IR interpreter models it.
//
// The interpreter runs a block's threads in lockstep, so every shared access happens in
// program order for every thread and a missing barrier would go unnoticed. This model
// therefore records, per element, which thread wrote it and which threads read it in
// which barrier epoch (the number of barriers the block has passed), and reports any
// two accesses by different threads in one epoch of which one is a write: on a GPU
// their order is undefined. It also models cp.async: a copy is in flight from issue
// until a cp.async.wait_group retires its group, and touching its destination before
// then is the bug a missing wait causes.
//
// Overlay parts (TensorDecl::overlay) share bytes: the union holds one part's data at a
// time. The first access to another part's tensor takes the bytes over, which is legal
// only when no access to the part in possession happened since the last barrier and no
// copy into it is in flight; the part given up loses its contents (reading it again is
// an uninitialized read). This is the barrier a staged epilogue needs before it writes
// its tile over the mainloop's slabs.
//
// TMA loads (sm_90) and their mbarriers: a load reads its box at issue and is in flight
// until a thread's mbar.wait observes the phase it completes, which is when its data
// lands (touching the box earlier is a missing wait). A phase completes once its
// expected arrivals have arrived and the bytes announced by arrive.expect_tx equal the
// bytes the loads delivered. Threads run in lockstep, so whatever could complete a
// phase has run by the time a thread waits on it: a wait on an incomplete phase is a
// deadlock on the GPU and an error here, never a hang.
//
// Warp specialization (sm_90): the arms of a Specialize run as concurrent tasks that hand
// buffers to each other through mbarriers, with no bar.sync between. Ordering between
// arms is happens-before through those mbarriers: each task has a vector clock, an
// arrival releases the arriving task's clock into the phase, and a wait that observes the
// phase acquires it. An access by one arm conflicts with an earlier one by another arm
// in the same barrier epoch unless the earlier one happens-before it that way.
//
// Asynchronous readers (wgmma operands, TMA stores) read shared elements some time
// between issue and the wait that retires them (wgmma.wait, bulk.wait.read): a write to
// such an element meanwhile is a race. They read through the async proxy, so elements
// that threads wrote must be fenced (fence.proxy.async by the writing thread) first.
//
// Named barriers (bar.sync id, count) order the accesses of exactly the threads that met
// there: each thread keeps, per other thread, the epoch before which that thread's
// accesses happen-before its own (a vector clock over threads, joined at every named
// barrier it passes, so orderings chain through several barriers).
//
// Thread-block clusters (sm_90): one SharedMemory holds the C CTAs of a cluster, each
// with its own copy of every shared tensor and mbarrier; threads are numbered across the
// cluster (CTA r's thread i is r * block_threads + i), and a thread accesses its own
// CTA's copy unless a call names another (a multicast TMA load, a remote arrive). A
// bar.sync orders the accesses of its own CTA only; a cluster barrier (barrier.cluster)
// orders every CTA's, and between CTAs only it and happens-before through mbarriers
// order anything. Epochs are therefore stamps of one counter that every barrier bumps,
// and an access is ordered before a later one by a barrier when the later thread's
// CTA barrier (same CTA) or the cluster barrier (another CTA) came after it.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "ir/program.h"

namespace loom::interp {

class SharedMemory {
 public:
  // Writer id of a Stage fill: the whole block between two barriers, so it never races.
  static constexpr int kBlock = -2;
  // Writer id of a landed TMA load: the mbarrier wait that made it visible ordered it
  // before every read of the waiting threads.
  static constexpr int kTma = -3;

  // Registers a shared tensor of `footprint` elements (padding included); returns its id.
  int add(const TensorDecl& decl, int64_t footprint);
  const TensorDecl& decl(int id) const { return *tensors_[size_t(id)].decl; }

  // A fresh block (or cluster of `ctas` blocks of threads / ctas threads each): every
  // element unwritten, no copies in flight, `mbarriers` uninitialized mbarriers per CTA.
  // `where` prefixes errors.
  void begin_block(std::string where, int threads, int mbarriers = 0, int ctas = 1);
  // Throws when copies are still in flight (a kernel may not exit with them).
  void end_block() const;
  void barrier(int cta = 0);  // bar.sync of CTA `cta`
  // A named barrier completed by `threads` (all of one CTA): their earlier accesses
  // happen-before their later ones, and nobody else's.
  void named_barrier(const std::vector<int>& threads);
  // bar.arrive by `thread`: its vector clock with its own accesses so far, joined into
  // `released` (what the barrier's waiters learn when the phase completes).
  void named_arrive(int thread, std::vector<int64_t>& released);
  // The phase completes: the waiters meet (as named_barrier) and also learn `released`.
  void named_barrier(const std::vector<int>& threads, const std::vector<int64_t>& released);
  void cluster_barrier();     // barrier.cluster: every CTA's threads
  int ctas() const { return ctas_; }
  int cta_of(int thread) const { return thread / cta_threads_; }
  // "thread 5", or "CTA 1 thread 5" in a cluster (thread = the cluster-wide number).
  std::string who(int thread) const;

  // Accesses by `thread` through statement `s` at a logical (padded, flat) offset; the
  // physical element is TensorDecl::physical(offset). Values are rounded to the dtype.
  double read(int id, int64_t offset, int thread, const Stmt& s);
  void write(int id, int64_t offset, double v, int thread, const Stmt& s);
  void atomic_add(int id, int64_t offset, double v, int thread, const Stmt& s);
  void fill(int id, int64_t offset, double v, const Stmt& s, int cta = 0);  // a Stage copy

  // cp.async of one element: `v` was read from global memory at issue.
  void async_copy(int id, int64_t offset, double v, int thread, const Stmt& s);
  void async_commit(int thread);
  void async_wait(int thread, int keep_in_flight);

  // mbarriers by slot of the thread's own CTA; `s` names the statement in errors.
  void mbar_init(int slot, int arrivals, int thread, const Stmt& s);
  void mbar_arrive_expect_tx(int slot, int64_t bytes, int thread, const Stmt& s);
  // Throws when the phase of `parity` is not complete (a deadlock on the GPU).
  void mbar_wait(int slot, int parity, int thread, const Stmt& s);
  // One element of a TMA box (read from global memory at issue) landing in CTA `cta`'s
  // copy of the tensor, then the load's complete_tx of its whole box on `cta`'s slot.
  void tma_element(int id, int64_t offset, double v, int slot, int thread, const Stmt& s,
                   int cta);
  void tma_complete_tx(int slot, int64_t bytes, int thread, const Stmt& s, int cta);
  // mbarrier.arrive of one thread (no transaction bytes) on slot `slot` of CTA `cta`.
  void mbar_arrive(int slot, int thread, const Stmt& s, int cta);
  // Whether the phase of `parity` has completed (a wait would pass now).
  bool mbar_ready(int slot, int parity, int thread, const Stmt& s);
  // "phase 2 of mbarrier slot 1 (3 of 128 arrivals, 0 bytes outstanding)", for messages.
  std::string mbar_state(int slot, int cta = 0) const;

  // The arms of a Specialize, and the CTAs of a cluster (Kernel IR): `threads` become one
  // task until end_task, which gives them back to the task they were in (an arm's CTA).
  // A task starts knowing nothing of its parent: its threads were not ordered by a barrier.
  int begin_task(const std::vector<int>& threads);
  void end_task(const std::vector<int>& threads);

  // Asynchronous readers. open_reader starts one issued by `thread` through `s`;
  // async_read reads an element for it (checked like read(), plus the proxy fence) and
  // keeps the element "being read" until close_reader.
  int open_reader(int thread, const Stmt& s);
  double async_read(int reader, int id, int64_t offset);
  void close_reader(int reader);
  // fence.proxy.async by `thread`: its earlier shared writes are visible to the async proxy.
  void fence_proxy_async(int thread) { ++fences_[size_t(thread)]; }
  // TMA store bulk groups of `thread` (cp.async.bulk.commit_group / wait_group.read).
  void bulk_issue(int thread, int reader) { threads_[size_t(thread)].bulk_open.push_back(reader); }
  void bulk_commit(int thread);
  void bulk_wait(int thread, int keep_reading);

 private:
  // When an access happened in its task's order: task -1 is no Specialize arm.
  struct Stamp {
    int task = -1;
    int64_t time = 0;
    int thread = -1;    // the accessing thread (-1: a block-wide or TMA write)
    int64_t epoch = 0;  // epoch_ at the access, for the named-barrier clocks
  };
  struct Cell {
    double value = 0;
    int64_t write_epoch = -1, read_epoch = -1;
    int writer = -1, reader = -1, other_reader = -1;  // other_reader: a second, distinct one
    int pending = 0;                                   // cp.async copies in flight
    int async_reads = 0;                               // asynchronous readers in flight
    int async_reader = -1;                             // the latest of them
    bool atomic = false;                               // the epoch's writes are atomic adds
    bool read_async = false;  // `reader`'s read was an asynchronous one, retired at read_stamp
    int64_t write_fence = 0;  // the writer's fence.proxy.async count at the write
    Stamp write_stamp, read_stamp, other_read_stamp;
    const Stmt *write_stmt = nullptr, *read_stmt = nullptr, *other_read_stmt = nullptr;
  };
  struct Tensor {
    const TensorDecl* decl = nullptr;
    int64_t footprint = 0;
    std::vector<Cell> cells;  // CTA r's at r * footprint + physical offset
    int lost_to = -1;         // the tensor whose overlay part took its bytes in this block
  };
  // The part in possession of the union and its latest access (for the messages).
  struct Owner {
    int part = -1;  // -1: no shared access yet in this block
    int64_t epoch = -1;
    int tensor = -1, thread = -1;
    const Stmt* stmt = nullptr;
  };
  struct Copy {
    int id, cta;
    int64_t offset;
    double value;
    int thread;
    const Stmt* stmt;  // null once retired
    bool tma = false;
  };
  struct Mbarrier {
    bool initialized = false;
    int64_t init_epoch = -1;
    int init_thread = -1;
    int arrivals = 0;              // expected per phase
    int pending = 0;               // arrivals the current phase still waits for
    int64_t tx = 0;                // bytes announced minus bytes delivered
    int64_t phase = 0;             // phases completed
    std::vector<size_t> current;   // TMA copies completing the current phase
    std::vector<size_t> complete;  // copies of completed phases no wait has observed yet
    std::vector<int64_t> arrived, released;  // task clocks of this phase's / past arrivals
  };
  struct Thread {
    std::vector<size_t> open;                  // copies issued since the last commit
    std::deque<std::vector<size_t>> committed;  // oldest group first
    std::vector<int> bulk_open;                  // TMA store readers since the last commit
    std::deque<std::vector<int>> bulk_committed;  // oldest group first
  };
  struct Reader {
    const Stmt* stmt;
    int thread;
    std::vector<std::pair<int, int64_t>> cells;  // (tensor, physical offset); empty once closed
    bool open = true;
  };

  // Every access goes through here: the tensor's part takes the union over if needed.
  void claim(int id, int cta, int thread, const Stmt& s);
  Cell& cell(int id, int64_t offset, int cta);
  bool written(const Cell& c) const { return c.write_epoch >= block_start_; }
  // "shared tensor As offset 37" (+ " of CTA 1" in a cluster)
  std::string where(int id, int64_t offset, int cta) const;
  // Whether an access to CTA `cta`'s memory stamped with epoch `e` shares an epoch with
  // the current access by `thread` (no barrier orders them).
  bool concurrent(int64_t e, int cta, int thread) const;
  // Race check of a write by `thread`; `what` names the write in the message.
  void check_write(const Cell& c, int id, int64_t offset, int cta, int thread, const Stmt& s,
                   bool atomic) const;
  void check_settled(const Cell& c, int id, int64_t offset, int cta, const char* access,
                     const Stmt& s) const;
  void check_initialized(const Cell& c, int id, int64_t offset, int cta, int thread,
                         const Stmt& s) const;
  // A write while an asynchronous reader (wgmma, TMA store) still reads the element.
  void check_not_being_read(const Cell& c, int id, int64_t offset, int cta,
                            const std::string& write, const Stmt& s) const;
  Stamp stamp(int thread) const;
  void forget_tasks();  // no task is live: their clocks no longer order anything
  // Whether an access stamped `a` happens-before the next access by `thread` through
  // mbarriers between Specialize arms, or through named barriers.
  bool ordered(const Stamp& a, int thread) const;
  void join(std::vector<int64_t>& into, const std::vector<int64_t>& from) const;
  void record_write(Cell& c, int cta, int thread, const Stmt& s, bool atomic);
  void record_read(Cell& c, int cta, int thread, const Stmt& s);
  [[noreturn]] void race(const std::string& msg) const;
  Mbarrier& mbar(int slot, int cta, int thread, const Stmt& s, bool initializing = false);
  std::string slot_name(int slot, int cta) const;  // "mbarrier slot 2" (+ " of CTA 1")
  void maybe_complete(Mbarrier& m, int slot, const Stmt& s);
  void arrive(int slot, int cta, int64_t bytes, int thread, const Stmt& s);
  // The copy's value lands; the landing is stamped as `by`'s (the waiting thread).
  void retire(size_t copy, int writer, int by = -1);

  std::vector<Tensor> tensors_;
  std::string where_;
  int ctas_ = 1, cta_threads_ = 1, mbars_per_cta_ = 0;
  // Barrier epochs: every barrier bumps epoch_; level_[r] is its value at CTA r's latest
  // barrier (bar.sync or cluster), cluster_level_ at the latest cluster barrier.
  int64_t epoch_ = 0;
  std::vector<int64_t> level_;
  int64_t cluster_level_ = 0;
  // Cells written before this epoch belong to earlier blocks: a block starts unwritten
  // without clearing every cell.
  int64_t block_start_ = 0;
  std::vector<Copy> copies_;
  std::vector<Thread> threads_;
  size_t in_flight_ = 0;
  std::vector<Mbarrier> mbars_;  // CTA r's slot s at r * mbars_per_cta_ + s
  std::vector<Owner> owners_;    // per CTA
  std::vector<int> task_of_;                  // per thread: its Specialize task, or -1
  std::vector<std::vector<int64_t>> clocks_;  // clocks_[a][b]: b's time as a knows it
  int live_tasks_ = 0;
  std::vector<int> parent_;  // per task: the task its threads were in before, or -1
  std::vector<Reader> readers_;
  size_t readers_open_ = 0;
  std::vector<int64_t> fences_;  // per thread: fence.proxy.async executed
  // sync_[b][a]: accesses by thread a stamped with an epoch below it happen-before b's
  // next accesses through named barriers. Empty until the block's first named barrier.
  std::vector<std::vector<int64_t>> sync_;
};

}  // namespace loom::interp
