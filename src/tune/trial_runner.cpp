#include "tune/trial_runner.h"

#include <algorithm>
#include <chrono>

#include "bench/reference.h"
#include "bench/timing.h"
#include "bench/verify.h"
#include "bench/verify_attention.h"
#include "driver/compile.h"
#include "driver/executor.h"
#include "driver/input_sets.h"
#include "driver/run.h"
#include "driver/run_memory.h"
#include "frontend/parser.h"
#include "ir/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "tune/trial_timing.h"

namespace loom::tune {

struct TrialRunner::Problem {
  std::string key;       // expression, sizes, seed and the input tensors' declarations
  Bindings host;         // the inputs (storage layout) and the symbol values
  DeviceTensors inputs;  // the same inputs on the GPU, shared by every candidate
  HostTensor reference;  // fp64 (a contraction)
  std::optional<AttentionReference> attention;  // an attention's checked rows
  // The L2 plan, made once per problem as `loom run --bench` makes it (trial_timing.h),
  // and rotation's input sets 1..R-1 (set 0 is `inputs`; driver/input_sets.h), uploaded
  // once and read by every candidate.
  TrialTiming timing;
  RotationInputs rotation;
};

namespace {

// The host's time per input element of a step of a problem's set-up, generously: the
// random values alone (make_random_inputs: a 64-bit draw and a rounding to the dtype per
// element) measured 37 ns per element on a 2-core CI-class host (2026-11-30), so a
// bmm with a 940M-element weight spends ~35 s there, past the tuner's 20 s per phase;
// 150 ns also covers the conversion and upload. An allowance for slow progress, not for
// a hang: the GPU-bound phases keep the bare limit.
constexpr double kHostSecondsPerInputElement = 150e-9;

// The inputs' elements (the set-up's host work grows with them); 0 where a shape needs a
// symbol the job does not bind (the set-up then fails with its own message).
int64_t input_element_count(const ProgramBase& inputs, const std::map<std::string, int64_t>& sizes) {
  Expr::Env env(sizes.begin(), sizes.end());
  int64_t n = 0;
  try {
    for (const TensorDecl& t : inputs.tensors) {
      if (t.role == TensorRole::Shared) continue;
      int64_t e = 1;
      for (const Expr& d : t.shape) e *= std::max<int64_t>(0, d.eval(env));
      n += e;
    }
  } catch (const Error&) {
    return 0;
  }
  return n;
}

std::string problem_key(const MeasureJob& job, const ProgramBase& inputs) {
  std::string k = job.expression + "|seed " + std::to_string(job.seed) + "|l2 " +
                  l2_request_name(job.l2);
  for (const auto& [s, v] : job.sizes) k += "|" + s + "=" + std::to_string(v);
  for (const auto& t : inputs.tensors) {
    k += "|" + t.name + ":" + dtype_name(t.dtype);
    for (const auto& d : t.shape) k += "," + d.str();
  }
  return k;
}

// A CUDA error from a faulting kernel is sticky: every later call in this process fails
// with it. Synchronizing tells the two kinds apart; a non-sticky error is cleared.
bool context_is_poisoned(std::string& why) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return true;
  }
  cudaGetLastError();
  return false;
}

}  // namespace

TrialRunner::TrialRunner(int device_ordinal) {
  dev_ = probe_device(device_ordinal, &no_device_);
  // A blocking stream, as `loom run` uses: it orders after the uploads cudaMemcpy makes
  // on the legacy default stream.
  if (dev_ && cudaSetDevice(device_ordinal) == cudaSuccess) cudaStreamCreate(&stream_);
}

TrialRunner::~TrialRunner() {
  problem_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

Measurement TrialRunner::run(const MeasureJob& job,
                             const std::function<void(const std::string&, double)>& phase,
                             bool& poisoned) {
  setup_seconds_ = 0;
  Measurement m = run_trial(job, phase, poisoned);
  m.setup_seconds = setup_seconds_;
  return m;
}

Measurement TrialRunner::run_trial(const MeasureJob& job,
                                   const std::function<void(const std::string&, double)>& phase,
                                   bool& poisoned) {
  poisoned = false;
  if (!dev_) return failed_measurement(TrialStatus::worker_error, "no GPU: " + no_device_);
  if (!stream_)
    return failed_measurement(TrialStatus::worker_error,
                              "cannot create a CUDA stream on " + dev_->name);

  phase("compile", 0);
  Graph g;
  CompiledProgram prog;
  CompileResult nvrtc;
  try {
    g = bind_sizes(parse_expression(job.expression), job.sizes);
    CompileOptions copt;
    copt.knobs = Knobs::parse(job.knobs);
    copt.target = target_for_device(*dev_);
    prog = compile_graph(g, copt, job.expression);
    const std::string& source = job.cuda_override.empty() ? prog.cuda : job.cuda_override;
    nvrtc = compile(nvrtc_request(source, dev_->arch()), &cache_);
  } catch (const Error& e) {
    return failed_measurement(TrialStatus::compile_error, e.what());
  }
  const KernelProgram& kp = prog.state.kernel;

  // Any CUDA failure from here on is either this candidate's fault (sticky: the process
  // must go) or a launch it cannot make on this GPU; `stage` names which step failed.
  std::string stage = "problem setup";
  auto on_error = [&](const std::string& what, TrialStatus unpoisoned) {
    std::string why;
    if (context_is_poisoned(why)) {
      poisoned = true;
      return failed_measurement(TrialStatus::fault,
                                stage + ": " + what + " (context poisoned: " + why + ")");
    }
    return failed_measurement(unpoisoned, stage + ": " + what);
  };

  try {
    ProgramBase inputs = inputs_of(kp);
    std::string key = problem_key(job, inputs);
    phase("setup", 0);
    if (!problem_ || problem_->key != key) {
      const auto setup_start = std::chrono::steady_clock::now();
      // Counted also when the set-up fails part way: those seconds were spent too.
      struct SetupClock {
        std::chrono::steady_clock::time_point start;
        double& out;
        ~SetupClock() {
          out = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      } setup_clock{setup_start, setup_seconds_};
      problem_.reset();
      // What `loom run` checks before allocating (driver/run_memory.h), with this
      // candidate's workspace: a problem the GPU or the host cannot hold is this trial's
      // clear refusal, not an allocation failure half way through.
      MemoryAvailable have;
      have.host = host_available_bytes();
      have.device = device_free_bytes();
      have.device_name = dev_->name;
      if (std::string why = memory_refusal(run_memory_need(g, &kp, false), have); !why.empty())
        return failed_measurement(TrialStatus::compile_error, "problem setup: " + why);
      auto p = std::make_unique<Problem>();
      p->key = key;
      // The host's share of the set-up grows with the inputs' elements (random values in
      // doubles, their conversion and upload); each step announces it, so a problem of
      // gigabytes is not taken for a hung kernel.
      const double input_elements = double(input_element_count(inputs, job.sizes));
      const double host_s = input_elements * kHostSecondsPerInputElement;
      phase("setup: inputs", host_s);
      make_random_inputs(inputs, p->host, job.seed);
      fill_serving_inputs(g, p->host, job.seed);  // paged attention: a table, lengths
      p->inputs.allocate(inputs, p->host);
      // Attention is checked as `loom run` checks it (verify_attention): its fp64 and
      // 16-bit references of the checked rows, computed once here.
      phase("setup: reference", host_s);
      if (g.attention()) p->attention = attention_reference(g, p->host.tensors);
      else p->reference = reference_eval(g, p->host.tensors, /*use_gpu=*/true);
      int64_t input_bytes = 0;
      for (const auto& t : inputs.tensors)
        input_bytes += p->host.tensors.at(t.name).numel() * int64_t(dtype_bytes(t.dtype));
      size_t free_bytes = 0, total_bytes = 0;
      check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      p->timing = plan_trial_timing(job.timing, job.l2, input_bytes, dev_->l2_bytes,
                                    int64_t(free_bytes));
      phase("setup: input sets", host_s * std::max(0, p->timing.timing.input_sets - 1));
      p->rotation = RotationInputs(inputs, p->host.symbols, job.seed, p->timing.timing.input_sets,
                                   [&](Bindings& h, uint64_t seed) { fill_serving_inputs(g, h, seed); });
      problem_ = std::move(p);
    }
  } catch (const Error& e) {
    problem_.reset();
    return on_error(e.what(), TrialStatus::worker_error);
  }

  phase("run", 0);
  stage = "checked run";
  try {
    DeviceTensors tensors;
    Bindings shapes;
    shapes.symbols = problem_->host.symbols;
    tensors.allocate(kp, shapes, &problem_->inputs);
    Module module = Module::load(nvrtc.cubin);
    ProgramLauncher launcher(kp, module, tensors, shapes.symbols);
    tensors.poison_outputs(kp, stream_);
    launcher.launch_all(stream_);
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (checked run)");
    HostTensor out = tensors.download(kp, "out", shapes.symbols);
    VerifyResult v;
    if (g.attention()) {
      // O (and LSE) against the fp64 reference at twice the 16-bit pipeline's error, the
      // check of `loom run` (run.cpp, finish_attention; bench/verify_attention.h).
      std::optional<HostTensor> lse;
      if (kp.has_tensor("lse")) lse = tensors.download(kp, "lse", shapes.symbols);
      AttentionVerify av = verify_attention(*problem_->attention, out, lse ? &*lse : nullptr);
      v = av.out;
      v.passed = av.passed();
      v.message = (v.passed ? "PASS " : "FAIL ") + av.message();
    } else {
      v = verify_output(out, problem_->reference, run_verify_threshold(g, prog.state));
    }
    Measurement m;
    m.rel_error = v.rel_fro_error;
    m.threshold = v.threshold;
    if (!v.passed) {
      m.status = TrialStatus::wrong_answer;
      m.reason = v.message;
      return m;
    }

    phase("time", 0);
    stage = "timing";
    const InputSets sets(kp, module, tensors, launcher, shapes.symbols, problem_->rotation);
    TimingOptions timing = problem_->timing.timing;
    timing.warmup = job.timing.warmup;
    timing.reps = job.timing.reps;
    timing.max_seconds = job.timing.max_seconds;
    timing.graph_replay_if_short = job.timing.graph_replay_if_short;
    std::vector<TimedLaunch> fns = {
        [&](cudaStream_t s, int set) { sets.launcher(set).launch_all(s); }};
    auto t0 = std::chrono::steady_clock::now();
    Timing t = time_candidates(fns, stream_, timing)[0];
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (timing)");
    m.timing_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.status = TrialStatus::ok;
    m.median_us = t.median_us;
    m.graph_us = t.graph_median_us.value_or(0);
    m.reps = t.reps;
    m.l2 = l2_method_name(timing.l2);
    m.input_sets = timing.input_sets;
    return m;
  } catch (const Error& e) {
    return on_error(e.what(), TrialStatus::compile_error);
  }
}

}  // namespace loom::tune
