// Splitting the machine's cores among the session's three processes.
#include "cudaagent/evaluation/cpu_groups.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

namespace cudaagent {
namespace {

// `cores` physical cores of `threads` CPUs each, numbered as Linux numbers a two-way SMT machine:
// CPU c and CPU c + cores are siblings.
std::vector<LogicalCpu> machine(int cores, int threads) {
  std::vector<LogicalCpu> cpus;
  for (int t = 0; t < threads; ++t) {
    for (int c = 0; c < cores; ++c) cpus.push_back({t * cores + c, c});
  }
  return cpus;
}

TEST_CASE("groups take whole cores, siblings together, sizes within one core") {
  auto groups = split_by_core(machine(8, 2), 3);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0] == std::vector<int>{0, 1, 2, 8, 9, 10});
  CHECK(groups[1] == std::vector<int>{3, 4, 5, 11, 12, 13});
  CHECK(groups[2] == std::vector<int>{6, 7, 14, 15});
  std::set<int> all;
  for (const auto& g : groups) all.insert(g.begin(), g.end());
  CHECK(all.size() == 16);  // every CPU once

  // No SMT: one CPU per core; 16 cores into 3 groups of 6, 5, 5.
  groups = split_by_core(machine(16, 1), 3);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].size() == 6);
  CHECK(groups[1].size() == 5);
  CHECK(groups[2].size() == 5);
  CHECK(groups[2].back() == 15);
}

TEST_CASE("fewer cores than groups: no groups, and the placement says why") {
  CHECK(split_by_core(machine(2, 2), 3).empty());
  CHECK(split_by_core(machine(3, 1), 0).empty());
  const CpuPlacement placement = place_session(machine(2, 2));
  CHECK_FALSE(placement.placed());
  CHECK(placement.note.find("2 physical cores") != std::string::npos);

  const CpuPlacement placed = place_session(machine(3, 1));
  REQUIRE(placed.placed());
  CHECK(placed.owner == std::vector<int>{0});
  CHECK(placed.baseline == std::vector<int>{1});
  CHECK(placed.candidate == std::vector<int>{2});
}

TEST_CASE("CPUs of unknown topology are cores of their own; the order of the input does not matter") {
  std::vector<LogicalCpu> cpus = {{5, -6}, {0, -1}, {3, -4}};
  auto groups = split_by_core(cpus, 3);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0] == std::vector<int>{0});
  CHECK(groups[1] == std::vector<int>{3});
  CHECK(groups[2] == std::vector<int>{5});
}

TEST_CASE("CPU lists are written as ranges") {
  CHECK(cpu_list_text({}).empty());
  CHECK(cpu_list_text({3}) == "3");
  CHECK(cpu_list_text({0, 1, 2, 3, 4, 8, 10, 11}) == "0-4,8,10-11");
  CHECK(cpu_list_text({11, 10, 10, 0}) == "0,10-11");
}

TEST_CASE("this machine's allowed CPUs are read, each once") {
  const auto cpus = allowed_cpus();
  REQUIRE_FALSE(cpus.empty());
  std::set<int> ids;
  for (const auto& cpu : cpus) ids.insert(cpu.id);
  CHECK(ids.size() == cpus.size());
}

}  // namespace
}  // namespace cudaagent
