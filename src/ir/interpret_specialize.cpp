// Warp specialization on the interpreter: the arms of a Specialize run concurrently.
//
// A producer arm fills a ring of shared buffers and waits on "empty" mbarriers; consumer
// arms wait on "full" ones and arrive on "empty". Running one arm after the other would
// deadlock as soon as the ring is full, so each arm runs as a task: its own OS thread,
// with a baton that exactly one task holds at a time. A task gives the baton up only
// when it blocks in an mbarrier wait whose phase has not completed, or when it finishes;
// the next unfinished task (in arm order, cyclically) takes it. The machine's state is
// shared and never touched by two tasks at once, and the interleaving depends on the
// program only, so a run is deterministic. When every unfinished task is blocked and
// each has re-checked its wait since the last progress, nothing can ever complete their
// phases: that is the deadlock the GPU would hang in, reported naming every blocked wait.
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "ir/error.h"
#include "ir/interpret_machine.h"

namespace loom::interp {
namespace {

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

// Unwinds a task whose run was cut short by another task's error.
struct TaskAborted {};

}  // namespace

class Scheduler {
 public:
  struct Task {
    std::function<void()> body;
    std::string label;    // "arm 1 (threads 128..255)"
    std::string blocked;  // the wait it is blocked in; empty while runnable
    int64_t checked_at = -1;
    bool done = false;
  };

  // `where` prefixes the deadlock message ("interpreter: kernel k block (0, 0, 0)").
  Scheduler(std::string where, std::vector<Task> tasks)
      : where_(std::move(where)), tasks_(std::move(tasks)) {}

  // Runs every task to completion; rethrows the first error any of them raised.
  void run() {
    std::vector<std::thread> threads;
    threads.reserve(tasks_.size());
    for (size_t i = 0; i < tasks_.size(); ++i) threads.emplace_back([this, i] { task_main(i); });
    {
      std::unique_lock<std::mutex> lock(mu_);
      running_ = 0;
      cv_.notify_all();
      cv_.wait(lock, [&] {
        for (const Task& t : tasks_)
          if (!t.done) return false;
        return true;
      });
    }
    for (std::thread& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);
  }

  // Called by running task `me` whose wait `what` cannot pass yet: hands the baton on and
  // returns once `me` holds it again (to re-check). Throws on deadlock.
  void block(size_t me, const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    Task& task = tasks_[me];
    task.blocked = what;
    task.checked_at = progress_;
    bool stuck = true;
    for (const Task& t : tasks_) stuck = stuck && (t.done || t.checked_at == progress_);
    if (stuck) {
      std::string msg = where_ +
                        ": deadlock: every arm of the specialize waits and none can "
                        "proceed:";
      for (const Task& t : tasks_)
        if (!t.done) msg += " " + t.label + " waits in " + t.blocked + ";";
      throw Error(msg +
                  " an mbarrier arrival (mbar.arrive, arrive.expect_tx) or a TMA load "
                  "that would complete one of these phases is missing, or a parity is wrong");
    }
    pass_baton(me);
    cv_.wait(lock, [&] { return running_ == int(me) || aborted_; });
    if (aborted_) throw TaskAborted{};
  }

  // The running task passed the wait it was blocked in.
  void progressed(size_t me) {
    std::lock_guard<std::mutex> lock(mu_);
    ++progress_;
    tasks_[me].blocked.clear();
    tasks_[me].checked_at = -1;
  }

 private:
  void task_main(size_t me) {
    bool aborted;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return running_ == int(me) || aborted_; });
      aborted = aborted_;
      ++progress_;  // a fresh task may arrive where the blocked ones wait
    }
    if (!aborted) {
      try {
        tasks_[me].body();
      } catch (const TaskAborted&) {
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
        aborted_ = true;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    tasks_[me].done = true;
    ++progress_;
    pass_baton(me);
    cv_.notify_all();
  }

  // With mu_ held: the next unfinished task after `me` runs (main once all are done).
  void pass_baton(size_t me) {
    running_ = -1;
    for (size_t k = 1; k <= tasks_.size(); ++k) {
      const size_t i = (me + k) % tasks_.size();
      if (!tasks_[i].done) {
        running_ = int(i);
        break;
      }
    }
    cv_.notify_all();
  }

  std::string where_;
  std::vector<Task> tasks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = -1;  // the task holding the baton
  bool aborted_ = false;
  int64_t progress_ = 0;  // waits passed and tasks finished so far
  std::exception_ptr error_;
};

void Machine::exec_specialize(const Node& n, const std::vector<int>& active, size_t) {
  const Stmt& s = *n.s;
  if (sched_)
    fail(s,
         "specialize inside an arm of another specialize: arms do not nest; give each role "
         "its own arm of the outer specialize");
  // The arms' threads: the active threads whose arm condition holds. In Kernel IR the arms
  // split the block's threads; Tile IR runs as one thread, which runs every arm it enters.
  std::vector<std::vector<int>> threads(n.body.size());
  std::vector<int> arm_of(size_t(threads_), -1);
  for (size_t i = 0; i < n.body.size(); ++i)
    for (int t : active) {
      if (eval(n.body[i].cond, t) == 0) continue;
      if (kernel_ && arm_of[size_t(t)] >= 0)
        fail(s,
             "thread " + std::to_string(t) + " satisfies the conditions of arms " +
                 std::to_string(arm_of[size_t(t)]) + " and " + std::to_string(i) +
                 "; the arms of a specialize split the block's threads into disjoint roles",
             t);
      arm_of[size_t(t)] = int(i);
      threads[i].push_back(t);
    }

  std::vector<Scheduler::Task> tasks;
  std::vector<size_t> arm_index;
  for (size_t i = 0; i < n.body.size(); ++i) {
    if (threads[i].empty()) continue;
    Scheduler::Task task;
    task.label = "arm " + std::to_string(i) + " (`" + first_line(*n.body[i].s) + "`)";
    tasks.push_back(std::move(task));
    arm_index.push_back(i);
  }
  task_pools_.assign(tasks.size(), {});
  for (size_t k = 0; k < tasks.size(); ++k) {
    const size_t i = arm_index[k];
    tasks[k].body = [this, &n, &threads, i, k] {
      task_ = int(k);
      pool_ = &task_pools_[k];
      run_block(n.body[i].body, threads[i], 0);
    };
  }
  std::vector<int> task_ids;
  if (kernel_)
    for (size_t k = 0; k < tasks.size(); ++k)
      task_ids.push_back(shared_.begin_task(threads[arm_index[k]]));

  Scheduler sched("interpreter: " + where_, std::move(tasks));
  sched_ = &sched;
  auto restore = [&] {
    sched_ = nullptr;
    task_ = -1;
    pool_ = &active_pool_;
    if (kernel_)
      for (size_t k = 0; k < task_ids.size(); ++k) shared_.end_task(threads[arm_index[k]]);
  };
  try {
    sched.run();
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void Machine::wait_in_task(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const int me = task_;
  bool blocked = false;
  while (true) {
    int waiting = -1;
    for (int t : active)
      if (!shared_.mbar_ready(int(eval(n.value, t)), int(eval(n.cond, t)), t, s)) {
        waiting = t;
        break;
      }
    if (waiting < 0) break;
    const int slot = int(eval(n.value, waiting));
    sched_->block(size_t(me), "`" + first_line(s) + "` (thread " + std::to_string(waiting) + ", " +
                                  shared_.mbar_state(slot) + ", parity " +
                                  std::to_string(eval(n.cond, waiting)) + ")");
    blocked = true;
    // Another task ran meanwhile: this one's view of the machine comes back.
    task_ = me;
    pool_ = &task_pools_[size_t(me)];
  }
  if (blocked) sched_->progressed(size_t(me));
}

}  // namespace loom::interp
