// Named tensors in a file, in the safetensors layout (an 8-byte little-endian header length, a
// JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then the
// raw little-endian bytes), so a checkpoint's pieces can be opened by Python's safetensors too.
// Used for optimiser state and the toy model; whole files are read into memory (checkpoint
// pieces, not multi-GB weights to be mapped).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct NamedTensors {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // file order on reading
  std::map<std::string, std::string> metadata;

  // The tensor called `name`, or an undefined tensor.
  at::Tensor find(const std::string& name) const;
};

// Writes the tensors (copied to the CPU, contiguous) to `path` through a temporary file and a
// rename, so a reader never sees half a file. Supported dtypes: float32, float64, float16,
// bfloat16, int64, int32, uint8, bool. Names must be unique and not "__metadata__".
Status rl_write_tensors(const std::string& path, const NamedTensors& contents);

// Reads a file written as above (or by Python's safetensors with the same dtypes). CPU tensors.
Result<NamedTensors> rl_read_tensors(const std::string& path);

}  // namespace cudaagent
