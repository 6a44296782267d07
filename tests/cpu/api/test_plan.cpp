// loom::Plan (include/loom/plan.h) without a GPU: compile-only plans (PlanOptions::target)
// describe their tensors, knobs, source and why they cannot execute; every argument error
// of execute() and check() is an ArgumentError naming the tensor and the fix, checked
// before the missing GPU (NoGpuError); run-time sizes stay symbolic in the description
// and are checked at execute(). Execution is tests/gpu/test_plan.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "loom/builder.h"
#include "loom/plan.h"

namespace loom {
namespace {

const char* kGemm = "matmul(A[256,64]:bf16, B[64,128]:bf16)";

PlanOptions compile_only(std::string knobs = "") {
  PlanOptions o;
  o.target = "sm_90a";
  o.knobs = std::move(knobs);
  return o;
}

// The message of the Error `fn` throws, prefixed "wrong error type" unless it is an E.
template <class E = Error>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    const bool is_e = dynamic_cast<const E*>(static_cast<const std::exception*>(&e)) != nullptr;
    return (is_e ? "" : "wrong error type: ") + std::string(e.what());
  }
  return "no error";
}

// Aligned, non-null, never dereferenced: the checks before the GPU look at the values only.
void* fake(uintptr_t p) { return reinterpret_cast<void*>(p); }

TEST(Plan, DescribesTensorsKnobsAndSource) {
  Plan p(kGemm, compile_only());
  ASSERT_EQ(p.tensors().size(), 3u);
  EXPECT_EQ(p.tensors()[0].name, "A");
  EXPECT_EQ(p.tensors()[0].role, "input");
  EXPECT_EQ(p.tensors()[0].dtype, "bf16");
  EXPECT_EQ(p.tensors()[0].shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(p.tensors()[0].bytes, 256 * 64 * 2);
  EXPECT_EQ(p.tensors()[1].name, "B");
  EXPECT_EQ(p.tensor("out").role, "output");
  EXPECT_EQ(p.tensor("out").shape, (std::vector<int64_t>{256, 128}));
  EXPECT_EQ(p.expression(), kGemm);
  EXPECT_EQ(p.arch(), "sm_90a");
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 256 * 128 * 64);
  EXPECT_FALSE(p.knobs().empty());
  EXPECT_NE(p.knobs_string().find("BM="), std::string::npos) << p.knobs_string();
  EXPECT_FALSE(p.knob_source().empty());
  EXPECT_NE(p.cuda_source().find("__global__"), std::string::npos);
  EXPECT_FALSE(p.executable());
  EXPECT_NE(p.not_executable_reason().find("compiled for sm_90a"), std::string::npos)
      << p.not_executable_reason();
  const std::string d = p.describe();
  EXPECT_NE(d.find(kGemm), std::string::npos) << d;
  EXPECT_NE(d.find("input A: bf16[256,64], 32768 bytes"), std::string::npos) << d;
  EXPECT_NE(d.find("output out: bf16[256,128]"), std::string::npos) << d;
  EXPECT_NE(d.find("compile only"), std::string::npos) << d;
}

TEST(Plan, AttentionTensorsInputsThenOutputs) {
  Plan p("attention(Q[1,4,128,64]:f16, K[1,4,128,64]:f16, V[1,4,128,64]:f16, lse=true)", compile_only());
  std::vector<std::string> names;
  for (const auto& t : p.tensors()) names.push_back(t.name + ":" + t.role);
  EXPECT_EQ(names, (std::vector<std::string>{"Q:input", "K:input", "V:input", "out:output",
                                             "lse:output"}));
  EXPECT_EQ(p.tensor("lse").dtype, "f32");
}

TEST(Plan, ExplicitKnobsAreUsedAndReported) {
  Plan a(kGemm, compile_only());
  Plan b(kGemm, compile_only(a.knobs_string()));  // the same knobs, given explicitly
  EXPECT_EQ(b.knobs(), a.knobs());
  EXPECT_EQ(b.cuda_source(), a.cuda_source());
  std::string m = error_of([] { Plan(kGemm, compile_only("NOT_A_KNOB=1")); });
  EXPECT_NE(m.find("NOT_A_KNOB"), std::string::npos) << m;
}

TEST(Plan, SizesAreBoundAtPlanTime) {
  PlanOptions o = compile_only();
  o.sizes = {{"M", 512}};
  Plan p("matmul(A[M,64]:f16, B[64,128]:f16)", o);
  EXPECT_EQ(p.tensor("A").shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(p.tensor("out").shape, (std::vector<int64_t>{512, 128}));
  std::string m = error_of([] { Plan("matmul(A[M,64]:f16, B[64,128]:f16)", compile_only()); });
  EXPECT_NE(m.find("M"), std::string::npos) << m;
  EXPECT_NE(m.find("no value"), std::string::npos) << m;
}

const char* kAttention =
    "attention(Q[B,8,S,64]:bf16, K[B,2,S,64]:bf16, V[B,2,S,64]:bf16, causal=true)";

PlanOptions runtime(std::vector<std::string> names) {
  PlanOptions o = compile_only();
  o.runtime_sizes = std::move(names);
  return o;
}

TEST(Plan, RuntimeSizesStaySymbolic) {
  Plan p(kAttention, runtime({"B", "S"}));
  EXPECT_EQ(p.runtime_sizes(), (std::vector<std::string>{"B", "S"}));
  const TensorInfo& q = p.tensor("Q");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{-1, 8, -1, 64}));
  EXPECT_EQ(q.dims, (std::vector<std::string>{"B", "8", "S", "64"}));
  EXPECT_EQ(q.bytes, -1);
  const TensorInfo q2 = p.tensor("Q", {{"B", 2}, {"S", 300}});
  EXPECT_EQ(q2.shape, (std::vector<int64_t>{2, 8, 300, 64}));
  EXPECT_EQ(q2.bytes, 2 * 8 * 300 * 64 * 2);
  EXPECT_DOUBLE_EQ(p.flops(), 0);
  const std::string d = p.describe();
  EXPECT_NE(d.find("run-time sizes: B, S"), std::string::npos) << d;
  EXPECT_NE(d.find("input Q: bf16[B,8,S,64], bytes by run-time sizes"), std::string::npos) << d;
  EXPECT_NE(p.cuda_source().find("loom_d_S"), std::string::npos);  // a kernel argument
  // One bound, one at run time.
  PlanOptions o = runtime({"S"});
  o.sizes = {{"B", 4}};
  Plan half(kAttention, o);
  EXPECT_EQ(half.tensor("K").shape, (std::vector<int64_t>{4, 2, -1, 64}));
}

TEST(Plan, SizeOptionErrors) {
  auto msg = [](PlanOptions o) { return error_of([&] { Plan(kAttention, o); }); };
  PlanOptions o = runtime({"B", "T"});
  std::string m = msg(o);
  EXPECT_NE(m.find("runtime_sizes lists T, which"), std::string::npos) << m;
  EXPECT_NE(m.find("its size symbols: B, S"), std::string::npos) << m;
  o = runtime({"B", "S"});
  o.sizes = {{"S", 64}};
  m = msg(o);
  EXPECT_NE(m.find("S is in both"), std::string::npos) << m;
  o = runtime({"B"});
  m = msg(o);
  EXPECT_NE(m.find("size symbol S of"), std::string::npos) << m;
  EXPECT_NE(m.find("PlanOptions::sizes[\"S\"]"), std::string::npos) << m;
  EXPECT_NE(m.find("PlanOptions::runtime_sizes"), std::string::npos) << m;
  o = runtime({"B"});
  o.sizes = {{"S", 0}};
  m = msg(o);
  EXPECT_NE(m.find("S = 0 is outside 1..2^48"), std::string::npos) << m;
  o = runtime({"B", "S"});
  o.sizes = {{"N", 5}};
  m = msg(o);
  EXPECT_NE(m.find("sizes gives N, which"), std::string::npos) << m;
}

TEST(Plan, RuntimeSizeArgumentErrors) {
  Plan p(kAttention, runtime({"B", "S"}));
  const std::map<std::string, void*> ptrs = {
      {"Q", fake(0x1000)}, {"K", fake(0x2000)}, {"V", fake(0x3000)}, {"out", fake(0x4000)}};
  auto run = [&](const std::map<std::string, int64_t>& sizes) {
    return error_of<ArgumentError>([&] { p.execute(ptrs, sizes); });
  };
  std::string m = run({{"B", 1}});
  EXPECT_NE(m.find("takes S at run time"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { p.execute(ptrs); });
  EXPECT_NE(m.find("takes B at run time"), std::string::npos) << m;
  m = run({{"B", 1}, {"S", 64}, {"D", 64}});
  EXPECT_NE(m.find("no run-time size D; its run-time sizes: B, S"), std::string::npos) << m;
  m = run({{"B", 1}, {"S", 0}});
  EXPECT_NE(m.find("S = 0 is outside"), std::string::npos) << m;
  m = run({{"B", 1}, {"S", int64_t(1) << 40}});  // Q would be 2^50 bytes
  EXPECT_NE(m.find("Q"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { p.tensor("Q", {{"B", 1}}); });
  EXPECT_NE(m.find("takes S at run time"), std::string::npos) << m;
  m = error_of<NoGpuError>([&] { p.execute(ptrs, {{"B", 1}, {"S", 64}}); });
  EXPECT_NE(m.find("cannot execute"), std::string::npos) << m;

  Plan bound(kGemm, compile_only());
  m = error_of<ArgumentError>([&] {
    bound.execute({{"A", fake(0x1000)}, {"B", fake(0x2000)}, {"out", fake(0x3000)}}, {{"M", 4}});
  });
  EXPECT_NE(m.find("has no run-time sizes, so execute() takes no M"), std::string::npos) << m;
}

TEST(Plan, RunTimeMGemmHoldsAKernelPerRange) {
  // A 16-bit GEMM on sm_90a whose run-time size is M alone: a kernel per range of M
  // (tests/cpu/driver/test_wgmma_symbolic_compile.cpp has the ranges' knobs).
  Plan p("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", runtime({"M"}));
  const std::vector<PlanVariant> v = p.variants();
  ASSERT_EQ(v.size(), 9u) << p.describe();
  EXPECT_EQ(v.front().size, "M");
  EXPECT_EQ(v.front().lo, 1);
  EXPECT_EQ(v.front().hi, 16);
  EXPECT_EQ(v.back().lo, 513);
  EXPECT_EQ(v.back().hi, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(p.knobs_string(), v.back().knobs);
  EXPECT_EQ(p.variant_for({{"M", 1}}), 0u);
  EXPECT_EQ(p.variant_for({{"M", 128}}), 5u);
  EXPECT_EQ(p.variant_for({{"M", 4096}}), 8u);
  const std::string d = p.describe();
  EXPECT_NE(d.find("kernels, one per range of M"), std::string::npos) << d;
  EXPECT_NE(d.find("M=49..64: "), std::string::npos) << d;
  EXPECT_NE(d.find("as if M = 64"), std::string::npos) << d;
  const std::string m = error_of<ArgumentError>([&] { p.variant_for({}); });
  EXPECT_NE(m.find("takes M at run time"), std::string::npos) << m;
  // One kernel: explicit knobs, or bound sizes.
  PlanOptions o = runtime({"M"});
  o.knobs = v.back().knobs;
  EXPECT_EQ(Plan("matmul(A[M,4096]:bf16, B[4096,4096]:bf16)", o).variants().size(), 1u);
  const std::vector<PlanVariant> one = Plan(kGemm, compile_only()).variants();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].size, "");
}

TEST(Plan, RuntimeSizedWorkspaceIsRefused) {
  PlanOptions o = runtime({"M"});
  o.knobs = "SPLITK=2";
  std::string m = error_of([&] { Plan("matmul(A[M,256]:f32, B[256,64]:f32)", o); });
  EXPECT_NE(m.find("needs a workspace"), std::string::npos) << m;
  EXPECT_NE(m.find("bind M in PlanOptions::sizes"), std::string::npos) << m;
}

TEST(Plan, RuntimeSizedSplitKvWorkspaceIsRefused) {
  const char* decode = "attention(Q[B,32,1,128]:bf16, K[B,8,S,128]:bf16, V[B,8,S,128]:bf16)";
  PlanOptions o = runtime({"B", "S"});
  o.knobs = "SPLIT_KV=8";
  std::string m = error_of([&] { Plan(decode, o); });
  EXPECT_NE(m.find("needs a workspace"), std::string::npos) << m;
  EXPECT_NE(m.find("depends on B"), std::string::npos) << m;
  EXPECT_NE(m.find("SPLIT_KV=1"), std::string::npos) << m;
  o = runtime({"S"});  // B bound: the workspace no longer moves with a run-time size
  o.sizes = {{"B", 4}};
  o.knobs = "SPLIT_KV=8";
  Plan p(decode, o);
  EXPECT_NE(p.knobs_string().find("SPLIT_KV=8"), std::string::npos) << p.knobs_string();
}

TEST(Plan, FromGraphBuilder) {
  GraphBuilder g;
  auto x = g.input("X", {dim("M"), dim(64)}, DType::BF16);
  auto w = g.input("W", {dim(128), dim(64)}, DType::BF16);
  PlanOptions o = compile_only();
  o.sizes = {{"M", 256}};
  Plan p(g.build(g.relu(g.linear(x, w))), o);
  EXPECT_EQ(p.expression(), "<graph>");
  ASSERT_EQ(p.tensors().size(), 3u);
  EXPECT_EQ(p.tensor("X").shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(p.tensor("W").shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(p.tensor("out").shape, (std::vector<int64_t>{256, 128}));
}

TEST(Plan, BadExpressionIsAnError) {
  std::string m = error_of([] { Plan("matmul(A[4,4]:f32", compile_only()); });
  EXPECT_NE(m, "no error");
  EXPECT_EQ(m.find("wrong error type"), std::string::npos) << m;
}

TEST(Plan, WithoutGpuNeedsATarget) {
  if (no_gpu_reason().empty()) GTEST_SKIP() << "a GPU is present: this is the no-GPU path";
  std::string m = error_of<NoGpuError>([] { Plan p(kGemm); });
  EXPECT_NE(m.find("needs that GPU"), std::string::npos) << m;
  EXPECT_NE(m.find("PlanOptions::target"), std::string::npos) << m;
}

TEST(Plan, ExecuteArgumentErrorsNameTensorAndFix) {
  Plan p(kGemm, compile_only());
  const std::map<std::string, void*> ok = {{"A", fake(0x1000)}, {"B", fake(0x2000)}, {"out", fake(0x3000)}};
  auto with = [&](const std::string& name, void* ptr) {
    auto m = ok;
    m[name] = ptr;
    return m;
  };
  auto without = [&](const std::string& name) {
    auto m = ok;
    m.erase(name);
    return m;
  };
  for (bool via_check : {false, true}) {
    SCOPED_TRACE(via_check ? "check" : "execute");
    auto run = [&](const std::map<std::string, void*>& m) {
      return error_of<ArgumentError>([&] { via_check ? p.check(m) : p.execute(m); });
    };
    std::string m = run(without("B"));
    EXPECT_NE(m.find("no pointer for input B"), std::string::npos) << m;
    EXPECT_NE(m.find("A, B, out"), std::string::npos) << m;
    m = run(with("out", nullptr));
    EXPECT_NE(m.find("pointer for out"), std::string::npos) << m;
    EXPECT_NE(m.find("is null"), std::string::npos) << m;
    m = run(with("A", fake(0x1002)));
    EXPECT_NE(m.find("pointer for A"), std::string::npos) << m;
    EXPECT_NE(m.find("16-byte aligned"), std::string::npos) << m;
    m = run(with("C", fake(0x4000)));
    EXPECT_NE(m.find("no tensor named C; its tensors: A, B, out"), std::string::npos) << m;
    // Right arguments, but no GPU: the plan says why it cannot run.
    m = error_of<NoGpuError>([&] { via_check ? p.check(ok) : p.execute(ok); });
    EXPECT_NE(m.find("cannot execute"), std::string::npos) << m;
    EXPECT_NE(m.find("compiled for sm_90a"), std::string::npos) << m;
  }
}

TEST(Plan, PositionalExecuteTakesOnePointerPerTensor) {
  Plan p(kGemm, compile_only());
  std::string m = error_of<ArgumentError>([&] { p.execute({fake(0x1000), fake(0x2000)}); });
  EXPECT_NE(m.find("got 2 pointers for the 3 tensors"), std::string::npos) << m;
  EXPECT_NE(m.find("in this order: A, B, out"), std::string::npos) << m;
  m = error_of<ArgumentError>([&] { p.execute({fake(0x1000), nullptr, fake(0x3000)}); });
  EXPECT_NE(m.find("pointer for B"), std::string::npos) << m;
  m = error_of<NoGpuError>([&] { p.execute({fake(0x1000), fake(0x2000), fake(0x3000)}); });
  EXPECT_NE(m.find("cannot execute"), std::string::npos) << m;
}

TEST(Plan, UnknownTensorQueryIsAnError) {
  Plan p(kGemm, compile_only());
  std::string m = error_of<ArgumentError>([&] { p.tensor("C"); });
  EXPECT_NE(m.find("no tensor named C"), std::string::npos) << m;
}

TEST(Plan, MovesKeepThePlan) {
  Plan a(kGemm, compile_only());
  const std::string cuda = a.cuda_source();
  Plan b = std::move(a);
  EXPECT_EQ(b.cuda_source(), cuda);
  Plan c("matmul(A[64,64]:f32, B[64,64]:f32)", compile_only());
  c = std::move(b);
  EXPECT_EQ(c.expression(), kGemm);
}

}  // namespace
}  // namespace loom
