// Rotation's input sets (driver/input_sets.h) are drawn from a program's Input tensors
// alone. That is only right if drawing them so gives exactly the inputs the whole
// program draws for the same seed — the inputs `loom run --seed S+set` checks — which
// make_random_inputs promises by drawing inputs in tensor order from one stream. A
// split-K program (zero-initialized workspace and counters among its tensors) checks
// that the Temps in between change nothing.
#include <gtest/gtest.h>

#include "driver/compile.h"
#include "driver/input_sets.h"
#include "ir/interpreter.h"

namespace loom {
namespace {

TEST(InputSets, InputsOfDrawsTheProgramsInputs) {
  CompileOptions opt;
  opt.knobs = Knobs::parse("SPLITK=4");
  const KernelProgram kp =
      compile_expression("relu(add(matmul(A[64,256]:bf16, B[256,48]:bf16), bias[48]:f32))", opt)
          .state.kernel;
  const ProgramBase in = inputs_of(kp);
  EXPECT_EQ(in.symbols, kp.symbols);
  size_t inputs = 0, others = 0;
  for (const auto& t : kp.tensors) (t.role == TensorRole::Input ? inputs : others) += 1;
  ASSERT_EQ(in.tensors.size(), inputs);
  EXPECT_GT(others, 1u) << "the output and split-K's workspace";
  for (const auto& t : in.tensors) EXPECT_EQ(t.role, TensorRole::Input) << t.name;

  for (uint64_t seed : {1u, 2u, 7u}) {
    Bindings whole, alone;
    make_random_inputs(kp, whole, seed);
    make_random_inputs(in, alone, seed);
    EXPECT_EQ(alone.tensors.size(), inputs);
    for (const auto& t : in.tensors)
      EXPECT_EQ(alone.tensors.at(t.name).data, whole.tensors.at(t.name).data)
          << t.name << " seed " << seed;
  }
}

}  // namespace
}  // namespace loom
