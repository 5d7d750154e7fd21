// Keeps the GPU's driver state alive while a stage runs many short CUDA processes.
//
// Without persistence mode the driver tears a GPU's state down when its last client closes, and
// the next process's CUDA start pays the whole initialisation again (seconds on an H200). A stage
// that forks a child per candidate holds the device open through this object instead, which
// changes no setting of the GPU: it is one more client holding the primary context. libcuda is
// loaded at run time, so the tools still start on machines without a driver (CI).
#pragma once

#include <memory>
#include <string>

namespace cudaagent {

class GpuKeeper {
 public:
  // Opens the first visible device (CUDA_VISIBLE_DEVICES applies). Never fails: on a machine
  // without a driver or GPU the keeper holds nothing and note() says why.
  static GpuKeeper open();

  GpuKeeper(GpuKeeper&&) noexcept;
  GpuKeeper& operator=(GpuKeeper&&) noexcept;
  ~GpuKeeper();

  bool holding() const;
  const std::string& note() const;  // what it holds, or why it holds nothing

 private:
  struct State;
  explicit GpuKeeper(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cudaagent
