// The RL arithmetic against values worked out by hand (the working is in the comments), with
// multi-turn masks: observation tokens must neither add TD errors nor pass on their values.
#include "cudaagent/train/rl_math.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace cudaagent;

namespace {

at::Tensor row(std::vector<float> values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kFloat)).unsqueeze(0);
}
at::Tensor rows(std::vector<std::vector<float>> values) {
  std::vector<at::Tensor> parts;
  for (auto& v : values) parts.push_back(row(v));
  return at::cat(parts, 0);
}
double at_(const at::Tensor& tensor, std::int64_t b, std::int64_t t) {
  return tensor[b][t].item<double>();
}
double scalar(const at::Tensor& tensor) { return tensor.item<double>(); }

}  // namespace

TEST_CASE("masked mean, unbiased variance and whitening") {
  at::Tensor values = row({1, 2, 3, 4});
  at::Tensor mask = row({1, 1, 1, 0});
  CHECK(scalar(masked_mean(values, mask)) == doctest::Approx(2.0));
  // ((1-2)^2 + 0 + (3-2)^2) / 3 = 2/3, times 3/2 = 1.
  CHECK(scalar(masked_var(values, mask)) == doctest::Approx(1.0));
  CHECK(scalar(masked_var(values, mask, false)) == doctest::Approx(2.0 / 3.0));
  at::Tensor whitened = masked_whiten(values, mask);
  CHECK(at_(whitened, 0, 0) == doctest::Approx(-1.0));
  CHECK(at_(whitened, 0, 1) == doctest::Approx(0.0));
  CHECK(at_(whitened, 0, 2) == doctest::Approx(1.0));
  CHECK(at_(whitened, 0, 3) == doctest::Approx(2.0));  // masked entries are transformed too
  CHECK(at_(masked_whiten(values, mask, false), 0, 0) == doctest::Approx(1.0));
}

TEST_CASE("outcome rewards land on each row's last trainable token") {
  at::Tensor mask = rows({{1, 1, 0, 0}, {1, 0, 0, 0}, {1, 0, 1, 0}});
  at::Tensor rewards = outcome_rewards(at::tensor({2.0F, -1.0F, 3.0F}), mask);
  CHECK(at_(rewards, 0, 1) == doctest::Approx(2.0));
  CHECK(at_(rewards, 1, 0) == doctest::Approx(-1.0));
  CHECK(at_(rewards, 2, 2) == doctest::Approx(3.0));  // after an observation span
  CHECK(scalar(rewards.sum()) == doctest::Approx(4.0));
}

TEST_CASE("GAE with gamma = lambda = 1 gives reward minus value") {
  at::Tensor values = row({0.5F, 0.2F, 0.1F});
  at::Tensor mask = row({1, 1, 1});
  at::Tensor rewards = row({0, 0, 1});
  auto gae = compute_gae(rewards, values, mask, 1.0, 1.0, false);
  // t2: 1 - 0.1 = 0.9; t1: (0 + 0.1 - 0.2) + 0.9 = 0.8; t0: (0 + 0.2 - 0.5) + 0.8 = 0.5.
  CHECK(at_(gae.advantages, 0, 0) == doctest::Approx(0.5));
  CHECK(at_(gae.advantages, 0, 1) == doctest::Approx(0.8));
  CHECK(at_(gae.advantages, 0, 2) == doctest::Approx(0.9));
  for (int t = 0; t < 3; ++t) CHECK(at_(gae.returns, 0, t) == doctest::Approx(1.0));
}

TEST_CASE("multi-turn GAE skips observation tokens") {
  // Two model turns of two tokens around two observation tokens whose (absurd) values must not
  // leak. gamma 0.9, lambda 0.8 (gamma*lambda = 0.72), reward 1 on the last token.
  at::Tensor mask = row({1, 1, 0, 0, 1, 1});
  at::Tensor values = row({0.1F, 0.2F, 9.0F, 9.0F, 0.3F, 0.4F});
  at::Tensor rewards = outcome_rewards(at::tensor({1.0F}), mask);
  auto gae = compute_gae(rewards, values, mask, 0.9, 0.8, false);
  // t5: delta = 1 - 0.4 = 0.6, adv 0.6.
  // t4: delta = 0.9*0.4 - 0.3 = 0.06, adv = 0.06 + 0.72*0.6 = 0.492.
  // t3, t2: carried, 0.492.
  // t1: delta = 0.9*0.3 - 0.2 = 0.07 (the next value is t4's), adv = 0.07 + 0.72*0.492 = 0.42424.
  // t0: delta = 0.9*0.2 - 0.1 = 0.08, adv = 0.08 + 0.72*0.42424 = 0.3854528.
  const double expected[] = {0.3854528, 0.42424, 0.492, 0.492, 0.492, 0.6};
  for (int t = 0; t < 6; ++t)
    CHECK(at_(gae.advantages, 0, t) == doctest::Approx(expected[t]).epsilon(1e-5));
  CHECK(at_(gae.returns, 0, 0) == doctest::Approx(0.4854528).epsilon(1e-5));
  CHECK(at_(gae.returns, 0, 5) == doctest::Approx(1.0));

  // The model tokens get exactly what they get with the observation span cut out.
  auto cut = compute_gae(row({0, 0, 0, 1}), row({0.1F, 0.2F, 0.3F, 0.4F}), row({1, 1, 1, 1}), 0.9,
                         0.8, false);
  const int kept[] = {0, 1, 4, 5};
  for (int i = 0; i < 4; ++i) {
    CHECK(at_(gae.advantages, 0, kept[i]) == doctest::Approx(at_(cut.advantages, 0, i)));
  }
}

TEST_CASE("GAE rows with right padding and whitening over the batch") {
  at::Tensor mask = rows({{1, 1, 1}, {1, 1, 0}});
  at::Tensor values = rows({{0, 0, 0}, {0, 0, 5}});
  at::Tensor rewards = outcome_rewards(at::tensor({1.0F, -1.0F}), mask);
  auto raw = compute_gae(rewards, values, mask, 1.0, 1.0, false);
  CHECK(at_(raw.advantages, 1, 0) == doctest::Approx(-1.0));
  CHECK(at_(raw.advantages, 1, 1) == doctest::Approx(-1.0));
  auto whitened = compute_gae(rewards, values, mask, 1.0, 1.0, true);
  // Five trainable advantages 1,1,1,-1,-1: mean 0.2, unbiased var (3*0.64 + 2*1.44)/4 = 1.2.
  CHECK(at_(whitened.advantages, 0, 0) == doctest::Approx(0.8 / std::sqrt(1.2)));
  CHECK(at_(whitened.advantages, 1, 0) == doctest::Approx(-1.2 / std::sqrt(1.2)));
  CHECK(at_(whitened.returns, 0, 0) == doctest::Approx(1.0));  // returns are not whitened
}

TEST_CASE("clipped policy loss with dual clip") {
  // Tokens: (A=+1, r=1.5) clipped at 1.2 -> -1.2; (A=+1, r=0.5) unclipped -> -0.5;
  // (A=-1, r=0.5) clipped at 0.8 -> 0.8; (A=-1, r=5) unclipped 5, dual clip 3 -> 3;
  // a masked token with an absurd ratio. Token mean: (-1.2 - 0.5 + 0.8 + 3) / 4 = 0.525.
  at::Tensor advantages = row({1, 1, -1, -1, 1});
  at::Tensor log_prob =
      row({std::log(1.5F), std::log(0.5F), std::log(0.5F), std::log(5.0F), std::log(10.0F)});
  at::Tensor old = at::zeros_like(log_prob);
  at::Tensor mask = row({1, 1, 1, 1, 0});
  auto terms = policy_loss(old, log_prob, advantages, mask, PolicyLossSettings{});
  CHECK(scalar(terms.loss) == doctest::Approx(0.525));
  CHECK(scalar(terms.clip_fraction) == doctest::Approx(0.5));
  CHECK(scalar(terms.clip_fraction_lower) == doctest::Approx(0.25));
  CHECK(scalar(terms.approx_kl) == doctest::Approx(-std::log(1.875) / 4));

  PolicyLossSettings asymmetric;
  asymmetric.clip_high = 0.28;  // first token now clipped at 1.28
  CHECK(scalar(policy_loss(old, log_prob, advantages, mask, asymmetric).loss) ==
        doctest::Approx((-1.28 - 0.5 + 0.8 + 3) / 4));
}

TEST_CASE("policy loss gradient flows only through unclipped tokens") {
  at::Tensor log_prob = row({std::log(1.5F), 0.0F}).requires_grad_(true);
  at::Tensor old = at::zeros({1, 2});
  auto terms = policy_loss(old, log_prob, row({1, 1}), row({1, 1}), PolicyLossSettings{});
  terms.loss.backward();
  // Token 0 is clipped (no gradient); token 1 has d(-A r)/d log p = -r = -1, over 2 tokens.
  CHECK(at_(log_prob.grad(), 0, 0) == doctest::Approx(0.0));
  CHECK(at_(log_prob.grad(), 0, 1) == doctest::Approx(-0.5));
}

TEST_CASE("on-policy: ratio 1 and no clipping") {
  at::Tensor log_prob = row({-0.3F, -2.0F, -0.01F});
  auto terms =
      policy_loss(log_prob, log_prob, row({1, -2, 0.5}), row({1, 1, 1}), PolicyLossSettings{});
  CHECK(scalar(terms.clip_fraction) == 0.0);
  CHECK(scalar((terms.ratio - 1).abs().max()) == 0.0);
  CHECK(scalar(terms.loss) == doctest::Approx(-(1 - 2 + 0.5) / 3.0));
}

TEST_CASE("clipped value loss") {
  // vpred (1, 0), old (0, 0), returns (2, -1), clip 0.5: clipped vpred (0.5, 0); squared errors
  // unclipped (1, 1), clipped (2.25, 1); 0.5 * mean(2.25, 1) = 0.8125; one of two clipped.
  auto terms = value_loss(row({1, 0}), row({2, -1}), row({0, 0}), row({1, 1}), 0.5,
                          LossAggregation::kTokenMean);
  CHECK(scalar(terms.loss) == doctest::Approx(0.8125));
  CHECK(scalar(terms.clip_fraction) == doctest::Approx(0.5));
}

TEST_CASE("KL estimators") {
  at::Tensor log_prob = row({std::log(0.5F)});
  at::Tensor ref = row({std::log(0.25F)});
  const double ln2 = std::log(2.0);
  CHECK(scalar(kl_penalty(log_prob, ref, KlEstimator::kK1)) == doctest::Approx(ln2));
  CHECK(scalar(kl_penalty(ref, log_prob, KlEstimator::kAbs)) == doctest::Approx(ln2));
  CHECK(scalar(kl_penalty(log_prob, ref, KlEstimator::kK2)) == doctest::Approx(0.5 * ln2 * ln2));
  // k3: q/p - log(q/p) - 1 with q/p = 0.5: 0.5 + ln 2 - 1.
  CHECK(scalar(kl_penalty(log_prob, ref, KlEstimator::kK3)) == doctest::Approx(0.5 + ln2 - 1));
  CHECK(scalar(kl_penalty(log_prob, log_prob, KlEstimator::kK3)) == 0.0);
  // k3 is clamped at 10 for far-apart policies.
  CHECK(scalar(kl_penalty(row({0.0F}), row({-50.0F}), KlEstimator::kK3)) == doctest::Approx(10.0));
  CHECK(parse_kl_estimator("low_var_kl").value() == KlEstimator::kK3);
  CHECK(parse_kl_estimator("kl").value() == KlEstimator::kK1);
  CHECK_FALSE(parse_kl_estimator("k9"));
}

TEST_CASE("loss aggregation modes and micro-batch additivity") {
  at::Tensor loss = rows({{1, 2}, {3, 0}});
  at::Tensor mask = rows({{1, 1}, {1, 0}});
  CHECK(scalar(aggregate_loss(loss, mask, LossAggregation::kTokenMean)) == doctest::Approx(2.0));
  CHECK(scalar(aggregate_loss(loss, mask, LossAggregation::kSeqMeanTokenSum)) ==
        doctest::Approx(3.0));
  CHECK(scalar(aggregate_loss(loss, mask, LossAggregation::kSeqMeanTokenMean)) ==
        doctest::Approx(2.25));
  for (auto mode : {LossAggregation::kTokenMean, LossAggregation::kSeqMeanTokenSum,
                    LossAggregation::kSeqMeanTokenMean}) {
    LossNormaliser whole{3.0, 2.0};
    const double parts =
        scalar(aggregate_loss(loss.narrow(0, 0, 1), mask.narrow(0, 0, 1), mode, whole)) +
        scalar(aggregate_loss(loss.narrow(0, 1, 1), mask.narrow(0, 1, 1), mode, whole));
    CHECK(parts == doctest::Approx(scalar(aggregate_loss(loss, mask, mode))));
  }
  CHECK(parse_loss_aggregation("seq-mean-token-mean").value() ==
        LossAggregation::kSeqMeanTokenMean);
  CHECK_FALSE(parse_loss_aggregation("token-sum"));
}

TEST_CASE("entropy and log-probs from logits") {
  at::Tensor uniform = at::zeros({1, 1, 4});
  CHECK(scalar(entropy_from_logits(uniform)) == doctest::Approx(std::log(4.0)));
  at::Tensor logits = at::tensor({0.0F, std::log(3.0F)}).view({1, 1, 2});
  at::Tensor labels = at::tensor({std::int64_t{1}}).view({1, 1});
  CHECK(scalar(log_probs_from_logits(logits, labels)) == doctest::Approx(std::log(0.75)));
}

TEST_CASE("adaptive KL controller") {
  KlController fixed;
  fixed.value = 0.1;
  fixed.update(5.0, 100);
  CHECK(fixed.value == 0.1);
  KlController adaptive;
  adaptive.value = 0.1;
  adaptive.adaptive = true;
  adaptive.target = 0.1;
  adaptive.horizon = 100;
  adaptive.update(0.2, 10);  // error clipped to 0.2: 1 + 0.2 * 10 / 100
  CHECK(adaptive.value == doctest::Approx(0.102));
}
