// The kernel families' choices, pinned: for a broad table of problems (the bench suites,
// attention, decode, varlen and paged attention, run-time sizes, tf32, ragged rows,
// batches; sm_90a and sm_80) the shape class, the per-atom default schedules
// (default_knobs), where the knobs came from and every knob the pipeline read (what
// `loom compile -v` prints), and for explicit knobs on each family the refusal or the
// knobs read. tests/cpu/driver/golden/families.txt holds the answers; the families
// registry (src/passes/families/) must reproduce them exactly: moving a family's defaults,
// legality and knob lists into its declaration changes no choice and no message.
// A deliberate change of a default regenerates the file: LOOM_UPDATE_GOLDEN=1 and run
// this test, then review the diff like code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "ir/error.h"
#include "passes/defaults.h"
#include "frontend/parser.h"

namespace loom {
namespace {

const std::string kGolden = std::string(LOOM_SOURCE_DIR) + "/tests/cpu/driver/golden/families.txt";

// Expressions of a suite file, one per line, '#' comments dropped.
std::vector<std::string> suite(const std::string& name) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/bench/suites/" + name);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> problems() {
  std::vector<std::string> out;
  for (const char* s : {"hopper-gemm.txt", "tuning.txt", "models.txt"})
    for (const auto& e : suite(s)) out.push_back(e);
  const std::vector<std::string> more = {
      // SIMT classes: small, medium, large, split-k (f32), and elementwise epilogues.
      "matmul(A[64,64]:f32, B[64,64]:f32)",
      "matmul(A[16,16]:f32, B[16,16]:f32)",
      "matmul(A[512,512]:f32, B[512,512]:f32)",
      "matmul(A[1024,1024]:f32, B[1024,1024]:f32)",
      "matmul(A[128,16384]:f32, B[128,16384]:f32.T)",
      "matmul(A[128,16384]:f32, B[16384,128]:f32)",
      "relu(matmul(A[2048,2048]:f32, B[2048,2048]:f32))",
      "matmul(A[1000,777]:f32, B[777,333]:f32)",
      // tf32: both majornesses, ragged, small.
      "matmul(A[4096,4096]:tf32, B[4096,4096]:tf32.T)",
      "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32.T)",
      "matmul(A[4096,4096]:tf32.T, B[4096,4096]:tf32)",
      "matmul(A[1000,777]:tf32, B[777,333]:tf32)",
      "matmul(A[512,512]:tf32, B[512,512]:tf32)",
      "matmul(A[4096,4095]:tf32, B[4095,4096]:tf32)",
      // 16-bit: the mma.sync classes (aligned, few tiles, ragged, decode), ragged rows.
      "matmul(A[1024,1024]:f16, B[1024,1024]:f16)",
      "matmul(A[1024,1024]:bf16, B[1024,1024]:bf16.T)",
      "matmul(A[1000,777]:bf16, B[777,333]:bf16)",
      "matmul(A[4096,4096]:bf16, B[4096,4095]:bf16)",
      "matmul(A[4096,4095]:bf16, B[4095,4096]:bf16)",
      "matmul(A[4096,4094]:f16, B[4094,4096]:f16)",
      "matmul(A[4096,4096]:bf16.T, B[4096,4096]:bf16)",
      "matmul(A[64,64]:f16, B[64,64]:f16)",
      "matmul(A[256,256]:bf16, B[256,256]:bf16)",
      "matmul(A[32,4096]:f16, B[4096,4096]:f16)",
      "matmul(A[96,4096]:bf16, B[4096,4096]:bf16)",
      "matmul(A[256,8192]:bf16, B[8192,256]:bf16)",
      "matmul(A[128,4096]:f16, B[4096,128]:f16)",
      // Narrow decode weights (N 128..1023, K < 4096) and the row count past them.
      "linear(X[1,2048]:bf16, W[512,2048]:bf16)",
      "linear(X[16,2048]:f16, W[256,2048]:f16)",
      "linear(X[32,1024]:bf16, W[128,1024]:bf16)",
      "linear(X[40,2048]:bf16, W[512,2048]:bf16)",
      "gelu(matmul(A[1000,777]:f16, B[777,333]:f16))",
      // Batches: bmm ranks 3 and 4, thin, short K, ragged entries.
      "bmm(A[4,512,512]:bf16, B[4,512,512]:bf16)",
      "bmm(A[32,1024,1024]:bf16, B[32,1024,1024]:bf16)",
      "bmm(A[64,512,64]:f16, B[64,64,512]:f16)",
      "bmm(A[8,100,100]:f32, B[8,100,100]:f32)",
      "matmul(A[2,8,512,64]:bf16, B[2,8,64,512]:bf16)",
      "matmul(A[2,8,1024,1024]:bf16, B[2,8,1024,1024]:bf16)",
      // Run-time sizes.
      "matmul(A[M,4096]:bf16, B[4096,4096]:bf16)",
      "matmul(A[M,4096]:f16, B[4096,N]:f16)",
      "matmul(A[M,K]:bf16, B[K,N]:bf16)",
      "matmul(A[M,256]:f32, B[256,64]:f32)",
      "matmul(A[M,64]:bf16, B[64,64]:bf16)",
      "matmul(A[M,4096]:f32, B[4096,4096]:f32)",
      "linear(X[T,4096]:bf16, W[14336,4096]:bf16)",
      // Attention: prefill (D 64, 128, 256; causal modes; GQA), odd lengths, f16/bf16.
      "attention(Q[2,8,1024,64]:bf16, K[2,8,1024,64]:bf16, V[2,8,1024,64]:bf16, causal=true)",
      "attention(Q[2,8,1024,128]:bf16, K[2,8,1024,128]:bf16, V[2,8,1024,128]:bf16, causal=true)",
      "attention(Q[4,16,4096,128]:f16, K[4,16,4096,128]:f16, V[4,16,4096,128]:f16)",
      "attention(Q[4,16,4096,64]:bf16, K[4,16,4096,64]:bf16, V[4,16,4096,64]:bf16)",
      "attention(Q[4,16,2048,128]:bf16, K[4,16,4096,128]:bf16, V[4,16,4096,128]:bf16)",
      "attention(Q[2,8,1000,64]:f16, K[2,8,1000,64]:f16, V[2,8,1000,64]:f16, causal=true)",
      "attention(Q[2,8,1000,128]:bf16, K[2,2,1000,128]:bf16, V[2,2,1000,128]:bf16, causal=true)",
      "attention(Q[2,8,256,64]:bf16, K[2,2,256,64]:bf16, V[2,2,256,64]:bf16, causal=true, lse=true)",
      "attention(Q[1,4,200,16]:bf16, K[1,2,50,16]:bf16, V[1,2,50,16]:bf16, causal=true, lse=true)",
      "attention(Q[1,8,512,256]:bf16, K[1,8,512,256]:bf16, V[1,8,512,256]:bf16, causal=top_left)",
      "attention(Q[1,8,512,96]:bf16, K[1,8,512,96]:bf16, V[1,8,512,96]:bf16)",
      "attention(Q[1,8,64,64]:bf16, K[1,8,64,64]:bf16, V[1,8,64,64]:bf16)",
      // Decode attention: one or a few query rows against a long KV.
      "attention(Q[1,32,1,128]:bf16, K[1,8,8192,128]:bf16, V[1,8,8192,128]:bf16)",
      "attention(Q[8,32,1,128]:bf16, K[8,8,4096,128]:bf16, V[8,8,4096,128]:bf16)",
      "attention(Q[4,32,4,64]:f16, K[4,8,2048,64]:f16, V[4,8,2048,64]:f16, causal=true)",
      "attention(Q[1,8,1,64]:bf16, K[1,8,100,64]:bf16, V[1,8,100,64]:bf16)",
      // Varlen and paged attention.
      "attention(Q[300,8,64]:bf16, K[300,8,64]:bf16, V[300,8,64]:bf16, cu_seqlens_q=CQ[4]:i32, "
      "cu_seqlens_k=CK[4]:i32, max_seqlen_q=128, causal=true)",
      "attention(Q[2,8,1,128]:bf16, Kc[64,2,16,128]:bf16, Vc[64,2,16,128]:bf16, "
      "block_table=BT[2,32]:i32, seqlens_k=L[2]:i32)",
      "attention(Q[2,8,64,64]:bf16, Kc[64,8,16,64]:bf16, Vc[64,8,16,64]:bf16, "
      "block_table=BT[2,32]:i32, seqlens_k=L[2]:i32, causal=true)",
  };
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

// Knobs the pipeline read, in registry order (what `loom compile -v` prints).
std::string used_knobs(const CompileState& s) {
  std::string out;
  for (const auto& k : knob_registry()) {
    auto it = s.used_knobs.find(k.name);
    if (it != s.used_knobs.end()) out += (out.empty() ? "" : ",") + k.name + "=" + it->second;
  }
  return out.empty() ? "-" : out;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = '|';
  return s;
}

// Compiles `expr` with `knobs` to the end of the kernel passes (no CUDA rendering); the
// knobs' source and the knobs read, or the error.
std::string compile_record(const std::string& expr, const std::string& arch, const std::string& knobs,
                           bool with_source) {
  try {
    CompileOptions opt;
    opt.target = Target::for_arch(arch);
    opt.knobs = Knobs::parse(knobs);
    opt.stop_after = "k:065_dependent_launch";
    opt.tuned_source = "--no-db";
    const CompiledProgram p = compile_expression(expr, opt);
    std::string out;
    if (with_source) out += "  source: " + p.knob_source + "\n";
    for (const auto& n : p.notes) out += "  note: " + one_line(n) + "\n";
    return out + "  used: " + used_knobs(p.state) + "\n";
  } catch (const Error& e) {
    return "  error: " + one_line(e.what()) + "\n";
  }
}

std::string defaults_record(const std::string& expr, const std::string& arch) {
  try {
    const DefaultChoice d = default_knobs(parse_expression(expr), Target::for_arch(arch));
    return "  class: " + d.shape_class + "\n  knobs: " + d.knobs.str() + "\n  mma: " + d.mma.str() +
           "\n  wgmma: " + d.wgmma.str() + "\n";
  } catch (const Error& e) {
    return "  defaults error: " + one_line(e.what()) + "\n";
  }
}

// Explicit knobs on one representative of each family: every knob of the registry at a
// value that is not its "off" value, so each family's refusals (and what it reads) show.
struct Probe {
  const char* expr;
  const char* arch;
  const char* base;  // explicit knobs every case of the probe carries
};

std::vector<std::string> probe_values(const KnobDef& k) {
  if (!k.choices.empty()) return k.choices;
  // An integer knob: its least value (often the "off" one) and a small one above it.
  std::vector<std::string> out = {std::to_string(k.min)};
  const int64_t v = std::min<int64_t>(std::max<int64_t>(k.min + 1, 2), k.max);
  if (v != k.min) out.push_back(std::to_string(v));
  return out;
}

std::string render() {
  std::ostringstream out;
  out << "# Generated by tests/cpu/driver/test_family_golden.cpp (LOOM_UPDATE_GOLDEN=1).\n";
  out << "## defaults\n";
  for (const auto& e : problems())
    for (const char* arch : {"sm_90a", "sm_80"}) {
      out << e << " @" << arch << "\n";
      out << defaults_record(e, arch);
      out << compile_record(e, arch, "", true);
    }
  out << "## explicit knobs per family\n";
  const std::vector<Probe> probes = {
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "sm_90a", ""},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "sm_90a", "ATOM=mma_bf16"},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "sm_80", ""},
      {"matmul(A[1024,1024]:f32, B[1024,1024]:f32)", "sm_90a", ""},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "sm_90a", "BM=128,BN=128,FM=8,FN=8"},
      {"matmul(A[1000,777]:bf16, B[777,333]:bf16)", "sm_90a", "ATOM=wgmma_bf16"},
      {"attention(Q[2,8,1024,128]:bf16, K[2,8,1024,128]:bf16, V[2,8,1024,128]:bf16, causal=true)",
       "sm_90a", ""},
      {"attention(Q[2,8,1024,128]:bf16, K[2,8,1024,128]:bf16, V[2,8,1024,128]:bf16, causal=true)",
       "sm_80", ""},
      {"attention(Q[1,32,1,128]:bf16, K[1,8,8192,128]:bf16, V[1,8,8192,128]:bf16)", "sm_90a", ""},
      {"linear(X[128,4096]:bf16, W[4096,4096]:bf16)", "sm_90a", ""},
      {"matmul(A[128,16384]:bf16, B[16384,128]:bf16)", "sm_90a", ""},
  };
  for (const auto& p : probes)
    for (const auto& k : knob_registry())
      for (const auto& v : probe_values(k)) {
        if (std::string(p.base).find(k.name + "=") != std::string::npos) continue;
        const std::string knobs = std::string(p.base) + (*p.base ? "," : "") + k.name + "=" + v;
        out << p.expr << " @" << p.arch << " {" << knobs << "}\n";
        out << compile_record(p.expr, p.arch, knobs, false);
      }
  // Several refused knobs at once: the order the messages list them in.
  const std::vector<std::pair<const char*, const char*>> combined = {
      {"attention(Q[2,8,1024,128]:bf16, K[2,8,1024,128]:bf16, V[2,8,1024,128]:bf16, causal=true)",
       "WGMMA_A=regs,BM=64,WM=2,ATOM=fma,CLUSTER_M=1,EPILOGUE=direct,STREAM_K=1,SPLITK=2"},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",
       "STAGE_OUTPUT=1,BLOCK_M=64,ATTN_PACK_P=1,COMBINE_GROUPS=2,WARPS=4"},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",
       "ATOM=fma,EPI_SYNC=2,CLUSTER_M=2,WARP_SPECIALIZE=1,WGMMA_A=regs,LDMATRIX=1"},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "FRAG_BUFFERS=2,LDMATRIX=1"},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",
       "ATOM=mma_bf16,STAGE=cp_async,CONSUMERS=pingpong,PRODUCER_REGS=40"},
      {"matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)", "EPILOGUE=direct,STMATRIX=0,EPI_BUFFERS=2"},
      {"matmul(A[1024,1024]:f32, B[1024,1024]:f32)", "EPI_SYNC=2,EPI_BUFFERS=2,CONSUMER_REGS=0"},
  };
  for (const auto& [expr, knobs] : combined) {
    out << expr << " @sm_90a {" << knobs << "}\n";
    out << compile_record(expr, "sm_90a", knobs, false);
  }
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(FamilyGolden, EveryProblemKeepsItsDefaultsAndEveryExplicitKnobItsAnswer) {
  const std::string now = render();
  if (const char* u = std::getenv("LOOM_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(kGolden) << now;
    GTEST_SKIP() << "wrote " << kGolden;
  }
  std::ifstream in(kGolden);
  ASSERT_TRUE(in) << kGolden << " is missing: run with LOOM_UPDATE_GOLDEN=1 to create it";
  std::stringstream want;
  want << in.rdbuf();
  const auto a = lines_of(want.str()), b = lines_of(now);
  // Report the first differences with the problem they belong to.
  int shown = 0;
  std::string header;
  for (size_t i = 0; i < std::max(a.size(), b.size()) && shown < 10; ++i) {
    const std::string wa = i < a.size() ? a[i] : "<end>", nb = i < b.size() ? b[i] : "<end>";
    if (!wa.empty() && wa[0] != ' ') header = wa;
    if (wa == nb) continue;
    ADD_FAILURE() << "line " << i + 1 << " (" << header << ")\n  golden: " << wa << "\n  now:    " << nb;
    ++shown;
  }
  EXPECT_EQ(a.size(), b.size());
  if (shown)
    ADD_FAILURE() << "the families' answers changed. A refactor must keep them; a deliberate "
                     "default change, or a new problem in bench/suites/*.txt, regenerates "
                     "the file (LOOM_UPDATE_GOLDEN=1 " << "test_driver_family_golden) and the "
                     "diff is reviewed with the change";
}

}  // namespace
}  // namespace loom
