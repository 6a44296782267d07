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

  // Registers a shared tensor of `footprint` elements (padding included); returns its id.
  int add(const TensorDecl& decl, int64_t footprint);
  const TensorDecl& decl(int id) const { return *tensors_[size_t(id)].decl; }

  // A fresh block: every element unwritten, no copies in flight. `where` prefixes errors.
  void begin_block(std::string where, int threads);
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
  };
  struct Copy {
    int id;
    int64_t offset;
    double value;
    int thread;
    const Stmt* stmt;
  };
  struct Thread {
    std::vector<size_t> open;                  // copies issued since the last commit
    std::deque<std::vector<size_t>> committed;  // oldest group first
  };

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

  std::vector<Tensor> tensors_;
  std::string where_;
  int64_t epoch_ = 0;
  // Cells written before this epoch belong to earlier blocks: a block starts unwritten
  // without clearing every cell.
  int64_t block_start_ = 0;
  std::vector<Copy> copies_;
  std::vector<Thread> threads_;
  size_t in_flight_ = 0;
};

}  // namespace loom::interp
