// GPU control (issue 10, class 1): an honest kernel written the way torch extensions usually are,
// with torch's headers in the .cu: a packed accessor, the tensor's device guard and the caller's
// stream, AT_DISPATCH, at::empty_like, TORCH_CHECK and C10_CUDA_KERNEL_LAUNCH_CHECK. Its object
// must pass the allow-list of imported symbols, and the candidate must PASS.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

namespace {

template <typename scalar_t>
__global__ void bias_relu_scale_kernel(
    const at::PackedTensorAccessor32<scalar_t, 2, at::RestrictPtrTraits> x,
    const scalar_t* __restrict__ bias,
    at::PackedTensorAccessor32<scalar_t, 2, at::RestrictPtrTraits> out, scalar_t scale) {
  const int row = blockIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < x.size(0) && col < x.size(1)) {
    const scalar_t v = x[row][col] + bias[col];
    out[row][col] = v > scalar_t(0) ? v * scale : scalar_t(0);
  }
}

}  // namespace

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  TORCH_CHECK(x.size(0) <= 65535, "too many rows for one grid dimension");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const auto xc = x.contiguous();
  const auto bc = bias.contiguous();
  auto out = at::empty_like(xc);
  const dim3 threads(256);
  const dim3 blocks(static_cast<unsigned>((xc.size(1) + 255) / 256), static_cast<unsigned>(xc.size(0)));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "bias_relu_scale", [&] {
    bias_relu_scale_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        xc.packed_accessor32<scalar_t, 2, at::RestrictPtrTraits>(), bc.data_ptr<scalar_t>(),
        out.packed_accessor32<scalar_t, 2, at::RestrictPtrTraits>(), static_cast<scalar_t>(scale));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}
