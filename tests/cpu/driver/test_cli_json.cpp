// `--json` of loom run, ladder, tune and db, and the command line's help and version: each
// document is validated against its schema (docs/schema/*.schema.json) by
// tests/json/validate_json.py (both of its engines), which also fails when stdout holds anything beside the
// one document. Without a GPU the run and tune documents are the no-GPU error documents
// and the ladder's steps all carry their error; on a GPU machine the same commands
// validate the measured documents (tests/gpu/test_cli_json.cpp checks their numbers).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <unistd.h>

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
  std::string d = testing::TempDir() + "/loom_cli_json_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  std::filesystem::create_directories(d);
  return d;
}

// Runs `loom ARGS` with stdout alone into a file (stderr apart) and validates the file
// against docs/schema/SCHEMA.schema.json. Returns the exit status and the document text.
struct JsonRun {
  int rc = 0;
  std::string doc, err;
};

JsonRun json_run(const std::string& schema, const std::string& args, const std::string& env = "") {
  JsonRun r;
  const std::string dir = temp_dir();
  const std::string out = dir + "/out.json", err = dir + "/err.txt";
  r.rc = shell(env + " " + kLoom + " " + args + " > " + out + " 2> " + err).rc;
  std::ifstream o(out), e(err);
  r.doc.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  // Both engines: the built-in one (what a machine without the module uses) and the
  // jsonschema module (the reference implementation) when it is installed.
  for (const std::string engine : {"builtin", "jsonschema"}) {
    Result v = shell("python3 " + kSource + "/tests/json/validate_json.py --engine=" + engine + " " + kSource +
                     "/docs/schema/" + schema + ".schema.json " + out + " 2>&1");
    if (v.rc == 77) {
      static bool said = false;
      if (!said) std::cerr << "note: validated with the built-in engine only: " << v.out;
      said = true;
      continue;
    }
    EXPECT_EQ(v.rc, 0) << engine << ": loom " << args << "\n" << v.out << "\n--- stdout ---\n" << r.doc
                       << "\n--- stderr ---\n" << r.err;
  }
  return r;
}

#define VALIDATED(var, schema, ...) JsonRun var = json_run(schema, __VA_ARGS__)

bool gpu_present() { return shell(kLoom + " device > /dev/null 2>&1").rc == 0; }

// The validation can fail: a field the schema does not know, a missing one, a wrong type,
// or text beside the document are each refused by both engines.
TEST(CliJson, ValidatorRefusesWhatTheSchemaDoesNot) {
  const std::string dir = temp_dir();
  const std::string good = R"({"loom": "0.9.0", "command": "db", "ok": true, "subcommand": "path", "path": "/x"})";
  const std::pair<std::string, int> cases[] = {
      {good, 0},
      {R"({"loom": "0.9.0", "command": "db", "ok": true, "subcommand": "path", "path": "/x", "new": 1})", 1},
      {R"({"loom": "0.9.0", "command": "db", "ok": true, "subcommand": "path"})", 1},
      {R"({"loom": "0.9.0", "command": "db", "ok": "yes", "subcommand": "path", "path": "/x"})", 1},
      {R"({"loom": "0.9.0", "command": "db", "ok": true, "subcommand": "list", "path": "/x", "damaged": []})", 1},
      {good + "\nnote: something\n", 1},
  };
  int i = 0;
  for (const auto& [doc, rc] : cases) {
    const std::string file = dir + "/doc" + std::to_string(i++) + ".json";
    std::ofstream(file) << doc;
    for (const std::string engine : {"builtin", "jsonschema"}) {
      Result v = shell("python3 " + kSource + "/tests/json/validate_json.py --engine=" + engine + " " + kSource +
                       "/docs/schema/db.schema.json " + file + " 2>&1");
      if (v.rc == 77) continue;  // noted by json_run
      EXPECT_EQ(v.rc, rc) << engine << ": " << doc << "\n" << v.out;
    }
  }
}

TEST(CliJson, RunDocuments) {
  VALIDATED(plain, "run", "run -c 'matmul(A[64,32]:f32, B[32,48]:f32)' --json");
  VALIDATED(bench, "run", "run -c 'matmul(A[64,32]:f32, B[32,48]:f32)' --bench --reps 3 --json");
  if (!gpu_present()) {
    EXPECT_EQ(plain.rc, 1);
    EXPECT_TRUE(has(plain.doc, "\"ok\": false")) << plain.doc;
    EXPECT_TRUE(has(plain.doc, "needs a GPU")) << plain.doc;
  } else {
    EXPECT_EQ(plain.rc, 0) << plain.doc;
    EXPECT_TRUE(has(bench.doc, "\"ratio\": ")) << bench.doc;
  }
}

TEST(CliJson, ErrorsAreDocumentsWithoutTheUsageText) {
  VALIDATED(bad_expr, "run", "run -c 'matmul(A[64,32]:f32' --json");
  EXPECT_EQ(bad_expr.rc, 1);
  EXPECT_TRUE(has(bad_expr.doc, "\"ok\": false")) << bad_expr.doc;
  VALIDATED(bad_reps, "run", "run -c x --reps 0 --json");
  EXPECT_EQ(bad_reps.rc, 1);
  EXPECT_TRUE(has(bad_reps.doc, "--reps 0 is out of range")) << bad_reps.doc;
  EXPECT_FALSE(has(bad_reps.doc, "usage:")) << bad_reps.doc;
  // stderr still tells a person, with the usage.
  EXPECT_TRUE(has(bad_reps.err, "usage:")) << bad_reps.err;
  VALIDATED(unknown, "ladder", "ladder nosuch --json");
  EXPECT_TRUE(has(unknown.doc, "unknown ladder 'nosuch'")) << unknown.doc;
  VALIDATED(tune_bad, "tune", "tune --json --budget 0 -c x");
  EXPECT_TRUE(has(tune_bad.doc, "--budget needs a positive number")) << tune_bad.doc;
  VALIDATED(db_bad, "db", "db --json frobnicate");
  EXPECT_TRUE(has(db_bad.doc, "unknown db command 'frobnicate'")) << db_bad.doc;
}

// An expression as typed can hold invalid UTF-8: the document is still valid JSON
// (the bytes replaced), not a crash in the JSON library.
TEST(CliJson, InvalidUtf8InTheInputStaysValidJson) {
  VALIDATED(r, "run", "run -c \"$(printf 'matmul(A[4,4]:f32, B[4,4]:f32)\\377\\376')\" --json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(has(r.err, "unexpected error")) << r.err;
  // db show quotes the text it was given in its error as it is.
  const std::string env = "LOOM_TUNE_DB=" + temp_dir() + "/tuning.db";
  VALIDATED(show, "db", "db show \"$(printf 'H100\\377')\" --json", env);
  EXPECT_EQ(show.rc, 1);
  EXPECT_TRUE(has(show.doc, "0 records match 'H100\xEF\xBF\xBD'")) << show.doc;  // U+FFFD
  EXPECT_FALSE(has(show.err, "unexpected error")) << show.err;
}

TEST(CliJson, LadderDocumentsWithoutAGpuCarryEachStepsError) {
  VALIDATED(gemm, "ladder", "ladder sgemm --shape 64x64x64 --reps 2 --json");
  VALIDATED(flash, "ladder", "ladder flash --shape 1x2x64x64 --reps 2 --causal --json");
  EXPECT_TRUE(has(flash.doc, "\"reference\": null")) << flash.doc;
  // The progress lines went to stderr.
  EXPECT_TRUE(has(gemm.err, "ladder sgemm: ")) << gemm.err;
  if (!gpu_present()) {
    EXPECT_EQ(gemm.rc, 0);
    EXPECT_TRUE(has(gemm.doc, "\"error\": \"loom run needs a GPU")) << gemm.doc;
    EXPECT_TRUE(has(gemm.doc, "\"device\": null")) << gemm.doc;
  }
}

TEST(CliJson, LadderPlotWithoutTimingsIsAClearError) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: tests/gpu/test_cli_json.cpp draws the plot";
  const std::string svg = temp_dir() + "/ladder.svg";
  Result text = shell(kLoom + " ladder swizzle --shape 64x64x64 --plot " + svg + " 2>&1");
  EXPECT_EQ(text.rc, 1) << text.out;
  EXPECT_TRUE(has(text.out, "nothing to plot: no step of the swizzle ladder ran (loom run needs a GPU")) << text.out;
  EXPECT_FALSE(std::filesystem::exists(svg));
  // With --json: the steps, ok false and the plot's error in one document.
  VALIDATED(j, "ladder", "ladder swizzle --shape 64x64x64 --plot " + svg + " --json");
  EXPECT_EQ(j.rc, 1);
  EXPECT_TRUE(has(j.doc, "\"error\": \"nothing to plot")) << j.doc;
  EXPECT_TRUE(has(j.doc, "\"steps\"")) << j.doc;
}

TEST(CliJson, LadderPlotPathIsCheckedBeforeTheStepsRun) {
  Result r = shell(kLoom + " ladder sgemm --plot out.png 2>&1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(has(r.out, "--plot out.png: Loom writes SVG; give a FILE.svg")) << r.out;
  EXPECT_FALSE(has(r.out, "naive")) << r.out;  // no step ran
}

TEST(CliJson, TuneDocuments) {
  VALIDATED(dry, "tune",
            "tune --json --dry-run --gpu h100 --candidates 4 -c 'matmul(A[256,256]:bf16, B[256,256]:bf16)'");
  EXPECT_EQ(dry.rc, 0) << dry.err;
  EXPECT_TRUE(has(dry.doc, "\"dry_run\": true")) << dry.doc;
  EXPECT_TRUE(has(dry.doc, "\"predicted_us\": ")) << dry.doc;
  if (!gpu_present()) {
    VALIDATED(no_gpu, "tune", "tune --json --no-record --budget 5 -c 'matmul(A[64,64]:f32, B[64,64]:f32)'");
    EXPECT_EQ(no_gpu.rc, 1);
    EXPECT_TRUE(has(no_gpu.doc, "loom tune needs a GPU")) << no_gpu.doc;
  }
}

TEST(CliJson, DbDocumentsOnATemporaryDatabase) {
  const std::string dir = temp_dir();
  const std::string env = "LOOM_TUNE_DB=" + dir + "/tuning.db";
  const std::string in = dir + "/records.db";
  std::ofstream(in) << "loom-tuning-db v1\n"
                       "gpu=NVIDIA H100 80GB HBM3\tsms=132\tcuda=13000\tdriver=13000\top=matmul(f32[M,K], "
                       "f32[K,N]):f32\tshape=M=64,N=4096,K=4096\tknobs=BM=64,BN=64\tus=100\tcublas_us=250\t"
                       "trials=17\tdate=2026-11-22T05:47:48Z\trev=ea7c7b5\tnote=a note\\twith a tab\tsum=a21f68a036ea977f\n"
                       "gpu=broken line\n"
                       "end 2\n";
  VALIDATED(imported, "db", "db import " + in + " --json", env);
  EXPECT_EQ(imported.rc, 2);  // the damaged line is rejected, the good one imported
  EXPECT_TRUE(has(imported.doc, "\"added\": 1,")) << imported.doc;
  VALIDATED(list, "db", "db list --json", env);
  VALIDATED(list_first, "db", "db --json list", env);
  EXPECT_EQ(list.doc, list_first.doc);
  EXPECT_TRUE(has(list.doc, "\"shape\": \"M=64,N=4096,K=4096\"")) << list.doc;
  EXPECT_TRUE(has(list.doc, "\"ratio\": 2.5,")) << list.doc;  // cuBLAS 250 us / Loom 100 us
  VALIDATED(show, "db", "db show 1 --json", env);
  EXPECT_TRUE(has(show.doc, "\"note\": \"a note\\twith a tab\"")) << show.doc;
  VALIDATED(shipped, "db", "db list --shipped --json", env);
  EXPECT_TRUE(has(shipped.doc, "tune/shipped/h100.db")) << shipped.doc;
  VALIDATED(path, "db", "db path --json", env);
  EXPECT_TRUE(has(path.doc, dir + "/tuning.db")) << path.doc;
  VALIDATED(exported, "db", "db export " + dir + "/copy.db --json", env);
  VALIDATED(to_stdout, "db", "db export - --json", env);
  EXPECT_EQ(to_stdout.rc, 1);
  EXPECT_TRUE(has(to_stdout.doc, "with --json give a FILE")) << to_stdout.doc;
  EXPECT_TRUE(has(exported.doc, "\"exported\": 1,")) << exported.doc;
  VALIDATED(cleared, "db", "db clear --yes --json", env);
  EXPECT_TRUE(has(cleared.doc, "\"removed\": 1")) << cleared.doc;
  // A damaged database: the damage in the document too, ok false, exit status 2.
  std::ofstream(dir + "/tuning.db") << "loom-tuning-db v1\ngpu=x\tbroken\nend 1\n";
  VALIDATED(damaged, "db", "db list --json", env);
  EXPECT_EQ(damaged.rc, 2);
  EXPECT_TRUE(has(damaged.doc, "\"ok\": false")) << damaged.doc;
  EXPECT_TRUE(has(damaged.doc, "\"what\": ")) << damaged.doc;
}

// scripts/plot_bench.py reads the run documents: a timed one becomes a bar, a failed one a
// line under the chart, and input with no timed run is a clear error.
TEST(CliJson, PlotBenchDrawsTheRatioOfRunDocuments) {
  const std::string dir = temp_dir();
  const std::string timed =
      R"j({"loom": "0.9.0", "command": "run", "ok": true, "expression": "matmul(A[4096,4096]:bf16, B[4096,4096]:bf16)",)j"
      R"j( "device": {"name": "NVIDIA H100 80GB HBM3"}, "date": "2026-11-27 15:00:00 UTC", "verify": {"passed": true},)j"
      R"j( "bench": {"reference": "cuBLAS", "ratio": 1.034}})j";
  Result failed = shell(kLoom + " run -c 'matmul(A[8,8]:f32, B[8,8]:f32)' --bench --json 2>/dev/null > " + dir + "/failed.json");
  std::ofstream(dir + "/timed.json") << timed << "\n" << timed << "\n";  // two documents in one file
  const std::string plot = "python3 " + kSource + "/scripts/plot_bench.py ";
  Result r = shell(plot + dir + "/timed.json " + dir + "/failed.json -o " + dir + "/b.svg 2>&1");
  EXPECT_EQ(r.rc, 0) << r.out;
  std::ifstream f(dir + "/b.svg");
  std::string svg((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true) << svg;
  EXPECT_TRUE(has(svg, ">1.03x</text>")) << svg;
  EXPECT_TRUE(has(svg, "Loom vs cuBLAS per shape")) << svg;
  if (failed.rc != 0) {
    EXPECT_TRUE(has(svg, "not drawn: ")) << svg;
    Result none = shell(plot + dir + "/failed.json -o " + dir + "/c.svg 2>&1");
    EXPECT_EQ(none.rc, 1) << none.out;
    EXPECT_TRUE(has(none.out, "nothing to draw: no input has a run timed against a reference")) << none.out;
  }
  // A tuned suite: each outcome's confirming run against cuBLAS.
  std::ofstream(dir + "/tune.json")
      << R"j({"loom": "0.9.0", "command": "tune", "ok": true, "outcomes": [)j"
      << R"j({"expression": "matmul(A[512,512]:bf16, B[512,512]:bf16)", "ok": true, "device_name": "H100",)j"
      << R"j( "confirm_us": 10.0, "reference_us": 12.5},)j"
      << R"j({"expression": "matmul(A[64,64]:f32, B[64,64]:f32)", "ok": false, "error": "no GPU"}]})j";
  Result tuned = shell(plot + dir + "/tune.json -o " + dir + "/t.svg 2>&1");
  EXPECT_EQ(tuned.rc, 0) << tuned.out;
  std::ifstream tf(dir + "/t.svg");
  std::string tsvg((std::istreambuf_iterator<char>(tf)), {});
  EXPECT_TRUE(has(tsvg, ">1.25x</text>")) << tsvg;
  EXPECT_TRUE(has(tsvg, "not drawn: matmul(A[64,64]:f32, B[64,64]:f32): no GPU")) << tsvg;
  Result png = shell(plot + dir + "/timed.json -o " + dir + "/b.png 2>&1");
  EXPECT_EQ(png.rc, 1) << png.out;
  EXPECT_TRUE(has(png.out, "give FILE.svg")) << png.out;
}

TEST(CliHelp, EveryCommandHasHelpListingItsOptions) {
  for (const std::string c : {"compile", "run", "ladder", "demo", "passes", "knobs", "device", "tune", "db"}) {
    Result help = shell(kLoom + " help " + c + " 2>&1");
    EXPECT_EQ(help.rc, 0) << c << ": " << help.out;
    EXPECT_TRUE(has(help.out, "usage: loom " + c)) << help.out;
    Result dash = shell(kLoom + " " + c + (c == "db" ? " help" : " --help") + " 2>&1");
    EXPECT_EQ(dash.out, help.out) << c;
  }
  Result run = shell(kLoom + " help run");
  for (const std::string o : {"-c, --expr, --code EXPR", "--bench", "--json", "--device N", "--l2 MODE", "--reps N", "--no-db"})
    EXPECT_TRUE(has(run.out, o)) << o << "\n" << run.out;
  Result ladder = shell(kLoom + " help ladder");
  for (const std::string o : {"--plot FILE.svg", "--json", "--causal", "--shape"})
    EXPECT_TRUE(has(ladder.out, o)) << o << "\n" << ladder.out;
  EXPECT_TRUE(has(shell(kLoom + " help tune").out, "--json")) << "tune";
  EXPECT_TRUE(has(shell(kLoom + " help db").out, "--json")) << "db";
  Result nosuch = shell(kLoom + " help nosuch 2>&1");
  EXPECT_EQ(nosuch.rc, 1);
  EXPECT_TRUE(has(nosuch.out, "no command 'nosuch' to describe")) << nosuch.out;
}

// An option a command does not take was silently ignored before (`loom passes --reps 5`,
// `loom run --ir tile`): now it is an error naming the option and where its options are.
TEST(CliHelp, AnOptionTheCommandDoesNotTakeIsRefused) {
  for (const std::string& args : {std::string("run -c x --ir tile"), std::string("passes --reps 5"),
                                  std::string("compile -c x --json"), std::string("compile -c x --device 1"),
                                  std::string("knobs --plot a.svg")}) {
    Result r = shell(kLoom + " " + args + " 2>&1");
    EXPECT_EQ(r.rc, 1) << args << ": " << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("option \\S+ does not apply to loom \\w+: `loom help \\w+` lists")))
        << args << ": " << r.out;
  }
}

// docs/cli.md opens with the usage: the same text `loom help` prints.
TEST(CliHelp, TheUsageInDocsIsTheUsageLoomPrints) {
  std::ifstream f(kSource + "/docs/cli.md");
  std::string doc((std::istreambuf_iterator<char>(f)), {});
  const size_t start = doc.find("```\nusage: loom ");
  ASSERT_NE(start, std::string::npos);
  const size_t end = doc.find("```\n", start + 4);
  EXPECT_EQ(doc.substr(start + 4, end - start - 4), shell(kLoom + " help").out)
      << "update docs/cli.md's usage block from `loom help`";
}

TEST(CliHelp, VersionNamesTheProjectVersion) {
  Result v = shell(kLoom + " --version");
  EXPECT_EQ(v.rc, 0);
  EXPECT_TRUE(std::regex_search(v.out, std::regex("^loom [0-9]+\\.[0-9]+\\.[0-9]+"))) << v.out;
  VALIDATED(doc, "db", "db path --json");
  EXPECT_TRUE(has(doc.doc, "\"loom\": \"" + v.out.substr(5, v.out.size() - 6) + "\"")) << doc.doc << v.out;
}

}  // namespace
