// k:027_frag_buffers — double-buffered mma fragments inside a staged slab (FRAG_BUFFERS).
//
// k:025 leaves each atom step k_i of a slab as "load the fragments of k_i (ldmatrix or
// element loads from shared), then the FM x FN mma chain on them". The mma chain
// cannot start until the loads land, so every step exposes one shared-memory latency.
// With a second set of fragment registers, the loads of step k_i+1 are issued before
// the mmas of step k_i and land while the tensor cores work (the HGEMM article's
// fragment double buffering). Steps, for every constant reduce loop whose body is
// allocations of mma operand fragments, their loads from shared slabs, then the math:
//  1. The fragment arrays gain a leading dimension of 2 and move in front of the loop
//     (k:050 hoists them further, out of the slab loop).
//  2. Prologue before the loop: the loads with k_i = 0, into buffer 0.
//  3. Loop body: `if k_i + 1 < E:` the loads with k_i + 1 into buffer (k_i + 1) % 2,
//     then the math reading buffer k_i % 2.
//  4. The loop is marked unrolled: a register array stays in registers only when its
//     indices are constants, which `k_i % 2` becomes once the loop is unrolled.
// Barriers, cp.async waits and the slab boundary stay where they were: the prefetch
// never crosses a slab. A loop of one step (BK equal to the atom's k), loads that are
// not from shared memory and SIMT kernels are left as they are.
#include <set>

#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

// The arrays mma.sync reads as its A and B operands, anywhere in `b`.
std::set<std::string> operand_fragments(const KernelOp& k, const Block& b) {
  std::set<std::string> names;
  walk(b, [&](const Stmt& s) {
    if (s.kind == StmtKind::Atom && find_warp_atom(k, s.atom))
      for (const Operand& o : s.args) names.insert(o.name);
  });
  return names;
}

// A statement that only fills fragments from shared memory: a fragment load or warp
// copy, or a register loop of them.
bool is_fragment_fill(const KernelOp& k, const ProgramBase& p, const Stmt& s,
                      const std::set<std::string>& frags) {
  if (s.kind == StmtKind::For) {
    if (s.tier != Tier::Register || s.body.empty()) return false;
    for (const Stmt& c : s.body)
      if (!is_fragment_fill(k, p, c, frags)) return false;
    return true;
  }
  const bool load = s.kind == StmtKind::Load ||
                    (s.kind == StmtKind::Atom && find_warp_copy(k, s.atom));
  return load && frags.count(s.dst) && p.tensor(s.tensor).role == TensorRole::Shared;
}

bool writes_fragment(const Stmt& s, const std::set<std::string>& frags) {
  bool hit = false;
  walk(Block{s}, [&](const Stmt& t) { hit |= t.kind != StmtKind::Alloc && frags.count(t.dst); });
  return hit;
}

// Every access to a fragment array in `b` selects buffer `which` first.
void select_buffer(Block& b, const std::set<std::string>& frags, const Expr& which) {
  walk(b, [&](Stmt& s) {
    if (s.kind != StmtKind::Alloc && frags.count(s.dst))
      s.dst_index.insert(s.dst_index.begin(), which);
    for (Operand& o : s.args)
      if (frags.count(o.name)) o.index.insert(o.index.begin(), which);
  });
}

class FragBuffers {
 public:
  FragBuffers(const ProgramBase& p, KernelOp& k) : p_(p), k_(k) {}

  void run(Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      Stmt& s = b[i];
      if (s.kind == StmtKind::For || s.kind == StmtKind::If) run(s.body);
      if (s.kind != StmtKind::For) continue;
      Block out;
      if (!rewrite(s, out)) continue;
      b.erase(b.begin() + long(i));
      b.insert(b.begin() + long(i), out.begin(), out.end());
      i += out.size() - 1;
    }
  }

 private:
  // Steps 1-4 on `loop`, into `out` (the statements replacing it); false where the loop
  // is not a slab's atom-step loop of at least two steps.
  bool rewrite(const Stmt& loop, Block& out) const {
    if (loop.loop_kind != LoopKind::Reduce || !loop.extent.is_const() ||
        loop.extent.const_value() < 2)
      return false;
    const std::set<std::string> frags = operand_fragments(k_, loop.body);
    if (frags.empty()) return false;
    // A barrier or wait inside would make this a slab loop, not a step loop within one.
    bool waits = false;
    walk(loop.body, [&](const Stmt& s) {
      waits |= s.kind == StmtKind::Barrier || s.kind == StmtKind::AsyncWait ||
               s.kind == StmtKind::MbarWait;
    });
    if (waits) return false;
    Block allocs, fills, math;
    for (const Stmt& s : loop.body) {
      if (math.empty() && s.kind == StmtKind::Alloc && frags.count(s.dst)) allocs.push_back(s);
      else if (math.empty() && is_fragment_fill(k_, p_, s, frags)) fills.push_back(s);
      else math.push_back(s);
    }
    // Each fragment must be declared and filled here and only read by the math: a
    // fragment written later in the step (or kept across steps) cannot be loaded early.
    if (allocs.size() != frags.size() || fills.empty() || math.empty()) return false;
    for (const Stmt& s : math)
      if (writes_fragment(s, frags) || s.kind == StmtKind::Alloc) return false;
    const std::string& k = loop.var;
    const Expr ki = Expr::var(k), E = loop.extent;
    for (Stmt a : allocs) {
      a.index.insert(a.index.begin(), Expr(2));
      out.push_back(a);
    }
    Block first = fills;
    substitute_block(first, {{k, Expr(0)}});
    select_buffer(first, frags, Expr(0));
    out.insert(out.end(), first.begin(), first.end());
    Block next = fills;
    substitute_block(next, {{k, ki + 1}});
    select_buffer(next, frags, (ki + 1) % 2);
    Block body = {Stmt::If(ki + 1 < E, next)};
    select_buffer(math, frags, ki % 2);
    body.insert(body.end(), math.begin(), math.end());
    Stmt l = Stmt::For(k, E, loop.loop_kind, loop.axis, body, loop.tier);
    l.unroll = true;
    out.push_back(l);
    return true;
  }

  const ProgramBase& p_;
  KernelOp& k_;
};

}  // namespace

Pass pass_frag_buffers() {
  return Pass{"k:027_frag_buffers", Level::Kernel, Level::Kernel,
              "with FRAG_BUFFERS=2, each slab's atom steps load the next step's fragments "
              "into the other of two fragment buffers before the current step's mmas",
              {"FRAG_BUFFERS"},
              [](CompileState& s) {
                bool mma = false;
                for (const auto& k : s.kernel.kernels) mma |= !k.warp_atoms.empty();
                // Recorded for mma kernels only: SIMT kernels have no fragments.
                if (!mma || s.knob("FRAG_BUFFERS", 1) != 2) return;
                for (auto& k : s.kernel.kernels) FragBuffers(s.kernel, k).run(k.body);
              }};
}

}  // namespace loom
