// Warp specialization on the interpreter: the arms of a Specialize run concurrently.
//
// A producer arm fills a ring of shared buffers and waits on "empty" mbarriers; consumer
// arms wait on "full" ones and arrive on "empty". Running one arm after the other would
// deadlock as soon as the ring is full, so each arm runs as a task of a Scheduler
// (interpret_scheduler.h): its own scheduler when the block runs alone, the cluster's
// when the block is a CTA of a cluster (the CTA waits for its arms like for a wait).
#include "ir/error.h"
#include "ir/interpret_machine.h"

namespace loom::interp {
namespace {

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

}  // namespace

void Machine::resume(size_t task) {
  TaskContext& c = contexts_[task];
  task_ = int(task);
  pool_ = &c.pool;
  cta_ = c.cta;
  arm_ = c.arm;
}

void Machine::exec_specialize(const Node& n, const std::vector<int>& active, size_t) {
  const Stmt& s = *n.s;
  if (arm_)
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
             shared_.who(t) + " satisfies the conditions of arms " +
                 std::to_string(arm_of[size_t(t)]) + " and " + std::to_string(i) +
                 "; the arms of a specialize split the block's threads into disjoint roles",
             t);
      arm_of[size_t(t)] = int(i);
      threads[i].push_back(t);
    }

  // A specialize marked "warpgroups" (Stmt::per_warpgroup) runs each arm as one task per
  // warpgroup of its threads: warpgroups of one arm then proceed independently, as they
  // do on the GPU, so one may wait at a named barrier for another's bar.arrive.
  std::vector<std::pair<size_t, std::vector<int>>> groups;  // (arm, its threads)
  for (size_t i = 0; i < n.body.size(); ++i) {
    if (threads[i].empty()) continue;
    if (!(kernel_ && (s.per_warpgroup() || schedule_seed_ != 0))) {
      groups.emplace_back(i, threads[i]);
      continue;
    }
    for (int t : threads[i]) {
      const int g = t % cta_threads_ / 128;
      if (groups.empty() || groups.back().first != i ||
          groups.back().second.back() % cta_threads_ / 128 != g)
        groups.emplace_back(i, std::vector<int>{});
      groups.back().second.push_back(t);
    }
  }
  const bool own = sched_ == nullptr;
  if (own) contexts_.clear();
  const std::string cta = ctas_ > 1 ? "CTA " + std::to_string(cta_) + " " : "";
  std::vector<Scheduler::Task> tasks;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const size_t i = groups[gi].first;
    const size_t id = contexts_.size();
    contexts_.push_back(TaskContext{{}, cta_, true});
    const std::string wg = s.per_warpgroup() || schedule_seed_ != 0 ? ", warpgroup " +
        std::to_string(groups[gi].second[0] % cta_threads_ / 128) : "";
    tasks.push_back(Scheduler::Task{
        [this, &n, &groups, gi, i, id] {
          resume(id);
          run_block(n.body[i].body, groups[gi].second, 0);
        },
        cta + "arm " + std::to_string(i) + wg + " (`" + first_line(*n.body[i].s) + "`)"});
  }
  if (kernel_)
    for (const auto& g : groups) shared_.begin_task(g.second);
  auto end_tasks = [&] {
    if (kernel_)
      for (const auto& g : groups) shared_.end_task(g.second);
  };

  if (!own) {
    const size_t me = size_t(task_);
    sched_->join(me, sched_->spawn(std::move(tasks)));
    resume(me);
    end_tasks();
    return;
  }
  Scheduler sched("interpreter: " + where_, "every arm of the specialize", schedule_seed_);
  sched_ = &sched;
  auto restore = [&] {
    sched_ = nullptr;
    task_ = -1;
    arm_ = false;
    pool_ = &active_pool_;
    end_tasks();
  };
  try {
    sched.run(std::move(tasks));
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void Machine::maybe_yield() {
  if (!sched_ || !sched_->seeded() || task_ < 0) return;
  const size_t me = size_t(task_);
  sched_->yield(me);
  resume(me);
}

void Machine::wait_in_task(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const size_t me = size_t(task_);
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
    sched_->block(me, "`" + first_line(s) + "` (" + shared_.who(waiting) + ", " +
                          shared_.mbar_state(slot, shared_.cta_of(waiting)) + ", parity " +
                          std::to_string(eval(n.cond, waiting)) + ")");
    blocked = true;
    resume(me);
  }
  if (blocked) sched_->progressed(me);
}

}  // namespace loom::interp
