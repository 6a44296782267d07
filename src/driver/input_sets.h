// Rotation's input sets (bench/timing_plan.h: launch c reads set c mod R, so each finds
// its inputs out of L2): set 0 is the inputs a program was checked on; sets 1..R-1 are
// fresh inputs drawn from the seeds after set 0's, as `loom run --seed` would draw them.
//
// Two parts, because the tuner keeps them apart: the sets' inputs on the device
// (RotationInputs), uploaded once per problem and read by every candidate, and one
// program's tensors and launchers over them (InputSets), which share that program's
// outputs and workspace (their launches run one after another on one stream).
// `loom run --bench` (driver/run.cpp) makes both for its one program.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/executor.h"

namespace loom {

// The program's Input tensors alone (its symbols kept): what an input set holds and
// what make_random_inputs fills for it (it draws inputs in tensor order from one seeded
// stream, so they are the program's inputs for that seed).
ProgramBase inputs_of(const ProgramBase& p);

class RotationInputs {
 public:
  RotationInputs() = default;
  // Sets 1..sets-1 of `p`'s inputs, from seeds seed+1 .. seed+sets-1 (none for sets <= 1);
  // `prepare` (when given) adjusts each set's random inputs with its seed, as the first
  // set's were (paged attention's block table and lengths: fill_serving_inputs).
  RotationInputs(const ProgramBase& p, const std::map<std::string, int64_t>& symbols,
                 uint64_t seed, int sets,
                 const std::function<void(Bindings&, uint64_t)>& prepare = {});
  int sets() const { return int(more_.size()) + 1; }
  const DeviceTensors& inputs(int set) const;  // 1 <= set < sets()

 private:
  std::vector<std::unique_ptr<DeviceTensors>> more_;
};

class InputSets {
 public:
  // `first`/`first_launcher`: set 0 (the checked tensors and their launcher); sets
  // 1..R-1 read `rotation`'s inputs and share `first`'s outputs and workspace, each with
  // its own launcher (pointers, tensor maps). All must outlive this.
  InputSets(const KernelProgram& kp, const Module& module, const DeviceTensors& first,
            const ProgramLauncher& first_launcher, const std::map<std::string, int64_t>& symbols,
            const RotationInputs& rotation);
  const DeviceTensors& tensors(int set) const { return set == 0 ? first_ : *more_[size_t(set - 1)]; }
  const ProgramLauncher& launcher(int set) const {
    return set == 0 ? first_launcher_ : *launchers_[size_t(set - 1)];
  }

 private:
  const DeviceTensors& first_;
  const ProgramLauncher& first_launcher_;
  std::vector<std::unique_ptr<DeviceTensors>> more_;
  std::vector<std::unique_ptr<ProgramLauncher>> launchers_;
};

}  // namespace loom
