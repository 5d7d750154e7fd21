// How much device memory a synthesized task's job will want, from what synth wrote in the task's
// record (task.meta: dtype, input_shapes, output_shape and bytes, the memory traffic of its
// operators). At its peak the job holds one input draw and either a copy of it for the call or
// the second draw, the first call's output (kept to judge the others against), the call's own
// output, and the operators' intermediates, of which the traffic is a bound; half of it is what
// they write:
//   2 * inputs + 2 * output + bytes / 2.
// 0 when the record carries no such description (an imported or an LLM-written task): the filter
// then admits the task by count alone. Never a verdict: filter.memory shows the estimate beside
// the peak the job reported, so the rule can be checked against real runs.
#pragma once

#include <simdjson.h>

#include <cstdint>

namespace cudaagent {

struct TaskMemory {
  std::uint64_t peak = 0;
  // inputs + output: what the job holds while torch.compile works on the CPU (one input draw, the
  // first eager output kept to compare with), so that the filter can lend the rest to other tasks
  // meanwhile (DeviceShare::shrink).
  std::uint64_t resident = 0;
};
TaskMemory task_memory_estimate(simdjson::dom::element task);

}  // namespace cudaagent
