// The measured --json documents on the GPU: `loom run --bench`, `loom ladder --plot` and
// `loom tune`, each validated against its schema (docs/schema/) by
// tests/json/validate_json.py (the jsonschema module, else its built-in engine), and their numbers checked for sense (a positive time, a
// ratio that is reference / Loom, one bar per step in the plot).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <unistd.h>

#include "runtime/device.h"

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
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

const std::string kLoom = "timeout 300 " + std::string(LOOM_BINARY);
const std::string kSource = LOOM_SOURCE_DIR;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string temp_dir() {
  static int n = 0;
  std::string d = testing::TempDir() + "/loom_gpu_json_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  std::filesystem::create_directories(d);
  return d;
}

struct JsonRun {
  int rc = 0;
  std::string doc, err;
};

JsonRun json_run(const std::string& schema, const std::string& args) {
  JsonRun r;
  const std::string dir = temp_dir();
  const std::string out = dir + "/out.json", err = dir + "/err.txt";
  r.rc = shell(kLoom + " " + args + " > " + out + " 2> " + err).rc;
  std::ifstream o(out), e(err);
  r.doc.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  Result v = shell("python3 " + kSource + "/tests/json/validate_json.py " + kSource + "/docs/schema/" +
                   schema + ".schema.json " + out + " 2>&1");
  EXPECT_EQ(v.rc, 0) << "loom " << args << "\n" << v.out << "\n--- stdout ---\n" << r.doc
                     << "\n--- stderr ---\n" << r.err;
  return r;
}

#define NEEDS_GPU()                                                   \
  std::string why;                                                    \
  if (!loom::probe_device(0, &why)) GTEST_SKIP() << "no GPU: " << why

#define VALIDATED(var, schema, args) JsonRun var = json_run(schema, args)

// The numbers after "KEY": in the document, in order.
std::vector<double> numbers(const std::string& doc, const std::string& key) {
  std::vector<double> out;
  std::regex re("\"" + key + "\": ([-0-9.eE+]+)");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

TEST(GpuCliJson, RunBenchDocument) {
  NEEDS_GPU();
  VALIDATED(r, "run", "run -c 'matmul(A[1024,1024]:bf16, B[1024,1024]:bf16)' --bench --reps 10 --json");
  EXPECT_EQ(r.rc, 0) << r.doc << r.err;
  EXPECT_TRUE(has(r.doc, "\"passed\": true")) << r.doc;
  EXPECT_TRUE(has(r.doc, "\"reference\": \"cuBLAS\"")) << r.doc;
  auto medians = numbers(r.doc, "median_us");
  ASSERT_EQ(medians.size(), 2u) << r.doc;  // cuBLAS, then Loom
  auto ratio = numbers(r.doc, "ratio");
  ASSERT_EQ(ratio.size(), 1u) << r.doc;
  EXPECT_NEAR(ratio[0], medians[0] / medians[1], 1e-6 * ratio[0]);
  // Attention: Loom alone, no reference.
  VALIDATED(a, "run",
            "run -c 'attention(Q[1,4,256,64]:bf16, K[1,4,256,64]:bf16, V[1,4,256,64]:bf16)' --bench --reps 5 --json");
  EXPECT_EQ(a.rc, 0) << a.doc << a.err;
  EXPECT_TRUE(has(a.doc, "\"reference\": null")) << a.doc;
}

TEST(GpuCliJson, LadderDocumentAndPlot) {
  NEEDS_GPU();
  const std::string svg = temp_dir() + "/swizzle.svg";
  VALIDATED(r, "ladder", "ladder swizzle --shape 1024x1024x1024 --reps 5 --json --plot " + svg);
  EXPECT_EQ(r.rc, 0) << r.doc << r.err;
  EXPECT_FALSE(has(r.doc, "\"ok\": false")) << r.doc;
  auto tflops = numbers(r.doc, "tflops");
  EXPECT_EQ(tflops.size(), 4u) << r.doc;
  std::ifstream f(svg);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  EXPECT_TRUE(has(text, "<svg")) << text;
  EXPECT_TRUE(has(text, "TFLOP/s")) << text;
  EXPECT_TRUE(has(text, "GROUP_M=16")) << text;
  int bars = 0;  // one per step that ran
  for (size_t at = 0; (at = text.find("fill=\"#4878a8\"><title>", at)) != std::string::npos; ++at) ++bars;
  EXPECT_EQ(bars, 4) << text;
}

TEST(GpuCliJson, TuneDocument) {
  NEEDS_GPU();
  // --export-shipped into a scratch file: the document's shipped_export object too.
  const std::string shipped = temp_dir() + "/shipped.db";
  VALIDATED(r, "tune",
            "tune --json --no-record --no-confirm --trials 3 --budget 60 --export-shipped " + shipped +
                " -c 'matmul(A[512,512]:bf16, B[512,512]:bf16)'");
  EXPECT_TRUE(has(r.doc, "\"shipped_export\": {")) << r.doc;
  EXPECT_EQ(r.rc, 0) << r.doc << r.err;
  EXPECT_TRUE(has(r.doc, "\"best_knobs\": \"")) << r.doc;
  auto best = numbers(r.doc, "best_us");
  ASSERT_EQ(best.size(), 1u) << r.doc;
  EXPECT_GT(best[0], 0);
}

}  // namespace
