#include "runtime/ptxas_report.h"

#include <regex>
#include <sstream>

namespace loom {
namespace {

// Formats verified against NVRTC 13.0 (sm_80 and sm_90a):
//   ptxas info    : Compiling entry function 'k3' for 'sm_90a'
//   ptxas info    : Function properties for k3
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]
const std::regex kEntry(R"(Compiling entry function '([^']+)')");
const std::regex kProperties(R"(Function properties for (\S+))");
const std::regex kStack(
    R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
const std::regex kUsed(R"(Used (\d+) registers)");
const std::regex kBarriers(R"(used (\d+) barriers)");
const std::regex kSmem(R"((\d+) bytes smem)");
const std::regex kCmem(R"((\d+) bytes cmem\[\d+\])");
// ptxas (CUDA 12.3 - 13.0) on sm_90a:
//   ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are
//   serialized due to insufficient register resources for the function 'k_attention'
// (one line; other reasons: extern calls, non-wgmma instructions defining accumulator
// registers of a wgmma between start and end of the pipeline stage, ..).
const std::regex kSerialized(
    R"(wgmma\.mma_async instructions are serialized due to (.+?) (?:for|in) the function '([^']+)')");

struct StackInfo {
  int64_t frame = 0, spill_stores = 0, spill_loads = 0;
};

}  // namespace

std::map<std::string, std::string> serialized_wgmma(const std::string& log) {
  std::map<std::string, std::string> out;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, kSerialized)) {
      std::string& why = out[m[2]];
      if (why.find(m[1].str()) == std::string::npos) why += (why.empty() ? "" : "; ") + m[1].str();
    }
  return out;
}

std::map<std::string, ResourceReport> parse_ptxas_report(const std::string& log) {
  std::map<std::string, ResourceReport> entries;
  std::map<std::string, StackInfo> stacks;
  std::string entry;       // the kernel that the next "Used ..." line describes
  std::string properties;  // the function that the next stack-frame line describes
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kEntry)) {
      entry = m[1];
      entries[entry];
    } else if (std::regex_search(line, m, kProperties)) {
      properties = m[1];
    } else if (std::regex_search(line, m, kStack)) {
      if (properties.empty()) continue;
      stacks[properties] = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3])};
      properties.clear();
    } else if (std::regex_search(line, m, kUsed)) {
      if (entry.empty()) continue;
      ResourceReport& r = entries[entry];
      r.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, kBarriers)) r.barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, kSmem)) r.shared_bytes = std::stoll(m[1]);
      r.constant_bytes = 0;
      for (auto it = std::sregex_iterator(line.begin(), line.end(), kCmem);
           it != std::sregex_iterator(); ++it)
        r.constant_bytes += std::stoll((*it)[1]);
      entry.clear();
    }
  }
  for (const auto& [name, why] : serialized_wgmma(log))
    if (auto it = entries.find(name); it != entries.end()) it->second.wgmma_serialized = why;
  for (auto& [name, r] : entries) {
    auto it = stacks.find(name);
    if (it == stacks.end()) continue;
    r.stack_frame_bytes = it->second.frame;
    r.spill_store_bytes = it->second.spill_stores;
    r.spill_load_bytes = it->second.spill_loads;
  }
  return entries;
}

}  // namespace loom
