// Verifier internals shared by verify.cpp (declarations, ops, launches) and
// verify_body.cpp (statements).
#pragma once
#include <set>
#include <string>

#include "ir/program.h"

namespace loom::verifier {

enum class Level { Loop, Tile, Kernel };
const char* level_name(Level l);  // "Loop IR", ...

// What a body touches: the tensors it writes, and the global tensors it reads or
// writes (a kernel must list those as parameters).
struct BodyFacts {
  std::set<std::string> written, used;
};

// Checks `body` against the rules of `level`; throws loom::Error naming `where`, the
// statement and the rule. Kernel IR bodies pass their kernel (its warp atoms and block
// size take part in the checks); other levels pass nullptr.
BodyFacts check_body(const ProgramBase& p, Level level, const std::string& where,
                     const Block& body, const KernelOp* kernel = nullptr);

}  // namespace loom::verifier
