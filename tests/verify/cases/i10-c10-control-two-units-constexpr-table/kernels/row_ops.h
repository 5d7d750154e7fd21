#pragma once
#include <cstdint>

namespace rowops {
void bias_relu_row(const float* in, const float* bias, float* out, int64_t n, float scale);
}
