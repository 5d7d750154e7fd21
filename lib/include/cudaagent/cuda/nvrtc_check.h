// cudaagent-verify --check: the candidate's kernels/*.cu compiled for diagnostics only, with NVRTC
// in this process, in a fraction of a second per file instead of the seconds of a full nvcc build
// (the agent's inner loop). Part of the CUDA library (lib/cuda): exists only when the toolkit does.
//
// Key design choice: NVRTC compiles device code only, so the host side of a kernel file (its
// launcher) is compiled as device code (-default-device) with launches allowed from the device
// (-rdc=true). That type-checks kernels, launchers and launch arguments alike; the few host
// headers a kernel file includes are replaced by small stand-ins built on libcu++. A file that
// needs other host headers (torch, the C++ library beyond those) is reported as not checkable,
// never as wrong: the full build judges it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct NvrtcCheckOptions {
  std::string arch = "90";   // compute_<arch>
  std::string toolkit_include;  // <toolkit>/include; empty: the one found at build time
  int jobs = 2;              // files checked in parallel
};

struct CudaFileCheck {
  std::string file;          // relative to the workspace: kernels/foo.cu
  bool ok = false;           // compiled without errors
  bool checkable = true;     // false: it includes a header --check cannot stand in for
  double seconds = 0;
  std::string diagnostics;   // "kernels/foo.cu:15: error: identifier \"x\" is undefined", first errors
};

// Checks every kernels/*.cu in `files` (relative name -> bytes; the workspace's headers come from
// the same map, nothing is read from disk but the toolkit's own headers). A file whose #include
// directives name anything else than a header of the map, a toolkit header or a stand-in is not
// compiled: its include is reported (this also keeps the compiler away from the caller's files).
// A Status only when NVRTC itself fails.
Result<std::vector<CudaFileCheck>> check_cuda_sources(const std::map<std::string, std::string>& files,
                                                      const NvrtcCheckOptions& options);

}  // namespace cudaagent
