// Disjoint groups of whole cores for the evaluation session's three processes: the owner (the
// clock), the baseline's runner and the candidate's runner. Left to the scheduler, a runner woken
// by the owner can be placed on the owner's core or its hyperthread sibling, where the two then
// take turns until the next migration. That would explain the A-A runs whose one arm stayed slow
// for several rounds; tests/gpu/session_h200.sh (CPU_GROUPS="off on") measures whether the groups
// help. With a group each, the three never share a core.
#pragma once

#include <string>
#include <vector>

namespace cudaagent {

struct LogicalCpu {
  int id = 0;    // the number sched_setaffinity takes
  long core = 0;  // the physical core it belongs to (package and core id): siblings share it
};

// The CPUs this process may run on, each with its physical core (read from
// /sys/devices/system/cpu/cpuN/topology; a CPU whose topology cannot be read is a core of its own).
std::vector<LogicalCpu> allowed_cpus();

// `cpus` split into `count` groups of whole physical cores, the cores in order of their first CPU,
// group sizes differing by at most one core. Empty when there are fewer cores than groups.
std::vector<std::vector<int>> split_by_core(const std::vector<LogicalCpu>& cpus, int count);

// "0-4,8,10-11": the form of taskset -c and /proc's Cpus_allowed_list.
std::string cpu_list_text(std::vector<int> ids);

// Where the session's processes run (EvaluationSettings::cpu_groups): a group each, or none with
// `note` saying why (not asked, or too few cores).
struct CpuPlacement {
  std::vector<int> owner, baseline, candidate;
  std::string note;
  bool placed() const { return !owner.empty(); }
};

// The placement for a machine whose allowed CPUs are `cpus`.
CpuPlacement place_session(const std::vector<LogicalCpu>& cpus);

}  // namespace cudaagent
