// AdamW against its arithmetic worked by hand, clipping, state round trips and the ZeRO-1 plan.
#include "cudaagent/train/rl_optim.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cmath>

using namespace cudaagent;

TEST_CASE("AdamW's first steps match the formula") {
  auto communicator = make_local_communicator();
  at::Tensor p = at::tensor({1.0F}).requires_grad_(true);
  OptimizerSettings settings;
  settings.lr = 0.1;
  settings.weight_decay = 0.01;
  settings.grad_clip = 0;
  AdamW optimizer({p}, {"p"}, settings, *communicator);
  p.mutable_grad() = at::tensor({2.0F});
  StepReport report = optimizer.step();
  CHECK(report.grad_norm == doctest::Approx(2.0));
  // Decay 1 * (1 - 0.1 * 0.01) = 0.999; m = 0.2, v = 0.004; bias-corrected m/sqrt(v) = 2/2 = 1.
  CHECK(p.item<double>() == doctest::Approx(0.899).epsilon(1e-6));
  CHECK_FALSE(p.grad().defined());  // cleared
  // Step 2 with g = -1: m = 0.9*0.2 - 0.1 = 0.08, v = 0.999*0.004 + 0.001 = 0.004996;
  // m / (1 - 0.81) = 0.421053, sqrt(v / (1 - 0.998001)) = 1.580902; step 0.1 * 0.266337.
  p.mutable_grad() = at::tensor({-1.0F});
  optimizer.step();
  const double decayed = 0.899 * 0.999;
  CHECK(p.item<double>() ==
        doctest::Approx(decayed - 0.1 * (0.08 / 0.19) / std::sqrt(0.004996 / 0.001999))
            .epsilon(1e-5));
  CHECK(optimizer.steps() == 2);
}

TEST_CASE("clipping, warm-up and non-finite gradients") {
  auto communicator = make_local_communicator();
  at::Tensor p = at::zeros({2}).requires_grad_(true);
  OptimizerSettings settings;
  settings.lr = 1.0;
  settings.weight_decay = 0;
  settings.grad_clip = 1.0;
  settings.warmup_steps = 4;
  AdamW optimizer({p}, {"p"}, settings, *communicator);
  CHECK(optimizer.lr_at(1) == doctest::Approx(0.25));
  CHECK(optimizer.lr_at(4) == doctest::Approx(1.0));
  p.mutable_grad() = at::tensor({3.0F, 4.0F});
  StepReport report = optimizer.step();
  CHECK(report.grad_norm == doctest::Approx(5.0));
  CHECK(report.lr == doctest::Approx(0.25));
  p.mutable_grad() = at::tensor({NAN, 1.0F});
  at::Tensor before = p.detach().clone();
  report = optimizer.step();
  CHECK(report.skipped);
  CHECK(at::equal(before, p.detach()));
  CHECK(optimizer.steps() == 1);
}

TEST_CASE("optimiser state round trip") {
  auto communicator = make_local_communicator();
  OptimizerSettings settings;
  at::Tensor a = at::ones({3}).requires_grad_(true);
  AdamW first({a}, {"a"}, settings, *communicator);
  a.mutable_grad() = at::ones({3});
  first.step();
  NamedTensors state = first.state();
  CHECK(state.metadata.at("steps") == "1");
  at::Tensor b = at::ones({3}).requires_grad_(true);
  AdamW second({b}, {"a"}, settings, *communicator);
  REQUIRE(second.load_state(state));
  CHECK(second.steps() == 1);
  CHECK(at::equal(second.state().find("exp_avg.a"), state.find("exp_avg.a")));
  NamedTensors other_world = state;
  other_world.metadata["world_size"] = "2";
  CHECK_FALSE(second.load_state(other_world));
}

TEST_CASE("ZeRO-1 owners balance the elements") {
  // Largest first to the lighter rank: 100 -> 0, 60 -> 1, 50 -> 1 (110), 10 -> 0 (110), and 1 to
  // the first of two equal loads, rank 0.
  CHECK(plan_parameter_owners({100, 10, 60, 50, 1}, 2) == std::vector<int>{0, 0, 1, 1, 0});
  CHECK(plan_parameter_owners({5, 5}, 1) == std::vector<int>{0, 0});
}
