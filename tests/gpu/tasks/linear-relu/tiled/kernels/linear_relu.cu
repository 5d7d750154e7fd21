// y = relu(x @ w^T + b) with 64x64 output tiles per block, 16-deep slices of x and w staged in
// shared memory, and a 4x4 register tile per thread; bias and ReLU are fused into the store.
#include <cuda_runtime.h>

namespace {

constexpr int kTile = 64;
constexpr int kDepth = 16;
constexpr int kPerThread = 4;  // a thread owns a 4x4 block of outputs: 16x16 threads per tile

__global__ void linear_relu_tiled(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, int rows,
                                  int cols, int depth) {
  __shared__ float xs[kDepth][kTile + 1];
  __shared__ float ws[kDepth][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  const int linear = ty * 16 + tx;  // 256 threads load 64x16 values of each operand: 4 each
  float acc[kPerThread][kPerThread] = {};
  for (int k0 = 0; k0 < depth; k0 += kDepth) {
    for (int load = linear; load < kTile * kDepth; load += 256) {
      const int tile_row = load / kDepth, k = load % kDepth;
      const int xr = row0 + tile_row, wr = col0 + tile_row, kk = k0 + k;
      xs[k][tile_row] = (xr < rows && kk < depth) ? x[xr * depth + kk] : 0.f;
      ws[k][tile_row] = (wr < cols && kk < depth) ? w[wr * depth + kk] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      float xv[kPerThread], wv[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        xv[i] = xs[k][ty * kPerThread + i];
        wv[i] = ws[k][tx * kPerThread + i];
      }
#pragma unroll
      for (int i = 0; i < kPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) acc[i][j] += xv[i] * wv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int r = row0 + ty * kPerThread + i;
    if (r >= rows) continue;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int c = col0 + tx * kPerThread + j;
      if (c >= cols) continue;
      const float v = acc[i][j] + b[c];
      y[r * cols + c] = v > 0.f ? v : 0.f;
    }
  }
}

}  // namespace

cudaError_t launch_linear_relu(const float* x, const float* weight, const float* bias, float* y,
                              int rows, int cols, int depth, cudaStream_t stream) {
  const dim3 threads(16, 16);
  const dim3 blocks((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  linear_relu_tiled<<<blocks, threads, 0, stream>>>(x, weight, bias, y, rows, cols, depth);
  return cudaGetLastError();
}
