// Issue 10, class 1 (native): a helper thread, from which torch would run outside the audited
// call. The object imports std::thread's start.
#include <thread>

#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  torch::Tensor result;
  std::thread worker([&] {
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = in[r * cols + c] + b[c];
      o[r * cols + c] = v > 0.f ? v * static_cast<float>(scale) : 0.f;
    }
  }
    result = out;
  });
  worker.join();
  return result;
}
