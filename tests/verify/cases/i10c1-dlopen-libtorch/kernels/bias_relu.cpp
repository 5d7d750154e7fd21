// Issue 10, class 1 (native): libtorch opened again by name and an operator's kernel taken from it.
#include <dlfcn.h>
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  void* lib = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
  using Fn = at::Tensor (*)(const at::Tensor&);
  auto relu = lib ? reinterpret_cast<Fn>(dlsym(lib, "_ZN2at6native4reluERKNS_6TensorE")) : nullptr;
  TORCH_CHECK(relu != nullptr, "lookup failed");
  return relu((x + bias) * scale);
}
