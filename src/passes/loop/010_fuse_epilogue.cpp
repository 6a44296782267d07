// l:010_fuse_epilogue — fold elementwise LoopOps into the op that produces their input.
//
// Legal when the consumer is a perfect nest of parallel loops with the producer's
// extents, reads the producer's tensor exactly at its own loop position (index 0 in a
// dimension of extent 1 counts), and nothing else reads that tensor. Steps:
//  1. Find the producer's Write of the temp tensor and its index variables.
//  2. Rename the consumer's loop variables to the producer's, drop its load of the temp
//     and use the written value in its place.
//  3. Replace the Write by the consumer's statements (which end in its own Write), and
//     delete the consumer and the temp. Repeat until no pair fuses.
// The temp was f32 (the accumulator type), so fusion changes no rounding.
#include <algorithm>

#include "ir/error.h"
#include "passes/passes.h"

namespace loom {
namespace {

// Descend a perfect nest of parallel loops; returns the loops and the innermost body.
std::vector<const Stmt*> parallel_nest(const Block& body, const Block** inner) {
  std::vector<const Stmt*> loops;
  const Block* b = &body;
  while (b->size() == 1 && (*b)[0].kind == StmtKind::For &&
         (*b)[0].loop_kind == LoopKind::Parallel) {
    loops.push_back(&(*b)[0]);
    b = &(*b)[0].body;
  }
  *inner = b;
  return loops;
}

// Find the (unique) Write to `tensor` in `b`, with its enclosing block.
Stmt* find_write(Block& b, const std::string& tensor, Block** where) {
  for (auto& s : b) {
    if (s.kind == StmtKind::Write && s.tensor == tensor) {
      *where = &b;
      return &s;
    }
    if (s.kind == StmtKind::For || s.kind == StmtKind::If)
      if (Stmt* w = find_write(s.body, tensor, where)) return w;
  }
  return nullptr;
}

int readers(const LoopProgram& p, const std::string& tensor) {
  int n = 0;
  for (const auto& op : p.ops)
    walk(op.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::Load && s.tensor == tensor) ++n;
    });
  return n;
}

void rename_value(Block& b, const std::string& from, const std::string& to) {
  walk(b, [&](Stmt& s) {
    for (auto& a : s.args)
      if (a.name == from) a.name = to;
  });
}

bool try_fuse(LoopProgram& p, size_t ci) {
  LoopOp& cons = p.ops[ci];
  // The producer is the op writing one of the consumer's temp inputs.
  for (size_t pi = 0; pi < ci; ++pi) {
    LoopOp& prod = p.ops[pi];
    const TensorDecl& t = p.tensor(prod.output);
    if (t.role != TensorRole::Temp) continue;
    if (std::find(cons.inputs.begin(), cons.inputs.end(), prod.output) == cons.inputs.end())
      continue;
    if (readers(p, prod.output) != 1) continue;

    const Block* cinner;
    auto cloops = parallel_nest(cons.body, &cinner);
    Block* wblock = nullptr;
    Stmt* write = find_write(prod.body, prod.output, &wblock);
    if (!write || cloops.size() != write->index.size()) continue;
    // The producer's write index must be its loop variables, in order.
    std::map<std::string, Expr> rename;
    bool ok = true;
    for (size_t i = 0; i < cloops.size() && ok; ++i) {
      if (!write->index[i].is_var()) ok = false;
      else rename[cloops[i]->var] = write->index[i];
    }
    // The consumer must read the temp at exactly its own loop position. A dimension of
    // extent 1 may be read at index 0 (l:000 indexes size-1 dimensions by 0, broadcast
    // style): that is the loop variable's only value. Without this a GEMM with M = 1
    // (a decode step's token) ran its epilogue as separate elementwise kernels.
    Block cell = *cinner;
    std::string loaded;
    for (auto it = cell.begin(); ok && it != cell.end(); ++it) {
      if (it->kind != StmtKind::Load || it->tensor != prod.output) continue;
      for (size_t i = 0; i < cloops.size(); ++i) {
        const Expr& ix = it->index[i];
        const bool at_var = ix.is_var() && ix.var_name() == cloops[i]->var;
        const bool unit = ix.is_const() && ix.const_value() == 0 &&
                          cloops[i]->extent.is_const() && cloops[i]->extent.const_value() == 1;
        if (!at_var && !unit) ok = false;
      }
      loaded = it->dst;
      cell.erase(it);
      break;
    }
    if (!ok || loaded.empty()) continue;

    // 2-3: splice the consumer's cell in place of the producer's write.
    substitute_block(cell, rename);
    Operand written = write->args[0];
    if (written.is_imm()) continue;
    rename_value(cell, loaded, written.name);
    size_t pos = size_t(write - wblock->data());
    wblock->erase(wblock->begin() + long(pos));
    wblock->insert(wblock->begin() + long(pos), cell.begin(), cell.end());

    std::string temp = prod.output;
    prod.name += "_" + cons.name;
    prod.output = cons.output;
    for (const auto& in : cons.inputs)
      if (in != temp && std::find(prod.inputs.begin(), prod.inputs.end(), in) == prod.inputs.end())
        prod.inputs.push_back(in);
    p.ops.erase(p.ops.begin() + long(ci));
    p.tensors.erase(std::remove_if(p.tensors.begin(), p.tensors.end(),
                                   [&](const TensorDecl& d) { return d.name == temp; }),
                    p.tensors.end());
    return true;
  }
  return false;
}

}  // namespace

Pass pass_fuse_epilogue() {
  return Pass{"l:010_fuse_epilogue", Level::Loop, Level::Loop,
              "elementwise ops that consume a temp at their own position are part of the "
              "producer's write (one LoopOp per kernel)",
              {},
              [](CompileState& s) {
                bool changed = true;
                while (changed) {
                  changed = false;
                  for (size_t ci = 1; ci < s.loop.ops.size() && !changed; ++ci)
                    changed = try_fuse(s.loop, ci);
                }
              }};
}

}  // namespace loom
