// Whether `loom run` can hold a problem: refused before anything is allocated, with the
// bytes it needs and the bytes the host and the GPU have, instead of a cudaMalloc or
// std::bad_alloc failure (or the OOM killer) half way through.
//
// What a run holds at its peak (run_expression, driver/run.cpp), every buffer counted as
// if live at once (so a slight overestimate; the rotated input sets of --bench are not
// counted: they are planned within half of the free memory left, bench/timing_plan.h):
//   GPU:  the kernel program's tensors in their dtypes (inputs, output, workspace such as
//         split-K's partial sums), the fp64 reference's copies of the contraction's A, B
//         and C (cuBLAS DGEMM), and with --bench cuBLAS's own output C.
//   host: every value is held as f64 (8 bytes): the program's tensors (inputs and the
//         poisoned output), the inputs again for verification and for the reference,
//         every op's result in the reference, the downloaded output; with --bench the
//         cuBLAS output downloaded and checked.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/program.h"

namespace loom {

struct MemoryPart {
  std::string what;
  int64_t bytes = 0;
};

struct RunMemoryNeed {
  std::vector<MemoryPart> host, device;
  int64_t host_bytes() const;
  int64_t device_bytes() const;
};

// What a run of `g` (sizes bound) needs. `kp` is the compiled program when there is one
// (its tensors, workspace included); without it the inputs and the result stand in for
// the program's tensors, a lower bound usable before compiling (no GPU needed).
RunMemoryNeed run_memory_need(const Graph& g, const KernelProgram* kp, bool bench);

struct MemoryAvailable {
  std::optional<int64_t> host;    // bytes the host can still give (MemAvailable)
  std::optional<int64_t> device;  // bytes free on the GPU; nullopt: not asked yet
  std::string device_name;
};

// Empty when `need` fits `have` (a side whose availability is unknown is not judged),
// else the refusal: each side's parts and total, what the host and the GPU have.
std::string memory_refusal(const RunMemoryNeed& need, const MemoryAvailable& have);

// The memory the host can give without swapping: MemAvailable of /proc/meminfo, else
// sysconf's available pages; nullopt when neither can be read.
std::optional<int64_t> host_available_bytes();

}  // namespace loom
