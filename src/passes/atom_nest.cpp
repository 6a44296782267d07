#include "passes/atom_nest.h"

#include <set>

#include "ir/error.h"

namespace loom {

AtomCells atom_cells(const Stmt& top, const std::string& pass, const std::string& atom_id,
                     int m, int n, int k) {
  AtomCells c;
  const Stmt* s = &top;
  for (;;) {
    std::string* slot = s->axis == "m" ? &c.m : s->axis == "n" ? &c.n : s->axis == "k" ? &c.k
                                                                                      : nullptr;
    if (!slot || !slot->empty() || !s->extent.is_const())
      throw Error(pass + ": ATOM loop `" + s->var + "` (axis " + s->axis +
                  ") is not one of an atom's m, n, k cell loops with a constant extent");
    *slot = s->var;
    c.extent[s->var] = s->extent.const_value();
    if (s->body.size() == 1 && s->body[0].kind == StmtKind::For && s->body[0].tier == Tier::Atom)
      s = &s->body[0];
    else
      break;
  }
  c.body = &s->body;
  for (auto [var, want] : {std::pair{&c.m, m}, std::pair{&c.n, n}, std::pair{&c.k, k}})
    if (!var->empty() && c.extent.at(*var) != want)
      throw Error(pass + ": ATOM loop `" + *var + "` runs " + std::to_string(c.extent.at(*var)) +
                  " cells, " + atom_id + " has " + std::to_string(want));
  return c;
}

void suffix_defined_scalars(Block& b, const std::string& suffix) {
  std::set<std::string> defined;
  walk(b, [&](const Stmt& s) {
    if ((s.kind == StmtKind::Load || s.kind == StmtKind::Compute || s.kind == StmtKind::Init) &&
        s.dst_index.empty())
      defined.insert(s.dst);
  });
  walk(b, [&](Stmt& s) {
    if (defined.count(s.dst) && s.dst_index.empty()) s.dst += suffix;
    for (auto& a : s.args)
      if (defined.count(a.name)) a.name += suffix;
  });
}

}  // namespace loom
