// Versions of cudaagent and every dependency. CUDA libraries are opened with dlopen and asked for
// their version at run time, so the report says what this process would really load, and a
// machine without a GPU driver (CI) still runs every tool.
#include "cudaagent/base/version.h"

#include <dlfcn.h>
#include <openssl/crypto.h>

#include <string>

namespace cudaagent {
namespace {

std::string cuda_version_string(int encoded) {  // 12040 -> "12.4"
  return std::to_string(encoded / 1000) + "." + std::to_string((encoded % 1000) / 10);
}

// Opens the first library that loads, from the toolkit directory found at build time or the
// loader's path, and calls `int symbol(int*)` (all three CUDA libraries use that shape).
std::string query_cuda_library(std::initializer_list<const char*> names, const char* symbol,
                               bool runtime_style) {
#if defined(__SANITIZE_ADDRESS__)
  // LeakSanitizer's exit-time scan crashes on the dynamic thread-local storage these libraries
  // leave behind ("Tracer caught signal 11", a bogus DTLS range; seen with cudaagent-profile
  // --version on every run, GCC 12). The sanitizer build is for our code, not theirs.
  (void)names, (void)symbol, (void)runtime_style;
  return "not queried in a sanitizer build";
#endif
  for (const char* name : names) {
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) continue;
    std::string out = "unreadable";
    if (runtime_style) {
      using Fn = int (*)(int*, int*);  // nvrtcVersion(major, minor)
      if (auto fn = reinterpret_cast<Fn>(dlsym(handle, symbol))) {
        int major = 0, minor = 0;
        if (fn(&major, &minor) == 0) out = std::to_string(major) + "." + std::to_string(minor);
      }
    } else {
      using Fn = int (*)(int*);  // cuDriverGetVersion / cuptiGetVersion
      if (auto fn = reinterpret_cast<Fn>(dlsym(handle, symbol))) {
        int value = 0;
        if (fn(&value) == 0) out = std::string(symbol) == "cuptiGetVersion"
                                       ? "API " + std::to_string(value)
                                       : cuda_version_string(value);
      }
    }
    // Left open on purpose: NVRTC and CUPTI keep static allocations that are only reachable
    // while they stay mapped, so dlclose would turn them into leaks under LeakSanitizer (and a
    // --version process ends right after anyway).
    return out;
  }
  return "none";
}

}  // namespace

VersionList base_versions() {
  VersionList out;
  out.emplace_back("cudaagent", build_version());
  out.emplace_back("commit", build_commit());
  out.emplace_back("compiler", __VERSION__);
  out.emplace_back("OpenSSL", OpenSSL_version(OPENSSL_VERSION));
#ifdef CUDAAGENT_CUDA_TOOLKIT_VERSION
  out.emplace_back("CUDA toolkit (build)", CUDAAGENT_CUDA_TOOLKIT_VERSION);
  const std::string dir = CUDAAGENT_CUDA_LIBRARY_DIR "/";
  const std::string nvrtc = dir + "libnvrtc.so", cupti = dir + "libcupti.so";
  out.emplace_back("NVRTC", query_cuda_library({nvrtc.c_str(), "libnvrtc.so"}, "nvrtcVersion", true));
  out.emplace_back("CUPTI", query_cuda_library({cupti.c_str(), "libcupti.so"}, "cuptiGetVersion", false));
#else
  out.emplace_back("CUDA toolkit (build)", "none (built without CUDA)");
#endif
  out.emplace_back("CUDA driver", query_cuda_library({"libcuda.so.1"}, "cuDriverGetVersion", false));
  return out;
}

std::string version_text(const std::string& program, const VersionList& versions) {
  std::string text = program + " " + build_version() + " (" + build_commit() + ")\n";
  for (const auto& [name, version] : versions) {
    text += "  " + name + ": " + version + "\n";
  }
  return text;
}

}  // namespace cudaagent
