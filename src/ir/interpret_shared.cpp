// Shared memory, race detection and cp.async groups of the Kernel IR interpreter
// (see interpret_shared.h).
#include "ir/interpret_shared.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/interpreter.h"

namespace loom::interp {
namespace {

std::string text(const Stmt& s) {
  std::string t = print_block(Block{s});
  return "`" + t.substr(0, t.find('\n')) + "`";
}

std::string thread_name(int t) {
  return t == SharedMemory::kBlock ? "the block's stage copy"
         : t == SharedMemory::kTma ? "a TMA load" : "thread " + std::to_string(t);
}

}  // namespace

int SharedMemory::add(const TensorDecl& decl, int64_t footprint) {
  Tensor t;
  t.decl = &decl;
  t.cells.resize(size_t(footprint));
  tensors_.push_back(std::move(t));
  return int(tensors_.size()) - 1;
}

void SharedMemory::begin_block(std::string where, int threads, int mbarriers) {
  where_ = std::move(where);
  block_start_ = ++epoch_;
  copies_.clear();
  threads_.assign(size_t(threads), Thread{});
  in_flight_ = 0;
  mbars_.assign(size_t(mbarriers), Mbarrier{});
  owner_ = Owner{};
  for (Tensor& t : tensors_) t.lost_to = -1;
  task_of_.assign(size_t(threads), -1);
  clocks_.clear();
  live_tasks_ = 0;
  readers_.clear();
  readers_open_ = 0;
  fences_.assign(size_t(threads), 0);
}

// A barrier orders everything before it; task clocks only matter within one epoch.
void SharedMemory::barrier() {
  ++epoch_;
  if (live_tasks_ == 0) clocks_.clear();
}

void SharedMemory::claim(int id, int thread, const Stmt& s) {
  const int part = decl(id).overlay;
  if (owner_.part != part && owner_.part >= 0) {
    const std::string takes = decl(id).name + " (overlay part " + std::to_string(part) +
                              ") takes over the bytes of part " + std::to_string(owner_.part);
    if (owner_.epoch == epoch_)
      race("race on shared memory: " + takes + " in " + text(s) + " by " +
           thread_name(thread) + ", but " + thread_name(owner_.thread) + " accessed " +
           decl(owner_.tensor).name + " there (" + text(*owner_.stmt) +
           ") with no barrier in between; add a barrier after the last use of " +
           decl(owner_.tensor).name);
    for (const Copy& c : copies_)
      if (c.stmt && decl(c.id).overlay == owner_.part)
        race("race on shared memory: " + takes + " in " + text(s) + " while a copy into " +
             where(c.id, c.offset) + " is in flight (" + text(*c.stmt) +
             "); wait for every copy (cp.async.wait 0, mbar.wait) and barrier first");
    for (Tensor& t : tensors_)
      if (t.decl->overlay == owner_.part) {
        for (Cell& c : t.cells) c.write_epoch = c.read_epoch = -1;
        t.lost_to = id;
      }
  }
  owner_ = Owner{part, epoch_, id, thread, &s};
}

void SharedMemory::end_block() const {
  if (readers_open_ > 0)
    for (const Reader& r : readers_)
      if (r.open)
        race(text(*r.stmt) + " by thread " + std::to_string(r.thread) + " still reads shared "
             "memory when the block ends: " +
             (r.stmt->kind == StmtKind::TmaStore
                  ? "commit the store and wait for it (bulk.commit + bulk.wait.read 0) before "
                    "the block exits"
                  : "retire it (wgmma.commit + wgmma.wait 0) before the block exits"));
  if (in_flight_ == 0) return;
  for (const Copy& c : copies_)
    if (c.stmt && c.tma)
      race("TMA load to " + where(c.id, c.offset) + " by thread " + std::to_string(c.thread) +
           " (" + text(*c.stmt) + ") was never waited on when the kernel ends: wait on its "
           "mbarrier's phase (mbar.wait) before the block exits");
    else if (c.stmt)
      race("cp.async to " + where(c.id, c.offset) + " by thread " + std::to_string(c.thread) +
           " (" + text(*c.stmt) + ") is still in flight when the kernel ends: commit it and "
           "wait for it (cp.async.commit + cp.async.wait 0) before its data is used");
}

std::string SharedMemory::where(int id, int64_t offset) const {
  const TensorDecl& d = decl(id);
  int64_t phys = d.physical(offset);
  return d.name + " offset " + std::to_string(offset) +
         (phys != offset ? " (physical " + std::to_string(phys) + ")" : "");
}

void SharedMemory::race(const std::string& msg) const {
  throw RaceError("interpreter: " + where_ + ": " + msg);
}

SharedMemory::Cell& SharedMemory::cell(int id, int64_t offset) {
  Tensor& t = tensors_[size_t(id)];
  int64_t phys = t.decl->physical(offset);
  // The swizzle permutes offsets within aligned groups, so a valid logical offset has
  // a valid physical one; this guards a swizzle whose bits reach past the footprint.
  if (phys < 0 || phys >= int64_t(t.cells.size()))
    throw Error("interpreter: " + where_ + ": " + where(id, offset) +
                " lies outside the shared tensor's " + std::to_string(t.cells.size()) +
                " elements: its swizzle moves offsets past the footprint");
  return t.cells[size_t(phys)];
}

void SharedMemory::check_settled(const Cell& c, int id, int64_t offset, const char* access,
                                 const Stmt& s) const {
  if (c.pending == 0) return;
  std::string by;
  bool tma = false;
  for (const Copy& cp : copies_)
    if (cp.stmt && cp.id == id && decl(id).physical(cp.offset) == decl(id).physical(offset)) {
      by = " (issued by thread " + std::to_string(cp.thread) + ": " + text(*cp.stmt) + ")";
      tma = cp.tma;
    }
  if (tma)
    race(std::string(access) + " of " + where(id, offset) + " by " + text(s) +
         " before its TMA load completed" + by +
         ": missing mbar.wait? (wait on the load's mbarrier phase before touching the box)");
  race(std::string(access) + " of " + where(id, offset) + " by " + text(s) +
       " before its cp.async completed" + by +
       ": missing cp.async.wait? (wait for the copy's group, then barrier)");
}

void SharedMemory::check_initialized(const Cell& c, int id, int64_t offset, int thread,
                                     const Stmt& s) const {
  if (written(c)) return;
  const int lost_to = tensors_[size_t(id)].lost_to;
  throw Error("interpreter: " + where_ + ": uninitialized shared read: thread " +
              std::to_string(thread) + " reads " + where(id, offset) + " in " + text(s) +
              (lost_to >= 0 ? ", whose bytes the overlay " + decl(lost_to).name + " took over"
                            : ", which nothing in this block wrote; a copy into the shared "
                              "tensor is missing or does not cover this element"));
}

void SharedMemory::check_write(const Cell& c, int id, int64_t offset, int thread,
                               const Stmt& s, bool atomic) const {
  if (c.read_epoch == epoch_) {
    int other = c.reader != thread ? c.reader : c.other_reader;
    const Stmt* rs = c.reader != thread ? c.read_stmt : c.other_read_stmt;
    const Stamp& st = c.reader != thread ? c.read_stamp : c.other_read_stamp;
    // An asynchronous read lasts until the wait that retired it: a write that the wait
    // does not happen-before (an arrival handed the buffer on before the wait) races.
    if (other >= 0 && other == c.reader && c.read_async && !ordered(st, thread))
      race("race on shared tensor " + where(id, offset) + ": " + text(s) + " by " +
           thread_name(thread) + " writes it while " + text(*rs) + " (issued by thread " +
           std::to_string(other) + ") may still be reading it: the wait that retires that read "
           "does not happen before this write (was the buffer handed on by an mbarrier arrival "
           "before the wait?); " +
           (rs->kind == StmtKind::TmaStore
                ? "missing bulk.wait.read? (wait for the store's group before releasing its tile)"
                : "missing wgmma.wait? (retire the wgmma's group before releasing its operands)"));
    if (other >= 0 && !ordered(st, thread))
      race("race on shared tensor " + where(id, offset) + ": thread " + std::to_string(other) +
           " read it (" + text(*rs) + ") and thread " + std::to_string(thread) +
           " wrote it (" + text(s) + ") with no barrier in between, so the write may land "
           "before the read (write-after-read); add a barrier between them");
  }
  if (written(c) && c.write_epoch == epoch_ && c.writer != thread && !(atomic && c.atomic) &&
      !ordered(c.write_stamp, thread))
    race("race on shared tensor " + where(id, offset) + ": " + thread_name(c.writer) +
         " wrote it (" + text(*c.write_stmt) + ") and thread " + std::to_string(thread) +
         " wrote it too (" + text(s) + ") with no barrier in between (write-after-write)");
}

void SharedMemory::record_write(Cell& c, int thread, const Stmt& s, bool atomic) {
  if (!(written(c) && c.write_epoch == epoch_ && c.atomic && atomic)) c.writer = thread;
  c.write_epoch = epoch_;
  c.atomic = atomic;
  c.write_stmt = &s;
  c.write_stamp = stamp(thread);
  c.write_fence = thread >= 0 ? fences_[size_t(thread)] : 0;
}

void SharedMemory::record_read(Cell& c, int thread, const Stmt& s) {
  if (c.read_epoch != epoch_) {
    c.read_epoch = epoch_;
    c.reader = thread;
    c.read_stmt = &s;
    c.read_stamp = stamp(thread);
    c.other_reader = -1;
    c.read_async = false;
  } else if (thread == c.reader) {
    c.read_stamp = stamp(thread);
    c.read_async = false;
  } else if (c.other_reader < 0 || thread == c.other_reader) {
    c.other_reader = thread;
    c.other_read_stmt = &s;
    c.other_read_stamp = stamp(thread);
  }
}

double SharedMemory::read(int id, int64_t offset, int thread, const Stmt& s) {
  claim(id, thread, s);
  Cell& c = cell(id, offset);
  check_settled(c, id, offset, "read", s);
  check_initialized(c, id, offset, thread, s);
  if (c.write_epoch == epoch_ && c.writer >= 0 && c.writer != thread &&
      !ordered(c.write_stamp, thread))
    race("race on shared tensor " + where(id, offset) + ": thread " + std::to_string(c.writer) +
         " wrote it (" + text(*c.write_stmt) + ") and thread " + std::to_string(thread) +
         " read it (" + text(s) + ") with no barrier in between (read-after-write); add a "
         "barrier between them");
  record_read(c, thread, s);
  return c.value;
}

void SharedMemory::write(int id, int64_t offset, double v, int thread, const Stmt& s) {
  claim(id, thread, s);
  Cell& c = cell(id, offset);
  check_not_being_read(c, id, offset, "write", s);
  check_settled(c, id, offset, "write", s);
  check_write(c, id, offset, thread, s, false);
  record_write(c, thread, s, false);
  c.value = round_to_dtype(decl(id).dtype, v);
}

void SharedMemory::atomic_add(int id, int64_t offset, double v, int thread, const Stmt& s) {
  claim(id, thread, s);
  Cell& c = cell(id, offset);
  check_not_being_read(c, id, offset, "atomic add", s);
  check_settled(c, id, offset, "atomic add", s);
  check_initialized(c, id, offset, thread, s);
  check_write(c, id, offset, thread, s, true);
  record_write(c, thread, s, true);
  c.value = round_to_dtype(decl(id).dtype, c.value + v);
}

void SharedMemory::fill(int id, int64_t offset, double v, const Stmt& s) {
  claim(id, kBlock, s);
  Cell& c = cell(id, offset);
  check_not_being_read(c, id, offset, "stage copy", s);
  check_settled(c, id, offset, "stage copy", s);
  record_write(c, kBlock, s, false);
  c.value = round_to_dtype(decl(id).dtype, v);
}

void SharedMemory::async_copy(int id, int64_t offset, double v, int thread, const Stmt& s) {
  claim(id, thread, s);
  Cell& c = cell(id, offset);
  check_not_being_read(c, id, offset, "cp.async", s);
  check_settled(c, id, offset, "cp.async", s);
  // The copy may land any time until its wait: it races with this epoch's accesses.
  check_write(c, id, offset, thread, s, false);
  ++c.pending;
  ++in_flight_;
  threads_[size_t(thread)].open.push_back(copies_.size());
  copies_.push_back(Copy{id, offset, v, thread, &s});
}

void SharedMemory::async_commit(int thread) {
  Thread& t = threads_[size_t(thread)];
  t.committed.push_back(std::move(t.open));
  t.open.clear();
}

// cp.async.wait_group retires whole committed groups, oldest first; copies not yet
// committed are in no group and stay in flight (PTX ISA, cp.async.wait_group).
void SharedMemory::async_wait(int thread, int keep_in_flight) {
  Thread& t = threads_[size_t(thread)];
  while (t.committed.size() > size_t(std::max(keep_in_flight, 0))) {
    for (size_t i : t.committed.front()) {
      Copy& cp = copies_[i];
      Cell& c = cell(cp.id, cp.offset);
      --c.pending;
      --in_flight_;
      check_not_being_read(c, cp.id, cp.offset, "cp.async landing", *cp.stmt);
      check_write(c, cp.id, cp.offset, cp.thread, *cp.stmt, false);
      record_write(c, cp.thread, *cp.stmt, false);
      c.value = round_to_dtype(decl(cp.id).dtype, cp.value);
      cp.stmt = nullptr;  // retired
    }
    t.committed.pop_front();
  }
}

// ---- mbarriers and TMA ------------------------------------------------------------

SharedMemory::Mbarrier& SharedMemory::mbar(int slot, int thread, const Stmt& s,
                                           bool initializing) {
  if (slot < 0 || slot >= int(mbars_.size()))
    throw Error("interpreter: " + where_ + ": " + text(s) + " uses mbarrier slot " +
                std::to_string(slot) + " of " + std::to_string(mbars_.size()) +
                " (KernelOp::mbarriers)");
  Mbarrier& m = mbars_[size_t(slot)];
  if (initializing) return m;
  if (!m.initialized)
    throw Error("interpreter: " + where_ + ": thread " + std::to_string(thread) + " uses " +
                "mbarrier slot " + std::to_string(slot) + " in " + text(s) +
                " before any mbar.init of it in this block");
  // The init is an ordinary shared-memory write: other threads see it after a barrier.
  if (m.init_epoch == epoch_ && m.init_thread != thread)
    race("mbarrier slot " + std::to_string(slot) + " initialized by thread " +
         std::to_string(m.init_thread) + " is used by thread " + std::to_string(thread) +
         " in " + text(s) + " with no barrier in between: fence.mbarrier_init, then barrier");
  return m;
}

void SharedMemory::mbar_init(int slot, int arrivals, int thread, const Stmt& s) {
  Mbarrier& m = mbar(slot, thread, s, true);
  if (m.initialized)
    race("mbarrier slot " + std::to_string(slot) + " is initialized again by thread " +
         std::to_string(thread) + " (" + text(s) + "): initialize each barrier once, from "
         "one thread");
  m = Mbarrier{};
  m.initialized = true;
  m.init_epoch = epoch_;
  m.init_thread = thread;
  m.arrivals = m.pending = arrivals;
}

void SharedMemory::maybe_complete(Mbarrier& m, int slot, const Stmt& s) {
  if (m.pending > 0) return;
  if (m.tx < 0)
    throw Error("interpreter: " + where_ + ": mbarrier slot " + std::to_string(slot) +
                " received " + std::to_string(-m.tx) + " bytes more from TMA loads than its "
                "arrive.expect_tx announced (" + text(s) + "): expect every load's box bytes");
  if (m.tx > 0) return;
  ++m.phase;
  join(m.released, m.arrived);
  m.arrived.clear();
  m.complete.insert(m.complete.end(), m.current.begin(), m.current.end());
  m.current.clear();
  m.pending = m.arrivals;
}

void SharedMemory::mbar_arrive_expect_tx(int slot, int64_t bytes, int thread, const Stmt& s) {
  Mbarrier& m = mbar(slot, thread, s);
  if (m.pending == 0)
    throw Error("interpreter: " + where_ + ": thread " + std::to_string(thread) +
                " arrives on mbarrier slot " + std::to_string(slot) + " (" + text(s) +
                ") more often than the " + std::to_string(m.arrivals) +
                " arrivals a phase expects");
  m.tx += bytes;
  --m.pending;
  // The arrival releases what the arriving task did before it to whoever observes the phase.
  if (int a = task_of_[size_t(thread)]; a >= 0) {
    join(m.arrived, clocks_[size_t(a)]);
    ++clocks_[size_t(a)][size_t(a)];
  }
  maybe_complete(m, slot, s);
}

void SharedMemory::mbar_arrive(int slot, int thread, const Stmt& s) {
  mbar_arrive_expect_tx(slot, 0, thread, s);
}

bool SharedMemory::mbar_ready(int slot, int parity, int thread, const Stmt& s) {
  return (mbar(slot, thread, s).phase & 1) != (parity & 1);
}

std::string SharedMemory::mbar_state(int slot) const {
  const Mbarrier& m = mbars_.at(size_t(slot));
  return "phase " + std::to_string(m.phase) + " of mbarrier slot " + std::to_string(slot) +
         " (still expects " + std::to_string(m.pending) + " of " + std::to_string(m.arrivals) +
         " arrivals and " + std::to_string(m.tx) + " bytes)";
}

void SharedMemory::tma_element(int id, int64_t offset, double v, int slot, int thread,
                               const Stmt& s) {
  Mbarrier& m = mbar(slot, thread, s);
  claim(id, thread, s);
  Cell& c = cell(id, offset);
  check_not_being_read(c, id, offset, "TMA load", s);
  check_settled(c, id, offset, "TMA load", s);
  // The box may land any time until the wait: it races with this epoch's accesses.
  check_write(c, id, offset, thread, s, false);
  ++c.pending;
  ++in_flight_;
  m.current.push_back(copies_.size());
  copies_.push_back(Copy{id, offset, v, thread, &s, true});
}

void SharedMemory::tma_complete_tx(int slot, int64_t bytes, int thread, const Stmt& s) {
  Mbarrier& m = mbar(slot, thread, s);
  m.tx -= bytes;
  maybe_complete(m, slot, s);
}

// try_wait.parity P succeeds once the phase of parity P has completed, i.e. when the
// phase now in progress has the other parity (PTX ISA, mbarrier.test_wait/try_wait).
void SharedMemory::mbar_wait(int slot, int parity, int thread, const Stmt& s) {
  Mbarrier& m = mbar(slot, thread, s);
  if ((m.phase & 1) == (parity & 1))
    throw Error("interpreter: " + where_ + ": deadlock: thread " + std::to_string(thread) +
                " waits (" + text(s) + ") for phase " + std::to_string(m.phase) +
                " of mbarrier slot " + std::to_string(slot) + ", which still expects " +
                std::to_string(m.pending) + " of " + std::to_string(m.arrivals) +
                " arrivals and " + std::to_string(m.tx) +
                " bytes; nothing before the wait completes it (a missing arrive.expect_tx or "
                "tma.load, or the wrong parity)");
  if (int w = task_of_[size_t(thread)]; w >= 0) join(clocks_[size_t(w)], m.released);
  for (size_t i : m.complete) retire(i, kTma, thread);
  m.complete.clear();
}

void SharedMemory::retire(size_t i, int writer, int by) {
  Copy& cp = copies_[i];
  if (!cp.stmt) return;
  Cell& c = cell(cp.id, cp.offset);
  --c.pending;
  --in_flight_;
  check_not_being_read(c, cp.id, cp.offset, "TMA landing", *cp.stmt);
  record_write(c, writer, *cp.stmt, false);
  c.write_stamp = stamp(by);
  c.value = round_to_dtype(decl(cp.id).dtype, cp.value);
  cp.stmt = nullptr;
}

// ---- Specialize tasks: happens-before through mbarriers ----------------------------

int SharedMemory::begin_task(const std::vector<int>& threads) {
  const size_t id = clocks_.size();
  for (auto& row : clocks_) row.resize(id + 1, 0);
  clocks_.emplace_back(id + 1, 0);
  clocks_[id][id] = 1;  // stamps start at 1: 0 is "knows nothing of this task"
  for (int t : threads) task_of_[size_t(t)] = int(id);
  ++live_tasks_;
  return int(id);
}

void SharedMemory::end_task(const std::vector<int>& threads) {
  for (int t : threads) task_of_[size_t(t)] = -1;
  --live_tasks_;
}

SharedMemory::Stamp SharedMemory::stamp(int thread) const {
  if (thread < 0) return Stamp{};
  const int a = task_of_[size_t(thread)];
  return a < 0 ? Stamp{} : Stamp{a, clocks_[size_t(a)][size_t(a)]};
}

bool SharedMemory::ordered(const Stamp& a, int thread) const {
  if (a.task < 0 || thread < 0) return false;
  const int b = task_of_[size_t(thread)];
  // Threads of one arm run in lockstep but only a barrier orders them (none in an arm).
  if (b < 0 || b == a.task || size_t(a.task) >= clocks_.size()) return false;
  return clocks_[size_t(b)][size_t(a.task)] >= a.time;
}

void SharedMemory::join(std::vector<int64_t>& into, const std::vector<int64_t>& from) const {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

// ---- asynchronous readers: wgmma operands, TMA stores ------------------------------

int SharedMemory::open_reader(int thread, const Stmt& s) {
  readers_.push_back(Reader{&s, thread, {}});
  ++readers_open_;
  return int(readers_.size()) - 1;
}

double SharedMemory::async_read(int reader, int id, int64_t offset) {
  const Reader& r = readers_[size_t(reader)];
  const double v = read(id, offset, r.thread, *r.stmt);
  Cell& c = cell(id, offset);
  // The async proxy does not see generic-proxy writes that no fence.proxy.async by the
  // writing thread has published (PTX ISA 8.6, "Proxies").
  if (c.writer >= 0 && c.write_fence == fences_[size_t(c.writer)])
    throw Error("interpreter: " + where_ + ": " + text(*r.stmt) + " reads " + where(id, offset) +
                " through the async proxy, but thread " + std::to_string(c.writer) +
                " wrote it (" + text(*c.write_stmt) + ") with no fence.proxy.async since: "
                "the copy engine / tensor cores may read stale bytes; have the writing threads "
                "execute fence.proxy.async after their shared stores, then a barrier");
  ++c.async_reads;
  c.async_reader = reader;
  readers_[size_t(reader)].cells.emplace_back(id, offset);
  return v;
}

void SharedMemory::close_reader(int reader) {
  Reader& r = readers_[size_t(reader)];
  if (!r.open) return;
  for (const auto& [id, offset] : r.cells) {
    Cell& c = cell(id, offset);
    --c.async_reads;
    // The read ends now, in the retiring thread's order.
    record_read(c, r.thread, *r.stmt);
    c.read_async = c.reader == r.thread;
  }
  r.cells.clear();
  r.open = false;
  --readers_open_;
}

void SharedMemory::check_not_being_read(const Cell& c, int id, int64_t offset,
                                        const std::string& write, const Stmt& s) const {
  if (c.async_reads == 0) return;
  const Reader& r = readers_[size_t(c.async_reader)];
  const bool store = r.stmt->kind == StmtKind::TmaStore;
  race(write + " of " + where(id, offset) + " by " + text(s) + " while " + text(*r.stmt) +
       " (issued by thread " + std::to_string(r.thread) + ") may still be reading it: " +
       (store ? "missing bulk.wait.read? (commit the store and wait for its group with "
                "bulk.wait.read before overwriting the tile it stores)"
              : "missing wgmma.wait? (commit the wgmma and retire its group with wgmma.wait "
                "before overwriting its operands)"));
}

void SharedMemory::bulk_commit(int thread) {
  Thread& t = threads_[size_t(thread)];
  t.bulk_committed.push_back(std::move(t.bulk_open));
  t.bulk_open.clear();
}

// cp.async.bulk.wait_group.read N: the stores of all but the newest N committed groups
// have finished reading shared memory; uncommitted ones are in no group yet.
void SharedMemory::bulk_wait(int thread, int keep_reading) {
  Thread& t = threads_[size_t(thread)];
  while (t.bulk_committed.size() > size_t(std::max(keep_reading, 0))) {
    for (int r : t.bulk_committed.front()) close_reader(r);
    t.bulk_committed.pop_front();
  }
}

}  // namespace loom::interp
