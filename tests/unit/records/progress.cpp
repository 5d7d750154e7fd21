// Progress for people: the estimate (finished records, rate, ETA from a count, the end of input
// or the share of the input read), the batch-log line every interval, and nothing when quiet.
#include "cudaagent/records/progress.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace cudaagent {
namespace {

class StepClock final : public Clock {
 public:
  double now_seconds() const override { return now; }
  double now = 100;
};

// A sink that is never a terminal, whatever the test runs in (reachable, so not a leak).
std::FILE* null_sink() {
  static std::FILE* const sink = std::fopen("/dev/null", "w");
  return sink;
}

class Lines final : public Logger {
 public:
  Lines() : Logger("cudaagent-test", null_sink()) {}
  std::vector<std::string> lines;

 protected:
  void write(std::string_view message) override { lines.emplace_back(message); }
};

TEST_CASE("progress_text: finished records, rate, and an ETA when the end is known or estimated") {
  CHECK(progress_text({12, 14, 40, {}}, 15) == "12 of 40 records, 0.8/s, ETA 0:35");
  CHECK(progress_text({12, 14, {}, 0.5}, 15) == "12 of ~28 records, 0.8/s, ETA 0:20");
  CHECK(progress_text({12, 14, {}, {}}, 15) == "12 records, 0.8/s");
  CHECK(progress_text({40, 40, 40, {}}, 10) == "40 of 40 records, 4/s");
  CHECK(progress_text({0, 3, 40, {}}, 10) == "0 of 40 records, 0/s");
  CHECK(human_duration(35) == "0:35");
  CHECK(human_duration(725) == "12:05");
  CHECK(human_duration(10931) == "3:02:11");
}

TEST_CASE("in a batch log, progress is a line every interval, the first after one interval") {
  Lines log;
  StepClock clock;
  std::atomic<int> stop{0};
  Session session{log, clock, stop};
  REQUIRE_FALSE(log.terminal());
  {
    Progress progress(session, true, 30);
    progress.update({1, 1, 10, {}});
    clock.now += 29;
    progress.update({2, 2, 10, {}});
    CHECK(log.lines.empty());
    clock.now += 2;
    progress.update({5, 5, 10, {}});
    REQUIRE(log.lines.size() == 1);
    CHECK(log.lines[0] == "progress: 5 of 10 records, 0.161/s, ETA 0:31, 0:31 elapsed");
    clock.now += 10;
    progress.update({6, 6, 10, {}});
    CHECK(log.lines.size() == 1);
    clock.now += 30;
    progress.update({7, 7, 10, {}});
    CHECK(log.lines.size() == 2);
  }
  Progress quiet(session, false, 30);
  clock.now += 100;
  quiet.update({8, 8, 10, {}});
  Progress never(session, true, 0);
  never.update({8, 8, 10, {}});
  CHECK(log.lines.size() == 2);
}

}  // namespace
}  // namespace cudaagent
