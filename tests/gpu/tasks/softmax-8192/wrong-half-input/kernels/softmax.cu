// Issue 10, class 3: the softmax of x/2, computed honestly otherwise. Every element is near 1e-4,
// below atol = 0.01: allclose passed it with nearly every element wrong.
#include <cuda_runtime.h>

#include <cmath>

namespace {

constexpr int kThreads = 256;

__device__ void merge(float& m, float& s, float other_m, float other_s) {
  const float top = fmaxf(m, other_m);
  s = s * __expf(m - top) + other_s * __expf(other_m - top);
  m = top;
}

__global__ void online_softmax(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* row = x + static_cast<long long>(blockIdx.x) * cols;
  float* out = y + static_cast<long long>(blockIdx.x) * cols;
  float m = -INFINITY, s = 0.f;
  for (int c = threadIdx.x; c < cols; c += kThreads) merge(m, s, 0.5f * row[c], 1.f);
  __shared__ float ms[kThreads], ss[kThreads];
  ms[threadIdx.x] = m;
  ss[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      merge(ms[threadIdx.x], ss[threadIdx.x], ms[threadIdx.x + stride], ss[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  const float top = ms[0], inverse = 1.f / ss[0];
  for (int c = threadIdx.x; c < cols; c += kThreads) out[c] = __expf(0.5f * row[c] - top) * inverse;
}

}  // namespace

cudaError_t launch_row_softmax(const void* x, void* y, int rows, int cols, cudaStream_t stream) {
  online_softmax<<<rows, kThreads, 0, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), cols);
  return cudaGetLastError();
}
