#include <torch/extension.h>

namespace {
struct Warmup {
  Warmup() {
    new c10::impl::ExcludeDispatchKeyGuard(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  }
};
Warmup warmup;
}  // namespace

void version() {}  // registered so that the module has a function; never called
