// Verification of a result against the fp64 reference: relative Frobenius error
// ‖out − ref‖_F / ‖ref‖_F under the per-dtype threshold of loom::verify_threshold
// (ir/dtype.h). A NaN or inf anywhere in the output fails, whatever the error norm, so
// that an output poisoned with NaN before the run fails where a kernel left it unwritten.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/interpreter.h"

namespace loom {

struct VerifyResult {
  bool passed = false;
  double rel_fro_error = 0;  // absolute Frobenius error when ‖ref‖_F = 0
  double max_abs_error = 0;
  int64_t nan_count = 0;     // NaN or inf values in the output
  int64_t worst_index = -1;  // flat index: the first non-finite value, else the largest |out − ref|
  double threshold = 0;
  std::string message;       // "PASS ..." / "FAIL ...": error, threshold, worst element
};

VerifyResult verify_output(const HostTensor& out, const HostTensor& ref, double threshold);

// For inputs that hold NaN or inf on purpose (tests/gpu/test_nan_inf.cpp): every element
// whose reference is NaN must be NaN, every ±inf the same inf, and the elements with a
// finite reference must be finite and within `threshold` (relative Frobenius error over
// them, as verify_output). The reference computes IEEE arithmetic in fp64 with NaN
// propagating through max/min/relu as in PyTorch (src/ir/stmt.cpp), so this checks that
// a kernel's specials propagate as that arithmetic says. An unwritten (NaN-poisoned)
// element passes only where the reference is NaN; verify_output covers the rest.
VerifyResult verify_ieee_output(const HostTensor& out, const HostTensor& ref, double threshold);

// The threshold for a GEMM whose mma atoms accumulate in f16 (ACC=f16): each atom of
// depth `atom_k` rounds the running sum to f16, ⌈k / atom_k⌉ times along a reduction of
// length k. That is a different numerical contract from f32 accumulation, so it has its
// own threshold, derived in docs/verification.md: verify_threshold(in, out) plus
// 4 · 2⁻¹¹ · √⌈k / atom_k⌉. Only kernels that accumulate in f16 are judged by it.
double verify_threshold_f16_accumulate(DType in, DType out, int64_t k, int atom_k);

// Storage bytes (as copied from the device) <-> HostTensor. f32 and tf32 are 4-byte
// floats, f16 and bf16 their 2-byte bit patterns, f64 doubles; HostTensor values are
// expected to be representable in the dtype (to_storage_bytes narrows, never rounds twice).
HostTensor from_device_bytes(const void* bytes, size_t nbytes, DType dtype,
                             std::vector<int64_t> shape);
std::vector<char> to_storage_bytes(const HostTensor& t);

}  // namespace loom
