// NaN and inf in the inputs of every kernel family (tests/gpu/family_cases.h) propagate as
// IEEE arithmetic says: the kernel's output has NaN, +inf and -inf exactly where the fp64
// reference of the same inputs has them, and its finite elements pass the dtype's
// threshold (verify_ieee_output). The specials are planted so that IEEE leaves no choice
// to the order of accumulation:
//   GEMMs: NaN at A[1,2] (row 1 is NaN), +inf at A[3,5] (row 3 is ±inf by the sign of
//     B[5,j], NaN where an opposite inf meets it), -inf at B[4,6] (column 6 likewise);
//   attention: NaN at Q[0,0,3,0] (that query row is NaN), +inf at V[0,0,0,5] (column 5 of
//     every row of the heads reading KV head 0 is +inf: key 0 is visible to every query and
//     its weight is positive), NaN at K[last batch, last KV head, key 0, 1] (every row of the
//     heads reading it is NaN).
// The fused epilogues of the cases (relu, a bias, a residual) carry the specials through
// as PyTorch does: relu(NaN) is NaN, not 0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bench/reference.h"
#include "bench/verify.h"
#include "compile_first.h"
#include "driver/executor.h"
#include "driver/run.h"
#include "family_cases.h"
#include "runtime/cubin_cache.h"
#include "runtime/module.h"
#include "runtime/watchdog.h"

namespace loom {
namespace {

using family_test::Case;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Row-major flat index of `at` in a tensor of `shape`.
int64_t flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& at) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + at[d];
  return i;
}

void plant(HostTensor& t, const std::vector<int64_t>& at, double value) {
  ASSERT_EQ(at.size(), t.shape.size());
  t.data[size_t(flat(t.shape, at))] = value;
}

// The contraction's operands (A, B / X, W / Q, K, V), in the graph's order, and their dtype.
std::vector<std::string> operand_names(const Graph& g, DType* dtype) {
  for (const Node& n : g.nodes)
    if (n.kind == OpKind::Matmul || n.kind == OpKind::Attention) {
      std::vector<std::string> names;
      for (int id : n.inputs) names.push_back(g.node(id).name);
      *dtype = g.node(n.inputs[0]).dtype;
      return names;
    }
  return {};
}

class GpuNanInf : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { compile_then_require_gpu(GetParam().expr, GetParam().knobs); }
};

TEST_P(GpuNanInf, SpecialsPropagateAsIeeeSays) {
  const Case& c = GetParam();
  auto dev = probe_device(0, nullptr);
  ASSERT_TRUE(dev);
  make_device_current(0);
  const Graph g = parse_expression(c.expr);
  CompileOptions copt;
  copt.knobs = Knobs::parse(c.knobs);
  copt.target = target_for_device(*dev);
  const CompiledProgram prog = compile_graph(g, copt, c.expr);
  const KernelProgram& kp = prog.state.kernel;
  CubinCache cache;
  const CompileResult cr = compile(nvrtc_request(prog.cuda, dev->arch()), &cache);
  Module module = Module::load(cr.cubin);

  Bindings host;
  make_random_inputs(kp, host, 5);
  DType in = DType::F32;
  const std::vector<std::string> ops = operand_names(g, &in);
  ASSERT_GE(ops.size(), 2u);
  if (g.attention()) {
    ASSERT_EQ(ops.size(), 3u);
    HostTensor& q = host.tensors.at(ops[0]);
    HostTensor& k = host.tensors.at(ops[1]);
    HostTensor& v = host.tensors.at(ops[2]);
    plant(q, {0, 0, 3, 0}, kNan);
    plant(v, {0, 0, 0, 5}, kInf);
    plant(k, {k.shape[0] - 1, k.shape[1] - 1, 0, 1}, kNan);
  } else {
    HostTensor& a = host.tensors.at(ops[0]);
    HostTensor& b = host.tensors.at(ops[1]);
    ASSERT_EQ(a.shape.size(), 2u);
    plant(a, {1, 2}, kNan);
    plant(a, {3, 5}, kInf);
    plant(b, {4, 6}, -kInf);
  }

  DeviceTensors tensors;
  tensors.allocate(kp, host);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ProgramLauncher launcher(kp, module, tensors, host.symbols);
  tensors.poison_outputs(kp, stream);
  launcher.launch_all(stream);
  sync_with_timeout(stream, kernel_timeout_s(), c.family + " with NaN/inf inputs");
  const HostTensor out = tensors.download(kp, "out", host.symbols);
  cudaStreamDestroy(stream);

  std::map<std::string, HostTensor> inputs;
  for (const auto& t : kp.tensors)
    if (t.role == TensorRole::Input) inputs[t.name] = host.tensors.at(t.name);
  const HostTensor ref = reference_eval(g, inputs, /*use_gpu=*/false);
  // The planted values reach the reference's output as NaN, inf and finite elements
  // alike, so the comparison below checks all three.
  int64_t nans = 0, infs = 0, finite = 0;
  for (double v : ref.data) (std::isnan(v) ? nans : std::isinf(v) ? infs : finite)++;
  ASSERT_GT(nans, 0);
  ASSERT_GT(infs, 0);
  ASSERT_GT(finite, 0);

  const VerifyResult v = verify_ieee_output(out, ref, verify_threshold(in, out.dtype));
  EXPECT_TRUE(v.passed) << c.family << ": " << v.message << " (reference: " << nans << " NaN, "
                        << infs << " inf, " << finite << " finite)";
}

INSTANTIATE_TEST_SUITE_P(Families, GpuNanInf, ::testing::ValuesIn(family_test::cases()),
                         [](const auto& info) { return info.param.family; });

}  // namespace
}  // namespace loom
