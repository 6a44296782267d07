// The single ordered list of passes, and the driver that runs it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace loom {

const std::vector<Pass>& pipeline();
const Pass* find_pass(const std::string& id);

// Observer called after every pass with the IR text before and after (for -vv diffs).
using PassObserver = std::function<void(const Pass&, const std::string& before,
                                        const std::string& after)>;

// Run the pipeline on s (whose graph is set) up to and including `last_id` (all when
// empty). Verifies the IR after every pass; a verifier failure names the pass.
void run_pipeline(CompileState& s, const std::string& last_id = "",
                  const PassObserver& observer = nullptr);

}  // namespace loom
