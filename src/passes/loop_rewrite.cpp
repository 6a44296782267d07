#include "passes/loop_rewrite.h"

namespace loom {

std::string fresh_name(const std::string& base, const std::set<std::string>& taken) {
  std::string n = base;
  for (int i = 0; taken.count(n); ++i) n = base + std::to_string(i);
  return n;
}

std::set<std::string> loop_program_names(const LoopProgram& p) {
  std::set<std::string> n(p.symbols.begin(), p.symbols.end());
  for (const auto& t : p.tensors) n.insert(t.name);
  for (const auto& op : p.ops)
    walk(op.body, [&](const Stmt& s) {
      if (!s.var.empty()) n.insert(s.var);
      if (!s.dst.empty()) n.insert(s.dst);
    });
  return n;
}

Block parallel_nest(const std::vector<ParallelLoop>& loops, Block body) {
  for (size_t i = loops.size(); i-- > 0;)
    body = {Stmt::For(loops[i].var, loops[i].extent, LoopKind::Parallel, loops[i].axis,
                      std::move(body))};
  return body;
}

std::vector<std::string> inputs_read(const LoopOp& orig, const Block& body) {
  std::set<std::string> read;
  walk(body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Load) read.insert(s.tensor);
  });
  std::vector<std::string> in;
  for (const auto& t : orig.inputs)
    if (read.count(t)) in.push_back(t);
  return in;
}

}  // namespace loom
