// What a tuning record is for: one GPU (and the CUDA software stack on it), one op, one
// shape. Keys are plain text so `loom db list` can print them and a person can read a
// database file; two spellings of one computation share a key because the op signature
// is derived from the parsed Graph, not from the expression text.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "runtime/device.h"

namespace loom::tune {

struct TuningKey {
  std::string gpu;        // DeviceInfo::name, e.g. "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int cuda_runtime = 0;   // cudart version, e.g. 13000
  int driver = 0;         // driver's CUDA version, e.g. 13000
  std::string op;         // canonical signature, e.g. "add(matmul(bf16[M,K], bf16[N,K].T):bf16, bf16[N]):bf16"
  std::string shape;      // the sizes, e.g. "M=4096,N=4096,K=4096" or "M=*,N=4096,K=4096" (M at run time); attention: B,Hq,Hkv,Sq,Sk,D

  // One line: "NVIDIA H100 80GB HBM3 (132 SMs, CUDA 13.0, driver 13.0) | <op> | <shape>".
  std::string str() const;
  // Same GPU model, op and shape, whatever the CUDA runtime and driver versions: the knobs
  // of such a record compile and run there too (shipped defaults match this way).
  bool same_problem(const TuningKey& o) const;
  bool operator==(const TuningKey& o) const = default;
  auto operator<=>(const TuningKey& o) const = default;
};

// The canonical op signature of a graph: tensor names dropped, dims named by their role
// in the contraction (batch, M, N, K; "1" for a broadcast dim), operand dtypes and
// storage orientation (".T") kept, every op's output dtype kept. Immediates in
// elementwise ops print as "scalar": their value does not change the kernel's schedule.
// Attention: "attention(bf16[B,Hq,Sq,D], bf16[B,Hkv,Sk,D], bf16[B,Hkv,Sk,D], causal=true
// [, lse=true]):bf16" (the scale left out likewise), its shape "B=4,Hq=16,Hkv=16,Sq=4096,
// Sk=4096,D=128".
std::string op_signature(const Graph& g);

// How a key's shape spells a contraction's run-time size: "M=*,N=4096,K=4096".
inline constexpr const char* kRunTimeSize = "*";

// The key of `g` on `dev`: a contraction's symbolic (run-time) sizes spelled
// kRunTimeSize; nullopt for an attention with a symbolic size, with the reason (the
// symbol and how to bind it) in why_not.
std::optional<TuningKey> key_for(const Graph& g, const DeviceInfo& dev,
                                 std::string* why_not = nullptr);

// "13.0" for 13000.
std::string cuda_version_text(int version);

// Why `key` is not one Loom could have made, or "" when it is: the GPU name is printable
// text (no control characters, valid UTF-8, at most 256 bytes), the SM count is 1..10000,
// the CUDA runtime and driver versions are 0 (unknown: a device profile) or a CUDA version
// number up to 999999, the op parses as an op signature (the grammar op_signature
// prints: calls, operands `dtype[dims]` with an optional `.T`, `scalar`, and attention's
// `causal=`/`lse=`) with a contraction or an attention, and the shape is NAME=SIZE pairs
// (sizes 1..2^40, or kRunTimeSize for a contraction; no name twice) naming exactly the
// dims the op names. The tuning database
// checks every record it reads, imports or writes with it (tune/db_file.h).
std::string key_problem(const TuningKey& key);

// Why `text` is not printable text for a database field, or "": valid UTF-8 with no
// control character (C0, DEL or C1; a tab only where allow_tab is set) and at most
// max_bytes long. `what` names the field in the message.
// `text` as a message may quote it: bytes outside printable ASCII as \xNN, cut to
// max_bytes with "..." (a damaged or hostile line must not drive the user's terminal).
std::string quoted_text(std::string_view text, size_t max_bytes = 60);

std::string text_problem(const std::string& what, std::string_view text, size_t max_bytes,
                         bool allow_tab = false);

}  // namespace loom::tune
