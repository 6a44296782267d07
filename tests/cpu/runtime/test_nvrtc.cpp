#include "runtime/nvrtc.h"

#include <gtest/gtest.h>
#include <nvrtc.h>

#include <regex>

#include "ir/error.h"

namespace loom {
namespace {

CompileRequest small_kernel(const std::string& arch) {
  CompileRequest req;
  req.arch = arch;
  req.headers = {{"scale.cuh", "__device__ inline float loom_scale(float x) { return 3.f * x; }\n"}};
  req.source = R"(#include "scale.cuh"
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = loom_scale(float(threadIdx.x));
}
)";
  return req;
}

class CompileForArch : public testing::TestWithParam<std::string> {};

TEST_P(CompileForArch, SmallKernelHasCubinAndCleanReport) {
  CompileResult r = compile(small_kernel(GetParam()), nullptr);
  EXPECT_FALSE(r.from_cache);
  EXPECT_GT(r.cubin.size(), 64u);
  // A cubin is an ELF file.
  EXPECT_EQ(std::string(r.cubin.data(), 4), "\x7f" "ELF");
  ASSERT_TRUE(r.resources.count("fill")) << r.log;
  const ResourceReport& rep = r.resources.at("fill");
  EXPECT_GT(rep.registers, 0);
  EXPECT_EQ(rep.spill_store_bytes, 0);
  EXPECT_EQ(rep.spill_load_bytes, 0);
  EXPECT_EQ(rep.stack_frame_bytes, 0);
  EXPECT_NE(r.log.find("for '" + GetParam() + "'"), std::string::npos) << r.log;
}

INSTANTIATE_TEST_SUITE_P(Archs, CompileForArch, testing::Values("sm_90a", "sm_80"));

TEST(Compile, DynamicallyIndexedLocalArrayNeedsAStackFrame) {
  CompileRequest req;
  req.source = R"(extern "C" __global__ void stack(float* o, int n) {
  float a[64];
  for (int i = 0; i < 64; ++i) a[(i * n) & 63] = o[i];
  o[threadIdx.x] = a[n & 63];
}
)";
  CompileResult r = compile(req, nullptr);
  ASSERT_TRUE(r.resources.count("stack")) << r.log;
  EXPECT_GE(r.resources.at("stack").stack_frame_bytes, 256) << r.log;
}

TEST(Compile, RegisterCapForcesSpillsAndTheReportShowsThem) {
  CompileRequest req;
  req.extra_options = {"--maxrregcount=32"};
  req.source = R"(extern "C" __global__ void spill(float* o, int n) {
  float a[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) a[i] = o[i * n + threadIdx.x];
  float s = 0;
#pragma unroll
  for (int j = 0; j < 48; ++j)
#pragma unroll
    for (int i = 0; i < 48; ++i) s += a[i] * a[(i + j) % 48];
  o[threadIdx.x] = s;
}
)";
  CompileResult r = compile(req, nullptr);
  ASSERT_TRUE(r.resources.count("spill")) << r.log;
  const ResourceReport& rep = r.resources.at("spill");
  EXPECT_LE(rep.registers, 32);
  EXPECT_GT(rep.spill_store_bytes, 0) << r.log;
  EXPECT_GT(rep.spill_load_bytes, 0) << r.log;
}

TEST(Compile, MangledKernelsAreReportedUnderTheirSymbol) {
  CompileRequest req;
  req.source = "__global__ void plain(int* p) { p[threadIdx.x] = 1; }\n";
  CompileResult r = compile(req, nullptr);
  EXPECT_TRUE(r.resources.count("_Z5plainPi")) << r.log;
}

TEST(Compile, SyntaxErrorShowsTheOffendingLineWithContext) {
  CompileRequest req;
  req.source =
      "extern \"C\" __global__ void bad(float* o) {\n"  // 1
      "  int x = 1\n"                                   // 2
      "  o[0] = x;\n"                                   // 3  <- error reported here
      "  o[1] = 2.f;\n"                                 // 4
      "}\n";                                            // 5
  try {
    compile(req, nullptr);
    FAIL() << "a syntax error must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("loom_kernel.cu(3): error"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--- loom_kernel.cu:3 ---"), std::string::npos) << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(>\s+3 \|   o\[0\] = x;)"))) << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(\n\s+1 \| extern "C")"))) << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(\n\s+5 \| \})"))) << msg;
  }
}

TEST(Compile, ErrorInsideAHeaderShowsTheHeaderLine) {
  CompileRequest req;
  req.headers = {{"broken.cuh", "// line 1\n__device__ int f() { return undefined_name; }\n"}};
  req.source = "#include \"broken.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = f(); }\n";
  try {
    compile(req, nullptr);
    FAIL() << "an undefined identifier must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("--- broken.cuh:2 ---"), std::string::npos) << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(>\s+2 \| __device__ int f)"))) << msg;
  }
}

TEST(Compile, UnknownArchIsAClearError) {
  CompileRequest req = small_kernel("sm_13");
  try {
    compile(req, nullptr);
    FAIL() << "sm_13 must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sm_90"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compile(small_kernel("compute_90"), nullptr), Error);
}

TEST(Compile, OptionsStartWithTheFixedSet) {
  CompileRequest req = small_kernel("sm_86");
  req.extra_options = {"-DLOOM_X=1"};
  auto o = compile_options(req);
  // NVRTC 12.9+ gets --no-cache (its compute cache would skip ptxas and empty the -v
  // report); the caller's options come last either way.
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  bool no_cache = major > 12 || (major == 12 && minor >= 9);
  ASSERT_EQ(o.size(), no_cache ? 7u : 6u);
  EXPECT_EQ(o[0], "--gpu-architecture=sm_86");
  EXPECT_EQ(o[1], "-std=c++17");
  EXPECT_EQ(o[2], "--ptxas-options=-v");
  EXPECT_EQ(o[3], "-lineinfo");
  EXPECT_EQ(o[4], "-default-device");
  if (no_cache) {
    EXPECT_EQ(o[5], "--no-cache");
  }
  EXPECT_EQ(o.back(), "-DLOOM_X=1");
}

TEST(Compile, CacheKeyChangesWithEveryInput) {
  CompileRequest base = small_kernel("sm_90a");
  std::string k = compile_cache_key(base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, compile_cache_key(base));
  auto differs = [&](auto mutate) {
    CompileRequest r = base;
    mutate(r);
    return compile_cache_key(r) != k;
  };
  EXPECT_TRUE(differs([](CompileRequest& r) { r.source += " "; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.arch = "sm_80"; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.extra_options.push_back("-DX"); }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.headers[0].second += " "; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.headers[0].first = "other.cuh"; }));
  EXPECT_TRUE(differs([](CompileRequest& r) { r.name = "x.cu"; }));
}

TEST(Compile, NvrtcVersionLooksLikeMajorDotMinor) {
  EXPECT_TRUE(std::regex_match(nvrtc_version_string(), std::regex(R"(\d+\.\d+)")))
      << nvrtc_version_string();
}

}  // namespace
}  // namespace loom
