#include "passes/symbol_spelling.h"

#include <set>

#include "ir/error.h"
#include "passes/pipeline.h"

namespace loom {

std::string apart_spelling(const std::string& name) { return "loom_sym_" + name; }

std::optional<SymbolClash> find_symbol_clash(const CompileState& s, const std::string& pass_id) {
  const ProgramBase* prog = s.level == Level::Loop     ? static_cast<const ProgramBase*>(&s.loop)
                            : s.level == Level::Tile   ? static_cast<const ProgramBase*>(&s.tile)
                            : s.level == Level::Kernel ? static_cast<const ProgramBase*>(&s.kernel)
                                                       : nullptr;
  if (!prog || prog->symbols.empty()) return std::nullopt;
  const std::set<std::string> symbols(prog->symbols.begin(), prog->symbols.end());
  // The tensors the passes declare (slabs `A_s`, temps `t2`, `workspace`) would be kernel
  // parameters of the symbol's name.
  for (const TensorDecl& t : prog->tensors)
    if (symbols.count(t.name))
      return SymbolClash{t.name, "a tensor the compiler generates (after pass " + pass_id + ")"};
  std::optional<SymbolClash> clash;
  auto check = [&](const Block& body) {
    walk(body, [&](const Stmt& st) {
      if (clash) return;
      std::vector<std::string> bound;
      if (st.kind == StmtKind::For || st.kind == StmtKind::Let || st.kind == StmtKind::TileArrive)
        bound.push_back(st.var);
      if (st.kind == StmtKind::Stage)
        for (const StageCopy& c : st.copies) bound.insert(bound.end(), c.vars.begin(), c.vars.end());
      for (const std::string& v : bound)
        if (symbols.count(v)) {
          clash = SymbolClash{v, "a loop variable the compiler generates (pass " + pass_id +
                                     " binds `" + v + "`)"};
          return;
        }
    });
  };
  if (s.level == Level::Loop)
    for (const LoopOp& op : s.loop.ops) check(op.body);
  if (s.level == Level::Tile)
    for (const TileOp& op : s.tile.ops) check(op.body);
  if (s.level == Level::Kernel)
    for (const KernelOp& k : s.kernel.kernels) check(k.body);
  return clash;
}

namespace {

// The first clash the passes would meet compiling `s`, run on a copy; nullopt when they
// meet none, or stop with an error first (the real run stops there too, with that error).
std::optional<SymbolClash> first_clash(const CompileState& s) {
  CompileState probe = s;
  probe.spelling_symbols = true;  // l:000 of the probe does not probe again
  try {
    for (const Pass& p : pipeline()) {
      p.run(probe);
      if (auto c = find_symbol_clash(probe, p.id)) return c;
    }
  } catch (const Error&) {
  }
  return std::nullopt;
}

}  // namespace

void spell_symbols_apart(CompileState& s) {
  if (s.spelling_symbols || s.level != Level::Graph) return;
  const std::vector<std::string> symbols = s.graph.symbols();
  if (symbols.empty()) return;
  // Each round renames one symbol: at most one round per symbol, then none may clash.
  for (size_t round = 0; round <= symbols.size(); ++round) {
    const std::optional<SymbolClash> c = first_clash(s);
    if (!c) return;
    const auto user = s.graph.symbol_names.find(c->symbol);
    if (user != s.graph.symbol_names.end())
      throw Error("internal error: the size symbol " + user->second + ", spelled " + c->symbol +
                  " in the IR, still has the name of " + c->what);
    const std::string spelled = apart_spelling(c->symbol);
    s.graph.rename_symbol(c->symbol, spelled);
    s.graph.symbol_names[spelled] = c->symbol;
    if (auto it = s.sizes.find(c->symbol); it != s.sizes.end()) {
      s.sizes[spelled] = it->second;
      s.sizes.erase(it);
    }
  }
  throw Error("internal error: renaming the size symbols apart from generated names did not "
              "converge");
}

}  // namespace loom
