// driver/external.h, the C++ layer under the Python binding, on the CPU: the tensors a
// caller must provide (names, roles, dtypes, shapes, bytes) for an attention and a GEMM,
// the FLOPs credited, the knob set reported, and the pointer checks' errors. The launch
// itself needs a GPU (python/tests/test_compiler.py, run by the lead on the H100).
#include <gtest/gtest.h>

#include "driver/external.h"
#include "ir/error.h"

namespace loom {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(External, AttentionTensorsAndFlops) {
  const std::string e =
      "attention(Q[2,8,256,64]:bf16, K[2,2,256,64]:bf16, V[2,2,256,64]:bf16, causal=true, lse=true)";
  ExternalProgram p = compile_external(e, Knobs{}, Target::for_arch("sm_90a"));
  ASSERT_EQ(p.tensors.size(), 5u);
  std::map<std::string, ExternalTensor> by_name;
  for (const auto& t : p.tensors) by_name[t.name] = t;
  EXPECT_EQ(by_name.at("Q").shape, (std::vector<int64_t>{2, 8, 256, 64}));
  EXPECT_EQ(by_name.at("K").shape, (std::vector<int64_t>{2, 2, 256, 64}));
  EXPECT_EQ(by_name.at("V").role, TensorRole::Input);
  EXPECT_EQ(by_name.at("out").role, TensorRole::Output);
  EXPECT_EQ(by_name.at("out").dtype, DType::BF16);
  EXPECT_EQ(by_name.at("out").bytes, 2 * 8 * 256 * 64 * 2);
  EXPECT_EQ(by_name.at("lse").dtype, DType::F32);
  EXPECT_EQ(by_name.at("lse").shape, (std::vector<int64_t>{2, 8, 256}));
  // Causal, Sq = Sk: row i keeps i + 1 keys, 4·D FLOPs each per (batch, head).
  EXPECT_DOUBLE_EQ(p.flops, 4.0 * 2 * 8 * 64 * (256.0 * 257 / 2));
  EXPECT_NE(p.knobs.find("BLOCK_M="), std::string::npos) << p.knobs;
  EXPECT_NE(p.program.cuda.find("k_attention"), std::string::npos);
}

TEST(External, GemmWithSizesAndKnobs) {
  ExternalProgram p = compile_external("matmul(A[M,K]:bf16, B[K,N]:bf16)",
                                       Knobs::parse("ATOM=mma_bf16"), Target::for_arch("sm_80"),
                                       {{"M", 256}, {"N", 128}, {"K", 64}});
  ASSERT_EQ(p.tensors.size(), 3u);
  EXPECT_EQ(p.tensors[0].name, "A");
  EXPECT_EQ(p.tensors[0].shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(p.tensors[2].name, "out");
  EXPECT_EQ(p.tensors[2].shape, (std::vector<int64_t>{256, 128}));
  EXPECT_DOUBLE_EQ(p.flops, 2.0 * 256 * 128 * 64);
  EXPECT_NE(p.knobs.find("ATOM=mma_bf16"), std::string::npos) << p.knobs;
  EXPECT_EQ(p.program.state.target.arch, "sm_80");
}

TEST(External, UnboundSizeIsAnError) {
  std::string m = error_of([] {
    compile_external("matmul(A[M,64]:f32, B[64,64]:f32)", Knobs{}, Target::for_arch("sm_90a"));
  });
  EXPECT_NE(m.find("dimension M has no value"), std::string::npos) << m;
}

// Run-time sizes (loom.matmul's one kernel for every M): the symbol stays unbound in the
// program, its dims read -1, every launch's sizes are checked; a workspace that grows with
// it is refused, and so is a name that is no symbol or is bound as well.
TEST(External, RunTimeSizes) {
  const Target sm90 = Target::for_arch("sm_90a");
  ExternalProgram p = compile_external("linear(X[M,4096]:bf16, W[4096,4096]:bf16, b[4096]:bf16)",
                                       Knobs{}, sm90, {}, nullptr, nullptr, {"M"});
  EXPECT_EQ(p.runtime, (std::vector<std::string>{"M"}));
  std::map<std::string, ExternalTensor> by_name;
  for (const auto& t : p.tensors) by_name[t.name] = t;
  EXPECT_EQ(by_name.at("X").shape, (std::vector<int64_t>{-1, 4096}));
  EXPECT_EQ(by_name.at("X").bytes, -1);
  EXPECT_EQ(by_name.at("W").bytes, 4096 * 4096 * 2);
  EXPECT_EQ(by_name.at("out").shape, (std::vector<int64_t>{-1, 4096}));
  EXPECT_EQ(p.flops, 0);
  EXPECT_NE(p.knobs.find("ATOM=wgmma_bf16"), std::string::npos) << p.knobs;
  EXPECT_NE(p.program.cuda.find("loom_d_M"), std::string::npos);
  EXPECT_NO_THROW(check_runtime_sizes(p, {{"M", 1}}));
  EXPECT_NO_THROW(check_runtime_sizes(p, {{"M", 4097}}));
  std::string m = error_of([&] { check_runtime_sizes(p, {}); });
  EXPECT_NE(m.find("takes M at run time"), std::string::npos) << m;
  m = error_of([&] { check_runtime_sizes(p, {{"M", 0}}); });
  EXPECT_NE(m.find("outside 1..2^48"), std::string::npos) << m;
  m = error_of([&] { check_runtime_sizes(p, {{"M", 8}, {"N", 8}}); });
  EXPECT_NE(m.find("no run-time size N"), std::string::npos) << m;
  m = error_of([&] { check_runtime_sizes(p, {{"M", int64_t(1) << 40}}); });
  EXPECT_NE(m.find("more than 2^48 bytes"), std::string::npos) << m;
  // A bound program takes no sizes.
  ExternalProgram bound = compile_external("matmul(A[8,64]:f32, B[64,64]:f32)", Knobs{}, sm90);
  m = error_of([&] { check_runtime_sizes(bound, {{"M", 8}}); });
  EXPECT_NE(m.find("bound when it was compiled"), std::string::npos) << m;
  m = error_of([&] {
    compile_external("matmul(A[M,64]:f32, B[64,64]:f32)", Knobs{}, sm90, {}, nullptr, nullptr, {"T"});
  });
  EXPECT_NE(m.find("no such symbol"), std::string::npos) << m;
  m = error_of([&] {
    compile_external("matmul(A[M,64]:f32, B[64,64]:f32)", Knobs{}, sm90, {{"M", 8}}, nullptr,
                     nullptr, {"M"});
  });
  EXPECT_NE(m.find("both bound and a run-time size"), std::string::npos) << m;
  m = error_of([&] {
    compile_external("matmul(A[M,4096]:bf16, B[4096,64]:bf16)", Knobs::parse("SPLITK=4"), sm90, {},
                     nullptr, nullptr, {"M"});
  });
  EXPECT_NE(m.find("workspace"), std::string::npos) << m;
}

TEST(External, PointerChecks) {
  ExternalProgram p = compile_external("attention(Q[1,2,64,64]:f16, K[1,2,64,64]:f16, V[1,2,64,64]:f16)",
                                       Knobs{}, Target::for_arch("sm_90a"));
  std::map<std::string, uintptr_t> ok = {{"Q", 0x1000}, {"K", 0x2000}, {"V", 0x3000}, {"out", 0x4000}};
  EXPECT_NO_THROW(check_external_pointers(p, ok));
  auto missing = ok;
  missing.erase("V");
  std::string m = error_of([&] { check_external_pointers(p, missing); });
  EXPECT_NE(m.find("no pointer for input V"), std::string::npos) << m;
  EXPECT_NE(m.find("Q, K, V, out"), std::string::npos) << m;
  auto null = ok;
  null["out"] = 0;
  m = error_of([&] { check_external_pointers(p, null); });
  EXPECT_NE(m.find("pointer for out is null"), std::string::npos) << m;
  auto extra = ok;
  extra["O"] = 0x5000;
  m = error_of([&] { check_external_pointers(p, extra); });
  EXPECT_NE(m.find("no tensor named O"), std::string::npos) << m;
}

}  // namespace
}  // namespace loom
