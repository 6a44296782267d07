// k:052_interleave_loads — sink each fragment load next to its first FMA (INTERLEAVE_LOADS).
//
// Register tiling leaves, per reduction step, a block of loads into small register
// arrays (`in0[FM]`, `in1[..]`) followed by the whole FM x FN grid of FMAs. Handwritten
// SGEMM templates instead issue each load right before the first multiply that needs
// it, so a load's latency overlaps the FMAs of the values already in registers. ptxas
// reschedules either order at every deployable -O level, so the article measured this
// as a wash and the knob defaults to 0; it exists to make that experiment one flag.
// Steps, in every block that allocates register arrays:
//  1. Fragments: register arrays allocated in the block and filled there, inside
//     register loops of loads and arithmetic only, by loads from a shared slab or a
//     global input (STAGE=direct). The copy staging registers of k:015 are not: their
//     loops hold Lets, and their consumers are stores.
//  2. Write out every REGISTER loop nest of the block that touches a fragment (bodies
//     of loads and arithmetic only), with the loop variables replaced by constants, so
//     every register index is a constant and every load names the elements it writes.
//  3. Walk the loads in order and move each one down to just before the first statement
//     that reads an element it writes, when that statement is arithmetic and every
//     statement in between is a register-only load or arithmetic statement that
//     neither reads nor writes those elements. Anything else (a barrier, an async wait,
//     a store, an If, a loop, a Let) stops the load where it was.
// Moving a load only across statements that do not touch its source tensor or its
// destination elements cannot change what it reads or what anyone else reads.
#include <algorithm>
#include <set>

#include "atoms/atoms.h"
#include "passes/passes.h"

namespace loom {
namespace {

// Arithmetic on registers only. Copy atoms (ldmatrix, stmatrix) touch shared memory, so
// they are not: a load never crosses one.
bool is_leaf_math(const Stmt& s) {
  if (s.kind == StmtKind::Atom) {
    const AtomDef* d = find_atom(s.atom);
    return d && d->kind == AtomKind::Compute;
  }
  return s.kind == StmtKind::Compute || s.kind == StmtKind::Accum || s.kind == StmtKind::Init;
}

// A REGISTER nest the pass may write out: constant extents, loads and arithmetic only.
bool unrollable(const Stmt& s) {
  if (s.kind == StmtKind::Load || is_leaf_math(s)) return true;
  if (s.kind != StmtKind::For || s.tier != Tier::Register || !s.extent.is_const()) return false;
  return std::all_of(s.body.begin(), s.body.end(), unrollable);
}

void unroll_into(const Stmt& s, Block& out) {
  if (s.kind != StmtKind::For) {
    out.push_back(s);
    return;
  }
  for (int64_t v = 0; v < s.extent.const_value(); ++v) {
    Block body = s.body;
    substitute_block(body, {{s.var, Expr(v)}});
    for (const Stmt& b : body) unroll_into(b, out);
  }
}

// Register-array elements one statement reads or writes: `array[index..]` and the
// `width - 1` elements after it along the last dimension. `whole` = every element
// (a non-constant index, or an atom whose operand is more than one element).
struct Elems {
  std::string array;
  std::vector<Expr> index;
  int width = 1;
  bool whole = false;
};

bool overlap(const Elems& a, const Elems& b) {
  if (a.array != b.array) return false;
  if (a.whole || b.whole || a.index.size() != b.index.size() || a.index.empty()) return true;
  for (size_t d = 0; d < a.index.size(); ++d)
    if (!a.index[d].is_const() || !b.index[d].is_const()) return true;
  for (size_t d = 0; d + 1 < a.index.size(); ++d)
    if (a.index[d].const_value() != b.index[d].const_value()) return false;
  int64_t lo_a = a.index.back().const_value(), lo_b = b.index.back().const_value();
  return lo_a < lo_b + b.width && lo_b < lo_a + a.width;
}

// An atom whose operands are single registers (FMA); others (mma fragments) read and
// write whole arrays as far as this pass can tell.
bool scalar_atom(const Stmt& s) {
  const AtomDef* d = find_atom(s.atom);
  return d && d->threads == 1 && d->m == 1 && d->n == 1 && d->k == 1;
}

// Everything the subtree of `s` reads from register values.
std::vector<Elems> reads(const Stmt& s) {
  std::vector<Elems> out;
  walk(Block{s}, [&](const Stmt& t) {
    bool whole = t.kind == StmtKind::Atom && !scalar_atom(t);
    int width = t.kind == StmtKind::Write ? t.width : 1;
    for (const Operand& a : t.args)
      if (!a.is_imm()) out.push_back({a.name, a.index, width, whole});
    // An accumulation reads the value it updates.
    if (t.kind == StmtKind::Accum || t.kind == StmtKind::Atom)
      out.push_back({t.dst, t.dst_index, 1, whole});
  });
  return out;
}

// Everything the subtree of `s` writes to register values.
std::vector<Elems> writes(const Stmt& s) {
  std::vector<Elems> out;
  walk(Block{s}, [&](const Stmt& t) {
    bool whole = t.kind == StmtKind::Atom && !scalar_atom(t);
    if (t.kind == StmtKind::Load || t.kind == StmtKind::Atom || is_leaf_math(t))
      out.push_back({t.dst, t.dst_index, t.kind == StmtKind::Load ? t.width : 1, whole});
    if (t.kind == StmtKind::Alloc) out.push_back({t.dst, {}, 1, true});
  });
  return out;
}

bool any_overlap(const std::vector<Elems>& xs, const Elems& e) {
  return std::any_of(xs.begin(), xs.end(), [&](const Elems& x) { return overlap(x, e); });
}

class Interleaver {
 public:
  explicit Interleaver(const KernelProgram& p) : p_(p) {}

  void run(Block& b) {
    for (Stmt& s : b)
      if (s.kind == StmtKind::For || s.kind == StmtKind::If) run(s.body);
    std::set<std::string> frags = fragments(b);
    if (frags.empty()) return;
    Block flat;
    for (const Stmt& s : b) {
      if (s.kind == StmtKind::For && unrollable(s) && touches(s, frags)) unroll_into(s, flat);
      else flat.push_back(s);
    }
    sink(flat, frags);
    b = std::move(flat);
  }

 private:
  // A tensor whose contents no statement of the block can change while a load waits:
  // shared slabs (changed only by stores, cp.async, TMA, all of which stop a load) and
  // the kernel's inputs.
  bool stable_source(const std::string& tensor) const {
    if (!p_.has_tensor(tensor)) return false;
    TensorRole r = p_.tensor(tensor).role;
    return r == TensorRole::Shared || r == TensorRole::Input;
  }

  std::set<std::string> fragments(const Block& b) const {
    std::set<std::string> allocs, frags;
    for (const Stmt& s : b)
      if (s.kind == StmtKind::Alloc) allocs.insert(s.dst);
    for (const Stmt& s : b) {
      if (!unrollable(s)) continue;
      walk(Block{s}, [&](const Stmt& t) {
        if (t.kind == StmtKind::Load && allocs.count(t.dst) && stable_source(t.tensor))
          frags.insert(t.dst);
      });
    }
    return frags;
  }

  static bool touches(const Stmt& s, const std::set<std::string>& frags) {
    bool hit = false;
    walk(Block{s}, [&](const Stmt& t) {
      hit |= frags.count(t.dst) != 0;
      for (const Operand& a : t.args) hit |= frags.count(a.name) != 0;
    });
    return hit;
  }

  bool movable(const Stmt& s, const std::set<std::string>& frags) const {
    if (s.kind != StmtKind::Load || !frags.count(s.dst) || !stable_source(s.tensor)) return false;
    return std::all_of(s.dst_index.begin(), s.dst_index.end(),
                       [](const Expr& e) { return e.is_const(); });
  }

  // A statement a load may pass: it touches registers only, so it cannot change the
  // load's source; the caller checks that it leaves the load's elements alone.
  static bool register_only(const Stmt& s) {
    return s.kind == StmtKind::Load || s.kind == StmtKind::Alloc || is_leaf_math(s);
  }

  void sink(Block& b, const std::set<std::string>& frags) {
    std::vector<bool> done(b.size(), false);
    for (size_t i = 0; i < b.size();) {
      if (done[i] || !movable(b[i], frags)) {
        ++i;
        continue;
      }
      done[i] = true;
      const Stmt& ld = b[i];
      Elems dst{ld.dst, ld.dst_index, ld.width};
      size_t target = i + 1;
      bool found = false;
      for (size_t j = i + 1; j < b.size(); ++j) {
        if (any_overlap(reads(b[j]), dst)) {
          found = is_leaf_math(b[j]);
          target = j;
          break;
        }
        if (!register_only(b[j]) || any_overlap(writes(b[j]), dst)) break;
      }
      if (!found || target == i + 1) {
        ++i;
        continue;
      }
      // The load lands right before its consumer; what followed it moves up to `i`.
      std::rotate(b.begin() + long(i), b.begin() + long(i) + 1, b.begin() + long(target));
      std::rotate(done.begin() + long(i), done.begin() + long(i) + 1,
                  done.begin() + long(target));
    }
  }

  const KernelProgram& p_;
};

}  // namespace

Pass pass_interleave_loads() {
  return Pass{"k:052_interleave_loads", Level::Kernel, Level::Kernel,
              "with INTERLEAVE_LOADS=1 the register loops that fill and consume fragment "
              "arrays are written out, and each fragment load sits right before the first "
              "arithmetic statement that reads it (unless a barrier, store or loop is in "
              "the way)",
              {"INTERLEAVE_LOADS"},
              [](CompileState& s) {
                if (s.knob("INTERLEAVE_LOADS", 0) == 0) return;
                for (auto& k : s.kernel.kernels) Interleaver(s.kernel).run(k.body);
              }};
}

}  // namespace loom
