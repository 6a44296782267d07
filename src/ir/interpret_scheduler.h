// Cooperative tasks of the Kernel IR interpreter: the arms of a Specialize, and the CTAs
// of a thread-block cluster (with their arms).
//
// A producer waits on "empty" mbarriers that consumers complete, consumers on "full" ones
// the producer's TMA loads complete, and in a cluster one CTA's waits are completed by its
// peers' loads and arrivals. Running the parties one after the other would deadlock as
// soon as one waits for another, so each runs as a task: its own OS thread, with a baton
// that exactly one task holds at a time. A task gives the baton up only when it blocks (an
// mbarrier wait whose phase has not completed, a cluster.sync its peers have not reached,
// a specialize whose arms are still running) or when it finishes; the next unfinished
// task (in creation order, cyclically) takes it. The machine's state is shared and never
// touched by two tasks at once, and the interleaving depends on the program only, so a run
// is deterministic. When every unfinished task is blocked and each has re-checked its
// condition since the last progress, nothing can ever unblock them: that is the deadlock
// the GPU would hang in, reported naming every blocked wait.
//
// A seeded scheduler (seed != 0) explores other interleavings, as the GPU's warpgroups and
// copy engine do: at every synchronization point a task reaches (yield: an mbarrier arrival
// or wait, a TMA copy, a wgmma wait, a named barrier) it may hand the baton to another
// task, and a blocked task hands it to a random other one. Each seed is one interleaving,
// reproducible; deadlock is still reported exactly (a task that yielded is not blocked).
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace loom::interp {

class Scheduler {
 public:
  struct Task {
    std::function<void()> body;
    std::string label;  // "arm 1 (`if threadIdx.x / 128 == 1:`)", "CTA 0"
  };

  // `where` prefixes the deadlock message ("interpreter: kernel k block (0, 0, 0)");
  // `parties` names who deadlocked ("every arm of the specialize").
  // `seed`: 0 runs each task until it blocks (the deterministic order above); otherwise
  // the seeded interleaving of yield() and of the baton's hand-offs.
  Scheduler(std::string where, std::string parties, uint64_t seed = 0)
      : where_(std::move(where)), parties_(std::move(parties)), seeded_(seed != 0), rng_(seed) {}
  ~Scheduler();

  // From outside any task: runs `tasks` (and whatever they spawn) to completion; rethrows
  // the first error any of them raised.
  void run(std::vector<Task> tasks);
  // From running task `me`: adds tasks, which run when the baton reaches them. Returns
  // their ids.
  std::vector<size_t> spawn(std::vector<Task> tasks);
  // From running task `me`: blocks until the tasks `ids` have finished.
  void join(size_t me, const std::vector<size_t>& ids);

  // Called by running task `me` whose wait `what` cannot pass yet: hands the baton on and
  // returns once `me` holds it again (to re-check). Throws on deadlock.
  void block(size_t me, const std::string& what) { block(me, what, false); }
  // The running task passed the wait it was blocked in.
  void progressed(size_t me);
  // Seeded: running task `me` is at a synchronization point and may hand the baton to
  // another task (one in four times); returns once `me` holds it again. Unseeded: nothing.
  void yield(size_t me);
  bool seeded() const { return seeded_; }

 private:
  struct State {
    std::string label;
    std::string blocked;  // the wait it is blocked in; empty while runnable
    bool joining = false;  // blocked until tasks it spawned finish (not a wait to report)
    int64_t checked_at = -1;
    bool done = false;
  };

  void block(size_t me, const std::string& what, bool joining);
  void task_main(size_t me, std::function<void()> body);
  void add(std::vector<Task>& tasks, std::vector<size_t>* ids);  // with mu_ held
  void pass_baton(size_t me);  // with mu_ held

  std::string where_, parties_;
  std::deque<State> tasks_;
  std::deque<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = -1;  // the task holding the baton
  bool aborted_ = false;
  int64_t progress_ = 0;  // waits passed and tasks finished so far
  std::exception_ptr error_;
  bool seeded_ = false;
  std::mt19937_64 rng_;
};

}  // namespace loom::interp
