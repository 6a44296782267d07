#include "runtime/nvrtc.h"

#include <nvrtc.h>

#include <chrono>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "runtime/cubin_cache.h"
#include "runtime/sha256.h"

namespace loom {
namespace {

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return;
  throw Error(std::string(what) + " failed: " + nvrtcGetErrorString(r));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using ProgramPtr = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

// NVRTC can only emit a cubin for a real architecture it knows; checking up front turns
// a cryptic "invalid option" into a message that lists what would work.
void check_arch(const std::string& arch) {
  static const std::regex kArch(R"(sm_(\d+)[af]?)");
  std::smatch m;
  int num_archs = 0;
  check_nvrtc(nvrtcGetNumSupportedArchs(&num_archs), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(num_archs);
  check_nvrtc(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  bool known = false;
  if (std::regex_match(arch, m, kArch)) {
    int n = std::stoi(m[1]);
    for (int a : archs) known |= a == n;
  }
  if (known) return;
  std::string list;
  for (int a : archs) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(a);
  throw Error("cannot compile for arch '" + arch + "': NVRTC " + nvrtc_version_string() +
              " produces cubins for " + list +
              " (add the 'a' suffix, e.g. sm_90a, for wgmma/setmaxnreg)");
}

const std::string* find_text(const CompileRequest& req, const std::string& file) {
  if (file == req.name) return &req.source;
  for (const auto& [name, contents] : req.headers)
    if (name == file) return &contents;
  return nullptr;
}

// The lines around `line` (1-based) with numbers and a '>' on the line itself.
std::string excerpt(const std::string& text, int line, int context) {
  const size_t width = std::to_string(line + context).size();
  std::istringstream in(text);
  std::string s, out;
  for (int n = 1; std::getline(in, s) && n <= line + context; ++n) {
    if (n < line - context) continue;
    std::string num = std::to_string(n);
    out += (n == line ? "> " : "  ") + std::string(width - num.size(), ' ') + num + " | " + s +
           "\n";
  }
  return out;
}

std::string compile_error_message(const CompileRequest& req, const std::string& log) {
  // NVRTC reports front-end errors as `file(LINE): error: ...`.
  static const std::regex kError(R"((\S+)\((\d+)\): (?:catastrophic )?error)");
  constexpr int kMaxExcerpts = 10;
  std::string msg = "NVRTC could not compile " + req.name + " for " + req.arch +
                    " (the kernel source is wrong: fix the generator or the kernel text)\n"
                    "--- NVRTC log ---\n" + log;
  if (!log.empty() && log.back() != '\n') msg += '\n';
  std::set<std::pair<std::string, int>> shown;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kError);
       it != std::sregex_iterator() && int(shown.size()) < kMaxExcerpts; ++it) {
    std::string file = (*it)[1];
    int line = std::stoi((*it)[2]);
    if (!shown.insert({file, line}).second) continue;
    const std::string* text = find_text(req, file);
    if (!text) continue;
    msg += "--- " + file + ":" + std::to_string(line) + " ---\n" + excerpt(*text, line, 2);
  }
  return msg;
}

CompileResult compile_uncached(const CompileRequest& req) {
  check_arch(req.arch);
  std::vector<const char*> header_texts, header_names;
  for (const auto& [name, contents] : req.headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(contents.c_str());
  }
  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtcCreateProgram(&raw, req.source.c_str(), req.name.c_str(),
                                 int(req.headers.size()), header_texts.data(),
                                 header_names.data()),
              "nvrtcCreateProgram");
  ProgramPtr prog(raw);

  std::vector<std::string> options = compile_options(req);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  nvrtcResult rc = nvrtcCompileProgram(prog.get(), int(argv.size()), argv.data());

  CompileResult out;
  size_t log_size = 0;
  check_nvrtc(nvrtcGetProgramLogSize(prog.get(), &log_size), "nvrtcGetProgramLogSize");
  std::string log(log_size, '\0');
  check_nvrtc(nvrtcGetProgramLog(prog.get(), log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && log.back() == '\0') log.pop_back();
  out.log = std::move(log);

  if (rc == NVRTC_ERROR_COMPILATION) throw Error(compile_error_message(req, out.log));
  if (rc == NVRTC_ERROR_INVALID_OPTION) {
    std::string opts;
    for (const auto& o : options) opts += " " + o;
    throw Error("NVRTC rejected an option in:" + opts + "\n" + out.log);
  }
  check_nvrtc(rc, "nvrtcCompileProgram");

  size_t cubin_size = 0;
  check_nvrtc(nvrtcGetCUBINSize(prog.get(), &cubin_size), "nvrtcGetCUBINSize");
  if (cubin_size == 0)
    throw Error("NVRTC produced no cubin for " + req.arch +
                ": the arch must be a real GPU (sm_XX), not a virtual one (compute_XX)");
  out.cubin.resize(cubin_size);
  check_nvrtc(nvrtcGetCUBIN(prog.get(), out.cubin.data()), "nvrtcGetCUBIN");
  out.resources = parse_ptxas_report(out.log);
  return out;
}

}  // namespace

std::vector<std::string> compile_options(const CompileRequest& req) {
  std::vector<std::string> o = {"--gpu-architecture=" + req.arch, "-std=c++17",
                                "--ptxas-options=-v", "-lineinfo", "-default-device"};
  // From 12.9 NVRTC answers a repeated compile from the driver's compute cache without
  // running ptxas, and the -v resource report (registers, spills) comes back empty — the
  // report the spill checks and the tuner's pruning read. Loom caches cubins itself.
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && (major > 12 || (major == 12 && minor >= 9)))
    o.push_back("--no-cache");
  o.insert(o.end(), req.extra_options.begin(), req.extra_options.end());
  return o;
}

std::string compile_cache_key(const CompileRequest& req) {
  Sha256 h;
  h.update_field("loom-cubin-key-v1");
  h.update_field(nvrtc_version_string());
  h.update_field(req.arch);
  for (const auto& o : compile_options(req)) h.update_field(o);
  h.update_field(req.name);
  h.update_field(req.source);
  for (const auto& [name, contents] : req.headers) {
    h.update_field(name);
    h.update_field(contents);
  }
  return h.hex_digest();
}

std::string nvrtc_version_string() {
  static const std::string version = [] {
    int major = 0, minor = 0;
    check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return std::to_string(major) + "." + std::to_string(minor);
  }();
  return version;
}

CompileResult compile(const CompileRequest& req, CubinCache* cache) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  std::string key;
  if (cache) {
    key = compile_cache_key(req);
    if (auto hit = cache->lookup(key)) {
      hit->compile_ms = elapsed_ms();
      return std::move(*hit);
    }
  }
  CompileResult out = compile_uncached(req);
  out.cache_key = key;
  out.compile_ms = elapsed_ms();
  if (cache) cache->store(key, out);
  return out;
}

}  // namespace loom
