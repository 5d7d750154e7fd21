// The decoder's arithmetic, written to match transformers' Qwen2/Llama modelling code operation for
// operation: RMSNorm statistics in float32 then cast back before the weight, rotary tables from
// float32 frequencies cast to the compute dtype, softmax in float32. Three entry points share one
// layer: the training forward (whole sequences, optional recomputation), prefill (one sequence into
// a cache slot) and decode (one token for each of n slots against the cache).
//
// Mixed precision (Weights::compute below the parameters' dtype) follows autocast: the residual
// stream, RMSNorm and its weights stay in the parameters' dtype; every matrix product and the
// attention take inputs cast to the compute dtype, and their outputs promote back when added to
// the residual. The weights are cast per layer as the layer runs (working_layer), not kept as a
// second, low-precision copy of the model refreshed after each optimiser step. Autograd routes
// each cast's gradient into the float32 parameter, so gradients accumulate over micro-batches in
// float32 and the optimiser, clipping, data-parallel buckets and checkpoints see only the
// float32 masters, unchanged. A persistent copy would save re-casting in the backward pass but
// costs half the weights' memory again, needs its gradients copied into the masters and a refresh
// after every step (and on every rank). Measured on the CPU with the tiny Qwen2 fixture: casting
// every weight once takes 0.06 ms against 45-70 ms for one 4 x 128-token forward and backward
// with recomputation (which casts each layer twice), so the casts cost well under 1%. For the
// 0.5B model on an H200 the estimate (not yet measured) is ~3 GB of memory traffic per cast of
// all weights, about a millisecond, against tens of milliseconds of products per micro-batch.
// With per-layer recomputation only one layer's cast copies exist at a time.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "causal_lm_weights.h"

namespace cudaagent::train {
namespace {

using Layer = CausalLm::Layer;

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const auto h = x.to(at::kFloat);
  const auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (h * at::rsqrt(variance + eps)).to(x.scalar_type());
}

// x is cast to the weight's dtype: a no-op unless the layer is a mixed-precision working copy.
at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
  const auto input = x.to(w.scalar_type());
  return b.defined() ? at::linear(input, w, b) : at::linear(input, w);
}

// The layer whose products run in `compute`: its projection weights and biases cast (tensors
// already in `compute` come back as they are, so without mixed precision this copies nothing);
// the norm weights stay in the parameters' dtype, as under autocast.
Layer working_layer(const Layer& l, at::ScalarType compute) {
  Layer out = l;
  for (at::Tensor* t : {&out.q_w, &out.q_b, &out.k_w, &out.k_b, &out.v_w, &out.v_b, &out.o_w, &out.gate_w,
                        &out.gate_b, &out.up_w, &out.up_b, &out.down_w, &out.down_b}) {
    if (t->defined()) *t = t->to(compute);
  }
  return out;
}

at::Tensor rotate_half(const at::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

struct Rotary {
  at::Tensor cos, sin;  // [..., positions, head_dim], in the compute dtype
};

// Rotary tables for `positions` (int64, any shape), shaped [*positions, head_dim].
Rotary rotary(const CausalLm::Weights& w, const at::Tensor& positions) {
  const auto freqs = positions.to(at::kFloat).unsqueeze(-1) * w.inv_freq;
  const auto emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(w.compute), emb.sin().to(w.compute)};
}

at::Tensor apply_rotary(const at::Tensor& x, const Rotary& r) { return x * r.cos + rotate_half(x) * r.sin; }

// Self-attention over whole sequences: q [B, heads, T, d], k/v [B, kv_heads, T, d]. `allowed`
// [B, 1, T, T] (true: may attend) replaces the plain causal mask when padding is masked.
at::Tensor attention(const at::Tensor& q, at::Tensor k, at::Tensor v, const at::Tensor& allowed) {
  const auto groups = q.size(1) / k.size(1);
  if (groups > 1) {
    k = k.repeat_interleave(groups, 1);
    v = v.repeat_interleave(groups, 1);
  }
#if TORCH_VERSION_MAJOR >= 2
  if (allowed.defined()) return at::scaled_dot_product_attention(q, k, v, allowed, 0.0, /*is_causal=*/false);
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
  const auto t = q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const auto scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  const auto hidden = allowed.defined() ? allowed.logical_not()
                                        : at::ones({t, t}, q.options().dtype(at::kBool)).triu(1);
  const auto probs = at::softmax(scores.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1, at::kFloat);
  return at::matmul(probs.to(q.scalar_type()), v);
#endif
}

// What every layer of one forward pass shares: rotary tables and, with padding, the mask.
struct AttentionInputs {
  Rotary rotary;
  at::Tensor allowed;  // [B, 1, T, T] bool, or undefined for plain causal attention
};

// The attention mask for padded rows: causal, padding keys excluded, and each position allowed
// to see itself so that a row of padding (a left pad sees only pads) stays finite instead of
// turning into NaN that would reach real tokens through the values.
at::Tensor padding_mask(const at::Tensor& attention_mask) {
  const auto t = attention_mask.size(1);
  const auto options = attention_mask.options().dtype(at::kBool);
  const auto causal = at::ones({t, t}, options).tril();
  const auto keys = attention_mask.to(at::kBool).view({attention_mask.size(0), 1, 1, t});
  return causal.logical_and(keys).logical_or(at::eye(t, options));
}

at::Tensor mlp(const Layer& l, const at::Tensor& x) {
  return dense(at::silu(dense(x, l.gate_w, l.gate_b)) * dense(x, l.up_w, l.up_b), l.down_w, l.down_b);
}

// Projections of the normed input to rotated q, k and v, each [B, heads, T, d].
struct Qkv {
  at::Tensor q, k, v;
};
Qkv project(const ModelConfig& c, const Layer& l, const at::Tensor& x, const Rotary& r) {
  const auto b = x.size(0), t = x.size(1);
  auto q = dense(x, l.q_w, l.q_b).view({b, t, c.num_attention_heads, c.head_dim}).transpose(1, 2);
  auto k = dense(x, l.k_w, l.k_b).view({b, t, c.num_key_value_heads, c.head_dim}).transpose(1, 2);
  auto v = dense(x, l.v_w, l.v_b).view({b, t, c.num_key_value_heads, c.head_dim}).transpose(1, 2);
  return {apply_rotary(q, r), apply_rotary(k, r), v};
}

// One decoder layer over whole sequences. `cache`, when given, receives the layer's k and v at
// positions 0..T-1 of `slot` (prefill).
at::Tensor layer_forward(const ModelConfig& c, const Layer& l, const at::Tensor& hidden, const AttentionInputs& a,
                         at::Tensor* cache_k = nullptr, at::Tensor* cache_v = nullptr, std::int64_t slot = 0) {
  const auto b = hidden.size(0), t = hidden.size(1);
  const auto x = rms_norm(hidden, l.input_norm, c.rms_norm_eps).to(l.q_w.scalar_type());
  const Qkv qkv = project(c, l, x, a.rotary);
  if (cache_k != nullptr) {
    cache_k->select(0, slot).slice(1, 0, t).copy_(qkv.k[0]);
    cache_v->select(0, slot).slice(1, 0, t).copy_(qkv.v[0]);
  }
  const auto attended = attention(qkv.q, qkv.k, qkv.v, a.allowed).transpose(1, 2).reshape({b, t, -1});
  const auto h = hidden + dense(attended, l.o_w);
  return h + mlp(l, rms_norm(h, l.post_norm, c.rms_norm_eps).to(l.gate_w.scalar_type()));
}

// The tensors of a layer that can carry gradients, in a fixed order.
std::vector<const at::Tensor*> layer_tensors(const Layer& l) {
  return {&l.input_norm, &l.post_norm, &l.q_w, &l.q_b, &l.k_w, &l.k_b, &l.v_w, &l.v_b,
          &l.o_w, &l.gate_w, &l.gate_b, &l.up_w, &l.up_b, &l.down_w, &l.down_b};
}

template <class T>
std::int64_t address_of(const T* p) {
  return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(p));
}
template <class T>
const T* pointer_at(const at::IValue& v) {
  return reinterpret_cast<const T*>(static_cast<std::intptr_t>(v.toInt()));
}

// Activation recomputation for one layer: the forward keeps only the layer's input; the backward
// runs the layer again with gradients on and differentiates that. The config and layer belong to
// the model, which must outlive the backward pass; their addresses travel in the node's saved data
// (the only place a C++ autograd node keeps non-tensor state).
struct RecomputedLayer : torch::autograd::Function<RecomputedLayer> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& cos,
                            const at::Tensor& sin, const c10::optional<at::Tensor>& allowed, at::TensorList params,
                            const ModelConfig* config, const Layer* layer, at::ScalarType compute) {
    const at::Tensor mask = allowed.has_value() ? *allowed : at::Tensor();
    ctx->save_for_backward({hidden, cos, sin, mask});
    ctx->saved_data["config"] = address_of(config);
    ctx->saved_data["layer"] = address_of(layer);
    ctx->saved_data["compute"] = static_cast<std::int64_t>(compute);
    (void)params;  // inputs only so that autograd routes their gradients through this node
    return layer_forward(*config, working_layer(*layer, compute), hidden,
                         AttentionInputs{Rotary{cos, sin}, mask});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto* config = pointer_at<ModelConfig>(ctx->saved_data["config"]);
    const auto* layer = pointer_at<Layer>(ctx->saved_data["layer"]);
    const auto compute = static_cast<at::ScalarType>(ctx->saved_data["compute"].toInt());
    at::AutoGradMode enable(true);
    const auto input = saved[0].detach().requires_grad_(saved[0].requires_grad());
    // The casts run again under grad mode, so the parameters' gradients pass back through them.
    const auto output = layer_forward(*config, working_layer(*layer, compute), input,
                                      AttentionInputs{Rotary{saved[1], saved[2]}, saved[3]});
    torch::autograd::variable_list wrt;
    if (input.requires_grad()) wrt.push_back(input);
    for (const at::Tensor* p : layer_tensors(*layer)) {
      if (p->defined() && p->requires_grad()) wrt.push_back(*p);
    }
    torch::autograd::variable_list grads;
    if (!wrt.empty()) grads = torch::autograd::grad({output}, wrt, {grad_outputs[0]}, false, false, /*allow_unused=*/true);
    // One gradient per forward input: hidden, cos, sin, the mask, each parameter passed, config,
    // layer, compute.
    torch::autograd::variable_list result;
    std::size_t next = 0;
    result.push_back(input.requires_grad() ? grads[next++] : at::Tensor());
    result.emplace_back();
    result.emplace_back();
    result.emplace_back();
    for (const at::Tensor* p : layer_tensors(*layer)) {
      if (!p->defined()) continue;
      result.push_back(p->requires_grad() ? grads[next++] : at::Tensor());
    }
    result.emplace_back();
    result.emplace_back();
    result.emplace_back();
    return result;
  }
};

}  // namespace

at::Tensor CausalLm::hidden_states(const at::Tensor& input_ids, const ForwardOptions& options) const {
  const Weights& w = *weights_;
  const auto ids = input_ids.to(w.device, at::kLong);
  AttentionInputs a;
  if (options.position_ids.defined()) {
    a.rotary = rotary(w, options.position_ids.to(w.device, at::kLong));  // [B, T, d]
    a.rotary = Rotary{a.rotary.cos.unsqueeze(1), a.rotary.sin.unsqueeze(1)};  // over heads
  } else {
    a.rotary = rotary(w, at::arange(ids.size(1), ids.options()));  // [T, d], over batch and heads
  }
  if (options.attention_mask.defined()) a.allowed = padding_mask(options.attention_mask.to(w.device));
  auto hidden = at::embedding(w.embed, ids);
  for (const Layer& l : w.layers) {
    if (options.recompute && at::GradMode::is_enabled()) {
      std::vector<at::Tensor> params;
      for (const at::Tensor* p : layer_tensors(l)) {
        if (p->defined()) params.push_back(*p);
      }
      const c10::optional<at::Tensor> allowed =
          a.allowed.defined() ? c10::optional<at::Tensor>(a.allowed) : c10::nullopt;
      hidden = RecomputedLayer::apply(hidden, a.rotary.cos, a.rotary.sin, allowed, at::TensorList(params),
                                      &config_, &l, w.compute);
    } else {
      hidden = layer_forward(config_, working_layer(l, w.compute), hidden, a);
    }
  }
  return rms_norm(hidden, w.norm, config_.rms_norm_eps);
}

TokenScores CausalLm::score_next_tokens(const at::Tensor& input_ids, const ScoreOptions& options) const {
  const auto ids = input_ids.to(weights_->device, at::kLong);
  const auto b = ids.size(0), t = ids.size(1);
  const auto zeros = at::zeros({b, std::max<std::int64_t>(t - 1, 0)}, ids.options().dtype(at::kFloat));
  if (t < 2) return {zeros, options.entropy ? zeros : at::Tensor()};
  const auto hidden = hidden_states(ids, options.forward);
  const auto h = hidden.slice(1, 0, t - 1).reshape({b * (t - 1), hidden.size(2)});
  const auto targets = ids.slice(1, 1, t).reshape({-1});
  at::Tensor rows;  // flat positions to compute
  if (options.mask.defined()) {
    rows = options.mask.to(weights_->device, at::kBool).reshape({-1}).nonzero().reshape({-1});
  } else {
    rows = at::arange(b * (t - 1), ids.options());
  }
  const TokenScores picked = score_hidden(h.index_select(0, rows), targets.index_select(0, rows),
                                          options.temperature, options.entropy, options.chunk_tokens);
  TokenScores out;
  out.logprobs = zeros.reshape({-1}).index_copy(0, rows, picked.logprobs).view({b, t - 1});
  if (options.entropy) out.entropy = zeros.reshape({-1}).index_copy(0, rows, picked.entropy).view({b, t - 1});
  return out;
}

at::Tensor CausalLm::logits(const at::Tensor& hidden) const {
  return dense(hidden, weights_->lm_head.to(weights_->compute)).to(at::kFloat);
}

at::Tensor CausalLm::prefill(const at::Tensor& ids, KvCache& cache, std::int64_t slot) const {
  const Weights& w = *weights_;
  const auto tokens = ids.to(w.device, at::kLong).reshape({1, -1});
  const AttentionInputs a{rotary(w, at::arange(tokens.size(1), tokens.options())), at::Tensor()};
  auto hidden = at::embedding(w.embed, tokens);
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    hidden = layer_forward(config_, working_layer(w.layers[i], w.compute), hidden, a, &cache.keys[i],
                           &cache.values[i], slot);
  }
  return rms_norm(hidden[0][-1], w.norm, config_.rms_norm_eps);
}

at::Tensor CausalLm::decode(const at::Tensor& ids, const at::Tensor& positions, KvCache& cache) const {
  const Weights& w = *weights_;
  const ModelConfig& c = config_;
  // Read before the copy to the device: with host positions (the engine's) this costs no sync.
  const auto length = positions.max().item<std::int64_t>() + 1;  // keys every slot may need
  const auto tokens = ids.to(w.device, at::kLong);
  const auto pos = positions.to(w.device, at::kLong);
  const auto n = tokens.size(0);
  const auto groups = c.num_attention_heads / c.num_key_value_heads;
  const auto slots = at::arange(n, pos.options());
  // Rotary tables [n, 1, 1, d]: one position per slot, broadcast over heads.
  const Rotary r0 = rotary(w, pos);
  const Rotary r{r0.cos.view({n, 1, 1, -1}), r0.sin.view({n, 1, 1, -1})};
  // Keys beyond a slot's own position are masked: [n, 1, 1, length].
  const auto future = (at::arange(length, pos.options()).unsqueeze(0) > pos.unsqueeze(1)).view({n, 1, 1, length});
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  auto hidden = at::embedding(w.embed, tokens).unsqueeze(1);  // [n, 1, hidden]
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const Layer l = working_layer(w.layers[i], w.compute);
    const auto x = rms_norm(hidden, l.input_norm, c.rms_norm_eps).to(w.compute);
    const Qkv qkv = project(c, l, x, r);  // q [n, heads, 1, d], k/v [n, kv_heads, 1, d]
    using at::indexing::Slice;
    cache.keys[i].index_put_({slots, Slice(), pos}, qkv.k.squeeze(2));
    cache.values[i].index_put_({slots, Slice(), pos}, qkv.v.squeeze(2));
    const auto keys = cache.keys[i].slice(0, 0, n).slice(2, 0, length);    // [n, kv, L, d]
    const auto values = cache.values[i].slice(0, 0, n).slice(2, 0, length);
    // Grouped queries attend to their shared key head without copying it: [n, kv, groups, d].
    const auto q = qkv.q.reshape({n, c.num_key_value_heads, groups, c.head_dim});
    const auto scores = (at::matmul(q, keys.transpose(-2, -1)) * scale)
                            .masked_fill(future, -std::numeric_limits<double>::infinity());
    const auto probs = at::softmax(scores, -1, at::kFloat).to(w.compute);
    const auto attended = at::matmul(probs, values).reshape({n, 1, -1});
    const auto h = hidden + dense(attended, l.o_w);
    hidden = h + mlp(l, rms_norm(h, l.post_norm, c.rms_norm_eps));
  }
  return rms_norm(hidden.squeeze(1), w.norm, c.rms_norm_eps);
}

}  // namespace cudaagent::train
