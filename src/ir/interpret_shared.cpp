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

}  // namespace

std::string SharedMemory::who(int t) const {
  if (t == kBlock) return "the block's stage copy";
  if (t == kTma) return "a TMA load";
  if (ctas_ == 1) return "thread " + std::to_string(t);
  return "CTA " + std::to_string(cta_of(t)) + " thread " + std::to_string(t % cta_threads_);
}

int SharedMemory::add(const TensorDecl& decl, int64_t footprint) {
  Tensor t;
  t.decl = &decl;
  t.footprint = footprint;
  t.cells.resize(size_t(footprint));
  tensors_.push_back(std::move(t));
  return int(tensors_.size()) - 1;
}

void SharedMemory::begin_block(std::string where, int threads, int mbarriers, int ctas) {
  where_ = std::move(where);
  ctas_ = ctas;
  cta_threads_ = threads / ctas;
  mbars_per_cta_ = mbarriers;
  block_start_ = ++epoch_;
  level_.assign(size_t(ctas), epoch_);
  cluster_level_ = epoch_;
  copies_.clear();
  threads_.assign(size_t(threads), Thread{});
  in_flight_ = 0;
  mbars_.assign(size_t(mbarriers) * size_t(ctas), Mbarrier{});
  owners_.assign(size_t(ctas), Owner{});
  for (Tensor& t : tensors_) {
    t.lost_to = -1;
    // Cells keep their epochs across blocks (block_start_ marks them stale), so a larger
    // cluster only needs room for its copies.
    if (t.cells.size() < size_t(t.footprint * ctas)) t.cells.resize(size_t(t.footprint * ctas));
  }
  task_of_.assign(size_t(threads), -1);
  clocks_.clear();
  live_tasks_ = 0;
  parent_.clear();
  readers_.clear();
  readers_open_ = 0;
  fences_.assign(size_t(threads), 0);
  sync_.clear();
}

// A barrier orders everything before it; task clocks only matter within one epoch. In a
// cluster a CTA's bar.sync leaves the other CTAs' epochs (and the clocks that order
// accesses across CTAs) alone.
void SharedMemory::barrier(int cta) {
  level_[size_t(cta)] = ++epoch_;
  if (live_tasks_ == 0 && ctas_ == 1) forget_tasks();
}

void SharedMemory::named_barrier(const std::vector<int>& threads) {
  named_barrier(threads, {});
}

void SharedMemory::named_arrive(int thread, std::vector<int64_t>& released) {
  const int64_t e = ++epoch_;  // the arriver's later accesses carry e or more: not released
  const size_t n = threads_.size();
  if (sync_.empty()) sync_.assign(n, std::vector<int64_t>(n, 0));
  if (released.size() != n) released.assign(n, 0);
  join(released, sync_[size_t(thread)]);
  released[size_t(thread)] = std::max(released[size_t(thread)], e);
}

void SharedMemory::named_barrier(const std::vector<int>& threads,
                                 const std::vector<int64_t>& released) {
  const int64_t e = ++epoch_;
  const size_t n = threads_.size();
  if (sync_.empty()) sync_.assign(n, std::vector<int64_t>(n, 0));
  std::vector<int64_t> joined(n, 0);
  if (released.size() == n) join(joined, released);
  for (int t : threads) join(joined, sync_[size_t(t)]);
  for (int t : threads) joined[size_t(t)] = e;
  for (int t : threads) sync_[size_t(t)] = joined;
}

void SharedMemory::cluster_barrier() {
  cluster_level_ = ++epoch_;
  for (int64_t& l : level_) l = epoch_;
  if (live_tasks_ == 0) forget_tasks();
}

void SharedMemory::forget_tasks() {
  clocks_.clear();
  parent_.clear();
}

bool SharedMemory::concurrent(int64_t e, int cta, int thread) const {
  const int by = thread >= 0 ? cta_of(thread) : cta;
  return e >= (by == cta ? level_[size_t(cta)] : cluster_level_);
}

void SharedMemory::claim(int id, int cta, int thread, const Stmt& s) {
  const int part = decl(id).overlay;
  Owner& owner = owners_[size_t(cta)];
  if (owner.part != part && owner.part >= 0) {
    const std::string takes = decl(id).name + " (overlay part " + std::to_string(part) +
                              ") takes over the bytes of part " + std::to_string(owner.part);
    if (concurrent(owner.epoch, cta, thread))
      race("race on shared memory: " + takes + " in " + text(s) + " by " + who(thread) +
           ", but " + who(owner.thread) + " accessed " + decl(owner.tensor).name + " there (" +
           text(*owner.stmt) + ") with no barrier in between; add a barrier after the last use "
           "of " + decl(owner.tensor).name);
    for (const Copy& c : copies_)
      if (c.stmt && c.cta == cta && decl(c.id).overlay == owner.part)
        race("race on shared memory: " + takes + " in " + text(s) + " while a copy into " +
             where(c.id, c.offset, c.cta) + " is in flight (" + text(*c.stmt) +
             "); wait for every copy (cp.async.wait 0, mbar.wait) and barrier first");
    for (Tensor& t : tensors_)
      if (t.decl->overlay == owner.part) {
        for (int64_t i = 0; i < t.footprint; ++i) {
          Cell& c = t.cells[size_t(cta * t.footprint + i)];
          c.write_epoch = c.read_epoch = -1;
        }
        t.lost_to = id;
      }
  }
  owner = Owner{part, epoch_, id, thread, &s};
}

void SharedMemory::end_block() const {
  if (readers_open_ > 0)
    for (const Reader& r : readers_)
      if (r.open)
        race(text(*r.stmt) + " by " + who(r.thread) + " still reads shared "
             "memory when the block ends: " +
             (r.stmt->kind == StmtKind::TmaStore
                  ? "commit the store and wait for it (bulk.commit + bulk.wait.read 0) before "
                    "the block exits"
                  : "retire it (wgmma.commit + wgmma.wait 0) before the block exits"));
  if (in_flight_ == 0) return;
  for (const Copy& c : copies_)
    if (c.stmt && c.tma)
      race("TMA load to " + where(c.id, c.offset, c.cta) + " by " + who(c.thread) +
           " (" + text(*c.stmt) + ") was never waited on when the kernel ends: wait on its "
           "mbarrier's phase (mbar.wait) before the block exits");
    else if (c.stmt)
      race("cp.async to " + where(c.id, c.offset, c.cta) + " by " + who(c.thread) +
           " (" + text(*c.stmt) + ") is still in flight when the kernel ends: commit it and "
           "wait for it (cp.async.commit + cp.async.wait 0) before its data is used");
}

std::string SharedMemory::where(int id, int64_t offset, int cta) const {
  const TensorDecl& d = decl(id);
  int64_t phys = d.physical(offset);
  return d.name + " offset " + std::to_string(offset) +
         (phys != offset ? " (physical " + std::to_string(phys) + ")" : "") +
         (ctas_ > 1 ? " of CTA " + std::to_string(cta) : "");
}

void SharedMemory::race(const std::string& msg) const {
  throw RaceError("interpreter: " + where_ + ": " + msg);
}

SharedMemory::Cell& SharedMemory::cell(int id, int64_t offset, int cta) {
  Tensor& t = tensors_[size_t(id)];
  int64_t phys = t.decl->physical(offset);
  // The swizzle permutes offsets within aligned groups, so a valid logical offset has
  // a valid physical one; this guards a swizzle whose bits reach past the footprint.
  if (phys < 0 || phys >= t.footprint)
    throw Error("interpreter: " + where_ + ": " + where(id, offset, cta) +
                " lies outside the shared tensor's " + std::to_string(t.footprint) +
                " elements: its swizzle moves offsets past the footprint");
  return t.cells[size_t(cta * t.footprint + phys)];
}

void SharedMemory::check_settled(const Cell& c, int id, int64_t offset, int cta,
                                 const char* access, const Stmt& s) const {
  if (c.pending == 0) return;
  std::string by;
  bool tma = false;
  for (const Copy& cp : copies_)
    if (cp.stmt && cp.id == id && cp.cta == cta &&
        decl(id).physical(cp.offset) == decl(id).physical(offset)) {
      by = " (issued by " + who(cp.thread) + ": " + text(*cp.stmt) + ")";
      tma = cp.tma;
    }
  if (tma)
    race(std::string(access) + " of " + where(id, offset, cta) + " by " + text(s) +
         " before its TMA load completed" + by +
         ": missing mbar.wait? (wait on the load's mbarrier phase before touching the box)");
  race(std::string(access) + " of " + where(id, offset, cta) + " by " + text(s) +
       " before its cp.async completed" + by +
       ": missing cp.async.wait? (wait for the copy's group, then barrier)");
}

void SharedMemory::check_initialized(const Cell& c, int id, int64_t offset, int cta,
                                     int thread, const Stmt& s) const {
  if (written(c)) return;
  const int lost_to = tensors_[size_t(id)].lost_to;
  throw Error("interpreter: " + where_ + ": uninitialized shared read: " + who(thread) +
              " reads " + where(id, offset, cta) + " in " + text(s) +
              (lost_to >= 0 ? ", whose bytes the overlay " + decl(lost_to).name + " took over"
                            : ", which nothing in this block wrote; a copy into the shared "
                              "tensor is missing or does not cover this element"));
}

void SharedMemory::check_write(const Cell& c, int id, int64_t offset, int cta, int thread,
                               const Stmt& s, bool atomic) const {
  if (concurrent(c.read_epoch, cta, thread)) {
    int other = c.reader != thread ? c.reader : c.other_reader;
    const Stmt* rs = c.reader != thread ? c.read_stmt : c.other_read_stmt;
    const Stamp& st = c.reader != thread ? c.read_stamp : c.other_read_stamp;
    // An asynchronous read lasts until the wait that retired it: a write that the wait
    // does not happen-before (an arrival handed the buffer on before the wait) races.
    if (other >= 0 && other == c.reader && c.read_async && !ordered(st, thread))
      race("race on shared tensor " + where(id, offset, cta) + ": " + text(s) + " by " +
           who(thread) + " writes it while " + text(*rs) + " (issued by " + who(other) +
           ") may still be reading it: the wait that retires that read "
           "does not happen before this write (was the buffer handed on by an mbarrier arrival "
           "before the wait?); " +
           (rs->kind == StmtKind::TmaStore
                ? "missing bulk.wait.read? (wait for the store's group before releasing its tile)"
                : "missing wgmma.wait? (retire the wgmma's group before releasing its operands)"));
    if (other >= 0 && !ordered(st, thread))
      race("race on shared tensor " + where(id, offset, cta) + ": " + who(other) + " read it (" +
           text(*rs) + ") and " + who(thread) + " wrote it (" + text(s) +
           ") with no barrier in between, so the write may land before the read "
           "(write-after-read); add a barrier between them" +
           (cta_of(other) != cta_of(thread)
                ? " (across CTAs: a cluster.sync, or an mbarrier arrival the writer waits for)"
                : ""));
  }
  if (written(c) && concurrent(c.write_epoch, cta, thread) && c.writer != thread &&
      !(atomic && c.atomic) && !ordered(c.write_stamp, thread))
    race("race on shared tensor " + where(id, offset, cta) + ": " + who(c.writer) +
         " wrote it (" + text(*c.write_stmt) + ") and " + who(thread) + " wrote it too (" +
         text(s) + ") with no barrier in between (write-after-write)");
}

void SharedMemory::record_write(Cell& c, int cta, int thread, const Stmt& s, bool atomic) {
  if (!(written(c) && concurrent(c.write_epoch, cta, thread) && c.atomic && atomic))
    c.writer = thread;
  c.write_epoch = epoch_;
  c.atomic = atomic;
  c.write_stmt = &s;
  c.write_stamp = stamp(thread);
  c.write_fence = thread >= 0 ? fences_[size_t(thread)] : 0;
}

void SharedMemory::record_read(Cell& c, int cta, int thread, const Stmt& s) {
  if (!concurrent(c.read_epoch, cta, thread)) {
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
  const int cta = cta_of(thread);
  claim(id, cta, thread, s);
  Cell& c = cell(id, offset, cta);
  check_settled(c, id, offset, cta, "read", s);
  check_initialized(c, id, offset, cta, thread, s);
  if (concurrent(c.write_epoch, cta, thread) && c.writer >= 0 && c.writer != thread &&
      !ordered(c.write_stamp, thread))
    race("race on shared tensor " + where(id, offset, cta) + ": " + who(c.writer) +
         " wrote it (" + text(*c.write_stmt) + ") and " + who(thread) + " read it (" + text(s) +
         ") with no barrier in between (read-after-write); add a barrier between them");
  record_read(c, cta, thread, s);
  return c.value;
}

void SharedMemory::write(int id, int64_t offset, double v, int thread, const Stmt& s) {
  const int cta = cta_of(thread);
  claim(id, cta, thread, s);
  Cell& c = cell(id, offset, cta);
  check_not_being_read(c, id, offset, cta, "write", s);
  check_settled(c, id, offset, cta, "write", s);
  check_write(c, id, offset, cta, thread, s, false);
  record_write(c, cta, thread, s, false);
  c.value = round_to_dtype(decl(id).dtype, v);
}

void SharedMemory::atomic_add(int id, int64_t offset, double v, int thread, const Stmt& s) {
  const int cta = cta_of(thread);
  claim(id, cta, thread, s);
  Cell& c = cell(id, offset, cta);
  check_not_being_read(c, id, offset, cta, "atomic add", s);
  check_settled(c, id, offset, cta, "atomic add", s);
  check_initialized(c, id, offset, cta, thread, s);
  check_write(c, id, offset, cta, thread, s, true);
  record_write(c, cta, thread, s, true);
  c.value = round_to_dtype(decl(id).dtype, c.value + v);
}

void SharedMemory::fill(int id, int64_t offset, double v, const Stmt& s, int cta) {
  claim(id, cta, kBlock, s);
  Cell& c = cell(id, offset, cta);
  check_not_being_read(c, id, offset, cta, "stage copy", s);
  check_settled(c, id, offset, cta, "stage copy", s);
  record_write(c, cta, kBlock, s, false);
  c.value = round_to_dtype(decl(id).dtype, v);
}

void SharedMemory::async_copy(int id, int64_t offset, double v, int thread, const Stmt& s) {
  const int cta = cta_of(thread);
  claim(id, cta, thread, s);
  Cell& c = cell(id, offset, cta);
  check_not_being_read(c, id, offset, cta, "cp.async", s);
  check_settled(c, id, offset, cta, "cp.async", s);
  // The copy may land any time until its wait: it races with this epoch's accesses.
  check_write(c, id, offset, cta, thread, s, false);
  ++c.pending;
  ++in_flight_;
  threads_[size_t(thread)].open.push_back(copies_.size());
  copies_.push_back(Copy{id, cta, offset, v, thread, &s});
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
      Cell& c = cell(cp.id, cp.offset, cp.cta);
      --c.pending;
      --in_flight_;
      check_not_being_read(c, cp.id, cp.offset, cp.cta, "cp.async landing", *cp.stmt);
      check_write(c, cp.id, cp.offset, cp.cta, cp.thread, *cp.stmt, false);
      record_write(c, cp.cta, cp.thread, *cp.stmt, false);
      c.value = round_to_dtype(decl(cp.id).dtype, cp.value);
      cp.stmt = nullptr;  // retired
    }
    t.committed.pop_front();
  }
}

// ---- mbarriers and TMA ------------------------------------------------------------

std::string SharedMemory::slot_name(int slot, int cta) const {
  return "mbarrier slot " + std::to_string(slot) +
         (ctas_ > 1 ? " of CTA " + std::to_string(cta) : "");
}

SharedMemory::Mbarrier& SharedMemory::mbar(int slot, int cta, int thread, const Stmt& s,
                                           bool initializing) {
  if (slot < 0 || slot >= mbars_per_cta_)
    throw Error("interpreter: " + where_ + ": " + text(s) + " uses mbarrier slot " +
                std::to_string(slot) + " of " + std::to_string(mbars_per_cta_) +
                " (KernelOp::mbarriers)");
  Mbarrier& m = mbars_[size_t(cta * mbars_per_cta_ + slot)];
  if (initializing) return m;
  if (!m.initialized)
    throw Error("interpreter: " + where_ + ": " + who(thread) + " uses " + slot_name(slot, cta) +
                " in " + text(s) + " before any mbar.init of it in this block");
  // The init is an ordinary shared-memory write: other threads see it after a barrier,
  // threads of other CTAs after a cluster barrier.
  if (concurrent(m.init_epoch, cta, thread) && m.init_thread != thread)
    race(slot_name(slot, cta) + " initialized by " + who(m.init_thread) + " is used by " +
         who(thread) + " in " + text(s) +
         (cta_of(thread) == cta
              ? " with no barrier in between: fence.mbarrier_init, then barrier"
              : " with no cluster barrier in between: fence.mbarrier_init, then cluster.sync "
                "(peers may arrive on it or multicast into it only after that)"));
  return m;
}

void SharedMemory::mbar_init(int slot, int arrivals, int thread, const Stmt& s) {
  const int cta = cta_of(thread);
  Mbarrier& m = mbar(slot, cta, thread, s, true);
  if (m.initialized)
    race(slot_name(slot, cta) + " is initialized again by " + who(thread) + " (" + text(s) +
         "): initialize each barrier once, from one thread");
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

// An arrival on CTA `cta`'s slot (the thread's own, or a peer's through a remote arrive).
void SharedMemory::arrive(int slot, int cta, int64_t bytes, int thread, const Stmt& s) {
  Mbarrier& m = mbar(slot, cta, thread, s);
  if (m.pending == 0)
    throw Error("interpreter: " + where_ + ": " + who(thread) + " arrives on " +
                slot_name(slot, cta) + " (" + text(s) + ") more often than the " +
                std::to_string(m.arrivals) + " arrivals a phase expects");
  m.tx += bytes;
  --m.pending;
  // The arrival releases what the arriving task did before it to whoever observes the phase.
  if (int a = task_of_[size_t(thread)]; a >= 0) {
    join(m.arrived, clocks_[size_t(a)]);
    ++clocks_[size_t(a)][size_t(a)];
  }
  maybe_complete(m, slot, s);
}

void SharedMemory::mbar_arrive_expect_tx(int slot, int64_t bytes, int thread, const Stmt& s) {
  arrive(slot, cta_of(thread), bytes, thread, s);
}

void SharedMemory::mbar_arrive(int slot, int thread, const Stmt& s, int cta) {
  arrive(slot, cta, 0, thread, s);
}

bool SharedMemory::mbar_ready(int slot, int parity, int thread, const Stmt& s) {
  return (mbar(slot, cta_of(thread), thread, s).phase & 1) != (parity & 1);
}

std::string SharedMemory::mbar_state(int slot, int cta) const {
  const Mbarrier& m = mbars_.at(size_t(cta * mbars_per_cta_ + slot));
  return "phase " + std::to_string(m.phase) + " of " + slot_name(slot, cta) +
         " (still expects " + std::to_string(m.pending) + " of " + std::to_string(m.arrivals) +
         " arrivals and " + std::to_string(m.tx) + " bytes)";
}

void SharedMemory::tma_element(int id, int64_t offset, double v, int slot, int thread,
                               const Stmt& s, int cta) {
  Mbarrier& m = mbar(slot, cta, thread, s);
  claim(id, cta, thread, s);
  Cell& c = cell(id, offset, cta);
  check_not_being_read(c, id, offset, cta, "TMA load", s);
  check_settled(c, id, offset, cta, "TMA load", s);
  // The box may land any time until the wait: it races with this epoch's accesses.
  check_write(c, id, offset, cta, thread, s, false);
  ++c.pending;
  ++in_flight_;
  m.current.push_back(copies_.size());
  copies_.push_back(Copy{id, cta, offset, v, thread, &s, true});
}

void SharedMemory::tma_complete_tx(int slot, int64_t bytes, int thread, const Stmt& s, int cta) {
  Mbarrier& m = mbar(slot, cta, thread, s);
  m.tx -= bytes;
  maybe_complete(m, slot, s);
}

// try_wait.parity P succeeds once the phase of parity P has completed, i.e. when the
// phase now in progress has the other parity (PTX ISA, mbarrier.test_wait/try_wait).
void SharedMemory::mbar_wait(int slot, int parity, int thread, const Stmt& s) {
  const int cta = cta_of(thread);
  Mbarrier& m = mbar(slot, cta, thread, s);
  if ((m.phase & 1) == (parity & 1))
    throw Error("interpreter: " + where_ + ": deadlock: " + who(thread) + " waits (" + text(s) +
                ") for phase " + std::to_string(m.phase) + " of " + slot_name(slot, cta) +
                ", which still expects " + std::to_string(m.pending) + " of " +
                std::to_string(m.arrivals) + " arrivals and " + std::to_string(m.tx) +
                " bytes; nothing before the wait completes it (a missing arrive.expect_tx or "
                "tma.load, or the wrong parity)");
  if (int w = task_of_[size_t(thread)]; w >= 0) join(clocks_[size_t(w)], m.released);
  for (size_t i : m.complete) retire(i, kTma, thread);
  m.complete.clear();
}

void SharedMemory::retire(size_t i, int writer, int by) {
  Copy& cp = copies_[i];
  if (!cp.stmt) return;
  Cell& c = cell(cp.id, cp.offset, cp.cta);
  --c.pending;
  --in_flight_;
  check_not_being_read(c, cp.id, cp.offset, cp.cta, "TMA landing", *cp.stmt);
  record_write(c, cp.cta, writer, *cp.stmt, false);
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
  parent_.push_back(threads.empty() ? -1 : task_of_[size_t(threads[0])]);
  for (int t : threads) task_of_[size_t(t)] = int(id);
  ++live_tasks_;
  return int(id);
}

void SharedMemory::end_task(const std::vector<int>& threads) {
  if (threads.empty()) return;
  const int parent = parent_[size_t(task_of_[size_t(threads[0])])];
  for (int t : threads) task_of_[size_t(t)] = parent;
  --live_tasks_;
}

SharedMemory::Stamp SharedMemory::stamp(int thread) const {
  if (thread < 0) return Stamp{};
  Stamp st;
  st.thread = thread;
  st.epoch = epoch_;
  if (const int a = task_of_[size_t(thread)]; a >= 0) {
    st.task = a;
    st.time = clocks_[size_t(a)][size_t(a)];
  }
  return st;
}

bool SharedMemory::ordered(const Stamp& a, int thread) const {
  if (thread < 0) return false;
  if (a.thread >= 0 && !sync_.empty() && sync_[size_t(thread)][size_t(a.thread)] > a.epoch)
    return true;
  if (a.task < 0) return false;
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
  const int cta = cta_of(r.thread);
  const double v = read(id, offset, r.thread, *r.stmt);
  Cell& c = cell(id, offset, cta);
  // The async proxy does not see generic-proxy writes that no fence.proxy.async by the
  // writing thread has published (PTX ISA 8.6, "Proxies").
  if (c.writer >= 0 && c.write_fence == fences_[size_t(c.writer)])
    throw Error("interpreter: " + where_ + ": " + text(*r.stmt) + " reads " +
                where(id, offset, cta) + " through the async proxy, but " + who(c.writer) +
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
  const int cta = cta_of(r.thread);
  for (const auto& [id, offset] : r.cells) {
    Cell& c = cell(id, offset, cta);
    --c.async_reads;
    // The read ends now, in the retiring thread's order.
    record_read(c, cta, r.thread, *r.stmt);
    c.read_async = c.reader == r.thread;
  }
  r.cells.clear();
  r.open = false;
  --readers_open_;
}

void SharedMemory::check_not_being_read(const Cell& c, int id, int64_t offset, int cta,
                                        const std::string& write, const Stmt& s) const {
  if (c.async_reads == 0) return;
  const Reader& r = readers_[size_t(c.async_reader)];
  const bool store = r.stmt->kind == StmtKind::TmaStore;
  race(write + " of " + where(id, offset, cta) + " by " + text(s) + " while " + text(*r.stmt) +
       " (issued by " + who(r.thread) + ") may still be reading it: " +
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
