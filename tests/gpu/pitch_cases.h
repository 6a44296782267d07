// The pitched-operand GPU cases (tests/gpu/test_pitch.cpp), shared with the CPU test that
// compiles each with NVRTC (tests/cpu/driver/test_pitch_compile.cpp).
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace loom {

struct PitchCase {
  std::string expr, knobs, family;  // family: a substring the CUDA must hold
};

inline void PrintTo(const PitchCase& c, std::ostream* os) { *os << c.expr << " knobs " << c.knobs; }

inline std::vector<PitchCase> pitch_cases() {
  const std::string tma = "ATOM=wgmma_bf16,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,WM=2,BN=128";
  return {
      // wgmma + TMA: 16-byte pitches, a column slice, a transposed view, a batch stride.
      {"matmul(A[1024,1000|1088]:bf16, B[1000,512|576]:bf16)", tma, "wgmma"},
      {"matmul(A[512,768|1024]:bf16, B[384,768|800]:bf16.T)", tma, "wgmma"},
      {"matmul(A[768,512|520]:bf16.T, B[768,256|320]:bf16)", tma, "wgmma"},
      {"bmm(A[3,256,128|65536,136]:bf16, B[3,128,192|40960,200]:bf16)", tma, "wgmma"},
      {"add(relu(linear(X[512,256|264]:bf16, W[384,256|272]:bf16, b[384]:bf16)), "
       "R[512,384|400]:bf16)", tma, "wgmma"},
      // The sm_90a defaults: TMA for 16-byte pitches, realigned copies for odd ones (on
      // wgmma with a wave of tiles, on mma.sync below it), a batch stride of 8-byte units.
      {"matmul(A[2048,1000|1024]:bf16, B[1000,1024]:bf16)", "", "wgmma"},
      {"matmul(A[2048,999|1001]:bf16, B[999,2048|2049]:bf16)", "", "wgmma"},
      {"matmul(A[1000,999|1001]:bf16, B[999,520|521]:bf16)", "", "mma"},
      {"matmul(A[1000,999|1001]:f16, B[520,999|1003]:f16.T)", "", "mma"},
      {"bmm(A[4,1024,1024|1048580,1024]:bf16, B[4,1024,1024]:bf16)", "", "mma"},
      {"linear(X[8,512,1024|600000,1040]:bf16, W[768,1024]:bf16)", "", "wgmma"},
      // A pitched output: the TMA-store epilogue, the defaults.
      {"relu(matmul(A[512,256]:bf16, B[256,384]:bf16, out_pitch=448))", tma + ",EPILOGUE=tma_store",
       "wgmma"},
      {"add(linear(X[2048,1024|1032]:bf16, W[1000,1024]:bf16, out_pitch=1024), b[1000]:bf16)", "",
       "wgmma"},
      // mma.sync and SIMT.
      {"matmul(A[300,200|208]:f16, B[200,136|144]:f16)",
       "ATOM=mma_f16,WM=2,WN=2,FM=2,FN=2,BK=32,STAGE=cp_async,STAGES=3", "mma"},
      {"matmul(A[300,200|203]:bf16, B[136,200|201]:bf16.T)",
       "ATOM=mma_bf16,WM=2,WN=2,FM=2,FN=2,BK=16,STAGE=sync,STAGES=2", "mma"},
      {"matmul(A[300,200|203]:f32, B[200,136|139]:f32)", "ATOM=fma", "fma"},
      {"bmm(A[2,100,64|10000,70]:f32, B[2,64,72|5000,75]:f32)", "ATOM=fma", "fma"},
  };
}

}  // namespace loom
