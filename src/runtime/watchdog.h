// Waiting for the GPU without hanging the process: a generated kernel whose pipeline
// waits for an arrival or bytes that never come (a wrong mbarrier count, a TMA box that
// delivers less than expect_tx says) spins forever, and cudaStreamSynchronize with it.
// The contract is an error, never a hang, so the checked launches wait through this.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

namespace loom {

// LOOM_KERNEL_TIMEOUT_S (seconds, > 0) or 60: far above any checked launch Loom makes
// (the largest benchmarked GEMMs take milliseconds), short enough to fail a run visibly.
double kernel_timeout_s();

// cudaStreamSynchronize that gives up after `limit_s` seconds with a loom::Error naming
// `what` (e.g. the kernels and knobs) and the likely cause. A kernel still running then
// keeps the GPU busy until the process exits (the driver tears the context down), so the
// caller should let the error end the run rather than launch more work.
void sync_with_timeout(cudaStream_t stream, double limit_s, const std::string& what);

}  // namespace loom
