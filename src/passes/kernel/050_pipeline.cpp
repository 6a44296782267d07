// k:050_pipeline — software pipelining of the staged reduction loop (PIPELINE).
//
// With a ring of buffers (t:050_multibuffer) the copy of a later slab can run while the
// current one is consumed. The loop is peeled into a prologue that fills the first
// buffers, a main loop that issues the next copy before computing on the current slab,
// and the drain, as CUTLASS's multistage mainloop does:
//
//   sync, 2 buffers (the copy passes through registers):
//     prologue: load(0); store(0); barrier
//     for k_o:  if k_o+1 < KO: load(k_o+1)   <- global loads in flight during the math
//               compute(k_o)
//               if k_o+1 < KO: store(k_o+1)  <- into the other buffer
//               barrier
//   cp_async, S buffers:
//     prologue: for s < S-1: if s < KO: copy(s); commit
//     for k_o:  wait(S-2); barrier           <- slab k_o landed; buffer k_o-1 is free
//               if k_o+S-1 < KO: copy(k_o+S-1)
//               commit; compute(k_o)
//     wait(0)
//   cp_async and registers (wgmma slabs whose rows forbid cp.async for one operand):
//     the cp.async ring as above, the register slab one ahead (load before the math,
//     store after it; see pipeline below)
//   tma, S buffers (each slot's mbarrier tells when its box landed):
//     prologue: for s < S: if s < KO: issue(s)      <- thread 0: expect_tx + TMA loads
//     for k_o:  wait(slot k_o % S, parity (k_o / S) % 2); compute(k_o); barrier
//               if k_o+S < KO: issue(k_o+S)        <- into the slot every thread just left
// Copies are recognized by their loop axes (copy.load / copy.store / copy.async), as
// k:015_lower_stages emits them (a TMA issue as the If holding its expect_tx); one
// barrier per iteration instead of two.
#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

bool is_copy(const Stmt& s, const char* axis) {
  return s.kind == StmtKind::For && s.axis == axis;
}

Block shifted(const Block& b, const std::string& var, Expr to) {
  Block c = b;
  substitute_block(c, {{var, to}});
  return c;
}

bool is_tma_issue(const Stmt& s) {
  if (s.kind != StmtKind::If) return false;
  for (const Stmt& b : s.body)
    if (b.kind == StmtKind::MbarArriveExpectTx) return true;
  return false;
}

// `if cond: body`, folded when the condition is a constant (the prologue's are).
void guarded(Block& out, const Expr& cond, Block body) {
  if (cond.is_const()) {
    if (cond.const_value() != 0) out.insert(out.end(), body.begin(), body.end());
    return;
  }
  out.push_back(Stmt::If(cond, std::move(body)));
}

// The TMA schedule: S boxes in flight, each refilled as soon as the block has left it.
bool pipeline_tma(const Stmt& loop, int64_t S, Block& out) {
  Block issue, rest;
  int barriers = 0;
  for (const auto& s : loop.body) {
    if (is_tma_issue(s)) issue.push_back(s);
    else if (s.kind == StmtKind::Barrier && !s.named_barrier()) ++barriers;
    else rest.push_back(s);  // a named barrier: the threads' meeting after a transpose
  }
  if (issue.size() != 1 || barriers != 1 || loop.body.back().kind != StmtKind::Barrier ||
      loop.body.back().named_barrier())
    return false;
  const std::string& k = loop.var;
  Expr ko = Expr::var(k), KO = loop.extent;
  for (int64_t s = 0; s < S; ++s) guarded(out, Expr(s) < KO, shifted(issue, k, s));
  Block body = rest;
  body.push_back(Stmt::Barrier());
  guarded(body, ko + S < KO, shifted(issue, k, ko + S));
  out.push_back(Stmt::For(k, KO, loop.loop_kind, loop.axis, body, loop.tier));
  return true;
}

// Returns true when `loop` (a staged reduce loop) was pipelined; `out` gets the
// statements that replace it.
bool pipeline(const Stmt& loop, int64_t S, Block& out) {
  for (const auto& s : loop.body)
    if (is_tma_issue(s)) return pipeline_tma(loop, S, out);
  Block allocs, loads, stores, asyncs, compute;
  int barriers = 0;
  bool has_commit = false, fenced = false;
  for (const auto& s : loop.body) {
    if (s.kind == StmtKind::Alloc) allocs.push_back(s);
    else if (s.kind == StmtKind::FenceProxyAsync) fenced = true;
    else if (is_copy(s, "copy.load")) loads.push_back(s);
    else if (is_copy(s, "copy.store")) stores.push_back(s);
    else if (is_copy(s, "copy.async")) asyncs.push_back(s);
    else if (s.kind == StmtKind::Barrier) ++barriers;
    else if (s.kind == StmtKind::AsyncCommit || s.kind == StmtKind::AsyncWait) has_commit = true;
    else compute.push_back(s);
  }
  if (barriers != 2) return false;
  // A stage whose slabs use both transports (cp.async and the register path, see
  // k:015_lower_stages) keeps its sequential order on the mma paths; wgmma's (its slabs
  // fenced for the async proxy) takes the mixed schedule below.
  const bool mixed = !asyncs.empty() && (!loads.empty() || !stores.empty());
  if (mixed && !(fenced && has_commit && S >= 2)) return false;
  const std::string& k = loop.var;
  Expr ko = Expr::var(k), KO = loop.extent;
  out = allocs;
  Block body;
  // wgmma reads the slabs through the async proxy: each writer fences its shared writes
  // before the barrier that hands them over (k:015).
  const auto publish = [&](Block& b) {
    if (fenced) b.push_back(Stmt::FenceProxyAsync());
    b.push_back(Stmt::Barrier());
  };
  // The register schedule writes slot k_o+1 after the math of k_o: any ring of two or
  // more slots is free there. Only wgmma's slabs take rings deeper than 2 on it (the mma
  // and SIMT paths measured theirs at 2).
  if (!loads.empty() && asyncs.empty() && (S == 2 || (fenced && S > 2))) {
    for (auto& s : shifted(loads, k, 0)) out.push_back(s);
    for (auto& s : shifted(stores, k, 0)) out.push_back(s);
    publish(out);
    Expr more = ko + 1 < KO;
    body.push_back(Stmt::If(more, shifted(loads, k, ko + 1)));
    body.insert(body.end(), compute.begin(), compute.end());
    body.push_back(Stmt::If(more, shifted(stores, k, ko + 1)));
    publish(body);
  } else if (mixed) {
    // cp.async slabs S-1 ahead, register slabs one ahead (their loads in flight during
    // the math, their stores after it, into slot k_o+1, which the wgmma of k_o-1 left:
    // it retired before this iteration's barrier):
    //   prologue: cp.async(s) + commit for s < S-1; load(0); store(0)
    //   for k_o:  wait(S-2); fence; barrier
    //             cp.async(k_o+S-1); commit; load(k_o+1); compute(k_o); store(k_o+1)
    for (int64_t s = 0; s + 1 < S; ++s) {
      guarded(out, Expr(s) < KO, shifted(asyncs, k, s));
      out.push_back(Stmt::AsyncCommit());
    }
    for (auto& s : shifted(loads, k, 0)) out.push_back(s);
    for (auto& s : shifted(stores, k, 0)) out.push_back(s);
    Expr more = ko + 1 < KO;
    body.push_back(Stmt::AsyncWait(int(S - 2)));
    publish(body);
    body.push_back(Stmt::If(ko + (S - 1) < KO, shifted(asyncs, k, ko + (S - 1))));
    body.push_back(Stmt::AsyncCommit());
    body.push_back(Stmt::If(more, shifted(loads, k, ko + 1)));
    body.insert(body.end(), compute.begin(), compute.end());
    body.push_back(Stmt::If(more, shifted(stores, k, ko + 1)));
  } else if (!asyncs.empty() && has_commit && S >= 2) {
    for (int64_t s = 0; s + 1 < S; ++s) {
      guarded(out, Expr(s) < KO, shifted(asyncs, k, s));
      out.push_back(Stmt::AsyncCommit());
    }
    body.push_back(Stmt::AsyncWait(int(S - 2)));
    publish(body);
    body.push_back(Stmt::If(ko + (S - 1) < KO, shifted(asyncs, k, ko + (S - 1))));
    body.push_back(Stmt::AsyncCommit());
    body.insert(body.end(), compute.begin(), compute.end());
  } else {
    return false;
  }
  out.push_back(Stmt::For(k, KO, loop.loop_kind, loop.axis, body, loop.tier));
  if (!asyncs.empty()) out.push_back(Stmt::AsyncWait(0));
  return true;
}

void visit(Block& b, int64_t S) {
  for (size_t i = 0; i < b.size(); ++i) {
    Stmt& st = b[i];
    if (st.kind == StmtKind::For && st.loop_kind == LoopKind::Reduce) {
      Block out;
      if (pipeline(st, S, out)) {
        b.erase(b.begin() + long(i));
        b.insert(b.begin() + long(i), out.begin(), out.end());
        i += out.size() - 1;
        continue;
      }
    }
    if (st.kind == StmtKind::For || st.kind == StmtKind::If) visit(st.body, S);
  }
}

}  // namespace

Pass pass_pipeline() {
  return Pass{"k:050_pipeline", Level::Kernel, Level::Kernel,
              "with STAGES >= 2 the next slab's copy is issued before the current slab's "
              "math: prologue / main loop / drain, one barrier per iteration",
              {"PIPELINE", "STAGES"},
              [](CompileState& s) {
                int64_t S = s.knobs.get_int("STAGES", 1);
                if (s.knob("PIPELINE", 1) == 0 || S < 2) return;
                for (auto& k : s.kernel.kernels) visit(k.body, S);
              }};
}

}  // namespace loom
