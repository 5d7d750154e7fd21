// Issue 10, class 1 (native): a libtorch symbol looked up at run time. The ReLU comes from
// at::native::relu found by dlsym, a call no operator audit can see and no symbol names.
#include <dlfcn.h>
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  using Relu = at::Tensor (*)(const at::Tensor&);
  auto relu = reinterpret_cast<Relu>(dlsym(RTLD_DEFAULT, "_ZN2at6native4reluERKNS_6TensorE"));
  TORCH_CHECK(relu != nullptr, "lookup failed");
  return relu((x + bias) * scale);
}
