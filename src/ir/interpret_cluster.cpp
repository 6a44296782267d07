// Thread-block clusters on the interpreter (sm_90, KernelOp::cluster).
//
// The C CTAs of a cluster are resident together and hand data to each other: a producer
// multicasts a TMA box into every CTA of its mask (each counts the bytes on its own
// mbarrier), a consumer releases a buffer by arriving on the mbarriers of every CTA whose
// producer writes into it, and barrier.cluster (cluster.sync) holds every thread of every
// CTA. So one cluster runs at a time, its CTAs as cooperative tasks of one Scheduler
// (interpret_scheduler.h): a CTA gives the baton up when it blocks in an mbarrier wait, in
// a cluster.sync its peers have not reached, or in a specialize whose arms still run.
//
// The hardware may release a CTA's shared memory (its mbarriers included) when it exits,
// so a peer may not touch it afterwards: every cluster kernel ends with a cluster.sync
// after the last remote access. The interpreter reports a CTA that exits after a peer
// arrived on its mbarriers with no cluster.sync since, and any later multicast or arrival
// that targets an exited CTA.
#include <numeric>

#include "ir/error.h"
#include "ir/interpret_machine.h"

namespace loom::interp {
namespace {

std::string first_line(const Stmt& s) {
  std::string text = print_block(Block{s});
  return text.substr(0, text.find('\n'));
}

std::string hex(int64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), digits[v % 16]);
    v /= 16;
  } while (v > 0);
  return "0x" + s;
}

constexpr const char* kMissingSync =
    " (missing cluster.sync before the end? every CTA of a cluster must pass a cluster.sync "
    "after its peers' last arrival on its mbarriers, multicast into or read of its shared "
    "memory, before it exits)";

}  // namespace

int Machine::cluster_size(const KernelOp& k) const {
  const std::string where = "interpreter: kernel " + k.name + ": ";
  for (int d = 0; d < 3; ++d)
    if (k.cluster[d] < 1)
      throw Error(where + "cluster dimension " + std::to_string(d) + " is " +
                  std::to_string(k.cluster[d]) + "; CTAs per cluster are at least 1");
  if (k.cluster[1] != 1 || k.cluster[2] != 1)
    throw Error(where + "cluster {" + std::to_string(k.cluster[0]) + ", " +
                std::to_string(k.cluster[1]) + ", " + std::to_string(k.cluster[2]) +
                "}: clusters are 1-D along x (rank = blockIdx.x % cluster[0])");
  if (k.cluster[0] > 16)
    throw Error(where + "cluster of " + std::to_string(k.cluster[0]) +
                " CTAs; sm_90 allows at most 16");
  const int64_t gx = k.grid[0].eval(symbols_);
  if (gx % k.cluster[0] != 0)
    throw Error(where + "grid.x = " + std::to_string(gx) + " is not a multiple of the cluster's " +
                std::to_string(k.cluster[0]) + " CTAs; a grid is a whole number of clusters");
  return k.cluster[0];
}

void Machine::run_cluster(const std::vector<Node>& nodes) {
  contexts_.clear();
  exited_.assign(size_t(ctas_), false);
  remote_.assign(size_t(ctas_), RemoteArrival{});
  cluster_gen_ = 0;
  cluster_arrived_ = 0;
  std::vector<std::vector<int>> threads(static_cast<size_t>(ctas_),
                                       std::vector<int>(static_cast<size_t>(cta_threads_)));
  std::vector<Scheduler::Task> tasks;
  for (int r = 0; r < ctas_; ++r) {
    std::iota(threads[size_t(r)].begin(), threads[size_t(r)].end(), r * cta_threads_);
    contexts_.push_back(TaskContext{{}, r, false});
    tasks.push_back(Scheduler::Task{[this, &nodes, &threads, r] {
                                      resume(size_t(r));
                                      run_block(nodes, threads[size_t(r)], 0);
                                      cta_exit(r);
                                    },
                                    "CTA " + std::to_string(r)});
  }
  // Each CTA is a task for happens-before: across CTAs only mbarriers and cluster.sync
  // order accesses.
  for (const std::vector<int>& t : threads) shared_.begin_task(t);
  Scheduler sched("interpreter: " + where_, "every CTA of the cluster", schedule_seed_);
  sched_ = &sched;
  auto restore = [&] {
    sched_ = nullptr;
    task_ = -1;
    arm_ = false;
    cta_ = 0;
    pool_ = &active_pool_;
    for (const std::vector<int>& t : threads) shared_.end_task(t);
  };
  try {
    sched.run(std::move(tasks));
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

void Machine::exec_cluster_sync(const Node& n, const std::vector<int>& active) {
  const Stmt& s = *n.s;
  if (ctas_ == 1)
    fail(s, "cluster.sync in a kernel without clusters (KernelOp::cluster is {1, 1, 1}): "
            "there are no peers to wait for; launch clusters or use a barrier");
  if (arm_)
    fail(s, "cluster.sync inside an arm of a specialize: every thread of every CTA of the "
            "cluster must reach it, but the other arms never do; put it before or after the "
            "specialize");
  require_all_threads(n, active, "cluster.sync");
  const size_t me = size_t(task_);
  const int64_t gen = cluster_gen_;
  if (++cluster_arrived_ == ctas_) {
    cluster_arrived_ = 0;
    ++cluster_gen_;
    shared_.cluster_barrier();
    sched_->progressed(me);
    return;
  }
  while (cluster_gen_ == gen) {
    std::string gone;
    for (int r = 0; r < ctas_; ++r)
      if (exited_[size_t(r)]) gone += (gone.empty() ? "" : ", ") + std::to_string(r);
    sched_->block(me, "`cluster.sync` (CTA " + std::to_string(cta_) + "; " +
                          std::to_string(cluster_arrived_) + " of " + std::to_string(ctas_) +
                          " CTAs arrived" +
                          (gone.empty() ? "" : "; CTA " + gone + " exited without reaching it") +
                          ")");
    resume(me);
  }
  sched_->progressed(me);
}

std::vector<int> Machine::targets(const Node& n, int t) {
  const Stmt& s = *n.s;
  const int own = shared_.cta_of(t);
  const int64_t mask = eval(n.mask, t);
  if (mask == 0) return {own};
  if (ctas_ == 1)
    fail(s,
         "multicast mask " + hex(mask) + " in a kernel without clusters (KernelOp::cluster is "
         "{1, 1, 1}): a mask names CTAs of a cluster; drop it (0: this CTA) or launch clusters",
         t);
  if (mask < 0)
    fail(s, "multicast mask " + std::to_string(mask) + " is negative; bit r selects CTA r", t);
  if ((mask >> ctas_) != 0) {
    int bit = ctas_;
    while (((mask >> bit) & 1) == 0) ++bit;
    fail(s,
         "multicast mask " + hex(mask) + " has bit " + std::to_string(bit) +
             " set but the cluster has " + std::to_string(ctas_) + " CTAs (ranks 0.." +
             std::to_string(ctas_ - 1) + ")",
         t);
  }
  std::vector<int> out;
  for (int r = 0; r < ctas_; ++r) {
    if (((mask >> r) & 1) == 0) continue;
    if (r != own && exited_[size_t(r)])
      fail(s,
           "CTA " + std::to_string(r) + " exited while the cluster still targets it: this " +
               (s.kind == StmtKind::TmaLoad ? "multicasts into its shared memory"
                                            : "arrives on its mbarriers") +
               " after it exited" + kMissingSync,
           t);
    out.push_back(r);
  }
  return out;
}

int Machine::remote_target(const Node& n, int t) {
  const Stmt& s = *n.s;
  const int64_t rank = eval(n.value, t);
  if (ctas_ == 1)
    fail(s, "a remote store in a kernel without clusters (KernelOp::cluster is {1, 1, 1}): "
            "there is no peer CTA whose shared memory it could write", t);
  if (rank < 0 || rank >= ctas_)
    fail(s, "remote store into CTA " + std::to_string(rank) + " but the cluster has " +
                std::to_string(ctas_) + " CTAs (ranks 0.." + std::to_string(ctas_ - 1) + ")", t);
  if (exited_[size_t(rank)])
    fail(s, "CTA " + std::to_string(rank) + " exited before this remote store into its shared "
            "memory (it must wait on the store's mbarrier before it exits)", t);
  return int(rank);
}

void Machine::cta_exit(int cta) {
  exited_[size_t(cta)] = true;
  const RemoteArrival& a = remote_[size_t(cta)];
  if (a.stmt && a.gen == cluster_gen_)
    throw Error("interpreter: " + where_ + ": CTA " + std::to_string(cta) +
                " exited while the cluster still arrives on its mbarriers: " +
                shared_.who(a.thread) + " arrived on its mbarrier slot " + std::to_string(a.slot) +
                " (`" + first_line(*a.stmt) +
                "`) after the last cluster.sync" + kMissingSync);
}

}  // namespace loom::interp
