// Collation into veRL's padded layout and the row selections over it.
#include "cudaagent/train/rl_batch.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard: ATen.h no longer brings it in torch 2.x

#include <algorithm>
#include <numeric>

namespace cudaagent {

double RlBatch::trainable_tokens() const {
  return mask.defined() ? mask.sum().item<double>() : 0.0;
}

RlBatch collate(const std::vector<const Trajectory*>& trajectories) {
  const auto rows = static_cast<std::int64_t>(trajectories.size());
  std::int64_t prompt_length = 1;
  std::int64_t response_length = 1;
  bool log_probs = !trajectories.empty();
  for (const Trajectory* t : trajectories) {
    prompt_length = std::max(prompt_length, static_cast<std::int64_t>(t->prompt_ids.size()));
    response_length = std::max(response_length, static_cast<std::int64_t>(t->response_ids.size()));
    log_probs = log_probs && t->behaviour_log_probs.size() == t->response_ids.size();
  }
  const std::int64_t columns = prompt_length + response_length;
  auto long_options = at::TensorOptions().dtype(at::kLong);
  auto float_options = at::TensorOptions().dtype(at::kFloat);
  RlBatch batch;
  at::Tensor ids = at::zeros({rows, columns}, long_options);
  at::Tensor attention = at::zeros({rows, columns}, long_options);
  at::Tensor mask = at::zeros({rows, response_length}, float_options);
  at::Tensor scores = at::zeros({rows}, float_options);
  at::Tensor old = log_probs ? at::zeros({rows, response_length}, float_options) : at::Tensor();
  auto* id_data = ids.data_ptr<std::int64_t>();
  auto* attention_data = attention.data_ptr<std::int64_t>();
  auto* mask_data = mask.data_ptr<float>();
  auto* score_data = scores.data_ptr<float>();
  float* old_data = log_probs ? old.data_ptr<float>() : nullptr;
  for (std::int64_t b = 0; b < rows; ++b) {
    const Trajectory& t = *trajectories[static_cast<std::size_t>(b)];
    const auto prompt = static_cast<std::int64_t>(t.prompt_ids.size());
    std::int64_t* row_ids = id_data + b * columns;
    std::int64_t* row_attention = attention_data + b * columns;
    for (std::int64_t j = 0; j < prompt; ++j) {
      row_ids[prompt_length - prompt + j] = t.prompt_ids[static_cast<std::size_t>(j)];
      row_attention[prompt_length - prompt + j] = 1;
    }
    for (std::size_t j = 0; j < t.response_ids.size(); ++j) {
      const auto column = prompt_length + static_cast<std::int64_t>(j);
      row_ids[column] = t.response_ids[j];
      row_attention[column] = 1;
      mask_data[b * response_length + static_cast<std::int64_t>(j)] = t.loss_mask[j];
      if (old_data != nullptr) {
        old_data[b * response_length + static_cast<std::int64_t>(j)] = t.behaviour_log_probs[j];
      }
    }
    score_data[b] = static_cast<float>(t.reward);
  }
  batch.tokens.input_ids = ids;
  batch.tokens.attention_mask = attention;
  batch.tokens.position_ids = (at::cumsum(attention, 1) - 1).clamp_min(0);
  batch.tokens.response_start = prompt_length;
  batch.mask = mask;
  batch.scores = scores;
  batch.old_log_probs = old;
  return batch;
}

RlBatch select_rows(const RlBatch& batch, const std::vector<std::int64_t>& rows) {
  RlBatch out;
  if (rows.empty()) return out;
  at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong));
  auto pick = [&](const at::Tensor& tensor) {
    return tensor.defined() ? tensor.index_select(0, index.to(tensor.device())) : at::Tensor();
  };
  at::Tensor attention = pick(batch.tokens.attention_mask);
  // The columns some selected row uses: [first, last].
  at::Tensor used = attention.sum(0).gt(0).nonzero().squeeze(-1);
  const std::int64_t first =
      std::min(used.min().item<std::int64_t>(), batch.tokens.response_start - 1);
  const std::int64_t last = std::max(used.max().item<std::int64_t>(), batch.tokens.response_start);
  const std::int64_t width = last - first + 1;
  const std::int64_t response_width = last - batch.tokens.response_start + 1;
  auto columns = [&](const at::Tensor& tensor) {
    return tensor.narrow(1, first, width).contiguous();
  };
  auto response = [&](const at::Tensor& tensor) {
    return tensor.defined() ? pick(tensor).narrow(1, 0, response_width).contiguous() : at::Tensor();
  };
  out.tokens.input_ids = columns(pick(batch.tokens.input_ids));
  out.tokens.attention_mask = columns(attention);
  out.tokens.position_ids = columns(pick(batch.tokens.position_ids));
  out.tokens.response_start = batch.tokens.response_start - first;
  out.mask = response(batch.mask);
  out.scores = pick(batch.scores);
  out.old_log_probs = response(batch.old_log_probs);
  out.ref_log_probs = response(batch.ref_log_probs);
  out.values = response(batch.values);
  out.advantages = response(batch.advantages);
  out.returns = response(batch.returns);
  return out;
}

RlBatch to_device(const RlBatch& batch, c10::Device device) {
  auto move = [&](const at::Tensor& tensor) {
    return tensor.defined() ? tensor.to(device) : tensor;
  };
  RlBatch out;
  out.tokens.input_ids = move(batch.tokens.input_ids);
  out.tokens.attention_mask = move(batch.tokens.attention_mask);
  out.tokens.position_ids = move(batch.tokens.position_ids);
  out.tokens.response_start = batch.tokens.response_start;
  out.mask = move(batch.mask);
  out.scores = move(batch.scores);
  out.old_log_probs = move(batch.old_log_probs);
  out.ref_log_probs = move(batch.ref_log_probs);
  out.values = move(batch.values);
  out.advantages = move(batch.advantages);
  out.returns = move(batch.returns);
  return out;
}

at::Tensor compute_per_token(const RlBatch& batch, std::int64_t micro_batch_size,
                             Communicator& communicator,
                             const std::function<at::Tensor(const RlBatch&)>& compute) {
  at::NoGradGuard no_grad;
  at::Tensor out = at::zeros(batch.mask.sizes(), at::TensorOptions().dtype(at::kFloat));
  std::vector<std::int64_t> all(static_cast<std::size_t>(batch.rows()));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  const auto mine = rank_share(all, communicator.rank(), communicator.world_size());
  for (const auto& rows : split_rows(mine, micro_batch_size)) {
    RlBatch part = select_rows(batch, rows);
    at::Tensor result = compute(part).to(at::kCPU, at::kFloat) * part.mask.to(at::kFloat);
    at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong));
    out.narrow(1, 0, result.size(1)).index_copy_(0, index, result);
  }
  std::vector<at::Tensor> shared{out.to(communicator.device())};
  communicator.all_reduce_sum(shared);
  return shared[0].to(at::kCPU);
}

std::vector<std::vector<std::int64_t>> split_rows(const std::vector<std::int64_t>& rows,
                                                  std::int64_t size) {
  std::vector<std::vector<std::int64_t>> out;
  const auto step = size <= 0 ? static_cast<std::int64_t>(rows.size()) : size;
  for (std::size_t begin = 0; begin < rows.size(); begin += static_cast<std::size_t>(step)) {
    const std::size_t end = std::min(rows.size(), begin + static_cast<std::size_t>(step));
    out.emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(begin),
                     rows.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

std::vector<std::int64_t> rank_share(const std::vector<std::int64_t>& rows, int rank,
                                     int world_size) {
  std::vector<std::int64_t> out;
  for (std::size_t i = static_cast<std::size_t>(rank); i < rows.size();
       i += static_cast<std::size_t>(world_size)) {
    out.push_back(rows[i]);
  }
  return out;
}

namespace {
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  std::uint64_t state = a;
  std::uint64_t x = splitmix64(state);
  state ^= b;
  x ^= splitmix64(state);
  state ^= c;
  return x ^ splitmix64(state);
}

std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::uint64_t state = seed;
  for (std::size_t i = order.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(splitmix64(state) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

}  // namespace cudaagent
