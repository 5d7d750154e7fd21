// The tensors of a loaded CausalLm, shared by the files that implement it (loading and saving,
// the forward arithmetic, the chunked scores). Internal to lib/train.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "cudaagent/train/causal_lm.h"

namespace cudaagent::train {

struct CausalLm::Layer {
  at::Tensor input_norm, post_norm;                 // [hidden]
  at::Tensor q_w, q_b, k_w, k_b, v_w, v_b, o_w;      // biases undefined when absent
  at::Tensor gate_w, gate_b, up_w, up_b, down_w, down_b;
};

struct CausalLm::Weights {
  at::Tensor embed;    // [vocab, hidden]
  at::Tensor norm;     // [hidden]
  at::Tensor lm_head;  // [vocab, hidden]; the same tensor as embed when tied
  std::vector<Layer> layers;
  at::Tensor inv_freq;  // [head_dim / 2] float32 rotary frequencies, on the device
  at::Device device{at::kCPU};
  at::ScalarType dtype = at::kFloat;    // the tensors above (but inv_freq)
  at::ScalarType compute = at::kFloat;  // matrix products and attention (ModelOptions::compute_dtype)
};

}  // namespace cudaagent::train
