// Collation into the padded layout, selections that trim padding, and the deterministic
// permutation.
#include "cudaagent/train/rl_batch.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <algorithm>

using namespace cudaagent;

namespace {

std::vector<std::int64_t> as_vector(const at::Tensor& tensor) {
  at::Tensor flat = tensor.to(at::kLong).contiguous().view({-1});
  return {flat.data_ptr<std::int64_t>(), flat.data_ptr<std::int64_t>() + flat.numel()};
}

Trajectory make(std::vector<std::int32_t> prompt, std::vector<std::int32_t> response,
                std::vector<std::uint8_t> mask, double reward) {
  Trajectory t;
  t.prompt_ids = std::move(prompt);
  t.response_ids = std::move(response);
  t.loss_mask = std::move(mask);
  t.behaviour_log_probs.assign(t.response_ids.size(), -1.0F);
  t.reward = reward;
  return t;
}

}  // namespace

TEST_CASE("collate pads prompts on the left and responses on the right") {
  Trajectory a = make({5, 6, 7}, {8, 9}, {1, 1}, 1.0);
  Trajectory b = make({3}, {4, 5, 6}, {1, 0, 1}, -1.0);
  RlBatch batch = collate({&a, &b});
  CHECK(batch.tokens.response_start == 3);
  CHECK(as_vector(batch.tokens.input_ids) ==
        std::vector<std::int64_t>{5, 6, 7, 8, 9, 0, 0, 0, 3, 4, 5, 6});
  CHECK(as_vector(batch.tokens.attention_mask) ==
        std::vector<std::int64_t>{1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1});
  CHECK(as_vector(batch.tokens.position_ids) ==
        std::vector<std::int64_t>{0, 1, 2, 3, 4, 4, 0, 0, 0, 1, 2, 3});
  CHECK(as_vector(batch.mask) == std::vector<std::int64_t>{1, 1, 0, 1, 0, 1});
  CHECK(batch.trainable_tokens() == 4.0);
  REQUIRE(batch.old_log_probs.defined());
  CHECK(batch.scores[1].item<float>() == -1.0F);
}

TEST_CASE("selections keep their rows' columns only") {
  Trajectory a = make({5, 6, 7}, {8}, {1}, 1.0);
  Trajectory b = make({3}, {4, 5, 6}, {1, 0, 1}, 2.0);
  RlBatch batch = collate({&a, &b});
  batch.values = at::arange(6, at::TensorOptions().dtype(at::kFloat)).view({2, 3});
  RlBatch only_b = select_rows(batch, {1});
  CHECK(only_b.tokens.response_start == 1);  // two columns of left padding trimmed
  CHECK(as_vector(only_b.tokens.input_ids) == std::vector<std::int64_t>{3, 4, 5, 6});
  CHECK(as_vector(only_b.values) == std::vector<std::int64_t>{3, 4, 5});
  RlBatch only_a = select_rows(batch, {0});
  CHECK(only_a.tokens.response_length() == 1);  // right padding trimmed
  CHECK(as_vector(only_a.tokens.input_ids) == std::vector<std::int64_t>{5, 6, 7, 8});
  CHECK(as_vector(only_a.tokens.position_ids) == std::vector<std::int64_t>{0, 1, 2, 3});
  RlBatch swapped = select_rows(batch, {1, 0});
  CHECK(swapped.scores[0].item<float>() == 2.0F);
}

TEST_CASE("row splits, rank shares and permutations") {
  const std::vector<std::int64_t> rows{0, 1, 2, 3, 4};
  auto parts = split_rows(rows, 2);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2] == std::vector<std::int64_t>{4});
  CHECK(split_rows(rows, 0).size() == 1);
  CHECK(rank_share(rows, 1, 2) == std::vector<std::int64_t>{1, 3});
  CHECK(rank_share(rows, 0, 2) == std::vector<std::int64_t>{0, 2, 4});
  auto order = permutation(100, 42);
  CHECK(order == permutation(100, 42));
  CHECK(order != permutation(100, 43));
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 100; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
  CHECK(mix_seed(1, 2, 3) != mix_seed(1, 3, 2));
}
