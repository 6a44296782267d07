// Named barriers (bar.sync id, count) on the interpreter.
//
// The hardware counts a barrier's arrivals per warp and releases the waiting warps once
// `count` threads' worth arrived; warps that execute another id, or none, run on. Here a
// group of threads that run in lockstep reaches the statement together: the active
// threads split by the id they evaluate, each part (whole warps only) joins that id's
// waiting set, and the barrier completes when the set holds exactly `count` threads.
// Threads of one lockstep group cannot arrive later at another statement, so a set left
// short is a deadlock outside a specialize; inside one, the arm blocks (like an mbarrier
// wait) until threads of another arm or CTA complete it, and the scheduler reports the
// deadlock when none ever will. A set that overflows its count, or threads that meet
// with different counts, are the programming errors the GPU would hang or misbehave on.
//
// bar.arrive id, count counts its warps toward the same phase without waiting: a one-way
// hand-off (FlashAttention-3's ping-pong between consumer warpgroups). The arrivers'
// accesses before it happen-before the waiters' after the phase completes, not the other
// way round. A phase whose arrivals nobody completes by the end of the block is an error
// (end_named_barriers): on the GPU the next phase would start short.
#include <algorithm>
#include <map>

#include "ir/error.h"
#include "ir/interpret_machine.h"

namespace loom::interp {

void Machine::exec_named_barrier(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  const int64_t count = int64_t(s.imm);
  const bool arrive = s.named_arrive();
  const std::string text =
      (arrive ? "bar.arrive " : "bar.sync ") + s.value.str() + ", " + std::to_string(count);
  // (CTA, id) -> the active threads that arrive there, in thread order.
  std::map<std::pair<int, int64_t>, std::vector<int>> parts;
  for (int t : active) {
    const int64_t id = eval(n.value, t);
    if (id < 1 || id >= int64_t(kNamedBarriers))
      fail(s, text + ": " + shared_.who(t) + " names barrier " + std::to_string(id) +
                  ", outside 1..15 (id 0 is the block-wide barrier)", t);
    parts[{shared_.cta_of(t), id}].push_back(t);
  }
  std::vector<std::pair<size_t, int64_t>> pending;  // (barrier, its completions before)
  for (auto& [key, threads] : parts) {
    // Whole warps: the hardware counts a warp's arrival for all of its lanes.
    auto warp_of = [&](int t) { return t % cta_threads_ / WarpAtom::kLanes; };
    for (size_t i = 0; i < threads.size();) {
      const int warp = warp_of(threads[i]);
      size_t end = i;
      while (end < threads.size() && warp_of(threads[end]) == warp) ++end;
      const int lanes = std::min(WarpAtom::kLanes, cta_threads_ - warp * WarpAtom::kLanes);
      if (int(end - i) != lanes)
        fail(s, text + " reached by " + std::to_string(end - i) + " of the lanes of warp " +
                    std::to_string(warp) + " (it sits under a lane-dependent If, or the id "
                    "differs within the warp): the hardware counts whole warps; make the "
                    "condition and the id the same across each warp",
             threads[i]);
      i = end;
    }
    const size_t b = size_t(key.first) * kNamedBarriers + size_t(key.second);
    NamedBarrier& bar = named_[b];
    const size_t before = bar.waiting.size() + bar.arrived.size();
    if (before > 0 && bar.count != count)
      fail(s, text + ": barrier " + std::to_string(key.second) + " is reached by " +
                  std::to_string(before) + " threads expecting " +
                  std::to_string(bar.count) + " (`" + print_block({*bar.stmt}).substr(0, 40) +
                  "`), and now by threads expecting " + std::to_string(count) +
                  "; every thread of a named barrier must give the same count");
    bar.count = count;
    bar.stmt = &s;
    if (arrive) {
      bar.arrived.insert(bar.arrived.end(), threads.begin(), threads.end());
      for (int t : threads) shared_.named_arrive(t, bar.released);
    } else {
      bar.waiting.insert(bar.waiting.end(), threads.begin(), threads.end());
    }
    const size_t total = bar.waiting.size() + bar.arrived.size();
    if (int64_t(total) > count)
      fail(s, text + ": " + std::to_string(total) + " threads arrive at barrier " +
                  std::to_string(key.second) + ", more than the " + std::to_string(count) +
                  " it counts; the extra warps would pass early or start its next phase on "
                  "the GPU: give each group of threads its own id, or count them all",
           threads[0]);
    if (int64_t(total) == count) {
      shared_.named_barrier(bar.waiting, bar.released);
      bar.waiting.clear();
      bar.arrived.clear();
      bar.released.clear();
      ++bar.completed;
    } else if (!arrive) {
      pending.emplace_back(b, bar.completed);
    }
  }
  for (const auto& [b, before] : pending) {
    const NamedBarrier& bar = named_[b];
    const std::string who = std::to_string(bar.waiting.size() + bar.arrived.size()) + " of its " +
                            std::to_string(bar.count) + " threads";
    if (!sched_)
      fail(s, "deadlock: " + text + " (barrier " + std::to_string(b % kNamedBarriers) +
                  ") is reached by " + who + " and nothing else runs that could bring the "
                  "rest: the count must equal the threads that execute it with this id");
    const size_t me = size_t(task_);
    bool blocked = false;
    while (named_[b].completed == before) {
      sched_->block(me, "`" + text + "` (barrier " + std::to_string(b % kNamedBarriers) +
                            " has " +
                            std::to_string(named_[b].waiting.size() + named_[b].arrived.size()) +
                            " of " +
                            std::to_string(named_[b].count) + " threads)");
      blocked = true;
      resume(me);
    }
    if (blocked) sched_->progressed(me);
  }
}

void Machine::end_named_barriers() {
  for (size_t b = 0; b < named_.size(); ++b) {
    const NamedBarrier& bar = named_[b];
    if (bar.arrived.empty()) continue;
    fail(*bar.stmt,
         "barrier " + std::to_string(b % kNamedBarriers) + " ends the block with " +
             std::to_string(bar.arrived.size()) + " of its " + std::to_string(bar.count) +
             " threads arrived (bar.arrive) and nobody waiting: every bar.arrive needs the "
             "bar.sync that completes its phase, or the next phase starts short; drop the "
             "last arrive or add the matching bar.sync",
         bar.arrived[0]);
  }
}

}  // namespace loom::interp
