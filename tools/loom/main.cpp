// The `loom` command. See docs/cli.md.
//
//   loom compile -c EXPR [--ir loop|tile|kernel|cuda] [-v|-vv] [--knobs K=V,..]
//                [--target sm_90a|sm_80|..] [--dims M=..,N=..] [-o FILE]
//   loom run -c EXPR [--check] [--bench] [--knobs ..] [--seed N] [--dims ..] [--reps N]
//            [--l2 auto|rotate|read|flush|off]
//   loom demo          what `make run` shows: pipeline, tile IR, CUDA, resources, run
//   loom passes        the pipeline, with each pass's invariant and knobs
//   loom knobs         every knob, its range and the pass that reads it
//   loom device        the GPU Loom would use, or why there is none
//   loom db ...        the tuning database (src/tune/db_cli.h)
//   loom tune ...      the tuner (src/tune/tune_cli.h)
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
#include "driver/ladder.h"
#include "driver/run.h"
#include "driver/write_file.h"
#include "frontend/parser.h"
#include "ir/diff.h"
#include "ir/error.h"
#include "ir/printable.h"
#include "runtime/cubin_cache.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"
#include "passes/bank_conflicts.h"
#include "tune/db_cli.h"
#include "tune/tune_cli.h"
#include "tune/tuned_knobs.h"
#include "tune/worker_main.h"

namespace loom {
namespace {

const char* kUsage =
    "usage: loom <command> [options]\n"
    "  compile -c EXPR [--ir loop|tile|kernel|cuda] [-v|-vv] [--knobs K=V,..]\n"
    "          [--target sm_90a|sm_80|sm_86|sm_89|sm_90] [--dims M=..,N=..] [-o FILE]\n"
    "          [--cubin FILE]   (also write the NVRTC cubin, e.g. for cuobjdump --dump-sass)\n"
    "  run     -c EXPR [--check] [--bench] [--knobs K=V,..] [--seed N] [--dims ..] [--reps N]\n"
    "          [--device N]   (CUDA ordinal; default 0)\n"
    "          [--l2 auto|rotate|read|flush|off]   (cold L2 per timed launch: rotated input\n"
    "          sets, or a read or write flush before each; auto rotates inputs under L2, else reads)\n"
    "          compile and run take the tuning database's knobs for the shape on this GPU\n"
    "          when it has a record (--no-db: never); explicit knobs still win\n"
    "  ladder  sgemm|splitk|swizzle|hgemm|tf32|hopper [--shape MxNxK] [--dtype f16|bf16] [--seed N] [--reps N]\n"
    "          [--l2 ..]\n"
    "          run an article's progression of knob sets, verified and timed vs cuBLAS\n"
    "  ladder  flash [--shape BxHxSxD] [--dtype bf16|f16] [--causal] [--seed N] [--reps N] [--l2 ..]\n"
    "          the flash-attention articles' progression, verified and timed (FA2 ratio:\n"
    "          scripts/attention_bench.py --ladder flash)\n"
    "  demo    compile the default GEMM, show every stage, and run it when there is a GPU\n"
    "  passes  list the pipeline\n"
    "  knobs   list the knobs\n"
    "  device  describe the GPU\n"
    "  tune    -c EXPR | --suite FILE [--budget S] [--devices 0,1]: search the knobs on the GPU,\n"
    "          verify every candidate, record the winner (loom tune --help)\n"
    "  db      list|show|clear|export|import|path: the tuning database (loom db help)\n"
    "Knobs also come from LOOM_KNOBS (the command line wins).\n";

constexpr const char* kDefaultGemm = "matmul(A[4096,4096]:f32, B[4096,4096]:f32)";

struct Args {
  std::string command, expr, ir = "cuda", knobs, dims, out_file, cubin_file;
  std::optional<std::string> target;  // given (even as ''): checked, never defaulted
  std::string ladder, shape, dtype;
  L2Request l2 = L2Request::automatic;
  int verbose = 0;
  bool check = false, bench = false, no_db = false, causal = false;
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
    std::cout << kUsage;
    std::exit(0);
  }
  OnceOptions once;
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
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
    else if (f == "--device" && a.command == "run") a.device = int(integer(0, kMaxDevice));
    else if (f == "--l2") a.l2 = parse_l2_request(value());
    else if (f == "--shape") a.shape = value();
    else if (f == "--dtype") a.dtype = value();
    else if (f == "--causal" && a.command == "ladder") a.causal = true;
    else if (f == "-h" || f == "--help") { std::cout << kUsage; std::exit(0); }
    else if (a.command == "ladder" && a.ladder.empty() && !f.empty() && f[0] != '-') a.ladder = f;
    else usage_error("unknown option '" + f + "'");
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
  return t.str();
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
  opt.target = Target::for_arch(a.target.value_or("sm_90a"));
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
  } else if (std::string why; auto dev = probe_device(0, &why)) {
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
  std::cout << format_run_report(r);
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
  opt.target = Target::for_arch(dev ? dev->arch() : "sm_90a");
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
  RunOptions opt;
  opt.seed = a.seed;
  opt.timing.reps = a.reps;
  opt.l2 = a.l2;
  opt.command_line = a.command_line;
  std::cout << "ladder " << l.name << ": " << l.expression << " (" << l.steps.size()
            << " steps, each verified, then timed"
            << (l.reference.empty() ? "" : " interleaved with " + l.reference) << ")\n"
            << std::flush;
  auto rows = run_ladder(l, opt, [&](const LadderRow& r) {
    std::string timed = format_us(r.us) + " us";
    if (!l.reference.empty()) timed += ", " + format_ratio(r.cublas_us / r.us) + " " + l.reference;
    std::cout << "  " << r.step.name << ": "
              << (r.ok ? timed : "not run: " + r.error.substr(0, r.error.find('\n'))) << "\n"
              << std::flush;
  });
  std::cout << "\n" << format_ladder(l, rows);
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
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "loom: unexpected error: " << loom::printable(e.what(), true) << "\n";
    return 1;
  }
}
