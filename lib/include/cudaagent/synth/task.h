// A composition written out as a task: the Python source in KernelBench / CUDA Agent form
// (`Model`, `get_inputs`, `get_init_inputs`) and the task record of cudaagent-records(5). The source is a
// pure function of the composition, so equal compositions get equal ids (the SHA-256 of model_py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/synth/compose.h"

namespace cudaagent::synth {

// The Python source of the task. Sizes of constructors are Model's init arguments (returned by
// get_init_inputs); other parameters are literals; inputs are torch.randn tensors of fixed shape.
std::string render_model_py(const Catalog& catalog, const Composition& composition);

struct TaskProvenance {
  std::uint64_t seed = 0;
  std::uint64_t index = 0;
  std::string composer = "random";  // "random", "chain" or "llm"
  std::string llm_model;            // the model that proposed it, in LLM mode
};

// One task record line, '\n'-terminated:
// {"id", "task": {"source": "synth", "model_py", "ops", "meta": {...}}}.
std::string task_record(const Catalog& catalog, const Composition& composition,
                        const TaskProvenance& provenance);

// A Python literal for a value: an integer when integral, else a float ("0.5", "1e-05").
std::string python_number(double value, bool force_float = false);

}  // namespace cudaagent::synth
