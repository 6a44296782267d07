// What ptxas says a kernel costs: registers, shared memory, stack and spills. NVRTC
// prints it into the program log when given --ptxas-options=-v, with no GPU needed, so
// CPU tests can check "this knob set does not spill" and the tuner can prune by it.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace loom {

struct ResourceReport {
  int registers = -1;  // -1: ptxas printed no "Used N registers" line for the kernel
  int64_t shared_bytes = 0;  // static shared memory only; dynamic smem is a launch choice
  int64_t stack_frame_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t constant_bytes = 0;  // summed over the cmem[N] banks ptxas lists
  int barriers = 0;
  // Non-empty when ptxas serialized the kernel's wgmma.mma_async instructions (its
  // "Potential Performance Loss" notes, C7510..C7512): each product then waits for the one
  // before it, a fraction of the tensor cores' rate with no spill to show for it. Holds
  // ptxas's reason ("insufficient register resources", ..).
  std::string wgmma_serialized;
  bool operator==(const ResourceReport&) const = default;
};

// Parses ptxas -v output into one report per entry function (kernel), keyed by the
// symbol ptxas names (mangled unless the kernel is extern "C"). Non-entry functions'
// "Function properties" are ignored: their stack is already in the caller's frame.
std::map<std::string, ResourceReport> parse_ptxas_report(const std::string& log);

// The kernels whose wgmma ptxas serialized, each with ptxas's reason, from the same log
// (parse_ptxas_report fills ResourceReport::wgmma_serialized from it; the cubin cache,
// which keeps the log, derives it again on a hit).
std::map<std::string, std::string> serialized_wgmma(const std::string& log);

}  // namespace loom
