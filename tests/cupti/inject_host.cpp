// A host process for the injection library without a GPU: opens it as the driver would, calls
// InitializeInjection, then the harness's flush and stream-id calls, and prints what they return.
// Usage: cudaagent_inject_host LIBRARY
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cudaagent_inject_host LIBRARY\n");
    return 2;
  }
  void* library = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "cudaagent_inject_host: cannot open '%s': %s\n", argv[1], ::dlerror());
    return 1;
  }
  using Init = int (*)();
  using Flush = int (*)();
  using StreamId = long long (*)(void*);
  auto init = reinterpret_cast<Init>(::dlsym(library, "InitializeInjection"));
  auto flush = reinterpret_cast<Flush>(::dlsym(library, "cudaagent_cupti_flush"));
  auto stream_id = reinterpret_cast<StreamId>(::dlsym(library, "cudaagent_cupti_stream_id"));
  if (init == nullptr || flush == nullptr || stream_id == nullptr) {
    std::fprintf(stderr, "cudaagent_inject_host: '%s' lacks an entry point\n", argv[1]);
    return 1;
  }
  std::printf("init %d\n", init());
  std::printf("init-again %d\n", init());
  std::printf("flush %d\n", flush());
  std::printf("stream %lld\n", stream_id(nullptr));
  return 0;
}
