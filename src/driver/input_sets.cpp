#include "driver/input_sets.h"

#include "ir/error.h"
#include "ir/interpreter.h"

namespace loom {

ProgramBase inputs_of(const ProgramBase& p) {
  ProgramBase in;
  in.symbols = p.symbols;
  for (const auto& t : p.tensors)
    if (t.role == TensorRole::Input) in.tensors.push_back(t);
  return in;
}

RotationInputs::RotationInputs(const ProgramBase& p, const std::map<std::string, int64_t>& symbols,
                               uint64_t seed, int sets,
                               const std::function<void(Bindings&, uint64_t)>& prepare) {
  const ProgramBase inputs = inputs_of(p);
  for (int set = 1; set < sets; ++set) {
    Bindings h;
    h.symbols = symbols;
    make_random_inputs(inputs, h, seed + uint64_t(set));
    if (prepare) prepare(h, seed + uint64_t(set));
    more_.push_back(std::make_unique<DeviceTensors>());
    more_.back()->allocate(inputs, h);
  }
}

const DeviceTensors& RotationInputs::inputs(int set) const {
  LOOM_CHECK(set >= 1 && set < sets(), "input set out of range");
  return *more_[size_t(set - 1)];
}

InputSets::InputSets(const KernelProgram& kp, const Module& module, const DeviceTensors& first,
                     const ProgramLauncher& first_launcher,
                     const std::map<std::string, int64_t>& symbols, const RotationInputs& rotation)
    : first_(first), first_launcher_(first_launcher) {
  Bindings shapes;
  shapes.symbols = symbols;
  for (int set = 1; set < rotation.sets(); ++set) {
    more_.push_back(std::make_unique<DeviceTensors>());
    more_.back()->allocate(kp, shapes, &rotation.inputs(set), &first);
    launchers_.push_back(std::make_unique<ProgramLauncher>(kp, module, *more_.back(), symbols));
  }
}

}  // namespace loom
