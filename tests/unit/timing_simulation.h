// Synthetic timing experiments with a known truth, for the statistics tests: a baseline and a
// candidate measured in alternating rounds (A-B, B-A, ...) on a clock that may drift, with
// log-normal per-call noise and occasional slow outliers.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "cudaagent/profile/timing_stats.h"

namespace cudaagent::testing {

struct SimulatedSetup {
  int rounds = 20;
  int per_round = 10;         // calls per arm per round
  double baseline_ms = 1.0;   // true baseline time; the candidate's is baseline_ms / ratio
  double ratio = 1.0;         // true speedup
  double noise = 0.03;        // sd of log(time) per call (~3% CV)
  double drift = 0.0;         // clock drift: times grow linearly by this fraction over the whole run
  double outlier_rate = 0.0;  // chance a call is slowed by 20% to 200%
  double round_noise = 0.0;   // sd of a log-factor shared by every call of one round, both arms
};

struct SimulatedRun {
  RoundSamples baseline;
  RoundSamples candidate;
};

// One experiment. Calls run in the order round 0: A then B, round 1: B then A, ...; the drift
// factor at a call is 1 + drift * (elapsed calls / all calls), shared by both arms.
inline SimulatedRun simulate_rounds(const SimulatedSetup& setup, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  SimulatedRun run;
  run.baseline.resize(static_cast<std::size_t>(setup.rounds));
  run.candidate.resize(static_cast<std::size_t>(setup.rounds));
  const double calls = 2.0 * setup.per_round * setup.rounds;
  for (int r = 0; r < setup.rounds; ++r) {
    const double round_factor = std::exp(setup.round_noise * normal(rng));
    for (int slot = 0; slot < 2; ++slot) {
      const bool baseline_arm = (slot == 0) == (r % 2 == 0);
      for (int i = 0; i < setup.per_round; ++i) {
        const double elapsed = (2.0 * setup.per_round * r + slot * setup.per_round + i) / calls;
        double t = (1 + setup.drift * elapsed) * round_factor * std::exp(setup.noise * normal(rng));
        if (uniform(rng) < setup.outlier_rate) t *= 1.2 + 1.8 * uniform(rng);
        if (baseline_arm) {
          run.baseline[static_cast<std::size_t>(r)].push_back(setup.baseline_ms * t);
        } else {
          run.candidate[static_cast<std::size_t>(r)].push_back(setup.baseline_ms / setup.ratio * t);
        }
      }
    }
  }
  return run;
}

}  // namespace cudaagent::testing
