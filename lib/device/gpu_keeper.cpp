// See gpu_keeper.h. The driver API is reached through dlopen/dlsym with the few signatures it
// needs spelled out here (CUresult is an int, CUdevice an int, CUcontext a pointer), so nothing
// in the tools links libcuda.
#include "cudaagent/device/gpu_keeper.h"

#include <dlfcn.h>

#include <utility>

namespace cudaagent {

namespace {

using CuInit = int (*)(unsigned);
using CuDeviceGet = int (*)(int*, int);
using CuPrimaryCtxRetain = int (*)(void**, int);
using CuPrimaryCtxRelease = int (*)(int);

}  // namespace

struct GpuKeeper::State {
  void* library = nullptr;
  CuPrimaryCtxRelease release = nullptr;
  int device = -1;
  bool holding = false;
  std::string note;

  ~State() {
    if (holding && release != nullptr) release(device);
    // The library stays mapped: the driver keeps threads of its own, and unmapping their code
    // under them at exit is not worth the tidiness.
  }
};

GpuKeeper::GpuKeeper(std::unique_ptr<State> state) : state_(std::move(state)) {}
GpuKeeper::GpuKeeper(GpuKeeper&&) noexcept = default;
GpuKeeper& GpuKeeper::operator=(GpuKeeper&&) noexcept = default;
GpuKeeper::~GpuKeeper() = default;

bool GpuKeeper::holding() const { return state_->holding; }
const std::string& GpuKeeper::note() const { return state_->note; }

GpuKeeper GpuKeeper::open() {
  auto state = std::make_unique<State>();
  state->library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (state->library == nullptr) {
    const char* why = dlerror();
    state->note = std::string("no CUDA driver: ") + (why != nullptr ? why : "libcuda.so.1 not found");
    return GpuKeeper(std::move(state));
  }
  auto init = reinterpret_cast<CuInit>(dlsym(state->library, "cuInit"));
  auto device_get = reinterpret_cast<CuDeviceGet>(dlsym(state->library, "cuDeviceGet"));
  auto retain = reinterpret_cast<CuPrimaryCtxRetain>(dlsym(state->library, "cuDevicePrimaryCtxRetain"));
  state->release = reinterpret_cast<CuPrimaryCtxRelease>(dlsym(state->library, "cuDevicePrimaryCtxRelease_v2"));
  if (init == nullptr || device_get == nullptr || retain == nullptr || state->release == nullptr) {
    state->note = "the CUDA driver lacks cuInit/cuDevicePrimaryCtxRetain";
    return GpuKeeper(std::move(state));
  }
  if (int code = init(0); code != 0) {
    state->note = "cuInit failed with CUresult " + std::to_string(code);
    return GpuKeeper(std::move(state));
  }
  if (int code = device_get(&state->device, 0); code != 0) {
    state->note = "no visible CUDA device (CUresult " + std::to_string(code) + ")";
    return GpuKeeper(std::move(state));
  }
  void* context = nullptr;
  if (int code = retain(&context, state->device); code != 0) {
    state->note = "cannot retain the device's primary context (CUresult " + std::to_string(code) + ")";
    return GpuKeeper(std::move(state));
  }
  state->holding = true;
  state->note = "holding the primary context of the first visible device";
  return GpuKeeper(std::move(state));
}

}  // namespace cudaagent
