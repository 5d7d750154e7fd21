// An honest bfloat16 softmax: bfloat16 in and out, float inside (a row maximum, then a sum of
// exponentials, each reduced across the block), one rounding per output.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

namespace {

constexpr int kThreads = 256;

template <class Op>
__device__ float block_reduce(float value, Op op) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] = op(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
  const float result = partial[0];
  __syncthreads();
  return result;
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

__global__ void softmax_bf16(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int cols) {
  const __nv_bfloat16* row = x + static_cast<long long>(blockIdx.x) * cols;
  __nv_bfloat16* out = y + static_cast<long long>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, __bfloat162float(row[c]));
  const float top = block_reduce(m, Max{});
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += kThreads) s += expf(__bfloat162float(row[c]) - top);
  const float inverse = 1.f / block_reduce(s, Add{});
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    out[c] = __float2bfloat16(expf(__bfloat162float(row[c]) - top) * inverse);
  }
}

}  // namespace

cudaError_t launch_row_softmax(const void* x, void* y, int rows, int cols, cudaStream_t stream) {
  softmax_bf16<<<rows, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                              static_cast<__nv_bfloat16*>(y), cols);
  return cudaGetLastError();
}
