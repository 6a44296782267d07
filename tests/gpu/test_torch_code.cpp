// The matmul article's `run --bench --code` commands on a GPU (each through -c, and one
// through --code: an alias lost in a merge fails that one alone), each as a user runs it
// after the CPU walk-through's fixes (tests/cpu/driver/test_article_walkthrough.cpp: the
// knob list in Loom's names), plus PyTorch programs of each kernel family with Loom's
// own knobs. Every command must verify against the fp64 reference; the Loom/cuBLAS ratio
// of each is printed ("ratio <name>: <x>") for the record, not checked (bench/ measures
// speed). Every test skips with probe_device's reason without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace loom {
namespace {

struct Result {
  int rc;
  std::string out;
};

Result shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Command {
  std::string name;
  std::string knobs;  // LOOM_KNOBS
  std::string code;   // PyTorch code (quoted with ' only)
  std::string extra;  // more options
  std::string option = "-c";  // the article writes --code for its fp16 program
};

// gtest prints a parameter by this in test names and ctest listings.
void PrintTo(const Command& c, std::ostream* os) { *os << c.name; }

std::string square(int n, const char* dtype = nullptr) {
  const std::string shape = std::to_string(n) + "," + std::to_string(n);
  const std::string t = "torch.randn(" + shape +
                        (dtype ? std::string(",dtype=torch.") + dtype + ",device='cuda'" : "") + ")";
  return "a=" + t + ";b=" + t + ";torch.matmul(a,b)";
}

std::vector<Command> commands() {
  const std::string f32 = "torch.matmul(torch.randn(2048,2048),torch.randn(2048,2048))";
  const std::string base = "BM=208,BN=128,FM=26,FN=4,BK=32,SPLITK=1";
  return {
      // Register tiling: one cell per thread (accepted as the article writes it), then 26x4.
      {"f32 one cell per thread", "BM=8,BN=32,FM=1,FN=1,BK=32,SPLITK=1,TMA=1,STAGE=11", f32, ""},
      {"f32 26x4 register tile, TMA", base + ",STAGE=tma", f32, ""},
      // The staging benchmarks.
      {"f32 gmem direct", base + ",STAGE=direct", f32, "--reps 10"},
      {"f32 staged sync", base + ",PIPELINE=0,STAGE=sync", f32, ""},
      {"f32 cp.async", base + ",PIPELINE=0,STAGE=cp_async", f32, ""},
      {"f32 TMA", base + ",PIPELINE=0,STAGE=tma", f32, ""},
      {"f32 cp.async unpadded", base + ",PAD_SMEM=0,PIPELINE=0,STAGE=cp_async", f32, ""},
      // The fp16 tensor-core kernel (the article's TMA=1,ATOM_KIND=mma_m16n8k16_f16,BK=2,
      // WM=2,WN=4,FM=4,FN=4,BUFFER_COUNT=3): Loom's mma.sync stages by cp.async.
      {"f16 mma.sync", "BK=32,WM=2,WN=4,FM=4,FN=4,ATOM=mma_f16,STAGES=3,STAGE=cp_async",
       square(2048, "float16"), ""},
      // Loom's own fp16 kernel (wgmma, warp-specialized, from the defaults or a record).
      {"f16 Loom default", "", square(2048, "float16"), ""},
      {"f16 Loom default, --code", "", square(2048, "float16"), "", "--code"},
      // Split-K on the skinny shape.
      {"f32 skinny no split", "BM=32,BN=32,FM=2,FN=2,BK=32,SPLITK=1",
       "torch.matmul(torch.randn(128,16384),torch.randn(16384,128))", ""},
      {"f32 skinny split 8", "BM=32,BN=32,FM=2,FN=2,BK=32,SPLITK=8",
       "torch.matmul(torch.randn(128,16384),torch.randn(16384,128))", ""},
      // PyTorch programs of the other families.
      {"bf16 linear+bias+gelu", "",
       "x=torch.randn(4096,1024,dtype=torch.bfloat16,device='cuda')\n"
       "w=torch.randn(4096,1024,dtype=torch.bfloat16,device='cuda')\n"
       "b=torch.randn(4096,dtype=torch.bfloat16,device='cuda')\n"
       "F.gelu(F.linear(x,w,b))",
       ""},
      {"f16 residual", "",
       "a=torch.randn(2048,1024,dtype=torch.half);b=torch.randn(1024,2048,dtype=torch.half)\n"
       "r=torch.randn(2048,2048,dtype=torch.half)\n"
       "y = a @ b\ny += r\ny * 0.5",
       ""},
      {"bf16 causal SDPA (GQA)", "",
       "import torch.nn.functional as F\n"
       "q=torch.randn(2,16,1024,128,dtype=torch.bfloat16,device='cuda')\n"
       "k=torch.randn(2,4,1024,128,dtype=torch.bfloat16,device='cuda')\n"
       "v=torch.randn(2,4,1024,128,dtype=torch.bfloat16,device='cuda')\n"
       "F.scaled_dot_product_attention(q,k,v,is_causal=True,enable_gqa=True)",
       ""},
  };
}

class TorchCodeGpu : public ::testing::TestWithParam<Command> {
 protected:
  void SetUp() override {
    std::string why;
    if (!probe_device(0, &why)) GTEST_SKIP() << why;
  }
};

TEST_P(TorchCodeGpu, RunsVerifiedThroughCode) {
  const Command& c = GetParam();
  const std::string cmd = "LOOM_KNOBS='" + c.knobs + "' timeout 300 " + std::string(LOOM_BINARY) +
                          " run --bench " + c.option + " \"" + c.code + "\" " + c.extra + " 2>&1";
  SCOPED_TRACE(cmd);
  Result r = shell(cmd);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(has(r.out, "verify (Loom vs fp64 reference): PASS")) << r.out;
  // The Loom row of the backend table: "Loom  <us>  <TFLOP/s>  <x>x" (attention has no
  // cuBLAS column).
  const size_t row = r.out.find("\nLoom ");
  std::string line = row == std::string::npos ? "" : r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  std::cout << "ratio " << c.name << ": " << (line.empty() ? "(no Loom row)" : line) << std::endl;
}

std::string name_of(const ::testing::TestParamInfo<Command>& info) {
  std::string n;
  for (char ch : info.param.name) n += std::isalnum((unsigned char)ch) ? ch : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Article, TorchCodeGpu, ::testing::ValuesIn(commands()), name_of);

}  // namespace
}  // namespace loom
