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

  // A fresh block: every element unwritten, no copies in flight, `mbarriers`
  // uninitialized mbarriers. `where` prefixes errors.
  void begin_block(std::string where, int threads, int mbarriers = 0);
  // Throws when copies are still in flight (a kernel may not exit with them).
  void end_block() const;
  void barrier() { ++epoch_; }

  // Accesses by `thread` through statement `s` at a logical (padded, flat) offset; the
  // physical element is TensorDecl::physical(offset). Values are rounded to the dtype.
  double read(int id, int64_t offset, int thread, const Stmt& s);
  void write(int id, int64_t offset, double v, int thread, const Stmt& s);
  void atomic_add(int id, int64_t offset, double v, int thread, const Stmt& s);
  void fill(int id, int64_t offset, double v, const Stmt& s);  // a Stage copy

  // cp.async of one element: `v` was read from global memory at issue.
  void async_copy(int id, int64_t offset, double v, int thread, const Stmt& s);
  void async_commit(int thread);
  void async_wait(int thread, int keep_in_flight);

  // mbarriers by slot; `s` names the statement in errors.
  void mbar_init(int slot, int arrivals, int thread, const Stmt& s);
  void mbar_arrive_expect_tx(int slot, int64_t bytes, int thread, const Stmt& s);
  // Throws when the phase of `parity` is not complete (a deadlock on the GPU).
  void mbar_wait(int slot, int parity, int thread, const Stmt& s);
  // One element of a TMA box (read from global memory at issue), then the load's
  // complete_tx of its whole box.
  void tma_element(int id, int64_t offset, double v, int slot, int thread, const Stmt& s);
  void tma_complete_tx(int slot, int64_t bytes, int thread, const Stmt& s);
  int mbarriers() const { return int(mbars_.size()); }

 private:
  struct Cell {
    double value = 0;
    int64_t write_epoch = -1, read_epoch = -1;
    int writer = -1, reader = -1, other_reader = -1;  // other_reader: a second, distinct one
    int pending = 0;                                   // cp.async copies in flight
    bool atomic = false;                               // the epoch's writes are atomic adds
    const Stmt *write_stmt = nullptr, *read_stmt = nullptr, *other_read_stmt = nullptr;
  };
  struct Tensor {
    const TensorDecl* decl = nullptr;
    std::vector<Cell> cells;  // indexed by physical offset
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
    int id;
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
  };
  struct Thread {
    std::vector<size_t> open;                  // copies issued since the last commit
    std::deque<std::vector<size_t>> committed;  // oldest group first
  };

  // Every access goes through here: the tensor's part takes the union over if needed.
  void claim(int id, int thread, const Stmt& s);
  Cell& cell(int id, int64_t offset);
  bool written(const Cell& c) const { return c.write_epoch >= block_start_; }
  std::string where(int id, int64_t offset) const;  // "shared tensor As offset 37"
  // Race check of a write by `thread`; `what` names the write in the message.
  void check_write(const Cell& c, int id, int64_t offset, int thread, const Stmt& s,
                   bool atomic) const;
  void check_settled(const Cell& c, int id, int64_t offset, const char* access,
                     const Stmt& s) const;
  void check_initialized(const Cell& c, int id, int64_t offset, int thread, const Stmt& s) const;
  void record_write(Cell& c, int thread, const Stmt& s, bool atomic);
  void record_read(Cell& c, int thread, const Stmt& s);
  [[noreturn]] void race(const std::string& msg) const;
  Mbarrier& mbar(int slot, int thread, const Stmt& s, bool initializing = false);
  void maybe_complete(Mbarrier& m, int slot, const Stmt& s);
  void retire(size_t copy, int writer);  // the copy's value lands

  std::vector<Tensor> tensors_;
  std::string where_;
  int64_t epoch_ = 0;
  // Cells written before this epoch belong to earlier blocks: a block starts unwritten
  // without clearing every cell.
  int64_t block_start_ = 0;
  std::vector<Copy> copies_;
  std::vector<Thread> threads_;
  size_t in_flight_ = 0;
  std::vector<Mbarrier> mbars_;
  Owner owner_;
};

}  // namespace loom::interp
