// k:030_warp_specialize — a producer warpgroup feeds the ring; the others only compute
// (WARP_SPECIALIZE=1, sm_90a wgmma kernels: STAGE=tma, or STAGE=cp_async, whose producer
// copies the slabs itself: CpAsyncSpecializer below).
//
// After k:015 every thread of a TMA kernel runs the same loop: thread 0 issues the
// slot's boxes, everyone waits on the slot's "full" mbarrier, computes, and a block-wide
// barrier keeps the slot from being refilled while anyone still reads it. The copy and
// the math share the warps' issue slots, and that barrier stalls the whole block once per
// slab. Specialized, the roles split (the seeds' "warp specialization": a producer warp
// does nothing but issue copies, consumers nothing but compute, decoupled through a ring):
//
//   specialize:
//     if threadIdx.x >= C*128:                 producer: one extra warpgroup
//       setmaxnreg.dec PRODUCER_REGS           (hands its registers to the consumers)
//       if threadIdx.x == C*128:               one thread issues, every slab in order
//         for ...k_o: mbar.wait empty[slot] parity=(k_o/S + 1) % 2     (the slot is free:
//                     a fresh barrier passes parity 1 at once, so the first S do not wait)
//                     expect_tx + tma.load into slot, completing full[slot]
//     if threadIdx.x < C*128:                  the C consumer warpgroups, unchanged but:
//       setmaxnreg.inc CONSUMER_REGS
//       for ...k_o: mbar.wait full[slot]; fence; wgmma...; commit
//                   wgmma.wait 1       (the group of k_o may run on; k_o-1's is done)
//                   if wg_thread == 0 and k_o > 0: mbar.arrive empty[(k_o-1) % S]
//       wgmma.wait 0; if wg_thread == 0: mbar.arrive empty[(KO-1) % S]; epilogue
//
// The producer is the last warpgroup, so the consumers' thread indices (k:010's lets)
// are unchanged. Each consumer warpgroup arrives once per slab: empty barriers expect C
// arrivals. The block-wide barrier inside the loop goes: the producer never reaches it.
// The producer arm keeps the loops and Lets around the issue (a persistent tile loop
// included) and nothing else. Knobs: WARP_SPECIALIZE, PRODUCER_REGS, CONSUMER_REGS
// (0: no setmaxnreg). The register split needs two or more consumer warpgroups: with one,
// each of the block's 256 threads may already hold 255 registers (65536 / 256), so there
// is nothing to move, and ptxas ignores setmaxnreg in a kernel whose register count at
// entry it is not given (C7508, "unable to determine register count at entry": no minimum
// blocks in __launch_bounds__) — the decode and split-K kernels emitted it for nothing.
// In a cluster (CLUSTER_M, CLUSTER_N) each CTA's slot is filled partly by its peers'
// producers, so the empty barriers count the consumers of every CTA, each release arrives
// on every CTA's barrier (a multicast arrive), and a cluster sync closes the kernel. In a
// 2-D cluster only the CTA's row (A) and column (B) refill its slot; releasing to all C
// CTAs costs C - (CM + CN - 1) extra remote arrivals per slab but keeps the counts and the
// mask constant.
//
// Ping-pong consumers (CONSUMERS=pingpong; t:010 tiled for one warpgroup, and t:027 made
// the kernel persistent): two consumer warpgroups run that one-warpgroup kernel, each on
// every other tile of the CTA's tile loop, and their mainloops take turns, so one
// warpgroup's epilogue runs under the other's math. Warpgroup w = 0, 1 is an arm of its
// own (its waits differ from the other's; an arm's threads go together):
//     if w*128 <= threadIdx.x < (w+1)*128:
//       for t_w in 0..(n + 1 - w) / 2  # persistent       its tiles t_i = t_w * 2 + w
//         let t_i = t_w * 2 + w; ...
//         mbar.wait turn[w] parity=(t_w + (w + 1) % 2) % 2   (the other's mainloop is done)
//         for ...k_o: (as above)
//         if wg_thread == 0: mbar.arrive turn[1 - w]         (the other's turn)
//         wgmma.wait 0; release; epilogue
// The producer is the cooperative one: it fills the ring in tile order. A slot is read by
// one warpgroup, so the empty barriers expect one arrival per CTA. The turns are not only
// for speed: a consumer waits on a slot's full barrier by parity, which cannot tell fill
// f from fill f + 2, so a warpgroup may start waiting on the slots of its tile only once
// the other has passed its waits on the fills before them. Warpgroup 0 goes first: a
// fresh barrier passes parity 1 at once. The thread Lets of k:010 (one warpgroup's
// block) become each warpgroup's own: threadIdx.x % 128 in place of threadIdx.x.
#include "ir/error.h"
#include "ir/register_file.h"
#include "passes/passes.h"

namespace loom {
namespace {

constexpr int kWarpgroup = 128;

bool is_tma_issue(const Stmt& s) {
  if (s.kind != StmtKind::If) return false;
  for (const Stmt& b : s.body)
    if (b.kind == StmtKind::MbarArriveExpectTx) return true;
  return false;
}

bool contains(const Stmt& s, const std::function<bool(const Stmt&)>& pred) {
  bool found = false;
  walk(Block{s}, [&](const Stmt& x) { found |= pred(x); });
  return found;
}

bool has_issue(const Stmt& s) { return contains(s, is_tma_issue); }

// With ping-pong consumers, warpgroup w's loop over the persistent tile loop's tiles
// w, w + 2, ...: `for t_w in 0..(n + 1 - w) / 2: let t_i = t_w * 2 + w; ...`.
// The wgmma groups one slab iteration commits, every one of them unconditionally: one for
// shared-A kernels, one per atom step with WGMMA_A=regs (k:026's step 5r: 4 for a 32-deep
// tf32 slab). The slab's closing wait keeps that many in flight — this slab's groups —
// while every earlier group, the previous slab's whose slot is released next, is retired
// (wgmma.wait_group N: all but the newest N groups complete, in commit order). With one
// wait 1 a register-A slab drained its consumer warpgroup to one group at every slab
// boundary: 0.87x cuBLAS TF32 at 4096^3 against the shared-A kernel's 0.99x (H100,
// bench/NOTES.md, 2026-11-27, TF32 with an N-major B). 1 where a commit sits under a
// condition or a loop of run-time extent (the count would be an upper bound, unsafe).
int64_t groups_per_slab(const Block& b) {
  int64_t n = 0;
  for (const Stmt& s : b) {
    if (s.kind == StmtKind::WgmmaCommit) {
      ++n;
    } else if (s.kind == StmtKind::For || s.kind == StmtKind::If) {
      const int64_t inner = groups_per_slab(s.body);
      if (inner == 0) continue;
      if (s.kind == StmtKind::If || !s.extent.is_const() || inner < 0) return -1;
      n += s.extent.const_value() * inner;
    }
  }
  return n;
}

// The closing wait's count for a slab loop body: groups_per_slab, or 1 where it is unknown.
int64_t closing_wait(const Block& b) {
  const int64_t n = groups_per_slab(b);
  return n >= 1 ? n : 1;
}

void own_tiles(Block& b, int64_t w) {
  for (Stmt& s : b) {
    if (s.kind == StmtKind::For && s.axis == "persistent") {
      Block body = {Stmt::Let(s.var, Expr::var("t_w") * 2 + Expr(w))};
      body.insert(body.end(), s.body.begin(), s.body.end());
      s = Stmt::For("t_w", (s.extent + Expr(1 - w)) / 2, s.loop_kind, s.axis, body, s.tier);
      return;
    }
    if (s.kind == StmtKind::For || s.kind == StmtKind::If) own_tiles(s.body, w);
  }
}

class Specializer {
 public:
  Specializer(CompileState& s, KernelOp& k, bool pingpong) : s_(s), k_(k), pingpong_(pingpong) {}

  void run() {
    consumers_ = k_.block_threads / kWarpgroup;
    cluster_ = k_.cluster[0];
    if (k_.block_threads % kWarpgroup != 0 || consumers_ < 1)
      throw Error("WARP_SPECIALIZE=1: kernel " + k_.name + " has " +
                  std::to_string(k_.block_threads) + " threads; specialization hands whole "
                  "warpgroups (128 threads) their roles: use ATOM=wgmma_*");
    if (pingpong_) {
      bool persistent = false;
      walk(k_.body, [&](const Stmt& x) {
        persistent |= x.kind == StmtKind::For && x.axis == "persistent";
      });
      if (k_.block_threads != kWarpgroup || !persistent)
        throw Error("CONSUMERS=pingpong: kernel " + k_.name + " is not one warpgroup's "
                    "persistent kernel (t:010 tiles for one warpgroup with WM=2, t:027 loops "
                    "over tiles with PERSISTENT=1)");
      consumers_ = 2;
    }
    // The slab loop and its slot count, as k:015 left them.
    Block& body = k_.body;
    size_t main = body.size();
    for (size_t i = 0; i < body.size(); ++i)
      if (has_issue(body[i])) {
        if (main != body.size())
          throw Error("WARP_SPECIALIZE=1: kernel " + k_.name + " issues TMA copies in two "
                      "places; the producer role takes one staged loop");
        main = i;
      }
    if (main == body.size())
      throw Error("WARP_SPECIALIZE=1 needs STAGE=tma: kernel " + k_.name +
                  " has no TMA copies for a producer to issue");
    // A named barrier in the slab loop is k:015's transposing stage's meeting of the
    // block's threads, once per slab.
    if (pingpong_ && contains(body[main], [](const Stmt& x) { return x.named_barrier(); }))
      throw Error("CONSUMERS=pingpong: kernel " + k_.name + " transposes a TMA-staged slab "
                  "(SLAB_A / SLAB_B = kinner with STAGE=tma), whose threads meet at one named "
                  "barrier per slab, which two warpgroups on different tiles cannot share: "
                  "use CONSUMERS=cooperative");
    ring_ = k_.mbarriers;  // full barriers 0..S-1 (k:015); empty ones follow
    if (ring_ < 1) throw Error("k:030_warp_specialize: kernel " + k_.name + " has no mbarriers");
    empty_base_ = k_.mbarriers;
    k_.mbarriers += int(ring_);
    if (pingpong_) {
      order_base_ = k_.mbarriers;
      k_.mbarriers += int(consumers_);
    }

    // Everything from the mbarrier setup's barrier on is the consumers' work.
    size_t start = 0;
    while (start < main && body[start].kind != StmtKind::Barrier &&
           body[start].kind != StmtKind::ClusterSync)
      ++start;
    if (start == main)
      throw Error("k:030_warp_specialize: kernel " + k_.name + " has no barrier after its "
                  "mbarrier initialization (k:015 puts one there)");
    init_empty_barriers(body, start);
    Block consumer(body.begin() + long(start) + 1, body.end());
    Block producer_loop = producer(body[main]);
    Block consumer_arm = consume(consumer);
    if (pingpong_) own_warpgroup(body, start, consumer_arm);

    const int64_t c_threads = consumers_ * kWarpgroup;
    const Expr tid = Expr::var("threadIdx.x");
    Block p_arm, c_arm;
    // Read (and so recorded) only where they apply: a full knob set fed back must compile.
    const int64_t p_regs = reallocates() ? s_.knob("PRODUCER_REGS", 40) : 0;
    const int64_t c_regs = reallocates() ? s_.knob("CONSUMER_REGS", 232) : 0;
    check_regs(p_regs, c_regs);
    if (c_regs > 0) p_arm.push_back(Stmt::SetMaxNReg(false, int(p_regs)));
    p_arm.push_back(Stmt::If(Expr::make(Expr::Kind::Eq, tid, Expr(c_threads)), producer_loop));
    if (c_regs > 0) c_arm.push_back(Stmt::SetMaxNReg(true, int(c_regs)));
    c_arm.insert(c_arm.end(), consumer_arm.begin(), consumer_arm.end());
    Block out(body.begin(), body.begin() + long(start) + 1);
    std::vector<Stmt> arms = {Stmt::If(Expr(c_threads) <= tid, p_arm)};
    if (!pingpong_) arms.push_back(Stmt::If(tid < Expr(c_threads), c_arm));
    // Ping-pong: the consumer warpgroups wait at different times, so each is an arm of
    // its own (an arm's threads go together), its c_wg a constant.
    for (int64_t w = 0; pingpong_ && w < consumers_; ++w) {
      Block arm = c_arm;
      own_tiles(arm, w);
      substitute_block(arm, {{"c_wg", Expr(w)}});
      const Expr below = tid < Expr((w + 1) * kWarpgroup);
      arms.push_back(Stmt::If(w == 0 ? below : (Expr(w * kWarpgroup) <= tid && below), arm));
    }
    out.push_back(Stmt::Specialize(arms));
    // A CTA of a cluster may not exit while its peers can still multicast into its shared
    // memory or arrive on its barriers: the whole cluster leaves together.
    if (cluster_ > 1) out.push_back(Stmt::ClusterSync());
    k_.body = std::move(out);
    k_.block_threads = int(c_threads) + kWarpgroup;
  }

  // Whether the kernel moves registers from the producer to the consumers (above).
  bool reallocates() const { return consumers_ >= 2; }

 private:
  // setmaxnreg moves registers between warpgroups of one block: the counts are multiples
  // of 8 in [24, 256], and the block's total must fit what the block holds at launch
  // (setmaxnreg_pool: 168 a thread at 384 threads, 64512 in all, not the SM's 65536; an
  // increase past it waits forever — PRODUCER_REGS=32,CONSUMER_REGS=240 was accepted and
  // would have hung, as the same split did in attention's kernel on an H200).
  void check_regs(int64_t p, int64_t c) const {
    if (c == 0) return;
    for (auto [name, v] : {std::pair{"PRODUCER_REGS", p}, std::pair{"CONSUMER_REGS", c}})
      if (v < 24 || v > 256 || v % 8 != 0)
        throw Error(std::string(name) + "=" + std::to_string(v) + ": setmaxnreg takes a multiple "
                    "of 8 from 24 to 256 registers per thread (0 for CONSUMER_REGS: no setmaxnreg)");
    const int64_t threads = (consumers_ + 1) * kWarpgroup;
    const int64_t min_blocks = s_.knobs.get_int("MIN_BLOCKS", 0);
    const int64_t pool = setmaxnreg_pool(threads, min_blocks);
    const int64_t total = p * kWarpgroup + c * consumers_ * kWarpgroup;
    if (total > pool) {
      const int64_t fits = std::max<int64_t>(0, (pool - p * kWarpgroup) / (consumers_ * kWarpgroup) / 8 * 8);
      throw Error("PRODUCER_REGS=" + std::to_string(p) + ",CONSUMER_REGS=" + std::to_string(c) +
                  " with " + std::to_string(consumers_) + " consumer warpgroups needs " +
                  std::to_string(total) + " registers, and a block of " + std::to_string(threads) +
                  " threads holds " + std::to_string(pool) + " (" +
                  std::to_string(launch_regs_per_thread(threads, min_blocks)) +
                  " a thread at launch" + (min_blocks > 1 ? ", MIN_BLOCKS=" + std::to_string(min_blocks) : std::string()) +
                  "), the only registers setmaxnreg moves: an increase past them never completes. "
                  "Lower CONSUMER_REGS (at most " + std::to_string(fits) + " beside PRODUCER_REGS=" +
                  std::to_string(p) + ")");
    }
  }

  void init_empty_barriers(Block& body, size_t barrier_at) {
    // k:015's setup `if threadIdx.x == 0: mbar.init...; fence` sits before the barrier.
    for (size_t i = barrier_at; i-- > 0;) {
      Stmt& s = body[i];
      if (s.kind != StmtKind::If) continue;
      for (size_t j = 0; j < s.body.size(); ++j)
        if (s.body[j].kind == StmtKind::FenceMbarInit) {
          // A slot's readers: every consumer warpgroup of every CTA, or with ping-pong
          // consumers one warpgroup per CTA.
          const int64_t readers = (pingpong_ ? 1 : consumers_) * cluster_;
          Block inits;
          for (int64_t e = 0; e < ring_; ++e)
            inits.push_back(Stmt::MbarInit(Expr(empty_base_ + e), int(readers)));
          for (int64_t w = 0; pingpong_ && w < consumers_; ++w)
            inits.push_back(Stmt::MbarInit(Expr(order_base_ + w), 1));
          s.body.insert(s.body.begin() + long(j), inits.begin(), inits.end());
          return;
        }
    }
    throw Error("k:030_warp_specialize: kernel " + k_.name + " has no mbarrier initialization");
  }

  // The producer: the loops and Lets leading to the issue, the issue preceded by the wait
  // for its slot to be empty.
  Block producer(const Stmt& s) {
    if (is_tma_issue(s)) {
      const Stmt& expect = s.body.front();
      LOOM_CHECK(expect.kind == StmtKind::MbarArriveExpectTx, "k:015 issues expect_tx first");
      const Expr slot = expect.value;  // full barrier = slot (k:015's base is 0)
      Block b = {Stmt::MbarWait(Expr(empty_base_) + slot, empty_parity(slot))};
      b.insert(b.end(), s.body.begin(), s.body.end());
      return b;
    }
    if (s.kind == StmtKind::For) {
      Block inner;
      for (const Stmt& c : s.body) {
        if (c.kind == StmtKind::Let) inner.push_back(c);
        else if (has_issue(c)) {
          Block p = producer(c);
          inner.insert(inner.end(), p.begin(), p.end());
        }
      }
      return {Stmt::For(s.var, s.extent, s.loop_kind, s.axis, inner, s.tier)};
    }
    if (s.kind == StmtKind::If) {
      Block inner;
      for (const Stmt& c : s.body)
        if (has_issue(c)) {
          Block p = producer(c);
          inner.insert(inner.end(), p.begin(), p.end());
        }
      return {Stmt::If(s.cond, inner)};
    }
    throw Error("k:030_warp_specialize: the TMA issue of kernel " + k_.name +
                " sits under a `" + print_block(Block{s}).substr(0, 40) + "`");
  }

  // The parity the producer waits for before its fill number j = count / S of `slot`
  // (slot = count % S): the consumers' release j - 1 completed phase j - 1, so parity
  // (j + 1) % 2; a fresh barrier is in phase 0 and passes parity 1 at once (j = 0).
  Expr empty_parity(const Expr& slot) {
    if (slot.kind() == Expr::Kind::Mod && slot.rhs().is_const())
      return (slot.lhs() / slot.rhs() + 1) % 2;
    throw Error("k:030_warp_specialize: ring slot " + slot.str() + " is not `count % S` "
                "(STAGES=1 has no ring to hand over: use STAGES>=2)");
  }

  // The consumers: the issue removed, the slab loop's trailing block barrier replaced by
  // the release of the previous slab, and a final wait before the epilogue.
  Block consume(Block b) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& s = b[i];
      if (is_tma_issue(s)) {
        b.erase(b.begin() + long(i));
        --i;
        continue;
      }
      if (s.kind == StmtKind::For && has_issue(s) && loop_has_direct_issue(s)) {
        const Expr last = release_in(s);
        const Expr first_thread = Expr::make(Expr::Kind::Eq, Expr::var("wg_thread"), Expr(0));
        Block after;
        if (pingpong_) {
          // This warpgroup has passed its last full-barrier wait: the other's turn. c_wg is
          // the arm's warpgroup and t_w its tile count (run() and own_tiles bind them).
          const Expr c = Expr::var("c_wg");
          after.push_back(Stmt::If(first_thread, {Stmt::MbarArrive(Expr(order_base_ + 1) - c)}));
          const Expr parity = (Expr::var("t_w") + (c + 1) % 2) % 2;
          b.insert(b.begin() + long(i), Stmt::MbarWait(Expr(order_base_) + c, parity));
          ++i;
        }
        // The loop's last slab: retired, then released, so a persistent CTA's producer
        // can refill its slot for the next tile.
        after.push_back(Stmt::WgmmaWait(0));
        after.push_back(Stmt::If(first_thread, {release(Expr(empty_base_) + last)}));
        b.insert(b.begin() + long(i) + 1, after.begin(), after.end());
        i += after.size();
        continue;
      }
      if ((s.kind == StmtKind::For || s.kind == StmtKind::If) && has_issue(s)) s.body = consume(s.body);
    }
    return b;
  }

  // Ping-pong: the block k:010 bound is one warpgroup, which each consumer warpgroup now
  // is: its thread Lets (before the mbarrier setup's barrier at `start`) and the consumer
  // arm read the thread's index in its warpgroup.
  void own_warpgroup(Block& body, size_t start, Block& consumer_arm) const {
    const Expr tid = Expr::var("threadIdx.x");
    const std::map<std::string, Expr> in_group = {{"threadIdx.x", tid % kWarpgroup}};
    // Readable Lets: `threadIdx.x % 128 / 128` is 0, `threadIdx.x % 128 % 128` the inner mod.
    const std::map<std::string, Expr::Range> block = {{"threadIdx.x", {0, 1023}}};
    auto tidy = [&](Expr v) {
      if (auto r = v.bounds(block); r && r->lo == r->hi) return Expr(r->lo);
      if (v.kind() == Expr::Kind::Mod && v.lhs().kind() == Expr::Kind::Mod &&
          v.rhs().is_const() && v.lhs().rhs().is_const() &&
          v.lhs().rhs().const_value() % v.rhs().const_value() == 0)
        return v.lhs().lhs() % v.rhs();
      return v;
    };
    for (size_t i = 0; i < start; ++i)
      if (body[i].kind == StmtKind::Let) body[i].value = tidy(body[i].value.substitute(in_group));
    substitute_block(consumer_arm, in_group);
  }

  // A consumer warpgroup hands slot `empty` back: in a cluster to every CTA's producer,
  // since each of them refills part of this CTA's slot (k:015's multicast).
  Stmt release(const Expr& empty) const {
    Stmt a = Stmt::MbarArrive(empty);
    if (cluster_ > 1) a.multicast = Expr((int64_t(1) << cluster_) - 1);
    return a;
  }

  static bool loop_has_direct_issue(const Stmt& loop) {
    for (const Stmt& c : loop.body)
      if (is_tma_issue(c)) return true;
    return false;
  }

  // Returns the slot of the loop's last iteration.
  Expr release_in(Stmt& loop) {
    Block out;
    Expr slot;
    bool waited = false;
    // The slab's closing wait, after its last wgmma: an earlier one (WGMMA_A=regs waits
    // before refilling a fragment an in-flight group reads) keeps its count.
    size_t closing = loop.body.size();
    for (size_t i = 0; i < loop.body.size(); ++i)
      if (loop.body[i].kind == StmtKind::WgmmaWait) closing = i;
    for (const Stmt& c : loop.body) {
      if (is_tma_issue(c)) {
        slot = c.body.front().value;
        continue;
      }
      // The slab's closing barrier (a cluster sync in a cluster): the producer never
      // reaches it; the empty barriers take its place. A named barrier stays: the
      // consumers' own meeting (k:015's transposing stage, after the transpose).
      if ((c.kind == StmtKind::Barrier && !c.named_barrier()) || c.kind == StmtKind::ClusterSync)
        continue;
      if (&c == &loop.body[closing]) {
        // This slab's groups may stay in flight; the previous slab is read.
        out.push_back(Stmt::WgmmaWait(int(closing_wait(loop.body))));
        waited = true;
        continue;
      }
      out.push_back(c);
    }
    if (!waited)
      throw Error("WARP_SPECIALIZE=1: kernel " + k_.name + "'s slab loop has no wgmma.wait; "
                  "the consumers release a slot once the wgmma reading it retired "
                  "(ATOM=wgmma_*)");
    const Expr ko = Expr::var(loop.var);
    const Expr prev = slot.substitute({{loop.var, ko - 1}});
    const Expr first_thread = Expr::make(Expr::Kind::Eq, Expr::var("wg_thread"), Expr(0));
    out.push_back(Stmt::If(first_thread && Expr(0) < ko, {release(Expr(empty_base_) + prev)}));
    loop.body = out;
    return slot.substitute({{loop.var, loop.extent - 1}});
  }

  CompileState& s_;
  KernelOp& k_;
  int64_t consumers_ = 0, ring_ = 0, empty_base_ = 0, cluster_ = 1;
  bool pingpong_ = false;
  int64_t order_base_ = 0;  // ping-pong: one "your turn" barrier per consumer warpgroup
};

// ---- the cp.async producer (STAGE=cp_async with ATOM=wgmma_*) ------------------------
// k:015 left every thread copying each slab (cp.async, or loads and shared stores),
// committing, waiting for all groups, fencing for the async proxy and meeting at a
// barrier before the wgmma, and at another after it. Specialized:
//
//   if threadIdx.x >= C*128:                   producer warpgroup, p = threadIdx.x - C*128
//     for k_o:  mbar.wait empty[k_o % S] parity (k_o/S + 1) % 2
//               for v in 0..C: the copies, as thread p + v*128 of the C*128 they were cut for
//               cp.async.commit
//               if k_o >= L: cp.async.wait L; fence.proxy.async; mbar.arrive full[(k_o-L) % S]
//     cp.async.wait 0; fence.proxy.async; mbar.arrive full[slab] for the last L slabs
//   if threadIdx.x < C*128:                    the consumers, as for TMA (Specializer)
//     for k_o:  mbar.wait full[k_o % S] parity (k_o/S) % 2; wgmma...; wgmma.wait 1
//               if wg_thread == 0 and k_o > 0: mbar.arrive empty[(k_o-1) % S]
//     wgmma.wait 0; if wg_thread == 0: mbar.arrive empty[(KO-1) % S]; epilogue
//
// Full barriers count the producer's 128 arrivals: each thread publishes its own copies
// (its fence orders them for the async proxy, its arrive releases them). A thread's
// cp.async lands only by its own wait_group, so slab k_o is announced L slabs later, once
// slabs k_o+1..k_o+L are in flight behind it: L = S - 2 keeps S - 1 slabs in flight and
// never waits on itself (the arrival for slab k needs slot (k+L) % S released, the
// consumers' slab k + L - S <= k - 2, which they finish without slab k).
// cp.async.mbarrier.arrive.noinc would announce each slab as it lands instead; this keeps
// to the statements the interpreter already runs (and checks: proxy fences per element,
// mbarrier phases, the ring's races).
class CpAsyncSpecializer {
 public:
  CpAsyncSpecializer(CompileState& s, KernelOp& k) : s_(s), k_(k) {}

  void run() {
    const int64_t C = k_.block_threads / kWarpgroup;
    if (k_.block_threads % kWarpgroup != 0 || C < 1)
      throw Error("WARP_SPECIALIZE=1: kernel " + k_.name + " has " +
                  std::to_string(k_.block_threads) + " threads; specialization hands whole "
                  "warpgroups (128 threads) their roles: use ATOM=wgmma_*");
    if (k_.cluster[0] > 1)
      throw Error("WARP_SPECIALIZE=1 with STAGE=cp_async in a cluster: the peers' slabs arrive "
                  "by TMA multicast; use STAGE=tma or CLUSTER_M=CLUSTER_N=1");
    Block& body = k_.body;
    size_t main = body.size();
    for (size_t i = 0; i < body.size(); ++i)
      if (is_slab_loop(body[i])) {
        if (main != body.size())
          throw Error("WARP_SPECIALIZE=1: kernel " + k_.name + " stages slabs in two loops; the "
                      "producer role takes one staged loop");
        main = i;
      }
    if (main == body.size())
      throw Error("WARP_SPECIALIZE=1 with STAGE=cp_async: kernel " + k_.name + " has no staged "
                  "slab loop at its top level (a persistent tile loop around it is not built "
                  "for the cp.async producer): use PERSISTENT=0 or STAGE=tma");
    const int64_t S = s_.knobs.get_int("STAGES", 1);
    if (S < 2)
      throw Error("WARP_SPECIALIZE=1 with STAGES=" + std::to_string(S) + ": the producer and "
                  "the consumers hand slots over through a ring; use STAGES>=2");
    const Stmt& loop = body[main];
    const Expr ko = Expr::var(loop.var), KO = loop.extent;
    const Expr slot = ko % S;
    const int64_t L = S - 2;
    const Expr tid = Expr::var("threadIdx.x");
    const Expr c_threads = Expr(C * kWarpgroup);
    const int64_t full = k_.mbarriers, empty = full + S;
    k_.mbarriers += int(2 * S);

    // Split the slab loop: the copies (and their staging allocs) for the producer, the
    // math for the consumers.
    Block allocs, copies, math;
    for (const Stmt& c : loop.body) {
      if (c.kind == StmtKind::Alloc) allocs.push_back(c);
      else if (c.kind == StmtKind::For &&
               (c.axis == "copy.async" || c.axis == "copy.load" || c.axis == "copy.store"))
        copies.push_back(c);
      else if (c.kind == StmtKind::AsyncCommit || c.kind == StmtKind::AsyncWait ||
               c.kind == StmtKind::FenceProxyAsync || c.kind == StmtKind::Barrier)
        continue;
      else math.push_back(c);
    }
    if (copies.empty())
      throw Error("k:030_warp_specialize: kernel " + k_.name + "'s slab loop has no copies");

    // Producer: thread p stands in for threads p, p + 128, ... of the C*128 the copies
    // were cut for (k:015 split each slab among the consumer block's threads).
    Block per_slab = {Stmt::MbarWait(Expr(empty) + slot, (ko / S + 1) % 2)};
    Block stand_in;
    for (const Stmt& c : copies) stand_in.push_back(c);
    substitute_block(stand_in, {{"threadIdx.x", tid - c_threads + Expr::var("p_v") * kWarpgroup}});
    // Not unrolled: each pass's staged registers are dead before the next pass loads
    // (unrolled, ptxas kept both consumers' worth live and spilled 124 B at 128x128).
    per_slab.push_back(Stmt::For("p_v", Expr(C), LoopKind::Parallel, "copy.producer", stand_in));
    per_slab.push_back(Stmt::AsyncCommit());
    const auto publish = [&](const Expr& slab) {
      return Block{Stmt::FenceProxyAsync(), Stmt::MbarArrive(Expr(full) + slab % S)};
    };
    Block announce = {Stmt::AsyncWait(int(L))};
    for (Stmt& x : publish(ko - L)) announce.push_back(x);
    if (L == 0) per_slab.insert(per_slab.end(), announce.begin(), announce.end());
    else per_slab.push_back(Stmt::If(Expr(L) <= ko, announce));
    Block producer = allocs;
    producer.push_back(Stmt::For(loop.var, KO, loop.loop_kind, loop.axis, per_slab, loop.tier));
    producer.push_back(Stmt::AsyncWait(0));
    if (L > 0) {
      producer.push_back(Stmt::FenceProxyAsync());
      // The last L slabs (fewer when KO < L): slab KO - L + d.
      const Expr slab = KO - L + Expr::var("p_d");
      producer.push_back(Stmt::For("p_d", Expr(L), LoopKind::Parallel, "copy.producer",
                                   {Stmt::If(Expr(0) <= slab,
                                             {Stmt::MbarArrive(Expr(full) + slab % S)})},
                                   Tier::Register));
    }

    // Consumers: wait for the slab, compute, keep one wgmma group in flight, release the
    // previous slab's slot; after the loop, retire and release the last.
    size_t closing = math.size();
    for (size_t i = 0; i < math.size(); ++i)
      if (math[i].kind == StmtKind::WgmmaWait) closing = i;
    if (closing == math.size())
      throw Error("WARP_SPECIALIZE=1: kernel " + k_.name + "'s slab loop has no wgmma.wait; "
                  "the consumers release a slot once the wgmma reading it retired "
                  "(ATOM=wgmma_*)");
    math[closing] = Stmt::WgmmaWait(int(closing_wait(math)));
    const Expr first_thread = Expr::make(Expr::Kind::Eq, Expr::var("wg_thread"), Expr(0));
    Block consume = {Stmt::MbarWait(Expr(full) + slot, ko / S % 2)};
    consume.insert(consume.end(), math.begin(), math.end());
    consume.push_back(Stmt::If(first_thread && Expr(0) < ko,
                               {Stmt::MbarArrive(Expr(empty) + (ko - 1) % S)}));
    Block consumer = {Stmt::For(loop.var, KO, loop.loop_kind, loop.axis, consume, loop.tier),
                      Stmt::WgmmaWait(0),
                      Stmt::If(first_thread, {Stmt::MbarArrive(Expr(empty) + (KO - 1) % S)})};
    consumer.insert(consumer.end(), body.begin() + long(main) + 1, body.end());

    // The mbarriers' setup, published to every thread by a barrier before the roles part.
    Block init;
    for (int64_t i = 0; i < S; ++i) init.push_back(Stmt::MbarInit(Expr(full + i), kWarpgroup));
    for (int64_t i = 0; i < S; ++i) init.push_back(Stmt::MbarInit(Expr(empty + i), int(C)));
    init.push_back(Stmt::FenceMbarInit());
    Block out(body.begin(), body.begin() + long(main));
    // The Lets and Allocs before the loop stay shared; the consumers' part of it (the
    // accumulators) is harmless in the producer, which never touches them.
    out.push_back(Stmt::If(Expr::make(Expr::Kind::Eq, tid, Expr(0)), init));
    out.push_back(Stmt::Barrier());
    out.push_back(Stmt::Specialize({Stmt::If(c_threads <= tid, producer),
                                    Stmt::If(tid < c_threads, consumer)}));
    k_.body = std::move(out);
    k_.block_threads = int(C * kWarpgroup) + kWarpgroup;
  }

 private:
  static bool is_slab_loop(const Stmt& s) {
    if (s.kind != StmtKind::For) return false;
    for (const Stmt& c : s.body)
      if (c.kind == StmtKind::For && (c.axis == "copy.async" || c.axis == "copy.load"))
        return true;
    return false;
  }

  CompileState& s_;
  KernelOp& k_;
};

}  // namespace

Pass pass_warp_specialize() {
  return Pass{"k:030_warp_specialize", Level::Kernel, Level::Kernel,
              "with WARP_SPECIALIZE=1 a producer warpgroup fills the ring (TMA, or its own "
              "cp.async copies) and the "
              "consumer warpgroups only wait, compute and release slots (full/empty mbarriers, "
              "setmaxnreg); with CONSUMERS=pingpong each of two consumer warpgroups takes every "
              "other tile, their mainloops in turn",
              {"WARP_SPECIALIZE", "PRODUCER_REGS", "CONSUMER_REGS", "CONSUMERS"},
              [](CompileState& s) {
                if (s.knob("WARP_SPECIALIZE", 0) == 0) return;
                // wgmma slabs the threads copy: a producer warpgroup of cp.async (above).
                // STAGE=sync has no such producer, and a silently unspecialized kernel
                // would not be what the knob asked for.
                const std::string stage = s.knobs.get_str("STAGE", "sync");
                const bool wgmma = s.knobs.get_str("ATOM", "fma").rfind("wgmma_", 0) == 0;
                if (wgmma && stage != "tma" && stage != "cp_async")
                  throw Error("WARP_SPECIALIZE=1 with STAGE=" + stage + ": the producer "
                              "warpgroup issues TMA boxes or cp.async copies; use STAGE=tma or "
                              "STAGE=cp_async, or WARP_SPECIALIZE=0");
                if (wgmma && stage == "cp_async") {
                  if (s.knobs.get_str("CONSUMERS", "cooperative") != "cooperative")
                    throw Error("CONSUMERS=" + s.knobs.get_str("CONSUMERS", "") + " with "
                                "STAGE=cp_async: ping-pong consumers are built on the TMA "
                                "producer; use STAGE=tma or CONSUMERS=cooperative");
                  s.used_knobs["CONSUMERS"] = "cooperative";
                  for (auto& k : s.kernel.kernels) CpAsyncSpecializer(s, k).run();
                  for (const char* knob : {"PRODUCER_REGS", "CONSUMER_REGS"})
                    if (s.knobs.has(knob) && s.knobs.get_int(knob, 0) != 0)
                      throw Error(std::string(knob) + " with STAGE=cp_async: the cp.async "
                                  "producer keeps its registers (its copies stage through "
                                  "them); drop " + knob);
                  return;
                }
                const std::string consumers = s.knobs.get_str("CONSUMERS", "cooperative");
                s.used_knobs["CONSUMERS"] = consumers;
                bool reallocates = false;
                for (auto& k : s.kernel.kernels)
                  if (k.mbarriers > 0 || !k.tma.empty()) {
                    Specializer sp(s, k, consumers == "pingpong");
                    sp.run();
                    reallocates |= sp.reallocates();
                  }
                if (reallocates) {
                  // Recorded only where a kernel reads them, like every knob.
                  s.used_knobs["PRODUCER_REGS"] = std::to_string(s.knob("PRODUCER_REGS", 40));
                  s.used_knobs["CONSUMER_REGS"] = std::to_string(s.knob("CONSUMER_REGS", 232));
                } else {
                  for (const char* knob : {"PRODUCER_REGS", "CONSUMER_REGS"})
                    if (s.knobs.has(knob) && s.knobs.get_int(knob, 0) != 0)
                      throw Error(std::string(knob) + "=" + std::to_string(s.knobs.get_int(knob, 0)) +
                                  " splits registers between a producer and two or more consumer "
                                  "warpgroups with setmaxnreg, but this kernel has one consumer "
                                  "warpgroup (256 threads), each of whose threads may already hold "
                                  "255 registers: drop " + knob + " (or use a tile with two "
                                  "consumer warpgroups, e.g. BM=128)");
                }
              }};
}

}  // namespace loom
