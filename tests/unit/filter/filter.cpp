// TaskFilter's content key: stable for the same task and settings, different when anything that
// can change the result changes. Needs a Python with torch (discovery); skipped without one.
#include "cudaagent/filter/filter.h"

#include <doctest/doctest.h>

#include <functional>
#include <set>

#include "test_support.h"

using cudaagent::FilterSettings;

TEST_CASE("job_key covers the source and every setting that changes a result") {
  cudaagent::testing::TempDir cache;
  FilterSettings base;
  base.device = "cpu";
  base.python = "/usr/bin/python3";
  base.cache_dir = cache.path().string();
  auto made = cudaagent::TaskFilter::create(base);
  if (!made) {
    MESSAGE("skipped: " << made.status().message());
    return;
  }
  const std::string source = "class Model: pass\n";
  const std::string key = made.value().job_key(source);
  CHECK(key.size() == 64);
  CHECK(made.value().job_key(source) == key);
  CHECK(made.value().job_key(source + " ") != key);

  const std::vector<std::function<void(FilterSettings&)>> changes = {
      [](FilterSettings& s) { s.window_low_ms = 2; },
      [](FilterSettings& s) { s.window_high_ms = 50; },
      [](FilterSettings& s) { s.tolerance.atol = 1e-3; },
      [](FilterSettings& s) { s.tolerance.rtol = 1e-3; },
      [](FilterSettings& s) { s.compile = false; },
      [](FilterSettings& s) { s.seed = 7; },
      [](FilterSettings& s) { s.timing_runs = 5; },
      [](FilterSettings& s) { s.timeout_seconds = 30; },
      [](FilterSettings& s) { s.memory_limit_bytes = 1ull << 30; },
  };
  std::set<std::string> keys{key};
  for (const auto& change : changes) {
    FilterSettings settings = base;
    change(settings);
    auto other = cudaagent::TaskFilter::create(settings);
    REQUIRE(other.is_ok());
    keys.insert(other.value().job_key(source));
  }
  CHECK(keys.size() == changes.size() + 1);

  // What does not change a result does not change the key.
  FilterSettings same = base;
  same.keep_job_dirs = true;
  same.scratch_dir = cache.path().string();
  same.sandbox_summary = "something else";
  CHECK(cudaagent::TaskFilter::create(same).value().job_key(source) == key);
}
