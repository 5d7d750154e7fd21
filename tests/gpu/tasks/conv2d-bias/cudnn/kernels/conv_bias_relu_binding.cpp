// The convolution by cuDNN (allowed for convolution by policy) on the caller's stream, with a
// workspace allocated through torch; the bias and ReLU by the kernel of conv_bias_relu.cu.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include <cudnn.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_nchw(float* y, const float* bias, long long n, int channels, int plane,
                                  cudaStream_t stream);

namespace {

void check(cudnnStatus_t status, const char* what) {
  TORCH_CHECK(status == CUDNN_STATUS_SUCCESS, what, ": ", cudnnGetErrorString(status));
}

// One handle per process, made on first use; the stream is set on every call.
cudnnHandle_t handle() {
  static cudnnHandle_t made = [] {
    cudnnHandle_t h = nullptr;
    check(cudnnCreate(&h), "cudnnCreate");
    return h;
  }();
  return made;
}

torch::Tensor conv_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  x = x.contiguous();
  weight = weight.contiguous();
  const int n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int k = weight.size(0), r = weight.size(2), s = weight.size(3);
  cudnnHandle_t cudnn = handle();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  check(cudnnSetStream(cudnn, stream), "cudnnSetStream");
  cudnnTensorDescriptor_t in_desc, out_desc;
  cudnnFilterDescriptor_t filter_desc;
  cudnnConvolutionDescriptor_t conv_desc;
  check(cudnnCreateTensorDescriptor(&in_desc), "tensor descriptor");
  check(cudnnCreateTensorDescriptor(&out_desc), "tensor descriptor");
  check(cudnnCreateFilterDescriptor(&filter_desc), "filter descriptor");
  check(cudnnCreateConvolutionDescriptor(&conv_desc), "convolution descriptor");
  check(cudnnSetTensor4dDescriptor(in_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w), "input");
  check(cudnnSetFilter4dDescriptor(filter_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s), "filter");
  check(cudnnSetConvolution2dDescriptor(conv_desc, r / 2, s / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "convolution");
  int on, oc, oh, ow;
  check(cudnnGetConvolution2dForwardOutputDim(conv_desc, in_desc, filter_desc, &on, &oc, &oh, &ow), "output");
  check(cudnnSetTensor4dDescriptor(out_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow), "output");
  cudnnConvolutionFwdAlgoPerf_t perf[4];
  int found = 0;
  check(cudnnGetConvolutionForwardAlgorithm_v7(cudnn, in_desc, filter_desc, conv_desc, out_desc, 4,
                                               &found, perf),
        "algorithm");
  TORCH_CHECK(found > 0, "no cuDNN algorithm");
  std::size_t bytes = 0;
  check(cudnnGetConvolutionForwardWorkspaceSize(cudnn, in_desc, filter_desc, conv_desc, out_desc,
                                                perf[0].algo, &bytes),
        "workspace size");
  auto workspace = torch::empty({static_cast<long>(bytes)}, x.options().dtype(torch::kUInt8));
  auto y = torch::empty({on, oc, oh, ow}, x.options());
  const float one = 1.f, zero = 0.f;
  check(cudnnConvolutionForward(cudnn, &one, in_desc, x.data_ptr<float>(), filter_desc,
                                weight.data_ptr<float>(), conv_desc, perf[0].algo,
                                bytes ? workspace.data_ptr() : nullptr, bytes, &zero, out_desc,
                                y.data_ptr<float>()),
        "cudnnConvolutionForward");
  cudnnDestroyTensorDescriptor(in_desc);
  cudnnDestroyTensorDescriptor(out_desc);
  cudnnDestroyFilterDescriptor(filter_desc);
  cudnnDestroyConvolutionDescriptor(conv_desc);
  const cudaError_t launched = launch_bias_relu_nchw(y.data_ptr<float>(), bias.data_ptr<float>(),
                                                     y.numel(), oc, oh * ow, stream);
  TORCH_CHECK(launched == cudaSuccess, "bias_relu: ", cudaGetErrorString(launched));
  return y;
}

void register_conv(pybind11::module& m) {
  m.def("conv_bias_relu", &conv_bias_relu, "relu(conv2d(x, weight, padding=k/2) + bias)");
}

}  // namespace

REGISTER_BINDING(conv_bias_relu, register_conv);
