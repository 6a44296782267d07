// The C ABI (include/loom/loom_c.h) without a GPU: the version, every status code's
// string, options only from loom_plan_options_init (struct_size), NULL and stale handles
// (double destroy included), NULL arguments, compile errors, a compile-only plan's
// queries, execute's argument errors before its NO_GPU, run-time sizes (options,
// queries, execute_sized's errors), and loom_last_error() kept per thread. The GPU half
// is tests/gpu/test_plan.cpp.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

#include "loom/loom_c.h"

namespace {

const char* kGemm = "matmul(A[256,64]:f32, B[64,128]:f32)";

loom_plan_t compile_only(const char* expr = kGemm) {
  loom_plan_options o;
  loom_plan_options_init(&o);
  o.target = "sm_90a";
  loom_plan_t p = nullptr;
  EXPECT_EQ(loom_plan_create(expr, &o, &p), LOOM_SUCCESS) << loom_last_error();
  return p;
}

bool has(const char* text, const char* part) { return std::string(text).find(part) != std::string::npos; }

TEST(CAbi, Version) {
  const std::string want = std::to_string(LOOM_VERSION_MAJOR) + "." +
                           std::to_string(LOOM_VERSION_MINOR) + "." + std::to_string(LOOM_VERSION_PATCH);
  EXPECT_EQ(loom_version(), want);
}

TEST(CAbi, EveryStatusHasItsOwnString) {
  std::set<std::string> seen;
  for (int s = LOOM_SUCCESS; s <= LOOM_ERROR_INTERNAL; ++s) {
    std::string text = loom_status_string(loom_status(s));
    EXPECT_NE(text, "unknown loom_status") << s;
    EXPECT_TRUE(seen.insert(text).second) << text;
  }
  EXPECT_STREQ(loom_status_string(loom_status(99)), "unknown loom_status");
}

TEST(CAbi, OptionsDefaults) {
  loom_plan_options o;
  o.device = 7;
  loom_plan_options_init(&o);
  EXPECT_EQ(o.device, 0);
  EXPECT_EQ(o.use_tuning_db, 1);
  EXPECT_EQ(o.knobs, nullptr);
  EXPECT_EQ(o.struct_size, sizeof(loom_plan_options));
  loom_plan_options_init(nullptr);  // no crash
}

TEST(CAbi, OptionsNeedInit) {
  loom_plan_options o = {};  // not from loom_plan_options_init
  o.target = "sm_90a";
  loom_plan_t p = reinterpret_cast<loom_plan_t>(0x1);
  EXPECT_EQ(loom_plan_create(kGemm, &o, &p), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(has(loom_last_error(), "loom_plan_options_init")) << loom_last_error();
  o.struct_size = sizeof(loom_plan_options) + 8;  // a newer header's options
  EXPECT_EQ(loom_plan_create(kGemm, &o, &p), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "newer loom_c.h")) << loom_last_error();
}

TEST(CAbi, CreateNullArguments) {
  loom_plan_t p = reinterpret_cast<loom_plan_t>(0x1);
  EXPECT_EQ(loom_plan_create(nullptr, nullptr, &p), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(has(loom_last_error(), "the expression is NULL")) << loom_last_error();
  EXPECT_EQ(loom_plan_create(kGemm, nullptr, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "output handle")) << loom_last_error();
}

TEST(CAbi, CompileErrors) {
  loom_plan_options o;
  loom_plan_options_init(&o);
  o.target = "sm_90a";
  loom_plan_t p = reinterpret_cast<loom_plan_t>(0x1);
  EXPECT_EQ(loom_plan_create("matmul(A[4,4]:f32", &o, &p), LOOM_ERROR_COMPILE);
  EXPECT_EQ(p, nullptr);
  EXPECT_STRNE(loom_last_error(), "");
  o.knobs = "NOT_A_KNOB=1";
  EXPECT_EQ(loom_plan_create(kGemm, &o, &p), LOOM_ERROR_COMPILE);
  EXPECT_TRUE(has(loom_last_error(), "NOT_A_KNOB")) << loom_last_error();
  o.knobs = nullptr;
  EXPECT_EQ(loom_plan_create("matmul(A[M,64]:f32, B[64,64]:f32)", &o, &p), LOOM_ERROR_COMPILE);
  EXPECT_TRUE(has(loom_last_error(), "M")) << loom_last_error();
  o.sizes = "M=128";
  ASSERT_EQ(loom_plan_create("matmul(A[M,64]:f32, B[64,64]:f32)", &o, &p), LOOM_SUCCESS) << loom_last_error();
  loom_tensor_info t;
  ASSERT_EQ(loom_plan_tensor(p, 0, &t), LOOM_SUCCESS);
  EXPECT_EQ(t.shape[0], 128);
  EXPECT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
  o.sizes = "M=";
  EXPECT_EQ(loom_plan_create("matmul(A[M,64]:f32, B[64,64]:f32)", &o, &p), LOOM_ERROR_COMPILE);
}

TEST(CAbi, WithoutGpuCreateIsNoGpu) {
  if (!std::string(loom_no_gpu_reason(0)).empty()) {
    loom_plan_t p = nullptr;
    EXPECT_EQ(loom_plan_create(kGemm, nullptr, &p), LOOM_ERROR_NO_GPU);
    EXPECT_TRUE(has(loom_last_error(), "needs that GPU")) << loom_last_error();
  } else {
    GTEST_SKIP() << "a GPU is present: this is the no-GPU path";
  }
}

TEST(CAbi, CompileOnlyPlanQueries) {
  loom_plan_t p = compile_only();
  ASSERT_NE(p, nullptr);
  size_t n = 0;
  ASSERT_EQ(loom_plan_num_tensors(p, &n), LOOM_SUCCESS);
  ASSERT_EQ(n, 3u);
  const char* names[] = {"A", "B", "out"};
  const char* roles[] = {"input", "input", "output"};
  const int64_t shapes[3][2] = {{256, 64}, {64, 128}, {256, 128}};
  for (size_t i = 0; i < n; ++i) {
    loom_tensor_info t;
    ASSERT_EQ(loom_plan_tensor(p, i, &t), LOOM_SUCCESS);
    EXPECT_STREQ(t.name, names[i]);
    EXPECT_STREQ(t.role, roles[i]);
    EXPECT_STREQ(t.dtype, "f32");
    ASSERT_EQ(t.rank, 2);
    EXPECT_EQ(t.shape[0], shapes[i][0]);
    EXPECT_EQ(t.shape[1], shapes[i][1]);
    EXPECT_EQ(t.bytes, shapes[i][0] * shapes[i][1] * 4);
  }
  loom_tensor_info t;
  EXPECT_EQ(loom_plan_tensor(p, 3, &t), LOOM_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(has(loom_last_error(), "index 3 is past the plan's 3 tensors")) << loom_last_error();
  const char* s = nullptr;
  ASSERT_EQ(loom_plan_cuda_source(p, &s), LOOM_SUCCESS);
  EXPECT_TRUE(has(s, "__global__"));
  ASSERT_EQ(loom_plan_knobs(p, &s), LOOM_SUCCESS);
  EXPECT_TRUE(has(s, "BM=")) << s;
  ASSERT_EQ(loom_plan_describe(p, &s), LOOM_SUCCESS);
  EXPECT_TRUE(has(s, "input A: f32[256,64]")) << s;
  int executable = 1;
  ASSERT_EQ(loom_plan_executable(p, &executable), LOOM_SUCCESS);
  EXPECT_EQ(executable, 0);
  EXPECT_EQ(loom_plan_knobs(p, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loom_plan_tensor(p, 0, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loom_plan_num_tensors(p, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
}

TEST(CAbi, ExecuteArgumentErrorsThenNoGpu) {
  loom_plan_t p = compile_only();
  void* ok[3] = {reinterpret_cast<void*>(0x1000), reinterpret_cast<void*>(0x2000),
                 reinterpret_cast<void*>(0x3000)};
  const char* names[3] = {"A", "B", "out"};
  EXPECT_EQ(loom_plan_execute_positional(p, ok, 2, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "got 2 pointers for the 3 tensors")) << loom_last_error();
  EXPECT_EQ(loom_plan_execute_positional(p, nullptr, 3, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  void* misaligned[3] = {ok[0], reinterpret_cast<void*>(0x2004), ok[2]};
  EXPECT_EQ(loom_plan_execute_positional(p, misaligned, 3, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "16-byte aligned")) << loom_last_error();
  const char* wrong[3] = {"A", "C", "out"};
  EXPECT_EQ(loom_plan_execute(p, wrong, ok, 3, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "no pointer for input B")) << loom_last_error();
  const char* twice[3] = {"A", "A", "out"};
  EXPECT_EQ(loom_plan_execute(p, twice, ok, 3, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "tensor A is named twice")) << loom_last_error();
  const char* null_name[3] = {"A", nullptr, "out"};
  EXPECT_EQ(loom_plan_execute(p, null_name, ok, 3, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "names[1] is NULL")) << loom_last_error();
  EXPECT_EQ(loom_plan_execute(p, nullptr, ok, 3, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loom_plan_execute(p, names, ok, 3, nullptr), LOOM_ERROR_NO_GPU);
  EXPECT_TRUE(has(loom_last_error(), "cannot execute")) << loom_last_error();
  EXPECT_EQ(loom_plan_execute_positional(p, ok, 3, nullptr), LOOM_ERROR_NO_GPU);
  EXPECT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
}

TEST(CAbi, RuntimeSizes) {
  const char* attn = "attention(Q[B,8,S,64]:bf16, K[B,2,S,64]:bf16, V[B,2,S,64]:bf16)";
  loom_plan_options o;
  loom_plan_options_init(&o);
  EXPECT_EQ(o.runtime_sizes, nullptr);
  o.target = "sm_90a";
  loom_plan_t p = nullptr;
  for (const char* bad : {"B,", ",S", "B,T"}) {
    o.runtime_sizes = bad;
    EXPECT_EQ(loom_plan_create(attn, &o, &p), LOOM_ERROR_COMPILE) << bad;
    EXPECT_EQ(p, nullptr);
  }
  o.runtime_sizes = "B,";
  ASSERT_EQ(loom_plan_create(attn, &o, &p), LOOM_ERROR_COMPILE);
  EXPECT_TRUE(has(loom_last_error(), "ends with a comma")) << loom_last_error();
  o.runtime_sizes = "B, S";
  ASSERT_EQ(loom_plan_create(attn, &o, &p), LOOM_SUCCESS) << loom_last_error();
  const char* names = nullptr;
  ASSERT_EQ(loom_plan_runtime_sizes(p, &names), LOOM_SUCCESS);
  EXPECT_STREQ(names, "B,S");
  loom_tensor_info t;
  ASSERT_EQ(loom_plan_tensor(p, 0, &t), LOOM_SUCCESS);
  EXPECT_EQ(t.shape[0], -1);
  EXPECT_EQ(t.shape[1], 8);
  EXPECT_EQ(t.shape[2], -1);
  EXPECT_EQ(t.bytes, -1);
  void* ptrs[4] = {reinterpret_cast<void*>(0x1000), reinterpret_cast<void*>(0x2000),
                   reinterpret_cast<void*>(0x3000), reinterpret_cast<void*>(0x4000)};
  const char* size_names[2] = {"B", "S"};
  const int64_t values[2] = {2, 300};
  EXPECT_EQ(loom_plan_execute_positional(p, ptrs, 4, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "takes B at run time")) << loom_last_error();
  EXPECT_EQ(loom_plan_execute_sized(p, nullptr, ptrs, 4, size_names, values, 1, nullptr),
            LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "takes S at run time")) << loom_last_error();
  const char* twice[2] = {"B", "B"};
  EXPECT_EQ(loom_plan_execute_sized(p, nullptr, ptrs, 4, twice, values, 2, nullptr),
            LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(loom_last_error(), "size B is given twice")) << loom_last_error();
  EXPECT_EQ(loom_plan_execute_sized(p, nullptr, ptrs, 4, nullptr, values, 2, nullptr),
            LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loom_plan_execute_sized(p, nullptr, ptrs, 4, size_names, nullptr, 2, nullptr),
            LOOM_ERROR_INVALID_ARGUMENT);
  const char* tensor_names[4] = {"Q", "K", "V", "out"};
  EXPECT_EQ(loom_plan_execute_sized(p, tensor_names, ptrs, 4, size_names, values, 2, nullptr),
            LOOM_ERROR_NO_GPU);
  EXPECT_EQ(loom_plan_execute_sized(p, nullptr, ptrs, 4, size_names, values, 2, nullptr),
            LOOM_ERROR_NO_GPU);
  EXPECT_EQ(loom_plan_runtime_sizes(p, nullptr), LOOM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
  EXPECT_EQ(loom_plan_runtime_sizes(p, &names), LOOM_ERROR_INVALID_HANDLE);
}

TEST(CAbi, NullStaleAndMadeUpHandles) {
  loom_plan_t p = compile_only();
  ASSERT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
  loom_plan_t made_up = reinterpret_cast<loom_plan_t>(0x10);
  for (loom_plan_t h : {loom_plan_t(nullptr), p, made_up}) {
    SCOPED_TRACE(reinterpret_cast<uintptr_t>(h));
    size_t n;
    const char* s;
    int e;
    loom_tensor_info t;
    void* ptrs[3] = {};
    const char* names[3] = {"A", "B", "out"};
    EXPECT_EQ(loom_plan_num_tensors(h, &n), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_TRUE(has(loom_last_error(), h ? "not a live plan" : "the plan is NULL")) << loom_last_error();
    EXPECT_EQ(loom_plan_tensor(h, 0, &t), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_cuda_source(h, &s), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_knobs(h, &s), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_describe(h, &s), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_executable(h, &e), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_execute(h, names, ptrs, 3, nullptr), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_execute_positional(h, ptrs, 3, nullptr), LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_execute_sized(h, names, ptrs, 3, nullptr, nullptr, 0, nullptr),
              LOOM_ERROR_INVALID_HANDLE);
    EXPECT_EQ(loom_plan_runtime_sizes(h, &s), LOOM_ERROR_INVALID_HANDLE);
  }
  EXPECT_EQ(loom_plan_destroy(nullptr), LOOM_SUCCESS);        // as free(NULL)
  EXPECT_EQ(loom_plan_destroy(p), LOOM_ERROR_INVALID_HANDLE);  // the double free
  EXPECT_TRUE(has(loom_last_error(), "destroyed already")) << loom_last_error();
  EXPECT_EQ(loom_plan_destroy(made_up), LOOM_ERROR_INVALID_HANDLE);
}

TEST(CAbi, LastErrorIsPerThread) {
  loom_plan_t p = nullptr;
  ASSERT_EQ(loom_plan_create(nullptr, nullptr, &p), LOOM_ERROR_INVALID_ARGUMENT);
  const std::string mine = loom_last_error();
  std::string theirs_before, theirs_after;
  std::thread t([&] {
    theirs_before = loom_last_error();
    loom_plan_destroy(reinterpret_cast<loom_plan_t>(0x10));
    theirs_after = loom_last_error();
  });
  t.join();
  EXPECT_EQ(theirs_before, "");
  EXPECT_TRUE(has(theirs_after.c_str(), "not a live plan")) << theirs_after;
  EXPECT_EQ(loom_last_error(), mine);
}

TEST(CAbi, PlansFromSeveralThreads) {
  std::vector<loom_plan_t> plans(4, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < plans.size(); ++i) threads.emplace_back([&, i] { plans[i] = compile_only(); });
  for (auto& t : threads) t.join();
  std::set<loom_plan_t> distinct(plans.begin(), plans.end());
  EXPECT_EQ(distinct.size(), plans.size());
  for (loom_plan_t p : plans) EXPECT_EQ(loom_plan_destroy(p), LOOM_SUCCESS);
}

}  // namespace
