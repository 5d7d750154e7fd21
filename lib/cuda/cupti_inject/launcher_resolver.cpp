// Stack walk with the C++ unwinder (_Unwind_Backtrace, the same tables exceptions use): the CUDA
// libraries ship .eh_frame, frame pointers are not kept. dladdr and realpath run outside the
// resolver's lock: a thread inside dlopen holds the loader lock and may itself launch a kernel
// from a library constructor, so taking the loader lock under our lock could deadlock.
#include "launcher_resolver.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <unistd.h>
#include <unwind.h>

#include <cstdlib>

namespace cudaagent::cupti {

bool is_cuda_machinery(std::string_view basename) {
  return basename.starts_with("libcuda.so") || basename.starts_with("libcudart") ||
         basename.starts_with("libcupti");
}

namespace {

std::string object_path(const char* name) {
  if (name == nullptr || name[0] == '\0') {  // the main program
    char buffer[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string("[executable]");
  }
  char resolved[PATH_MAX];
  return ::realpath(name, resolved) != nullptr ? std::string(resolved) : std::string(name);
}

std::string_view basename_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

struct LauncherResolver::Walk {
  LauncherResolver* resolver;
  int frames = 0;
  std::uint32_t found = 0;
};

LauncherResolver::LauncherResolver(const void* self) {
  Dl_info info{};
  if (::dladdr(self, &info) != 0) self_base_ = info.dli_fbase;
}

int LauncherResolver::step(void* unwind_context, void* argument) {
  auto* walk = static_cast<Walk*>(argument);
  auto* context = static_cast<_Unwind_Context*>(unwind_context);
  if (++walk->frames > kMaxFrames) return _URC_END_OF_STACK;
  int before_instruction = 0;
  std::uintptr_t address = _Unwind_GetIPInfo(context, &before_instruction);
  if (address == 0) return _URC_END_OF_STACK;
  // A return address points after the call; look up the call itself, which may be the last
  // instruction of its function.
  if (before_instruction == 0) address -= 1;
  const std::uint32_t verdict = walk->resolver->classify(address);
  if (verdict != kSkipped && verdict != 0) {
    walk->found = verdict;
    return _URC_END_OF_STACK;
  }
  return _URC_NO_REASON;
}

std::uint32_t LauncherResolver::resolve() {
  Walk walk{this};
  _Unwind_Backtrace(
      [](_Unwind_Context* context, void* argument) {
        return static_cast<_Unwind_Reason_Code>(step(context, argument));
      },
      &walk);
  std::lock_guard lock(mutex_);
  ++stats_.walks;
  if (walk.found == 0) ++stats_.unresolved;
  return walk.found;
}

std::uint32_t LauncherResolver::classify(std::uintptr_t address) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = address_cache_.find(address); it != address_cache_.end()) return it->second;
  }
  Dl_info info{};
  void* extra = nullptr;
  std::uint32_t verdict = 0;
  std::string path;
  if (::dladdr1(reinterpret_cast<void*>(address), &info, &extra, RTLD_DL_LINKMAP) != 0 &&
      extra != nullptr) {
    const auto* map = static_cast<const link_map*>(extra);
    bool known = false;
    {
      std::lock_guard lock(mutex_);
      if (auto it = object_ids_.find(map); it != object_ids_.end()) {
        verdict = it->second;
        known = true;
      }
    }
    if (!known) {
      path = object_path(map->l_name);
      const bool skipped = info.dli_fbase == self_base_ || is_cuda_machinery(basename_of(path)) ||
                           is_cuda_machinery(basename_of(map->l_name != nullptr ? map->l_name : ""));
      std::lock_guard lock(mutex_);
      if (auto it = object_ids_.find(map); it != object_ids_.end()) {
        verdict = it->second;  // another thread classified it meanwhile
      } else if (skipped) {
        verdict = kSkipped;
        object_ids_.emplace(map, verdict);
      } else {
        paths_.push_back(std::move(path));
        verdict = static_cast<std::uint32_t>(paths_.size());
        object_ids_.emplace(map, verdict);
        stats_.objects = paths_.size();
      }
    }
  }
  std::lock_guard lock(mutex_);
  if (address_cache_.size() < kMaxCachedAddresses) address_cache_.emplace(address, verdict);
  return verdict;
}

const std::string& LauncherResolver::path(std::uint32_t id) const {
  static const std::string kNone;
  std::lock_guard lock(mutex_);
  if (id == 0 || id == kSkipped || id > paths_.size()) return kNone;
  return paths_[id - 1];
}

LauncherResolver::Stats LauncherResolver::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace cudaagent::cupti
