// Reading the machine's cores and splitting them into the session's groups (cpu_groups.h).
#include "cudaagent/evaluation/cpu_groups.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>

namespace cudaagent {
namespace {

// One number from a sysfs file, or -1.
long read_number(const std::string& path) {
  std::ifstream in(path);
  long value = -1;
  if (!(in >> value)) return -1;
  return value;
}

}  // namespace

std::vector<LogicalCpu> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<LogicalCpu> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int id = 0; id < CPU_SETSIZE; ++id) {
    if (!CPU_ISSET(id, &set)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(id) + "/topology/";
    const long package = read_number(topology + "physical_package_id");
    const long core = read_number(topology + "core_id");
    // Unknown topology: its own core, numbered apart from every real one.
    const long key = (package < 0 || core < 0) ? -1 - id : package * 65536 + core;
    cpus.push_back({id, key});
  }
  return cpus;
}

std::vector<std::vector<int>> split_by_core(const std::vector<LogicalCpu>& cpus, int count) {
  // Cores in order of their lowest CPU, each with its CPUs.
  std::vector<long> order;
  std::map<long, std::vector<int>> members;
  std::vector<LogicalCpu> sorted = cpus;
  std::sort(sorted.begin(), sorted.end(), [](const LogicalCpu& a, const LogicalCpu& b) { return a.id < b.id; });
  for (const LogicalCpu& cpu : sorted) {
    auto& ids = members[cpu.core];
    if (ids.empty()) order.push_back(cpu.core);
    ids.push_back(cpu.id);
  }
  const auto cores = static_cast<int>(order.size());
  if (count <= 0 || cores < count) return {};
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(count));
  std::size_t next = 0;
  for (int g = 0; g < count; ++g) {
    const int take = cores / count + (g < cores % count ? 1 : 0);
    for (int i = 0; i < take; ++i, ++next) {
      const auto& ids = members[order[next]];
      groups[static_cast<std::size_t>(g)].insert(groups[static_cast<std::size_t>(g)].end(), ids.begin(), ids.end());
    }
    std::sort(groups[static_cast<std::size_t>(g)].begin(), groups[static_cast<std::size_t>(g)].end());
  }
  return groups;
}

std::string cpu_list_text(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string text;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(ids[i]);
    if (j > i) text += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return text;
}

CpuPlacement place_session(const std::vector<LogicalCpu>& cpus) {
  CpuPlacement placement;
  auto groups = split_by_core(cpus, 3);
  if (groups.empty()) {
    std::vector<long> cores;
    for (const LogicalCpu& cpu : cpus) cores.push_back(cpu.core);
    std::sort(cores.begin(), cores.end());
    cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
    placement.note = "not placed: " + std::to_string(cores.size()) +
                     " physical cores allowed, a group each for the owner and two runners needs 3";
    return placement;
  }
  placement.owner = std::move(groups[0]);
  placement.baseline = std::move(groups[1]);
  placement.candidate = std::move(groups[2]);
  return placement;
}

}  // namespace cudaagent
