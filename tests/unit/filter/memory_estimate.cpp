// task_memory_estimate: 2 * inputs + 2 * output + traffic / 2 from synth's task.meta (inputs +
// output resident while torch.compile works), and 0 (unknown) for anything that does not describe
// a task's tensors.
#include "cudaagent/filter/memory_estimate.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace {

cudaagent::TaskMemory memory(const std::string& task_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element task;
  REQUIRE_FALSE(parser.parse(task_json).get(task));
  return cudaagent::task_memory_estimate(task);
}

std::uint64_t estimate(const std::string& task_json) { return memory(task_json).peak; }

std::string task_with(const std::string& meta) { return R"({"model_py": "x", "meta": )" + meta + "}"; }

}  // namespace

TEST_CASE("task_memory_estimate: two input sets, two outputs and half the traffic") {
  // float32: inputs 2*3*4 + 5*4 = 44 bytes, output 6*4 = 24, traffic 100.
  CHECK(estimate(task_with(R"({"dtype": "float32", "input_shapes": [[2, 3], [5]],
                               "output_shape": [2, 3], "bytes": 100})")) == 2 * 44 + 2 * 24 + 50);
  CHECK(estimate(task_with(R"({"dtype": "bfloat16", "input_shapes": [[4]], "output_shape": [],
                               "bytes": 0})")) == 2 * 8 + 2 * 2);
  // synth's first ops6k task: layer_norm then pad on 229,376 x 1,217 float32.
  const std::uint64_t in = 229376ULL * 1217 * 4, out = 229376ULL * 1223 * 4;
  CHECK(estimate(task_with(R"({"dtype": "float32", "input_shapes": [[229376, 1217]],
                               "output_shape": [229376, 1223], "bytes": 4471924232})")) ==
        2 * in + 2 * out + 4471924232ULL / 2);
  CHECK(memory(task_with(R"({"dtype": "float32", "input_shapes": [[2, 3], [5]],
                             "output_shape": [2, 3], "bytes": 100})")).resident == 44 + 24);
}

TEST_CASE("task_memory_estimate: unknown (0) without a usable description") {
  for (const std::string& task : {
           std::string(R"({"model_py": "x"})"),
           task_with(R"({"dtype": "complex64", "input_shapes": [[2]], "output_shape": [2], "bytes": 8})"),
           task_with(R"({"dtype": "float32", "input_shapes": [[-2]], "output_shape": [2], "bytes": 8})"),
           task_with(R"({"dtype": "float32", "input_shapes": [[2]], "output_shape": "big", "bytes": 8})"),
           task_with(R"({"dtype": "float32", "input_shapes": [[2]], "output_shape": [2]})"),
           task_with(R"({"dtype": "float32", "input_shapes": [[2]], "output_shape": [2], "bytes": -1})"),
           // products past any GPU: not believed
           task_with(R"({"dtype": "float32", "input_shapes": [[4294967296, 4294967296]],
                        "output_shape": [2], "bytes": 8})"),
       }) {
    CAPTURE(task);
    CHECK(estimate(task) == 0);
    CHECK(memory(task).resident == 0);
  }
}
