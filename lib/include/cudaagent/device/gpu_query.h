// What the trusted side reads about a GPU without touching CUDA itself: nvidia-smi's name, driver,
// clocks and temperature, before, during and after a timing block (clocks cannot be locked on the test machine, so they are recorded and checked instead).
#pragma once

#include <string>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct GpuReading {
  std::string name;
  std::string driver;
  std::string pstate;
  double sm_mhz = 0;
  double memory_mhz = 0;
  double temperature_c = 0;
};

// Runs `nvidia_smi` (a bare name is looked up in /usr/bin, /bin, /usr/local/bin) for device
// `index` (a number or a UUID, as CUDA_VISIBLE_DEVICES names it) with a 10 s limit. A Status when
// it is missing, fails or prints something else than one CSV line.
Result<GpuReading> query_gpu(const std::string& index, const std::string& nvidia_smi = "nvidia-smi");

// Parses nvidia-smi's line "name, driver, pstate, sm, mem, temp" (--format=csv,noheader,nounits).
// Exposed for tests. Fields nvidia-smi cannot read ("[N/A]") are 0.
Result<GpuReading> parse_gpu_reading(const std::string& line);

// The GPU's UUID ("GPU-dcbc3e3b-...") for device `index` (a number as nvidia-smi counts the GPUs
// this process can see, or a UUID, which is returned as it is). A Status when nvidia-smi is missing
// or fails.
Result<std::string> query_gpu_uuid(const std::string& index, const std::string& nvidia_smi = "nvidia-smi");

// The device to ask about: the first entry of CUDA_VISIBLE_DEVICES (`visible`, null when unset),
// "0" when unset or empty.
std::string visible_gpu_index(const char* visible);

}  // namespace cudaagent
