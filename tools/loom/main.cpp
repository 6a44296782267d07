// The `loom` command. See docs/cli.md; `loom help COMMAND` lists a command's options
// (kOptions below is the one list the parser and the help share).
//
//   loom compile -c EXPR [--ir loop|tile|kernel|cuda] [-v|-vv] [--knobs K=V,..]
//                [--target sm_90a|sm_80|..] [--dims M=..,N=..] [-o FILE]
//   loom run -c EXPR [--check] [--bench] [--knobs ..] [--seed N] [--dims ..] [--reps N]
//            [--l2 auto|rotate|read|flush|off] [--json]
//   loom ladder NAME [--shape ..] [--dtype ..] [--json] [--plot FILE.svg]
//   loom demo          what `make run` shows: pipeline, tile IR, CUDA, resources, run
//   loom passes        the pipeline, with each pass's invariant and knobs
//   loom knobs         every knob, its range and the pass that reads it
//   loom device        the GPU Loom would use, or why there is none
//   loom db ...        the tuning database (src/tune/db_cli.h)
//   loom tune ...      the tuner (src/tune/tune_cli.h)
//   loom help [COMMAND], loom --version
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "bench/report.h"
#include "codegen/cuda.h"
#include "driver/cli_args.h"
#include "driver/compile.h"
#include "driver/json_output.h"
#include "driver/ladder.h"
#include "driver/ladder_plot.h"
#include "driver/run.h"
#include "driver/size_variants.h"
#include "driver/write_file.h"
#include "frontend/parser.h"
#include "ir/diff.h"
#include "ir/error.h"
#include "ir/printable.h"
#include "runtime/cubin_cache.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"
#include "passes/bank_conflicts.h"
#include "passes/families/family.h"
#include "tune/db_cli.h"
#include "tune/db_file.h"
#include "tune/tune_cli.h"
#include "tune/tuned_knobs.h"
#include "tune/worker_main.h"

namespace loom {
namespace {

const char* kUsage =
    "usage: loom <command> [options]        (loom help COMMAND: its options; loom --version)\n"
    "  compile -c EXPR [--ir loop|tile|kernel|cuda] [-v|-vv] [--knobs K=V,..]\n"
    "          [--target sm_90a|sm_80|sm_86|sm_89|sm_90] [--dims M=..,N=..] [-o FILE]\n"
    "          [--cubin FILE]   (also write the NVRTC cubin, e.g. for cuobjdump --dump-sass)\n"
    "  run     -c EXPR [--check] [--bench] [--knobs K=V,..] [--seed N] [--dims ..] [--reps N]\n"
    "          [--device N]   (CUDA ordinal; default 0)\n"
    "          [--l2 auto|rotate|read|flush|off]   (cold L2 per timed launch: rotated input\n"
    "          sets, or a read or write flush before each; auto rotates inputs under L2, else reads)\n"
    "          [--json]   (one JSON document on stdout: docs/schema/run.schema.json)\n"
    "          compile and run take the tuning database's knobs for the shape on this GPU\n"
    "          when it has a record (--no-db: never); explicit knobs still win\n"
    "  ladder  sgemm|splitk|swizzle|hgemm|tf32|hopper [--shape MxNxK] [--dtype f16|bf16] [--seed N] [--reps N]\n"
    "          [--l2 ..] [--json] [--plot FILE.svg]\n"
    "          run an article's progression of knob sets, verified and timed vs cuBLAS\n"
    "  ladder  flash [--shape BxHxSxD] [--dtype bf16|f16] [--causal] [--seed N] [--reps N] [--l2 ..]\n"
    "          [--json] [--plot FILE.svg]\n"
    "          the flash-attention articles' progression, verified and timed (FA2 ratio:\n"
    "          scripts/attention_bench.py --ladder flash)\n"
    "  demo    compile the default GEMM, show every stage, and run it when there is a GPU\n"
    "  passes  list the pipeline\n"
    "  knobs   list the knobs\n"
    "  device  describe the GPU\n"
    "  tune    -c EXPR | --suite FILE [--budget S] [--devices 0,1] [--json]: search the knobs on\n"
    "          the GPU, verify every candidate, record the winner (loom tune --help)\n"
    "  db      list|show|clear|export|import|path [--json]: the tuning database (loom db help)\n"
    "  help    [COMMAND]: this text, or one command's options\n"
    "Knobs also come from LOOM_KNOBS (the command line wins).\n";

constexpr const char* kDefaultGemm = "matmul(A[4096,4096]:f32, B[4096,4096]:f32)";

// Every option of the commands main.cpp parses (tune and db parse their own), with the
// commands that take it: the parser refuses an option the command does not take, and
// `loom help COMMAND` lists exactly these, so the help cannot miss an option.
struct OptionSpec {
  const char* name;
  const char* aliases;   // other spellings, space-separated, or ""
  const char* value;     // the value's placeholder, or "" for a flag
  const char* commands;  // space-separated
  const char* help;
};

const OptionSpec kOptions[] = {
    // The expression; `--code` is a third spelling of -c (PyTorch code: docs/cli.md).
    {"-c", "--expr --code", "EXPR", "compile run demo",
     "the expression to compile, or PyTorch code (docs/cli.md, \"Expressions\")"},
    {"--ir", "", "LEVEL", "compile", "what to print: loop, tile, kernel or cuda (default cuda)"},
    {"--knobs", "", "K=V,..", "compile run demo", "knobs (loom knobs lists them); LOOM_KNOBS too, these win"},
    {"--target", "", "ARCH", "compile", "sm_90a (default), sm_80, sm_86, sm_89 or sm_90; on a GPU of that arch, its own SM count, L2 and DRAM bandwidth"},
    {"--dims", "", "M=..,N=..", "compile run", "values of the expression's symbolic dimensions"},
    {"-o", "", "FILE", "compile", "write the output to FILE instead of stdout"},
    {"--cubin", "", "FILE", "compile", "also write the NVRTC cubin (for cuobjdump --dump-sass)"},
    {"-v", "", "", "compile", "the pipeline's passes, knob source and resource report on stderr"},
    {"-vv", "", "", "compile", "-v, and a diff of every pass that changed the IR"},
    {"--check", "", "", "run", "verify against the fp64 reference (always done; accepted for scripts)"},
    {"--bench", "", "", "run", "after verifying, time Loom against cuBLAS (docs/benchmarking.md)"},
    {"--no-db", "", "", "compile run", "ignore the tuning database (shape-class defaults)"},
    {"--seed", "", "N", "run ladder", "input data seed (default 1)"},
    {"--reps", "", "N", "run ladder", "timed repetitions, 1..1000000 (default 50)"},
    {"--device", "", "N", "run", "CUDA ordinal (default 0)"},
    {"--l2", "", "MODE", "run ladder",
     "cold L2 per timed launch: auto (default), rotate, read, flush or off"},
    {"--shape", "", "MxNxK", "ladder", "the problem (flash: BxHxSxD); default: the ladder's own"},
    {"--dtype", "", "TYPE", "ladder", "hgemm, hopper: f16 or bf16; flash: bf16 or f16"},
    {"--causal", "", "", "ladder", "flash: the causal mask"},
    {"--json", "", "", "run ladder", "print one JSON document on stdout (docs/cli.md, \"JSON output\")"},
    {"--plot", "", "FILE.svg", "ladder", "draw the steps' TFLOP/s (and ratio to cuBLAS) as an SVG"},
    {"-h", "--help", "", "compile run demo ladder passes knobs device", "this help"},
};

struct CommandHelp {
  const char* name;
  const char* synopsis;  // after `loom NAME`
  const char* what;
};

const CommandHelp kCommands[] = {
    {"compile", "-c EXPR [options]", "lower an expression to CUDA (or an IR level) and compile it with NVRTC"},
    {"run", "-c EXPR [options]",
     "compile, run on the GPU, verify against an fp64 reference; --bench times it against cuBLAS"},
    {"ladder", "NAME [options]",
     "run an article's progression of knob sets, each verified and timed; NAME: sgemm, splitk, "
     "swizzle, hgemm, tf32, hopper or flash"},
    {"demo", "[-c EXPR] [--knobs K=V,..]", "compile the default GEMM, show every stage, run it when there is a GPU"},
    {"passes", "", "list the pipeline: each pass, its invariant and its knobs"},
    {"knobs", "", "list every knob, its range, the pass that reads it, and what loom tune searches"},
    {"device", "", "describe the GPU Loom would use, or say why there is none"},
};

bool takes(const OptionSpec& o, const std::string& command) {
  std::istringstream words(o.commands);
  for (std::string w; words >> w;)
    if (w == command) return true;
  return false;
}

// `loom help COMMAND` and `loom COMMAND --help`: every option the command takes.
std::string command_help(const std::string& command) {
  if (command == "tune") return tune::kTuneUsage;
  if (command == "db") return tune::kDbUsage;
  for (const auto& c : kCommands) {
    if (command != c.name) continue;
    std::ostringstream o;
    o << "usage: loom " << c.name << (*c.synopsis ? " " : "") << c.synopsis << "\n  " << c.what << "\n";
    bool any = false;
    for (const auto& opt : kOptions) {
      if (!takes(opt, command)) continue;
      if (!any) o << "options:\n";
      any = true;
      std::string spelled = opt.name;
      std::istringstream aliases(opt.aliases);
      for (std::string alias; aliases >> alias;) spelled += ", " + alias;
      if (*opt.value) spelled += std::string(" ") + opt.value;
      o << "  " << std::left << std::setw(24) << spelled << " " << opt.help << "\n";
    }
    o << "docs/cli.md describes every command.\n";
    return o.str();
  }
  std::string names;
  for (const auto& c : kCommands) names += std::string(c.name) + ", ";
  throw Error("no command '" + command + "' to describe; the commands are " + names + "tune and db");
}

const OptionSpec* find_option(const std::string& f) {
  for (const auto& o : kOptions) {
    if (f == o.name) return &o;
    std::istringstream aliases(o.aliases);
    for (std::string alias; aliases >> alias;)
      if (f == alias) return &o;
  }
  return nullptr;
}

struct Args {
  std::string command, expr, ir = "cuda", knobs, dims, out_file, cubin_file;
  std::optional<std::string> target;  // given (even as ''): checked, never defaulted
  std::string ladder, shape, dtype, plot_file;
  L2Request l2 = L2Request::automatic;
  int verbose = 0;
  bool check = false, bench = false, no_db = false, causal = false, json = false;
  uint64_t seed = 1;
  int reps = 50;
  int device = 0;
  std::string command_line;
};

[[noreturn]] void usage_error(const std::string& msg) {
  throw Error(msg + "\n" + kUsage);
}

// The ranges of the integer options: a GPU ordinal, a repetition count a run can finish.
constexpr int64_t kMaxReps = 1000000;
constexpr int64_t kMaxDevice = 1023;

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.command_line += (i ? " " : "") + std::string(argv[i]);
  if (argc < 2) usage_error("missing command");
  a.command = argv[1];
  if (a.command == "-h" || a.command == "--help" || a.command == "help") {
    if (argc > 3) usage_error("loom help takes one command name");
    std::cout << (argc == 3 ? command_help(argv[2]) : kUsage);
    std::exit(0);
  }
  if (a.command == "--version" || a.command == "version") {
    std::cout << "loom " << loom_version_text() << "\n";
    std::exit(0);
  }
  bool known = false;
  for (const auto& c : kCommands) known = known || a.command == c.name;
  if (!known) usage_error("unknown command '" + a.command + "'");
  OnceOptions once;
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    if (a.command == "ladder" && a.ladder.empty() && !f.empty() && f[0] != '-') {
      a.ladder = f;
      continue;
    }
    // Every option is listed in kOptions and parsed below (an option missing from either
    // is refused, or reported as listed but not parsed).
    const OptionSpec* spec = find_option(f);
    if (!spec) usage_error("unknown option '" + f + "'");
    if (!takes(*spec, a.command))
      throw Error("option " + f + " does not apply to loom " + a.command + ": `loom help " +
                  a.command + "` lists the options it takes");
    // The value of an option that takes one; `canonical` names its aliases together.
    auto value = [&](const std::string& canonical = "") -> std::string {
      if (i + 1 >= argc) usage_error("option " + f + " needs a value");
      once.see(canonical.empty() ? f : canonical, f, argv[i + 1]);
      return argv[++i];
    };
    auto integer = [&](int64_t min, int64_t max) {
      const std::string text = value();
      try {
        return parse_int_option(f, text, min, max);
      } catch (const Error& e) {
        usage_error(e.what());
      }
    };
    if (f == "-c" || f == "--expr" || f == "--code") a.expr = value("-c");
    else if (f == "--ir") a.ir = value();
    else if (f == "--knobs") a.knobs = value();
    else if (f == "--target") a.target = value();
    else if (f == "--dims") a.dims = value();
    else if (f == "-o") a.out_file = value();
    else if (f == "--cubin") a.cubin_file = value();
    else if (f == "-v") a.verbose = std::max(a.verbose, 1);
    else if (f == "-vv") a.verbose = 2;
    else if (f == "--check") a.check = true;
    else if (f == "--bench") a.bench = true;
    else if (f == "--no-db") a.no_db = true;
    else if (f == "--seed") a.seed = uint64_t(integer(0, std::numeric_limits<int64_t>::max()));
    else if (f == "--reps") a.reps = int(integer(1, kMaxReps));
    else if (f == "--device") a.device = int(integer(0, kMaxDevice));
    else if (f == "--l2") a.l2 = parse_l2_request(value());
    else if (f == "--shape") a.shape = value();
    else if (f == "--dtype") a.dtype = value();
    else if (f == "--causal") a.causal = true;
    else if (f == "--json") a.json = true;
    else if (f == "--plot") a.plot_file = value();
    else if (f == "-h" || f == "--help") { std::cout << command_help(a.command); std::exit(0); }
    else throw Error("internal: option " + f + " is listed but not parsed");
  }
  if (a.ir != "loop" && a.ir != "tile" && a.ir != "kernel" && a.ir != "cuda")
    usage_error("--ir must be loop, tile, kernel or cuda (got '" + a.ir + "')");
  return a;
}

std::string resource_table(const CompileResult& cr, const KernelProgram& kp) {
  TextTable t({{"kernel"}, {"regs", Align::Right}, {"smem", Align::Right},
               {"stack", Align::Right}, {"spill st", Align::Right}, {"spill ld", Align::Right},
               {"threads", Align::Right}});
  for (const auto& k : kp.kernels) {
    auto it = cr.resources.find(k.name);
    ResourceReport r = it == cr.resources.end() ? ResourceReport{} : it->second;
    t.add_row({k.name, std::to_string(r.registers), format_bytes(r.shared_bytes),
               format_bytes(r.stack_frame_bytes), format_bytes(r.spill_store_bytes),
               format_bytes(r.spill_load_bytes), std::to_string(k.block_threads)});
  }
  std::string out = t.str();
  for (const auto& k : kp.kernels)
    if (auto it = cr.resources.find(k.name); it != cr.resources.end())
      out += serialized_wgmma_warning(k.name, it->second.wgmma_serialized);
  return out;
}

CompileResult nvrtc_compile(const CompiledProgram& c, const std::string& arch) {
  CompileRequest req;
  req.source = c.cuda;
  req.headers = {{kDeviceHeaderName, device_header()}};
  req.arch = arch;
  CubinCache cache;
  return compile(req, &cache);
}

std::string pipeline_listing() {
  std::ostringstream o;
  for (const auto& p : pipeline()) {
    o << "  " << p.id << "  [" << level_name(p.from) << " -> " << level_name(p.to) << "]";
    if (!p.knobs.empty()) {
      o << "  knobs:";
      for (const auto& k : p.knobs) o << " " << k;
    }
    o << "\n      " << p.invariant << "\n";
  }
  return o.str();
}

int cmd_compile(const Args& a) {
  if (a.expr.empty()) usage_error("compile needs -c EXPR");
  CompileOptions opt;
  opt.knobs = Knobs::from_env_and_cli(a.knobs);
  std::string why_no_gpu;
  const std::optional<DeviceInfo> dev = probe_device(0, &why_no_gpu);
  opt.target = target_for_arch_here(a.target.value_or("sm_90a"), dev);
  opt.sizes = parse_dims(a.dims);
  std::ostringstream log;
  std::vector<std::string> ran;
  opt.observer = [&](const Pass& p, const std::string& before, const std::string& after) {
    bool changed = before != after;
    ran.push_back("  " + p.id + (changed ? "  changed" : "  unchanged"));
    if (a.verbose >= 2 && changed)
      log << ">>> " << p.id << "\n" << unified_diff(before, after) << "<<< " << p.id << "\n";
  };
  Graph g = parse_expression(a.expr);
  check_dims_named(g, opt.sizes);
  if (!opt.sizes.empty()) g = bind_sizes(g, opt.sizes);
  // The database is keyed by GPU: without one (or compiling for another arch than the
  // GPU's) there is no key to look up.
  if (a.no_db) {
    opt.tuned_source = "--no-db";
  } else if (dev) {
    if (dev->arch() == opt.target.arch)
      tune::tuning_db_lookup()(g, *dev, opt);
    else
      opt.tuned_source = "tuning database not consulted: --target " + opt.target.arch +
                         " is not this GPU's " + dev->arch();
  } else {
    opt.tuned_source = "tuning database not consulted: no GPU to key it by";
  }
  CompiledProgram c = compile_graph(g, opt, a.expr);
  for (const auto& n : c.notes) std::cerr << "loom: note: " << n << "\n";

  std::string main_out;
  if (a.ir == "loop") main_out = print(c.state.loop);
  else if (a.ir == "tile") main_out = print(c.state.tile);
  else if (a.ir == "kernel") main_out = print(c.state.kernel);
  else main_out = c.cuda;

  std::cout << log.str();
  // Every accepted program is compiled, with or without -v: CUDA that NVRTC rejects is
  // Loom's error, reported (and exit status 1) rather than printed as a result.
  const CompileResult cr = nvrtc_compile(c, opt.target.arch);
  if (!a.cubin_file.empty()) {
    write_file_or_error(a.cubin_file, {cr.cubin.data(), cr.cubin.size()}, "--cubin");
  }
  if (a.verbose >= 1) {
    std::cerr << "knobs from: " << c.knob_source << "\n";
    // A run-time M's defaults come as one kernel per range of M (driver/size_variants.h);
    // the listing below is the top range's, the one printed.
    if (!g.symbols().empty()) {
      CompileOptions quiet = opt;
      quiet.observer = nullptr;
      const std::string ranges = compile_size_variants(g, quiet, a.expr).describe("  ");
      if (!ranges.empty())
        std::cerr << "kernels by run-time size (a launch runs its size's; printed: the last):\n"
                  << ranges;
    }
    std::cerr << "pipeline (" << c.summary << "):\n";
    for (const auto& r : ran) std::cerr << r << "\n";
    std::cerr << "NVRTC " << nvrtc_version_string() << " resource report for "
              << opt.target.arch << (cr.from_cache ? " (cached)" : "") << ":\n"
              << resource_table(cr, c.state.kernel);
    for (const auto& k : c.state.kernel.kernels) {
      Expr::Env env(opt.sizes.begin(), opt.sizes.end());
      auto reports = bank_conflicts(c.state.kernel, k, env);
      if (reports.empty()) continue;
      std::cerr << "shared-memory bank conflicts of " << k.name
                << " (wavefronts per warp access; factor 1.00 = conflict-free):\n"
                << format_bank_conflicts(reports);
    }
  }
  if (!a.out_file.empty()) {
    write_file_or_error(a.out_file, main_out, "-o");
  } else {
    std::cout << main_out;
  }
  return 0;
}

int cmd_run(const Args& a) {
  if (a.expr.empty()) usage_error("run needs -c EXPR");
  RunOptions opt;
  opt.knobs = Knobs::from_env_and_cli(a.knobs);
  opt.sizes = parse_dims(a.dims);
  opt.seed = a.seed;
  opt.device = a.device;
  opt.bench = a.bench;
  opt.timing.reps = a.reps;
  opt.l2 = a.l2;
  opt.command_line = a.command_line;
  opt.choose_tuned = tune::tuning_db_lookup(!a.no_db);
  RunReport r = run_expression(a.expr, opt);
  for (const auto& n : r.program.notes) std::cerr << "loom: note: " << n << "\n";
  std::cout << (a.json ? json_text(run_json(a.expr, r)) : format_run_report(r));
  if (!r.verify.passed) return 2;
  if (r.cublas_verify && !r.cublas_verify->passed) return 3;
  return 0;
}

int cmd_demo(const Args& a) {
  std::string expr = a.expr.empty() ? kDefaultGemm : a.expr;
  std::cout << "== Loom: " << expr << "\n\n== pipeline\n" << pipeline_listing();
  CompileOptions opt;
  opt.knobs = Knobs::from_env_and_cli(a.knobs);
  std::string why;
  auto dev = probe_device(0, &why);
  opt.target = target_for_arch_here(dev ? dev->arch() : "sm_90a", dev);
  CompiledProgram c = compile_expression(expr, opt);
  std::cout << "\n== tile IR\n" << print(c.state.tile);
  std::cout << "\n== generated CUDA (" << opt.target.arch << ")\n" << c.cuda;
  CompileResult cr = nvrtc_compile(c, opt.target.arch);
  std::cout << "\n== NVRTC " << nvrtc_version_string() << " resource report for "
            << opt.target.arch << (cr.from_cache ? " (from the cubin cache)" : "") << "\n"
            << resource_table(cr, c.state.kernel);
  if (!dev) {
    std::cout << "\n== run: skipped: " << why << "\n";
    return 0;
  }
  std::cout << "\n== run on " << dev->name << " (verify, then benchmark against cuBLAS)\n";
  RunOptions ro;
  ro.knobs = opt.knobs;
  ro.bench = true;
  ro.command_line = a.command_line;
  RunReport r = run_expression(expr, ro);
  std::cout << format_run_report(r);
  return r.verify.passed ? 0 : 2;
}

int cmd_ladder(const Args& a) {
  if (a.ladder.empty())
    usage_error("ladder needs a name: sgemm, splitk, swizzle, hgemm, tf32, hopper or flash");
  Ladder l = make_ladder(a.ladder, a.shape, a.dtype, a.causal);
  // Checked before the steps run: a plot Loom cannot write is known now.
  if (!a.plot_file.empty()) check_plot_path(a.plot_file);
  RunOptions opt;
  opt.seed = a.seed;
  opt.timing.reps = a.reps;
  opt.l2 = a.l2;
  opt.command_line = a.command_line;
  // With --json the progress goes to stderr: stdout holds the document alone.
  std::ostream& progress = a.json ? std::cerr : std::cout;
  progress << "ladder " << l.name << ": " << l.expression << " (" << l.steps.size()
           << " steps, each verified, then timed"
           << (l.reference.empty() ? "" : " interleaved with " + l.reference) << ")\n"
           << std::flush;
  auto rows = run_ladder(l, opt, [&](const LadderRow& r) {
    std::string timed = format_us(r.us) + " us";
    if (!l.reference.empty()) timed += ", " + format_ratio(r.cublas_us / r.us) + " " + l.reference;
    progress << "  " << r.step.name << ": "
             << (r.ok ? timed : "not run: " + r.error.substr(0, r.error.find('\n'))) << "\n"
             << std::flush;
  });
  std::string why;
  const std::optional<DeviceInfo> dev = probe_device(0, &why);
  const std::string date = tune::utc_now_iso();
  std::string plot_error;
  if (!a.plot_file.empty()) {
    try {
      const std::string svg = ladder_svg(l, rows, dev ? dev->name : "no GPU", date);
      write_file_or_error(a.plot_file, svg, "--plot");
    } catch (const Error& e) {
      if (!a.json) throw;
      plot_error = e.what();
    }
  }
  if (a.json) {
    Json doc = ladder_json(l, rows, dev, date);
    if (!plot_error.empty()) {
      doc["ok"] = false;
      doc["error"] = plot_error;
    }
    std::cout << json_text(doc);
    if (!plot_error.empty()) std::cerr << "loom: " << printable(plot_error, true) << "\n";
    return plot_error.empty() ? 0 : 1;
  }
  std::cout << "\n" << format_ladder(l, rows);
  if (!a.plot_file.empty()) std::cout << "plot: " << a.plot_file << "\n";
  return 0;
}

int cmd_knobs() {
  TextTable t({{"knob"}, {"range"}, {"read by"}, {"meaning"}});
  for (const auto& k : knob_registry()) {
    std::string range;
    if (!k.choices.empty())
      for (const auto& c : k.choices) range += (range.empty() ? "" : "|") + c;
    else
      range = std::to_string(k.min) + ".." + std::to_string(k.max);
    t.add_row({k.name, range, k.read_by, k.doc});
  }
  std::cout << t.str();
  // What `loom tune` explores, as each knob declares it (ATOM's values come from the atom
  // table instead).
  TextTable searched({{"knob"}, {"searched by loom tune (atoms: values, from sm_XX)"}});
  for (const auto& k : knob_registry()) {
    std::string text;
    for (const auto& entry : k.search) {
      std::string values;
      for (const auto& v : entry.values) values += (values.empty() ? "" : "|") + v;
      text += (text.empty() ? "" : "; ") + (entry.atoms.empty() ? std::string("all") : entry.atoms) +
              ": " + values + (entry.min_cc ? ", sm_" + std::to_string(entry.min_cc) + "+" : "");
    }
    if (!text.empty()) searched.add_row({k.name, text});
  }
  std::cout << "\n" << searched.str();
  // Which kernel family reads which knobs (src/passes/families/; docs/knobs.md, "Knobs by
  // kernel family"): an explicit knob the chosen family neither reads nor honours is refused.
  std::cout << "\nknobs by kernel family:\n" << families_knob_table();
  return 0;
}

int cmd_device() {
  std::string why;
  auto d = probe_device(0, &why);
  if (!d) {
    std::cout << "no GPU: " << why << "\n";
    return 1;
  }
  std::cout << d->name << " (" << d->arch() << "), " << d->sm_count << " SMs, L2 "
            << format_bytes(d->l2_bytes) << ", smem/block " << format_bytes(d->smem_per_block_optin)
            << ", DRAM peak " << std::fixed << std::setprecision(2) << d->dram_bytes_per_s() / 1e12
            << " TB/s, driver " << d->driver_version << ", runtime " << d->runtime_version << "\n";
  return 0;
}

int dispatch(const Args& a) {
  if (a.command == "compile") return cmd_compile(a);
  if (a.command == "run") return cmd_run(a);
  if (a.command == "demo") return cmd_demo(a);
  if (a.command == "ladder") return cmd_ladder(a);
  if (a.command == "passes") { std::cout << pipeline_listing(); return 0; }
  if (a.command == "knobs") return cmd_knobs();
  if (a.command == "device") return cmd_device();
  usage_error("unknown command '" + a.command + "'");
}

// Whether this command line asks for a JSON document: then an error is one too.
bool wants_json(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string c = argv[1];
  if (c != "run" && c != "ladder" && c != "tune" && c != "db") return false;
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "--json") return true;
  return false;
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Standard output is a file Loom writes too: `loom compile ... > /dev/full` must not exit
// 0 with the kernel lost. std::cout writes through stdio's stdout: fflush reports (and
// sets errno for) what is still buffered, ferror and the stream state what failed before.
bool stdout_written() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int err = errno;
  if (flushed && !std::ferror(stdout) && std::cout) return true;
  // The failed write was earlier and its errno is gone: ask the OS once more (the output
  // is incomplete already) so the message can say why.
  if (err == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
  std::cerr << "loom: cannot write standard output: " << (err ? std::strerror(err) : "write error")
            << "\n";
  return false;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  const bool json = loom::wants_json(argc, argv);
  // With --json a failure is a document too (ok false, the message), besides stderr.
  auto fail = [&](const std::string& message) {
    if (json) {
      std::cout << loom::json_text(loom::json_error_document(argv[1], message));
      loom::stdout_written();
    }
    return 1;
  };
  try {
    // The tuner's measurement worker (src/tune/worker.h): started by the tuner, not
    // listed in the usage.
    if (argc >= 2 && std::string(argv[1]) == "tune-worker")
      return loom::tune::tune_worker_main(argc - 2, argv + 2);
    int rc = 0;
    if (argc >= 2 && std::string(argv[1]) == "db")
      rc = loom::tune::db_command({argv + 2, argv + argc}, std::cout, std::cerr);
    else if (argc >= 2 && std::string(argv[1]) == "tune")
      rc = loom::tune::tune_command({argv + 2, argv + argc}, std::cout, std::cerr);
    else
      rc = loom::dispatch(loom::parse_args(argc, argv));
    return loom::stdout_written() ? rc : 1;
  } catch (const loom::Error& e) {
    // Messages quote what the user typed; printable() keeps an ANSI escape or invalid
    // UTF-8 in it from reaching the terminal raw.
    std::cerr << "loom: " << loom::printable(e.what(), true) << "\n";
    return fail(e.what());
  } catch (const std::exception& e) {
    std::cerr << "loom: unexpected error: " << loom::printable(e.what(), true) << "\n";
    return fail(std::string("unexpected error: ") + e.what());
  }
}
