#include "driver/run_memory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "bench/report.h"

namespace loom {
namespace {

// Element counts fit int64 with room to spare (frontend/sizes.h caps each tensor at 2^48
// bytes), so these sums of a few dozen such counts times 8 cannot overflow.
int64_t numel(const std::vector<Dim>& shape) {
  int64_t n = 1;
  for (const Dim& d : shape) n *= d.value;
  return n;
}

// Elements of storage a graph tensor reaches: its element count, or for a view with
// strides (`X[M,K|1056]`, `out_pitch=`) one past its last element, the same rule as the
// frontend's size check (frontend/sizes.cpp) and the executor's allocation.
int64_t storage_elems(const std::vector<Dim>& shape, const std::vector<int64_t>& pitch) {
  if (pitch.empty()) return numel(shape);
  const size_t r = shape.size();
  int64_t stride = 1, last = shape[r - 1].value - 1;
  for (size_t i = r - 1; i-- > 0;) {
    const size_t from_end = r - 2 - i;
    stride = from_end < pitch.size() ? pitch[pitch.size() - 1 - from_end] : shape[i + 1].value * stride;
    last += (shape[i].value - 1) * stride;
  }
  return last + 1;
}

int64_t sum(const std::vector<MemoryPart>& parts) {
  int64_t s = 0;
  for (const auto& p : parts) s += p.bytes;
  return s;
}

std::string bytes_text(int64_t b) { return std::to_string(b) + " bytes (" + format_bytes(b) + ")"; }

std::string parts_text(const std::vector<MemoryPart>& parts) {
  std::string s;
  for (const auto& p : parts)
    if (p.bytes > 0) s += (s.empty() ? "" : " + ") + p.what + " " + format_bytes(p.bytes);
  return s;
}

}  // namespace

int64_t RunMemoryNeed::host_bytes() const { return sum(host); }
int64_t RunMemoryNeed::device_bytes() const { return sum(device); }

RunMemoryNeed run_memory_need(const Graph& g, const KernelProgram* kp, bool bench) {
  int64_t in_elems = 0, in_bytes = 0, op_elems = 0;
  const Node* contraction = nullptr;
  for (const Node& n : g.nodes) {
    if (n.kind == OpKind::Input) {
      const int64_t elems = storage_elems(n.storage_shape(), n.pitch);
      in_elems += elems;
      in_bytes += elems * dtype_bytes(n.dtype);
    } else {
      op_elems += numel(n.shape);
    }
    if (n.kind == OpKind::Matmul) contraction = &n;
  }
  const Node& result = g.node(g.result());
  const int64_t out_elems = storage_elems(result.shape, g.out_pitch);

  int64_t program_elems = in_elems + out_elems, program_bytes = in_bytes + out_elems * dtype_bytes(result.dtype);
  if (kp) {
    program_elems = program_bytes = 0;
    Expr::Env env;
    for (const auto& t : kp->tensors) {
      if (t.role == TensorRole::Shared) continue;
      // What the executor allocates: a pitched view's footprint (its rows at their pitch).
      const int64_t n = (t.pitched() ? t.footprint() : t.numel()).eval(env);
      program_elems += n;
      program_bytes += n * dtype_bytes(t.dtype);
    }
  }

  RunMemoryNeed need;
  need.device.push_back({"kernel tensors", program_bytes});
  need.host.push_back({"kernel tensors as f64", 8 * program_elems});
  need.host.push_back({"inputs for verification and the reference", 2 * 8 * in_elems});
  need.host.push_back({"fp64 reference", 8 * op_elems});
  need.host.push_back({"downloaded output", 8 * out_elems});
  if (contraction) {
    const int64_t a = numel(g.node(contraction->inputs[0]).shape);
    const int64_t b = numel(g.node(contraction->inputs[1]).shape);
    const int64_t c = numel(contraction->shape);
    need.device.push_back({"fp64 reference (A, B, C)", 8 * (a + b + c)});
    if (bench) {
      need.device.push_back({"cuBLAS output", c * dtype_bytes(contraction->dtype)});
      need.host.push_back({"cuBLAS output and its reference", 2 * 8 * c});
    }
  }
  return need;
}

std::string memory_refusal(const RunMemoryNeed& need, const MemoryAvailable& have) {
  const bool host_short = have.host && need.host_bytes() > *have.host;
  const bool device_short = have.device && need.device_bytes() > *have.device;
  if (!host_short && !device_short) return "";
  std::string gpu = have.device_name.empty() ? "the GPU" : "the GPU (" + have.device_name + ")";
  std::string out = "the problem does not fit in ";
  out += host_short && device_short ? "host or GPU memory" : host_short ? "host memory" : "GPU memory";
  out += ": it needs " + bytes_text(need.host_bytes()) + " on the host (" + parts_text(need.host) +
         ") and " + bytes_text(need.device_bytes()) + " on the GPU (" + parts_text(need.device) +
         "); the host has " +
         (have.host ? bytes_text(*have.host) + " available" : std::string("an unknown amount")) +
         ", " + gpu + " " +
         (have.device ? bytes_text(*have.device) + " free" : std::string("was not asked yet")) +
         ". Nothing was allocated; run a smaller problem (or `loom compile` it: compiling "
         "needs no memory for the tensors)";
  return out;
}

std::optional<int64_t> host_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    std::string key, unit;
    int64_t kib = 0;
    if (in >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return int64_t(pages) * int64_t(page);
  return std::nullopt;
}

}  // namespace loom
