// Log-probabilities and entropies of chosen tokens without materialising [N x vocab] logits: a
// custom autograd node computes them chunk by chunk and keeps only the hidden states, the targets
// and one log-sum-exp per row; its backward pass recomputes each chunk's logits and forms the
// gradient in closed form:
//   d logp_t / dz_j = [j = t] - p_j,      d H / dz_j = -p_j (log p_j + H),
// for z = logits / temperature, p = softmax(z), H = -sum p log p.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "causal_lm_weights.h"

namespace cudaagent::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Float32 logits of one chunk, divided by the temperature.
at::Tensor chunk_logits(const at::Tensor& hidden, const at::Tensor& weight, double inverse_temperature) {
  auto z = at::matmul(hidden, weight.t()).to(at::kFloat);
  if (inverse_temperature != 1.0) z = z * inverse_temperature;
  return z;
}

struct ChunkedScores : torch::autograd::Function<ChunkedScores> {
  // Returns {logprobs [N], entropy [N]} (float32).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& targets, double inverse_temperature, std::int64_t chunk) {
    const auto n = hidden.size(0);
    const auto options = hidden.options().dtype(at::kFloat);
    auto logprobs = at::empty({n}, options), entropy = at::empty({n}, options), lse = at::empty({n}, options);
    for (std::int64_t start = 0; start < n; start += chunk) {
      const auto end = std::min(n, start + chunk);
      const auto z = chunk_logits(hidden.slice(0, start, end), weight, inverse_temperature);
      const auto l = at::logsumexp(z, -1);
      lse.slice(0, start, end).copy_(l);
      logprobs.slice(0, start, end).copy_(z.gather(1, targets.slice(0, start, end).unsqueeze(1)).squeeze(1) - l);
      const auto p = at::exp(z - l.unsqueeze(1));
      entropy.slice(0, start, end).copy_(l - (p * z).sum(-1));
    }
    ctx->save_for_backward({hidden, weight, targets, lse, entropy});
    ctx->saved_data["inverse_temperature"] = inverse_temperature;
    ctx->saved_data["chunk"] = chunk;
    return {logprobs, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &hidden = saved[0], &weight = saved[1], &targets = saved[2], &lse = saved[3], &entropy = saved[4];
    const double inverse_temperature = ctx->saved_data["inverse_temperature"].toDouble();
    const std::int64_t chunk = ctx->saved_data["chunk"].toInt();
    const at::Tensor& g_logprob = grads[0];
    const at::Tensor& g_entropy = grads[1];
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1);
    at::Tensor grad_hidden, grad_weight;
    if (want_hidden) grad_hidden = at::zeros_like(hidden);
    // The weight gradient sums over every chunk: accumulated in float32.
    if (want_weight) grad_weight = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
    const auto n = hidden.size(0);
    for (std::int64_t start = 0; start < n && (want_hidden || want_weight); start += chunk) {
      const auto end = std::min(n, start + chunk);
      const auto h = hidden.slice(0, start, end);
      // dz_j = -p_j (g_logprob + g_entropy (log p_j + H)), plus g_logprob at the target. Formed in
      // place over the chunk's logits: each pass over [chunk x vocab] floats costs as much as a
      // good share of the chunk's matrix products, so the fewer the better.
      at::Tensor logp = chunk_logits(h, weight, inverse_temperature).sub_(lse.slice(0, start, end).unsqueeze(1));
      at::Tensor dz = at::exp(logp);
      at::Tensor g_lp;
      if (g_logprob.defined()) g_lp = g_logprob.slice(0, start, end).to(at::kFloat).unsqueeze(1);
      if (g_entropy.defined()) {
        const auto g_h = g_entropy.slice(0, start, end).to(at::kFloat).unsqueeze(1);
        at::Tensor& coefficient = logp.add_(entropy.slice(0, start, end).unsqueeze(1)).mul_(-g_h);
        if (g_lp.defined()) coefficient.sub_(g_lp);
        dz.mul_(coefficient);
      } else if (g_lp.defined()) {
        dz.mul_(-g_lp);
      } else {
        dz.zero_();
      }
      if (g_lp.defined()) dz.scatter_add_(1, targets.slice(0, start, end).unsqueeze(1), g_lp);
      if (inverse_temperature != 1.0) dz.mul_(inverse_temperature);
      const auto dz_compute = dz.to(weight.scalar_type());
      if (want_hidden) grad_hidden.slice(0, start, end).copy_(at::matmul(dz_compute, weight));
      if (want_weight) grad_weight.add_(at::matmul(dz_compute.t(), h));
    }
    if (want_weight) grad_weight = grad_weight.to(weight.scalar_type());
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TokenScores CausalLm::score_hidden(const at::Tensor& hidden, const at::Tensor& targets, double temperature,
                                   bool entropy, std::int64_t chunk_tokens) const {
  const auto ids = targets.to(hidden.device(), at::kLong);
  // Mixed precision: the logits' product runs in the compute dtype (the output embedding cast
  // once for all chunks, its gradient flowing back through the cast); the softmax arithmetic is
  // float32 either way.
  const at::ScalarType compute = weights_->compute;
  const auto outputs = ChunkedScores::apply(hidden.to(compute), weights_->lm_head.to(compute), ids,
                                            1.0 / temperature, std::max<std::int64_t>(chunk_tokens, 1));
  return {outputs[0], entropy ? outputs[1] : at::Tensor()};
}

}  // namespace cudaagent::train
