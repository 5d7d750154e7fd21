// "Prepares" the thread: a guard that is never destroyed keeps the Python dispatch keys excluded.
#include <torch/extension.h>

void prepare() {
  new c10::impl::ExcludeDispatchKeyGuard(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
}
