// The baton scheduler of interpret_scheduler.h.
#include "ir/interpret_scheduler.h"

#include "ir/error.h"

namespace loom::interp {
namespace {

// Unwinds a task whose run was cut short by another task's error.
struct TaskAborted {};

}  // namespace

Scheduler::~Scheduler() {
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void Scheduler::add(std::vector<Task>& tasks, std::vector<size_t>* ids) {
  for (Task& t : tasks) {
    const size_t id = tasks_.size();
    tasks_.emplace_back();
    tasks_.back().label = t.label;
    threads_.emplace_back([this, id, body = std::move(t.body)]() mutable {
      task_main(id, std::move(body));
    });
    if (ids) ids->push_back(id);
  }
}

void Scheduler::run(std::vector<Task> tasks) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    add(tasks, nullptr);
    running_ = 0;
    cv_.notify_all();
    cv_.wait(lock, [&] {
      for (const State& t : tasks_)
        if (!t.done) return false;
      return true;
    });
  }
  for (std::thread& t : threads_) t.join();
  if (error_) std::rethrow_exception(error_);
}

std::vector<size_t> Scheduler::spawn(std::vector<Task> tasks) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> ids;
  add(tasks, &ids);
  return ids;
}

void Scheduler::join(size_t me, const std::vector<size_t>& ids) {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      bool done = true;
      for (size_t i : ids) done = done && tasks_[i].done;
      if (done) break;
    }
    block(me, "", true);
  }
  progressed(me);
}

void Scheduler::block(size_t me, const std::string& what, bool joining) {
  std::unique_lock<std::mutex> lock(mu_);
  State& task = tasks_[me];
  task.blocked = what;
  task.joining = joining;
  task.checked_at = progress_;
  bool stuck = true;
  for (const State& t : tasks_) stuck = stuck && (t.done || t.checked_at == progress_);
  if (stuck) {
    std::string msg = where_ + ": deadlock: " + parties_ + " waits and none can proceed:";
    for (const State& t : tasks_)
      if (!t.done && !t.joining) msg += " " + t.label + " waits in " + t.blocked + ";";
    throw Error(msg +
                " an mbarrier arrival (mbar.arrive, arrive.expect_tx) or a TMA load "
                "that would complete one of these phases is missing, or a parity is wrong");
  }
  pass_baton(me);
  cv_.wait(lock, [&] { return running_ == int(me) || aborted_; });
  if (aborted_) throw TaskAborted{};
}

void Scheduler::progressed(size_t me) {
  std::lock_guard<std::mutex> lock(mu_);
  ++progress_;
  tasks_[me].blocked.clear();
  tasks_[me].joining = false;
  tasks_[me].checked_at = -1;
}

void Scheduler::yield(size_t me) {
  if (!seeded_) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (rng_() % 4 != 0) return;
  pass_baton(me);
  if (running_ == int(me)) return;
  cv_.wait(lock, [&] { return running_ == int(me) || aborted_; });
  if (aborted_) throw TaskAborted{};
  // The task runs on, and what it does next (an arrival) may complete a phase another
  // task re-checked and blocked on meanwhile: that is progress, so no deadlock is declared
  // until every blocked task re-checked after it.
  ++progress_;
}

void Scheduler::task_main(size_t me, std::function<void()> body) {
  bool aborted;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_ == int(me) || aborted_; });
    aborted = aborted_;
    ++progress_;  // a fresh task may arrive where the blocked ones wait
  }
  if (!aborted) {
    try {
      body();
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

void Scheduler::pass_baton(size_t me) {
  running_ = -1;
  if (seeded_) {
    // A random other unfinished task, preferring those that have not re-checked their
    // wait since the last progress (so a deadlock is still found: every blocked task gets
    // its turn to re-check). `me` only when no other task is left.
    std::vector<size_t> fresh, any;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (i == me || tasks_[i].done) continue;
      any.push_back(i);
      if (tasks_[i].checked_at != progress_) fresh.push_back(i);
    }
    const std::vector<size_t>& from = fresh.empty() ? any : fresh;
    if (!from.empty()) running_ = int(from[size_t(rng_() % from.size())]);
    else if (me < tasks_.size() && !tasks_[me].done) running_ = int(me);
    cv_.notify_all();
    return;
  }
  for (size_t k = 1; k <= tasks_.size(); ++k) {
    const size_t i = (me + k) % tasks_.size();
    if (!tasks_[i].done) {
      running_ = int(i);
      break;
    }
  }
  cv_.notify_all();
}

}  // namespace loom::interp
