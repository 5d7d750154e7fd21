// AdamW in torch's arithmetic (decay, then the moment updates, then the bias-corrected step) over
// the parameters this rank owns. The moments are float32 whatever the parameter's dtype.
#include "cudaagent/train/rl_optim.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard: ATen.h no longer brings it in torch 2.x

#include <cmath>

namespace cudaagent {

AdamW::AdamW(std::vector<at::Tensor> parameters, std::vector<std::string> names,
             const OptimizerSettings& settings, Communicator& communicator)
    : parameters_(std::move(parameters)),
      names_(std::move(names)),
      settings_(settings),
      communicator_(communicator) {
  std::vector<std::int64_t> numels;
  numels.reserve(parameters_.size());
  for (const auto& parameter : parameters_) numels.push_back(parameter.numel());
  owners_ = plan_parameter_owners(numels, communicator_.world_size());
  exp_avg_.resize(parameters_.size());
  exp_avg_sq_.resize(parameters_.size());
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] != communicator_.rank()) continue;
    auto options = parameters_[i].options().dtype(at::kFloat).requires_grad(false);
    exp_avg_[i] = at::zeros(parameters_[i].sizes(), options);
    exp_avg_sq_[i] = at::zeros(parameters_[i].sizes(), options);
  }
}

double AdamW::lr_at(std::int64_t step) const {
  if (settings_.warmup_steps <= 0 || step >= settings_.warmup_steps) return settings_.lr;
  return settings_.lr * static_cast<double>(step) / static_cast<double>(settings_.warmup_steps);
}

void AdamW::zero_grad() {
  for (auto& parameter : parameters_) {
    if (parameter.grad().defined()) parameter.mutable_grad() = at::Tensor();
  }
}

StepReport AdamW::step() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  grads.reserve(parameters_.size());
  for (auto& parameter : parameters_) {
    if (!parameter.grad().defined()) parameter.mutable_grad() = at::zeros_like(parameter);
    grads.push_back(parameter.mutable_grad());
  }
  all_reduce_in_buckets(communicator_, grads, settings_.bucket_bytes);

  StepReport report;
  at::Tensor total = at::zeros({}, at::TensorOptions().dtype(at::kDouble));
  for (const auto& grad : grads) {
    at::Tensor norm = grad.to(at::kFloat).norm().to(at::kCPU, at::kDouble);
    total += norm * norm;
  }
  report.grad_norm = std::sqrt(total.item<double>());
  if (!std::isfinite(report.grad_norm)) {
    report.skipped = true;
    zero_grad();
    return report;
  }
  if (settings_.grad_clip > 0) {
    const double coefficient = settings_.grad_clip / (report.grad_norm + 1e-6);
    if (coefficient < 1.0) {
      for (auto& grad : grads) grad.mul_(coefficient);
    }
  }
  ++steps_;
  report.lr = lr_at(steps_);
  const double bias1 = 1.0 - std::pow(settings_.beta1, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(settings_.beta2, static_cast<double>(steps_));
  const double step_size = report.lr / bias1;
  const double bias2_sqrt = std::sqrt(bias2);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] != communicator_.rank()) continue;
    at::Tensor& parameter = parameters_[i];
    at::Tensor grad = grads[i].to(at::kFloat);
    at::Tensor value = parameter.to(at::kFloat);
    value.mul_(1.0 - report.lr * settings_.weight_decay);
    exp_avg_[i].lerp_(grad, 1.0 - settings_.beta1);
    exp_avg_sq_[i].mul_(settings_.beta2).addcmul_(grad, grad, 1.0 - settings_.beta2);
    at::Tensor denominator = (exp_avg_sq_[i].sqrt() / bias2_sqrt).add_(settings_.eps);
    value.addcdiv_(exp_avg_[i], denominator, -step_size);
    if (!value.is_same(parameter)) parameter.copy_(value);
  }
  broadcast_from_owners(communicator_, parameters_, owners_, settings_.bucket_bytes);
  zero_grad();
  return report;
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] != communicator_.rank()) continue;
    out.tensors.emplace_back("exp_avg." + names_[i], exp_avg_[i]);
    out.tensors.emplace_back("exp_avg_sq." + names_[i], exp_avg_sq_[i]);
  }
  out.metadata["steps"] = std::to_string(steps_);
  out.metadata["world_size"] = std::to_string(communicator_.world_size());
  out.metadata["rank"] = std::to_string(communicator_.rank());
  return out;
}

Status AdamW::load_state(const NamedTensors& state) {
  auto meta = [&](const char* key) -> std::string {
    auto found = state.metadata.find(key);
    return found == state.metadata.end() ? std::string() : found->second;
  };
  if (meta("world_size") != std::to_string(communicator_.world_size()) ||
      meta("rank") != std::to_string(communicator_.rank())) {
    return Status::error("optimiser state of rank " + meta("rank") + " of " + meta("world_size") +
                         " cannot be loaded by rank " + std::to_string(communicator_.rank()) +
                         " of " + std::to_string(communicator_.world_size()));
  }
  std::int64_t steps = 0;
  try {
    steps = std::stoll(meta("steps"));
  } catch (const std::exception&) {
    return Status::error("optimiser state has no step count");
  }
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] != communicator_.rank()) continue;
    at::Tensor avg = state.find("exp_avg." + names_[i]);
    at::Tensor avg_sq = state.find("exp_avg_sq." + names_[i]);
    if (!avg.defined() || !avg_sq.defined() || avg.sizes() != exp_avg_[i].sizes() ||
        avg_sq.sizes() != exp_avg_sq_[i].sizes()) {
      return Status::error("optimiser state lacks or mis-shapes the moments of '" + names_[i] +
                           "'");
    }
    exp_avg_[i].copy_(avg);
    exp_avg_sq_[i].copy_(avg_sq);
  }
  steps_ = steps;
  return Status::ok();
}

}  // namespace cudaagent
