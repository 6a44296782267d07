// launch: 128 128 16384 2,2,128 128 17408 timing-only
#include "loom_device.cuh"
extern "C" __global__ void __launch_bounds__(128)
k_matmul(const float* __restrict__ A,
    const float* __restrict__ B,
    float* __restrict__ out) {
  // ---- shared memory: 17408 bytes ----
  extern __shared__ __align__(128) unsigned char loom_smem[];
  float* const A_s = reinterpret_cast<float*>(loom_smem + 0);
  float* const B_s = reinterpret_cast<float*>(loom_smem + 8704);
  // ---- scheduler: the tile this CTA computes ----
  const int s = blockIdx.z;
  const int m_b = blockIdx.y;
  const int n_b = blockIdx.x;
  // ---- this thread's cells within the tile ----
  const int m_t = threadIdx.x / 16;
  const int n_t = threadIdx.x % 16;
  float acc3[8][4];
  #pragma unroll
  for (int m_r = 0; m_r < 8; ++m_r) {  // register
    #pragma unroll
    for (int n_v = 0; n_v < 4; ++n_v) {  // register
      acc3[m_r][n_v] = 0.0f;
    }
  }
  float A_s_v[2][4];
  float B_s_v[2][4];
  // ---- mainloop: accumulate over the reduction ----
  #pragma unroll
  for (int A_s_c = 0; A_s_c < 2; ++A_s_c) {  // register
    const int A_s_e = A_s_c * 128 + threadIdx.x;
    loom::ld_v4_f32(&A_s_v[A_s_c][0], &A[(m_b * 64 + A_s_e / 4) * 16384 + s * 128 + A_s_e % 4 * 4]);
  }
  #pragma unroll
  for (int B_s_c = 0; B_s_c < 2; ++B_s_c) {  // register
    const int B_s_e = B_s_c * 128 + threadIdx.x;
    loom::ld_v4_f32(&B_s_v[B_s_c][0], &B[(s * 128 + B_s_e / 16) * 128 + n_b * 64 + B_s_e % 16 * 4]);
  }
  #pragma unroll
  for (int A_s_c = 0; A_s_c < 2; ++A_s_c) {  // register
    const int A_s_e = A_s_c * 128 + threadIdx.x;
    loom::st_f32(&A_s[A_s_e % 4 * 272 + A_s_e / 4], A_s_v[A_s_c][0]);
    loom::st_f32(&A_s[A_s_e % 4 * 272 + A_s_e / 4 + 68], A_s_v[A_s_c][1]);
    loom::st_f32(&A_s[A_s_e % 4 * 272 + A_s_e / 4 + 136], A_s_v[A_s_c][2]);
    loom::st_f32(&A_s[A_s_e % 4 * 272 + A_s_e / 4 + 204], A_s_v[A_s_c][3]);
  }
  #pragma unroll
  for (int B_s_c = 0; B_s_c < 2; ++B_s_c) {  // register
    const int B_s_e = B_s_c * 128 + threadIdx.x;
    loom::st_v4_f32(&B_s[B_s_e / 16 * 68 + B_s_e % 16 * 4], &B_s_v[B_s_c][0]);
  }
  __syncthreads();
  for (int k_o = 0; k_o < 8; ++k_o) {
    if (k_o + 1 < 8) {
      #pragma unroll
      for (int A_s_c = 0; A_s_c < 2; ++A_s_c) {  // register
        const int A_s_e = A_s_c * 128 + threadIdx.x;
        loom::ld_v4_f32(&A_s_v[A_s_c][0], &A[(m_b * 64 + A_s_e / 4) * 16384 + s * 128 + (k_o + 1) * 16 + A_s_e % 4 * 4]);
      }
      #pragma unroll
      for (int B_s_c = 0; B_s_c < 2; ++B_s_c) {  // register
        const int B_s_e = B_s_c * 128 + threadIdx.x;
        loom::ld_v4_f32(&B_s_v[B_s_c][0], &B[(s * 128 + (k_o + 1) * 16 + B_s_e / 16) * 128 + n_b * 64 + B_s_e % 16 * 4]);
      }
    }
    #pragma unroll
    for (int k_i = 0; k_i < 16; ++k_i) {
      float in0[8];
      #pragma unroll
      for (int m_r = 0; m_r < 2; ++m_r) {  // register
        loom::ld_v4_f32(&in0[m_r * 4], &A_s[k_o % 2 * 1088 + k_i * 68 + m_t * 8 + m_r * 4]);
      }
      float in1[4];
      loom::ld_v4_f32(&in1[0], &B_s[k_o % 2 * 1088 + k_i * 68 + n_t * 4]);
      #pragma unroll
      for (int m_r = 0; m_r < 8; ++m_r) {  // register
        #pragma unroll
        for (int n_v = 0; n_v < 4; ++n_v) {  // register
          loom::fma_f32(acc3[m_r][n_v], in0[m_r], in1[n_v]);
        }
      }
    }
    if (k_o + 1 < 8) {
      #pragma unroll
      for (int A_s_c = 0; A_s_c < 2; ++A_s_c) {  // register
        const int A_s_e = A_s_c * 128 + threadIdx.x;
        loom::st_f32(&A_s[(k_o + 1) % 2 * 1088 + A_s_e % 4 * 272 + A_s_e / 4], A_s_v[A_s_c][0]);
        loom::st_f32(&A_s[(k_o + 1) % 2 * 1088 + A_s_e % 4 * 272 + A_s_e / 4 + 68], A_s_v[A_s_c][1]);
        loom::st_f32(&A_s[(k_o + 1) % 2 * 1088 + A_s_e % 4 * 272 + A_s_e / 4 + 136], A_s_v[A_s_c][2]);
        loom::st_f32(&A_s[(k_o + 1) % 2 * 1088 + A_s_e % 4 * 272 + A_s_e / 4 + 204], A_s_v[A_s_c][3]);
      }
      #pragma unroll
      for (int B_s_c = 0; B_s_c < 2; ++B_s_c) {  // register
        const int B_s_e = B_s_c * 128 + threadIdx.x;
        loom::st_v4_f32(&B_s[(k_o + 1) % 2 * 1088 + B_s_e / 16 * 68 + B_s_e % 16 * 4], &B_s_v[B_s_c][0]);
      }
    }
    __syncthreads();
  }
  // ---- epilogue: fused elementwise ops and the store ----
  #pragma unroll
  for (int m_r = 0; m_r < 8; ++m_r) {  // register
    if (s == 0) loom::red_add_v4_f32(&out[(m_b * 64 + m_t * 8 + m_r) * 128 + n_b * 64 + n_t * 4], &acc3[m_r][0]);
  }
}
