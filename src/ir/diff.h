// Line diff of two printed IR texts: `loom compile -vv` shows each pass as the unified
// diff of the IR before and after it.
#pragma once
#include <string>

namespace loom {

// Unified diff of `before` and `after`, compared line by line: hunks headed
// `@@ -a,b +c,d @@` followed by ` ` (context), `-` (removed) and `+` (added) lines, with
// `context` unchanged lines around each change; no file headers. Empty when the texts
// have the same lines.
std::string unified_diff(const std::string& before, const std::string& after, int context = 3);

}  // namespace loom
