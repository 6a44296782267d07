// Size symbols and the names the passes generate share the IR's one namespace: a loop
// variable `m` bound by l:000 would shadow a user's symbol `m` inside its loop, and a slab
// `A_s` declared by t:040 would be a second kernel parameter beside a symbol `A_s`. The
// user may name a symbol anything that is not reserved (`loom_...`), so a symbol that one
// of this program's passes would also generate is spelled apart before lowering: renamed
// in the Graph to `loom_sym_<name>`, a spelling no pass and no user name can take, with
// the user's name kept in Graph::symbol_names and ProgramBase::symbol_names (bindings may
// name it either way; the printers show both).
#pragma once
#include <optional>
#include <string>

#include "passes/pass.h"

namespace loom {

// A size symbol with the name of something a pass generates.
struct SymbolClash {
  std::string symbol;  // the symbol's current spelling
  std::string what;    // "a loop variable the compiler generates (pass l:000_lower_graph binds `m`)"
};

// The first symbol of the program `s` holds at its current level that a name generated
// so far would clash with; nullopt when none.
std::optional<SymbolClash> find_symbol_clash(const CompileState& s, const std::string& pass_id);

// Renames every symbol of `s.graph` that a pass of the pipeline would also generate, found by
// running the passes on a copy (only when the graph has symbols). The IR spelling of a
// renamed symbol `m` is `loom_sym_m`; `s.sizes` follows it. Called by l:000_lower_graph.
void spell_symbols_apart(CompileState& s);

// The spelling given to the user's symbol `name` when it clashes.
std::string apart_spelling(const std::string& name);

}  // namespace loom
