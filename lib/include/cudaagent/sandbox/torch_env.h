// TorchEnv: what building and loading a candidate's extension needs to know about the Python that
// will run it (torch version, header and library paths, ABI, extension suffix, GPU). Asked once per
// interpreter by running it, then cached on disk keyed by the interpreter and torch files' identity.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct TorchEnv {
  std::string python;          // absolute path of the interpreter (a venv's link, not resolved)
  std::vector<std::string> prefixes;  // sys.prefix, base_prefix, exec_prefix: what it reads
  std::string python_version;  // "3.11.2"
  std::string torch_version;   // "1.13.0a0", "2.11.0+cu130"
  std::string torch_cuda;      // CUDA version torch was built with; empty for CPU-only torch
  std::vector<std::string> include_paths;  // torch's, then Python's
  std::vector<std::string> library_paths;  // where libtorch*.so live (may be empty: system dirs)
  std::vector<std::string> libraries;      // to link an extension: torch, torch_cpu, c10, ...
  std::string extension_suffix;            // ".cpython-311-x86_64-linux-gnu.so"
  bool cxx11_abi = true;
  bool cuda_available = false;
  std::string gpu_name;   // device 0, when cuda_available
  std::string gpu_arch;   // "90" for sm_90, when cuda_available
  std::uint64_t gpu_memory_bytes = 0;  // device 0's memory, when cuda_available (else 0)
  std::string json;       // the raw discovery record, as cached
};

// Candidate interpreters in order: `requested` if not empty, else $CUDAAGENT_PYTHON, else every
// python3 on PATH, then /usr/bin/python3. The first that imports torch wins.
std::vector<std::string> python_candidates(const std::string& requested);

// Runs the discovery script in `python` (isolated mode, scrubbed environment, 120 s limit) or reads
// the cached answer from `cache_dir` (empty: no cache). A Status when the interpreter cannot run or
// cannot import torch, with its stderr's last line.
Result<TorchEnv> discover_torch(const std::string& python, const std::string& cache_dir);

// discover_torch over python_candidates(requested); the errors of every candidate when none works.
Result<TorchEnv> find_torch(const std::string& requested, const std::string& cache_dir);

// find_torch, and for `device` "cuda" a torch that sees a GPU (else a Status that says which torch
// in which interpreter saw none).
Result<TorchEnv> find_torch_for_device(const std::string& requested, const std::string& cache_dir,
                                       const std::string& device);

// Parses a discovery record (the JSON the script prints). Exposed for tests.
Result<TorchEnv> parse_torch_env(const std::string& json);

}  // namespace cudaagent
