// The GPU cases of epilogue operands loaded by TMA during the mainloop (EPI_LOAD=tma,
// k:056): a residual R[M, N] and a SwiGLU gate E0[M, N], shared by the GPU test
// (tests/gpu/test_hopper_gemm.cpp) and the CPU test that compiles each for sm_90a and
// checks ptxas' spills (tests/cpu/driver/test_wgmma_compile.cpp). M and N are ragged
// against the tile (the operand's boxes are zero-filled past the edges); every row is a
// multiple of 16 bytes (a tensor map's row pitch).
#pragma once
#include <string>
#include <vector>

#include "tma_store_cases.h"

namespace loom::epilogue_operand_test {

using Case = tma_store_test::Case;

// The large schedule: 128 x 256 tiles, persistent, strips of the output through 2
// buffers; the operand through `buffers` strip buffers (0: the whole tile).
inline std::string large(int stages, int epi_buffers, int load_buffers) {
  return "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=256,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=" +
         std::to_string(stages) + ",GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,"
         "EPILOGUE=tma_store,EPI_BUFFERS=" + std::to_string(epi_buffers) +
         ",EPI_LOAD=tma,EPI_LOAD_BUFFERS=" + std::to_string(load_buffers);
}

inline std::vector<Case> cases() {
  return {
      {"add(linear(X[1000,512]:bf16, W[3000,512]:bf16, b[3000]:bf16), R[1000,3000]:bf16)",
       large(3, 2, 2)},
      {"mul(silu(linear(X[1000,512]:bf16, W[3000,512]:bf16)), E0[1000,3000]:bf16)",
       large(3, 2, 2)},
      {"mul(silu(linear(X[1000,512]:bf16, W[3000,512]:bf16)), E0[1000,3000]:bf16)",
       large(4, 1, 1)},
      // Many tiles per CTA: the buffers refilled across tiles.
      {"add(linear(X[4000,256]:bf16, W[2000,256]:bf16), R[4000,2000]:bf16)", large(3, 2, 2)},
      // 128 x 128 tiles: the whole operand tile beside 4 stages.
      {"mul(silu(linear(X[1000,512]:bf16, W[3000,512]:bf16)), E0[1000,3000]:bf16)",
       "ATOM=wgmma_bf16,WM=2,WN=1,FM=1,FN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "GROUP_M=8,WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,EPI_LOAD=tma"},
      // f16, the direct epilogue (no TMA store), one CTA per tile.
      {"add(matmul(A[1000,256]:f16, B[256,1000]:f16), R[1000,1000]:f16)",
       "ATOM=wgmma_f16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "WARP_SPECIALIZE=1,EPI_LOAD=tma"},
      // An f32 residual: 32-column strips.
      {"add(matmul(A[1000,256]:bf16, B[256,1000]:bf16, out=f32), R[1000,1000]:f32)",
       "ATOM=wgmma_bf16,WM=2,WN=1,BN=128,STAGE=tma,SWIZZLE=128B,BK=64,STAGES=4,"
       "WARP_SPECIALIZE=1,PERSISTENT=1,EPILOGUE=tma_store,EPI_BUFFERS=2,EPI_LOAD=tma"},
  };
}

}  // namespace loom::epilogue_operand_test
