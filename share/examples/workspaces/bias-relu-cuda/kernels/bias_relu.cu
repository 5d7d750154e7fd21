// out = max(x + bias, 0) * scale, one thread per element, on the caller's current stream.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

__global__ void bias_relu_scale_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ out, int64_t n, int64_t cols,
                                       float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % cols];
    out[i] = v > 0.f ? v * scale : 0.f;
  }
}

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  bias_relu_scale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, x.size(1),
      static_cast<float>(scale));
  return out;
}
