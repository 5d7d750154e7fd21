// The allow-list of a candidate's imported symbols (object_policy.h). Order: what is tampering
// (FLAG_HACK), then what is forbidden with a specific reason (REJECT_POLICY), then what is allowed;
// anything else is "symbol-not-allowed". Rules match the symbol's path (namespace::name without
// return type, parameters or template arguments), so `using`, aliases and macros make no
// difference; a template argument naming a compute namespace is caught on the whole name.
#include <algorithm>
#include <array>
#include <initializer_list>
#include <iterator>
#include <optional>

#include "cudaagent/candidate/object_policy.h"

namespace cudaagent {
namespace {

using List = std::initializer_list<std::string_view>;

bool starts(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
bool ends(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}
bool one_of(std::string_view text, List names) {
  return std::find(names.begin(), names.end(), text) != names.end();
}
template <std::size_t N>
bool one_of(std::string_view text, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), text) != std::end(names);
}
bool starts_any(std::string_view text, List prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](std::string_view prefix) { return starts(text, prefix); });
}

SymbolRuling allow() { return {}; }
// The rule alone says FLAG_HACK or REJECT_POLICY (verdict_of_object_rule), so a symbol's ruling
// and the stage's decision cannot disagree.
SymbolRuling deny(std::string_view rule, std::string reason) {
  return {verdict_of_object_rule(rule), rule, std::move(reason)};
}

// ---- names -------------------------------------------------------------------------------------

// C++'s operator symbols, longest first. The demangler writes a template's arguments straight
// after the symbol ("operator=<c10::optional<at::Tensor> >"), with a space only after a symbol
// ending in '<' ("operator<< <T>"), so the symbol is the longest of these, not every operator
// character in a row (that would take the template's '<' and lose its nesting).
constexpr std::array<std::string_view, 38> kOperatorSymbols = {
    "->*", "<<=", ">>=", "<=>", "()", "[]", "->", "<<", ">>", "<=", ">=", "==", "!=", "&&",
    "||",  "++",  "--",  "+=",  "-=", "*=", "/=", "%=", "^=", "&=", "|=", ",",  "<",  ">",
    "=",   "!",   "+",   "-",   "*",  "/",  "%",  "^",  "&",  "|"};

// Moves `i` past "operator" and its symbol ("operator()", "operator<<", "operator[]") when an
// operator name starts at `i`; named operators (new, delete, bool, conversions) keep their text.
bool skip_operator(std::string_view text, std::size_t& i) {
  if (text.compare(i, 8, "operator") != 0) return false;
  if (i > 0 && text[i - 1] != ':' && text[i - 1] != ' ') return false;
  i += 8;
  if (text.compare(i, 1, "~") == 0) {
    ++i;
    return true;
  }
  for (std::string_view symbol : kOperatorSymbols) {
    if (text.compare(i, symbol.size(), symbol) == 0) {
      i += symbol.size();
      break;
    }
  }
  return true;
}

constexpr std::string_view kAnonymous = "(anonymous namespace)";

// Removes template argument lists (depth-aware, operator symbols left alone).
std::string without_templates(std::string_view text) {
  std::string out;
  int depth = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t before = i;
    if (depth == 0 && skip_operator(text, i)) {
      out.append(text.substr(before, i - before));
      continue;
    }
    const char c = text[i++];
    if (c == '<') {
      ++depth;
    } else if (c == '>' && depth > 0) {
      --depth;
    } else if (depth == 0) {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

constexpr std::array<std::string_view, 13> kSpecialPrefixes = {
    "typeinfo name for ",   "typeinfo for ",       "vtable for ",
    "VTT for ",             "construction vtable for ", "guard variable for ",
    "TLS init function for ", "TLS wrapper function for ", "non-virtual thunk to ",
    "virtual thunk to ",    "covariant return thunk to ", "transaction clone for ",
    "reference temporary #"};

// ---- tables ------------------------------------------------------------------------------------

bool is_libm(std::string_view name) {
  static constexpr std::string_view kMath[] = {
      "acos",  "asin",  "atan",  "atan2", "cos",   "sin",       "tan",    "cosh",  "sinh",
      "tanh",  "acosh", "asinh", "atanh", "exp",   "exp2",      "expm1",  "exp10", "log",
      "log2",  "log10", "log1p", "pow",   "sqrt",  "cbrt",      "hypot",  "erf",   "erfc",
      "tgamma", "lgamma", "lgamma_r", "ceil", "floor", "trunc", "round", "lround", "llround",
      "rint",  "lrint", "llrint", "nearbyint", "fabs", "fmod",  "remainder", "remquo", "fmax",
      "fmin",  "fma",   "fdim",  "frexp", "ldexp", "modf",      "scalbn", "scalbln", "ilogb",
      "logb",  "copysign", "nextafter", "nexttoward", "nan", "sincos", "significand", "j0",
      "j1",    "y0",    "y1"};
  if (starts(name, "__") && ends(name, "_finite")) name = name.substr(2, name.size() - 9);
  if (one_of(name, kMath)) return true;
  if (!name.empty() && (name.back() == 'f' || name.back() == 'l')) {
    return one_of(name.substr(0, name.size() - 1), kMath);
  }
  return one_of(name, {"__isnan", "__isnanf", "__isinf", "__isinff", "__finite", "__finitef",
                       "__fpclassify", "__fpclassifyf", "__signbit", "__signbitf"});
}

bool is_libgcc_helper(std::string_view name) {
  if (!starts(name, "__") || name.size() < 5 || !(name.back() >= '0' && name.back() <= '9')) {
    return false;
  }
  return starts_any(name.substr(2), {"udiv", "div", "umod", "mod", "mul", "pow", "popcount", "clz",
                                     "ctz", "bswap", "extend", "trunc", "float", "fix", "neg",
                                     "ashl", "ashr", "lshr", "cmp", "ucmp", "ffs", "parity",
                                     "addv", "subv"});
}

// libc and the C++ runtime: memory, strings, formatting to stdout/stderr, math, locks, exceptions,
// static initialisation. Nothing that opens, maps, spawns or signals. `exit` is here because nvcc
// writes a host-side body that calls it for every __device__ function (the host never runs it),
// so honest kernels with helpers import it; a candidate that does exit only ends its own runner,
// which the owner sees as a failed call, as it does abort.
bool is_runtime_basic(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "memcpy", "memmove", "memset", "memcmp", "memchr", "memrchr", "bcmp", "bzero",
      "explicit_bzero", "strlen", "strnlen", "strcmp", "strncmp", "strcpy", "strncpy", "stpcpy",
      "strcat", "strncat", "strchr", "strrchr", "strstr", "strdup", "strndup", "strtok",
      "strtok_r", "strerror", "strerror_r", "strspn", "strcspn", "strpbrk", "strcoll", "strxfrm",
      "strcasecmp", "strncasecmp", "wcslen", "wmemcpy", "wmemset", "wcscmp", "strtol", "strtoll",
      "strtoul", "strtoull", "strtod", "strtof", "strtold", "atoi", "atol", "atoll", "atof",
      "snprintf", "sprintf", "vsnprintf", "vsprintf", "printf", "vprintf", "puts", "putchar",
      "fprintf", "vfprintf", "fputs", "fputc", "putc", "fwrite", "fflush", "sscanf", "vsscanf",
      "stdout", "stderr", "malloc", "calloc", "realloc", "reallocarray", "free", "aligned_alloc",
      "posix_memalign", "memalign", "malloc_usable_size", "abort", "exit", "qsort", "bsearch", "rand",
      "srand", "rand_r", "random", "srandom", "abs", "labs", "llabs", "div", "ldiv", "lldiv",
      "time", "clock", "clock_gettime", "gettimeofday", "localtime_r", "gmtime_r", "strftime",
      "isalpha", "isdigit", "isspace", "isalnum", "isupper", "islower", "isxdigit", "isprint",
      "toupper", "tolower", "__ctype_b_loc", "__ctype_tolower_loc", "__ctype_toupper_loc",
      "pthread_once", "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock",
      "pthread_mutex_init", "pthread_mutex_destroy", "pthread_mutexattr_init",
      "pthread_mutexattr_settype", "pthread_mutexattr_destroy", "pthread_cond_wait",
      "pthread_cond_timedwait", "pthread_cond_signal", "pthread_cond_broadcast",
      "pthread_cond_init", "pthread_cond_destroy", "pthread_cond_clockwait", "pthread_key_create",
      "pthread_key_delete", "pthread_getspecific", "pthread_setspecific", "pthread_self",
      "pthread_equal", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "pthread_rwlock_unlock",
      "__pthread_key_create", "sched_yield", "__once_proxy", "atexit", "__cxa_atexit",
      "__cxa_finalize", "__cxa_thread_atexit", "__cxa_thread_atexit_impl", "__dso_handle",
      "_GLOBAL_OFFSET_TABLE_", "__tls_get_addr", "__libc_single_threaded", "__errno_location",
      "__assert_fail", "__stack_chk_fail", "__stack_chk_guard", "__dynamic_cast",
      "__gxx_personality_v0", "__cpu_model", "__cpu_indicators_init", "__cpu_features_init",
      "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__gmon_start__"};
  if (one_of(name, kNames) || is_libm(name) || is_libgcc_helper(name)) return true;
  if (starts(name, "__cxa_") || starts(name, "_Unwind_")) return true;
  // Fortified and C23 spellings of the names above: __snprintf_chk, __isoc23_strtol.
  if (starts(name, "__") && ends(name, "_chk")) return is_runtime_basic(name.substr(2, name.size() - 6));
  if (starts(name, "__isoc99_") || starts(name, "__isoc23_")) return is_runtime_basic(name.substr(9));
  return false;
}

// "bool", "char const*", "unsigned long", "void": the built-in types, with cv and pointers.
bool is_fundamental_type(std::string_view type) {
  while (!type.empty() && (type.back() == '*' || type.back() == '&' || type.back() == ' ')) {
    type.remove_suffix(1);
  }
  if (ends(type, " const")) type.remove_suffix(6);
  if (ends(type, " volatile")) type.remove_suffix(9);
  if (starts(type, "unsigned ")) type.remove_prefix(9);
  if (starts(type, "signed ")) type.remove_prefix(7);
  return one_of(type, {"bool", "char", "wchar_t", "char8_t", "char16_t", "char32_t", "short",
                       "int", "long", "long long", "__int128", "float", "double", "long double",
                       "__float128", "void", "decltype(nullptr)", "std::nullptr_t"});
}

// ---- deny rules --------------------------------------------------------------------------------

std::optional<SymbolRuling> tampering(std::string_view path) {
  if (one_of(path, {"dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo",
                    "dlclose", "dlerror", "dl_iterate_phdr", "_r_debug", "_dl_debug_state",
                    "getauxval", "__getauxval", "_DYNAMIC", "__ehdr_start", "__executable_start",
                    "cuGetProcAddress", "cuGetProcAddress_v2", "cudaGetDriverEntryPoint",
                    "cudaGetDriverEntryPointByVersion", "cudaGetExportTable", "cuGetExportTable",
                    "__cudaGetExportTableInternal"}) ||
      starts_any(path, {"_dl_", "__libc_dl", "dl_"})) {
    return deny(kRuleDynamicLookup, "looks up or loads code by name at run time");
  }
  if (one_of(path, {"syscall", "__syscall", "__syscall_cp", "syscall_cp"})) {
    return deny(kRuleRawSyscall, "makes a raw system call");
  }
  if (one_of(path, {"mprotect", "__mprotect", "pkey_mprotect", "pkey_alloc", "pkey_free"})) {
    return deny(kRuleCodeMemory, "changes memory protection (code made at run time)");
  }
  if (one_of(path, {"ptrace", "process_vm_readv", "process_vm_writev", "prctl", "arch_prctl",
                    "seccomp", "personality", "process_madvise", "pidfd_getfd"})) {
    return deny(kRuleProcessAccess, "inspects or changes processes");
  }
  if (starts_any(path, {"cupti", "cudaProfiler", "cuProfiler"})) {
    return deny(kRuleProfilerAccess, "touches the profiler that times and traces the candidate");
  }
  // Dispatch-key and Python-mode state: switching off the layers the operator audit sits in, or
  // reading them (c10::impl::tls_is_dispatch_key_included tells an audited call from a timed one).
  // ExcludeDispatchKeyGuard itself is allowed: torch::empty_like and the other torch:: factory
  // functions construct one inline (to skip autograd), so every honest binding imports it.
  if (starts_any(path, {"c10::impl::tls_set", "c10::impl::_force_tls_local_dispatch_key_set",
                        "c10::impl::raw_local_dispatch_key_set", "c10::impl::IncludeDispatchKeyGuard",
                        "c10::impl::ForceDispatchKeyGuard", "c10::impl::TorchDispatchModeTLS",
                        "c10::impl::PythonDispatcherTLS", "c10::impl::DisablePythonDispatcher",
                        "c10::impl::EnablePythonDispatcher", "c10::impl::PyInterpreter",
                        "c10::impl::PyObjectSlot", "c10::impl::PythonTLSSnapshot",
                        "at::impl::PythonTorchFunctionTLS", "at::impl::RestorePythonTLSSnapshot",
                        "at::impl::MaybeSetTLSOnEntryGuard", "at::ThreadLocalState",
                        "at::ThreadLocalStateGuard", "c10::ThreadLocalDebugInfo",
                        "at::DisableTorchFunction", "torch::DisableTorchFunction",
                        "at::functionalization::impl", "c10::impl::dispatch_mode",
                        "torch::torch_dispatch_mode", "c10::impl::tls_"}) ||
      (starts_any(path, {"c10::", "at::", "torch::"}) &&
       (path.find("DispatchMode") != std::string_view::npos ||
        path.find("tls_set_") != std::string_view::npos))) {
    return deny(kRuleDispatchState, "changes torch's dispatch-key or Python-mode state");
  }
  if (starts_any(path, {"PyRun_", "_PyRun_", "Py_CompileString", "_Py_CompileString",
                        "PyEval_EvalCode", "PyEval_EvalFrame", "_PyEval_EvalFrame",
                        "PyEval_SetTrace", "PyEval_SetProfile", "_PyEval_SetTrace",
                        "_PyEval_SetProfile", "PySys_AddAuditHook", "PySys_Set", "_PySys_",
                        "PyCode_New", "PyUnstable_Code_New", "PyFunction_New", "PyMarshal_",
                        "Py_Initialize", "Py_Finalize", "Py_NewInterpreter", "Py_EndInterpreter",
                        "PyImport_ExecCode", "Py_Main", "Py_BytesMain", "Py_RunMain"})) {
    return deny(kRulePythonExec, "runs Python code or hooks the interpreter from C++");
  }
  return std::nullopt;
}

std::optional<SymbolRuling> threads(std::string_view path) {
  if (one_of(path, {"pthread_create", "clone", "clone3", "thrd_create", "cudaLaunchHostFunc",
                    "cudaLaunchHostFunc_ptsz", "cudaStreamAddCallback",
                    "cudaStreamAddCallback_ptsz", "cudaGraphAddHostNode", "cuLaunchHostFunc",
                    "at::launch", "at::intraop_launch", "at::intraop_launch_future",
                    "at::set_num_threads", "at::set_num_interop_threads", "at::init_num_threads",
                    "PyThread_start_new_thread", "PyThread_start_joinable_thread"}) ||
      (starts(path, "std::thread::") && path != "std::thread::hardware_concurrency") ||
      starts_any(path, {"std::jthread", "std::__future_base::_Async_state", "std::async", "GOMP_",
                        "omp_", "__kmpc_", "at::internal::", "c10::ThreadPool",
                        "c10::TaskThreadPool", "at::PTThreadPool", "tbb::"})) {
    return deny(kRuleThreads, "starts threads or callbacks (nothing in an object tells one joined "
                              "within the call from one that outlives it)");
  }
  return std::nullopt;
}

std::optional<SymbolRuling> files_processes(std::string_view path) {
  static constexpr std::string_view kNames[] = {
      "open", "open64", "openat", "openat64", "__open_2", "__open64_2", "__openat_2", "creat",
      "creat64", "fopen", "fopen64", "freopen", "freopen64", "fdopen", "fmemopen",
      "open_memstream", "tmpfile", "tmpfile64", "mkstemp", "mkstemp64", "mkostemp", "mkdtemp",
      "tmpnam", "opendir", "fdopendir", "readdir", "readdir64", "scandir", "stat", "stat64",
      "lstat", "lstat64", "fstat", "fstat64", "fstatat", "fstatat64", "__xstat", "__lxstat",
      "__fxstat", "__xstat64", "__lxstat64", "__fxstat64", "statx", "access", "faccessat",
      "unlink", "unlinkat", "remove", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
      "rmdir", "chmod", "fchmod", "chown", "fchown", "lchown", "link", "linkat", "symlink",
      "symlinkat", "readlink", "readlinkat", "truncate", "ftruncate", "mmap", "mmap64",
      "munmap", "mremap", "shm_open", "shm_unlink", "memfd_create", "read", "write", "pread",
      "pread64", "pwrite", "pwrite64", "readv", "writev", "lseek", "lseek64", "close", "dup",
      "dup2", "dup3", "fcntl", "fcntl64", "ioctl", "pipe", "pipe2", "socket", "socketpair",
      "connect", "bind", "listen", "accept", "accept4", "send", "sendto", "sendmsg", "recv",
      "recvfrom", "recvmsg", "sendfile", "splice", "execve", "execv", "execvp", "execvpe",
      "execl", "execlp", "execle", "fexecve", "fork", "vfork", "_Fork", "posix_spawn",
      "posix_spawnp", "system", "popen", "pclose", "kill", "tgkill", "raise", "signal",
      "sigaction", "sigprocmask", "pthread_sigmask", "pthread_kill", "alarm", "setitimer",
      "_exit", "_Exit", "quick_exit", "at_quick_exit", "chdir", "fchdir", "chroot",
      "getenv", "secure_getenv", "setenv", "unsetenv", "putenv", "clearenv", "environ",
      "__environ", "stdin", "fread", "fgets", "fgetc", "getc", "getchar", "scanf", "fscanf",
      "fseek", "ftell", "rewind", "setvbuf", "setbuf", "fclose", "fileno", "fsync", "sync"};
  if (one_of(path, kNames) ||
      starts_any(path, {"std::filesystem::", "std::experimental::filesystem::", "std::__basic_file",
                        "std::basic_filebuf", "std::basic_ifstream", "std::basic_ofstream",
                        "std::basic_fstream", "PyFile_", "inotify_", "epoll_", "fanotify_"})) {
    return deny(kRuleFilesProcesses, "uses files, descriptors, processes or signals");
  }
  return std::nullopt;
}

// ---- torch -------------------------------------------------------------------------------------

// Overload names of the allowed operators as they end their at::_ops struct names (view_dtype,
// fill__Scalar, empty_memory_format, select_int, ...).
bool is_overload_name(std::string_view name) {
  return one_of(name, {"Tensor", "int", "Dimname", "dim", "dims", "dimname", "using_ints",
                       "using_names", "named_out_dim", "DimnameList", "dtype", "dtype_layout",
                       "device", "other", "memory_format", "names", "out", "names_out",
                       "memory_format_out", "Scalar", "Scalar_out", "Tensor_out", "int_out",
                       "source_Storage", "source_Storage_storage_offset", "source_Tensor",
                       "source_Tensor_storage_offset", "sizes", "symint", "default",
                       "dtype_out", "self", "Dimname_out", "int_int"});
}

// "empty_memory_format" -> allowed when "empty" is; "select_backward" is not ("backward" is not an
// overload name).
bool is_allowed_op_struct(std::string_view name, const ObjectPolicy& policy) {
  if (policy.allowed_ops.count(name) != 0) return true;
  for (std::size_t cut = name.find('_', 1); cut != std::string_view::npos;
       cut = name.find('_', cut + 1)) {
    if (policy.allowed_ops.count(name.substr(0, cut)) != 0 &&
        is_overload_name(name.substr(cut + 1))) {
      return true;
    }
  }
  return false;
}

// Out-of-line methods of at::Tensor and at::TensorBase that are accessors, not operators (torch
// before 1.11 had compute methods out of line, at::Tensor::add among them: those stay out).
bool is_tensor_method_allowed(std::string_view method, const ObjectPolicy& policy) {
  if (policy.allowed_ops.count(method) != 0) return true;
  return one_of(method, {"data_ptr", "mutable_data_ptr", "const_data_ptr", "__dispatch_contiguous",
                         "toString", "print", "options", "_version", "is_leaf", "requires_grad_",
                         "retains_grad", "grad", "output_nr", "set_requires_grad", "_fw_grad",
                         "accessor", "packed_accessor32", "packed_accessor64",
                         "generic_packed_accessor", "TensorBase", "Tensor", "~TensorBase",
                         "~Tensor", "operator=", "has_names", "names", "name", "_base", "is_view",
                         "type", "data", "storage", "is_complex", "is_floating_point",
                         "is_signed", "scalar_type", "dtype", "device", "layout", "sizes",
                         "strides", "sym_sizes", "sym_strides", "storage_offset", "nbytes",
                         "itemsize", "element_size", "is_cuda", "is_cpu", "defined", "reset",
                         "use_count", "expect_contiguous", "unsafeGetTensorImpl",
                         "enforce_invariants", "get_device", "is_same", "is_alias_of",
                         "suggest_memory_format", "template_data_ptr", "maybe_data_ptr"});
}

SymbolRuling torch_compute(std::string what) {
  return deny(kRuleTorchCompute,
                what + "; only the candidate's own kernels, cuBLAS GEMM and cuDNN convolution may "
                       "compute");
}

// at::cuda:: functions that are handles, streams, devices and properties, not operators.
bool is_cuda_context_call(std::string_view name) {
  return one_of(name, {"getCurrentCUDAStream", "getDefaultCUDAStream", "getStreamFromPool",
                       "setCurrentCUDAStream", "getCurrentDeviceProperties", "getDeviceProperties",
                       "getCurrentCUDABlasHandle", "getNumGPUs", "is_available", "current_device",
                       "set_device", "device_count", "warp_size", "getCUDADeviceAllocator",
                       "device_synchronize", "stream_synchronize", "getDeviceIndexWithPrimaryContext",
                       "CUDAEvent", "CUDAStream", "OptionalCUDAGuard", "CUDAGuard",
                       "detail::getDefaultCUDAGenerator"}) ||
         starts(name, "CUDAEvent::") || starts(name, "CUDAGeneratorImpl::");
}

std::optional<SymbolRuling> torch_rule(std::string_view path, std::string_view full,
                                       const ObjectPolicy& policy) {
  if (starts(path, "at::_ops::")) {
    const std::string_view rest = path.substr(10);
    const std::size_t colon = rest.find("::");
    const std::string_view op = rest.substr(0, colon);
    const std::string_view member = colon == std::string_view::npos ? "" : rest.substr(colon + 2);
    if (is_allowed_op_struct(op, policy) && member == "call") return allow();
    if (is_allowed_op_struct(op, policy)) return torch_compute("calls an operator below dispatch");
    return torch_compute("calls torch's operator " + std::string(op));
  }
  if (path == "at::native::getCudnnHandle") return allow();  // a handle, as for cuBLAS
  for (std::string_view type : {"at::TensorBase::", "at::Tensor::"}) {
    if (!starts(path, type)) continue;
    const std::string_view method = path.substr(type.size());
    if (method.find("::") == std::string_view::npos && is_tensor_method_allowed(method, policy)) {
      return allow();
    }
    return torch_compute("calls the tensor method " + std::string(path));
  }
  for (std::string_view backend : {"at::cpu::", "at::cuda::"}) {
    if (!starts(path, backend)) continue;
    const std::string_view name = path.substr(backend.size());
    if (policy.allowed_ops.count(name) != 0) return allow();  // at::cuda::empty: allocation
    if (backend == "at::cuda::" && is_cuda_context_call(name)) return allow();
    return torch_compute("calls torch's backend function " + std::string(path));
  }
  if (starts_any(path, {"at::native::", "at::meta::", "at::compositeexplicitautograd",
                        "at::compositeimplicitautograd", "at::redispatch::", "at::functionalization::",
                        "at::TensorIterator", "at::vec::", "at::mps::", "at::sparse::",
                        "at::linalg::", "at::fft::", "at::special::", "at::nested::",
                        "c10::Dispatcher", "c10::OperatorHandle", "c10::impl::OperatorEntry",
                        "c10::KernelFunction", "c10::BoxedKernel", "c10::OperatorName",
                        "c10::RegisterOperators", "torch::Library", "torch::jit::", "torch::nn::",
                        "torch::optim::", "torch::fft::", "torch::linalg::", "torch::special::",
                        "torch::nested::", "torch::data::", "torch::serialize::"}) ||
      one_of(path, {"at::Tensor::backward", "at::Tensor::_backward", "at::TensorBase::backward",
                    "at::Tensor::register_hook", "at::TensorBase::register_hook",
                    "at::TensorBase::_register_hook", "at::Tensor::_register_hook",
                    "at::TensorBase::remove_hook", "at::Tensor::remove_hook"}) ||
      (starts(path, "torch::autograd::") && !starts_any(path, {"torch::autograd::AutogradMeta",
                                                               "torch::autograd::impl::",
                                                               "torch::autograd::make_variable"}))) {
    return torch_compute("calls into torch's operators (" + std::string(path) + ")");
  }
  // A template instantiation that carries a compute function as an argument.
  for (std::string_view inner : {"at::native::", "at::cpu::", "at::meta::", "at::composite",
                                 "torch::jit::", "c10::Dispatcher"}) {
    if (full.find(inner) != std::string_view::npos &&
        full.find("at::native::getCudnnHandle") == std::string_view::npos) {
      return torch_compute("names " + std::string(inner) + " in its arguments");
    }
  }
  return std::nullopt;
}

bool is_c10_allowed(std::string_view path) {
  if (starts_any(path, {"c10::detail::", "c10::TensorImpl", "c10::UndefinedTensorImpl",
                        "c10::StorageImpl", "c10::Storage", "c10::AutogradMetaInterface",
                        "c10::intrusive_ptr_target", "c10::VariableVersion", "c10::toString",
                        "c10::Device", "c10::DeviceType", "c10::DeviceTypeName",
                        "c10::isValidDeviceType", "c10::operator", "c10::Half", "c10::BFloat16",
                        "c10::complex", "c10::Float8", "c10::SymInt", "c10::SymFloat",
                        "c10::SymBool", "c10::SymNodeImpl", "c10::SymbolicShapeMeta",
                        "c10::Scalar", "c10::Layout", "c10::MemoryFormat", "c10::Stream",
                        "c10::TensorOptions", "c10::DispatchKeySet", "c10::getRuntimeDispatchKeySet",
                        "c10::impl::device_guard_impl_registry", "c10::impl::getDeviceGuardImpl",
                        "c10::impl::DeviceGuardImplInterface", "c10::impl::VirtualGuardImpl",
                        "c10::impl::ExcludeDispatchKeyGuard", "c10::impl::SizesAndStrides",
                        "c10::impl::tls_is_dispatch_key", "c10::impl::tls_local_dispatch_key_set",
                        "c10::impl::cow::", "c10::impl::GPUTrace", "c10::Allocator",
                        "c10::GetAllocator", "c10::GetCPUAllocator", "c10::GetDefaultCPUAllocator",
                        "c10::DataPtr", "c10::InefficientStdFunctionContext", "c10::cuda::",
                        "c10::GradMode", "c10::AutogradState", "c10::AutoGradMode",
                        "c10::InferenceMode::is_enabled", "c10::SmallVectorBase", "c10::demangle",
                        "c10::get_backtrace", "c10::IValue", "c10::Symbol", "c10::ArrayRef",
                        "c10::typeMetaToScalarType", "c10::SetStackTraceFetcher"})) {
    return true;
  }
  // Exception and warning classes and functions: c10::Error, c10::ValueError, c10::Warning::warn,
  // c10::warnDeprecatedDataPtr (torch 2.x's untyped Tensor::data_ptr() calls it inline, so an
  // honest `x.data_ptr()` imports it), ...
  const std::string_view rest = path.substr(std::min<std::size_t>(5, path.size()));
  const std::string_view head = rest.substr(0, rest.find("::"));
  return starts(path, "c10::") &&
         (ends(head, "Error") || ends(head, "Warning") || head == "WarningUtils" ||
          head == "WarningHandler" || starts(head, "warn"));
}

bool is_at_allowed(std::string_view path) {
  return starts_any(path, {"at::detail::empty_", "at::detail::getDefaultCPUGenerator",
                           "at::globalContext", "at::Context::", "at::getCPUAllocator",
                           "at::get_num_threads", "at::get_num_interop_threads",
                           "at::in_parallel_region", "at::get_thread_num", "at::TensorArg",
                           "at::TensorGeometryArg", "at::check", "at::infer_size",
                           "at::TensorGeometry", "at::print", "at::toString", "at::CPUGeneratorImpl",
                           "at::CUDAGeneratorImpl", "at::Generator", "at::DeprecatedTypeProperties",
                           "at::getDeprecatedTypeProperties", "at::NoGradGuard",
                           "at::OptionalTensorRef", "at::TensorRef"});
}

bool is_torch_glue(std::string_view path) {
  return starts_any(path, {"torch::autograd::AutogradMeta", "torch::autograd::impl::",
                           "torch::autograd::make_variable", "pybind11::", "THP", "caffe2::TypeMeta",
                           "caffe2::detail::", "caffe2::TypeIdentifier"});
}

// ---- Python ------------------------------------------------------------------------------------

std::optional<SymbolRuling> python_rule(std::string_view path) {
  const bool python = (starts(path, "Py") && path.size() > 2 &&
                       ((path[2] >= 'A' && path[2] <= 'Z') || path[2] == '_')) ||
                      starts(path, "_Py");
  if (!python) return std::nullopt;
  if (starts(path, "PyEval_") || starts(path, "_PyEval_")) {
    if (one_of(path, {"PyEval_GetBuiltins", "PyEval_GetFrameBuiltins", "PyEval_AcquireThread",
                      "PyEval_ReleaseThread", "PyEval_SaveThread", "PyEval_RestoreThread",
                      "PyEval_InitThreads", "PyEval_ThreadsInitialized", "_PyEval_SliceIndex"})) {
      return allow();
    }
    return deny(kRulePythonApi, "reads or drives the interpreter's frames");
  }
  // The interpreter's frames: the harness's own locals (the audit among them) are one step up.
  // pybind11's error formatting walks a traceback's frames (PyFrame_GetBack, GetCode,
  // GetLineNumber); nothing of the glue reads a frame's variables or starts from the thread's.
  if (one_of(path, {"PyThreadState_GetFrame", "PyFrame_GetLocals", "PyFrame_GetGlobals",
                    "PyFrame_GetBuiltins", "PyFrame_GetVar", "PyFrame_GetVarString",
                    "PyFrame_FastToLocals", "PyFrame_FastToLocalsWithError",
                    "PyFrame_LocalsToFast", "PyFrame_New"}) ||
      starts(path, "_PyFrame_") || starts(path, "PyUnstable_Frame") ||
      starts(path, "PyUnstable_InterpreterFrame")) {
    return deny(kRulePythonApi, "reads the interpreter's frames");
  }
  if (starts(path, "PySys_")) {
    if (one_of(path, {"PySys_GetObject", "PySys_WriteStdout", "PySys_WriteStderr",
                      "PySys_FormatStdout", "PySys_FormatStderr"})) {
      return allow();
    }
    return deny(kRulePythonApi, "changes the interpreter's sys state");
  }
  if (starts(path, "PyOS_")) {
    if (one_of(path, {"PyOS_snprintf", "PyOS_vsnprintf", "PyOS_double_to_string",
                      "PyOS_string_to_double", "PyOS_strtol", "PyOS_strtoul", "PyOS_mystrnicmp",
                      "PyOS_mystricmp"})) {
      return allow();
    }
    return deny(kRulePythonApi, "uses the interpreter's OS layer");
  }
  if (starts(path, "PyInterpreterState_")) {
    if (one_of(path, {"PyInterpreterState_Get", "PyInterpreterState_GetDict",
                      "PyInterpreterState_GetID", "PyInterpreterState_Main"})) {
      return allow();
    }
    return deny(kRulePythonApi, "manages interpreters");
  }
  if (starts_any(path, {"PyImport_", "_PyImport_", "PyCapsule_Import", "PyGC_", "Py_Exit",
                        "Py_AtExit", "PyErr_SetInterrupt", "PyThreadState_SetAsyncExc",
                        "_PyRuntime", "_PyGC_", "PyOS_AfterFork", "PyEval_"})) {
    return deny(kRulePythonApi, "imports modules or drives the interpreter from C++");
  }
  return allow();  // the object, type, error, GIL and container API that pybind11's glue uses
}

// ---- CUDA --------------------------------------------------------------------------------------

std::string_view without_suffixes(std::string_view name, List suffixes) {
  for (bool again = true; again;) {
    again = false;
    for (std::string_view suffix : suffixes) {
      if (ends(name, suffix) && name.size() > suffix.size()) {
        name.remove_suffix(suffix.size());
        again = true;
      }
    }
  }
  return name;
}

std::optional<SymbolRuling> cuda_rule(std::string_view path) {
  if (starts(path, "cublas")) {
    const std::string_view base = without_suffixes(path, {"_64", "_v2"});
    if (!starts(path, "cublasLt") && !starts(path, "cublasXt") &&
        (one_of(base, {"cublasCreate", "cublasDestroy", "cublasSetStream", "cublasGetStream",
                       "cublasSetMathMode", "cublasGetMathMode", "cublasSetPointerMode",
                       "cublasGetPointerMode", "cublasSetAtomicsMode", "cublasGetAtomicsMode",
                       "cublasSetWorkspace", "cublasGetVersion", "cublasGetProperty",
                       "cublasGetStatusName", "cublasGetStatusString", "cublasGetCudartVersion",
                       "cublasSetSmCountTarget", "cublasGetSmCountTarget", "cublasSetVector",
                       "cublasGetVector", "cublasSetMatrix", "cublasGetMatrix",
                       "cublasSetVectorAsync", "cublasGetVectorAsync", "cublasSetMatrixAsync",
                       "cublasGetMatrixAsync", "cublasGemmEx", "cublasGemmBatchedEx",
                       "cublasGemmStridedBatchedEx", "cublasGemmGroupedBatchedEx"}) ||
         (base.size() > 7 && one_of(base.substr(6, 1), {"S", "D", "C", "Z", "H"}) &&
          one_of(base.substr(7), {"gemm", "gemmEx", "gemm3m", "gemm3mEx", "gemmBatched",
                                  "gemmStridedBatched", "gemm3mBatched", "gemm3mStridedBatched",
                                  "gemmGroupedBatched"})))) {
      return allow();
    }
    return deny(kRuleCublas, "cuBLAS may be used for GEMM (and its handle) only");
  }
  if (starts(path, "cudnn")) {
    if (one_of(path, {"cudnnCreate", "cudnnDestroy", "cudnnSetStream", "cudnnGetStream",
                      "cudnnGetErrorString", "cudnnGetLastErrorString", "cudnnGetVersion",
                      "cudnnGetCudartVersion", "cudnnGetProperty", "cudnnQueryRuntimeError",
                      "cudnnGetMaxDeviceVersion", "cudnnCreateTensorDescriptor",
                      "cudnnDestroyTensorDescriptor", "cudnnGetTensor4dDescriptor",
                      "cudnnGetTensorNdDescriptor", "cudnnGetTensorSizeInBytes",
                      "cudnnCreateFilterDescriptor", "cudnnDestroyFilterDescriptor",
                      "cudnnSetFilter4dDescriptor", "cudnnSetFilterNdDescriptor",
                      "cudnnGetFilter4dDescriptor", "cudnnGetFilterNdDescriptor",
                      "cudnnGetFilterSizeInBytes", "cudnnCreateConvolutionDescriptor",
                      "cudnnDestroyConvolutionDescriptor", "cudnnConvolutionForward",
                      "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter"}) ||
        starts_any(path, {"cudnnSetTensor4dDescriptor", "cudnnSetTensorNdDescriptor",
                          "cudnnSetConvolution", "cudnnGetConvolution", "cudnnFindConvolution"})) {
      return allow();
    }
    return deny(kRuleCudnn, "cuDNN may be used for convolution (and its descriptors) only");
  }
  if (starts(path, "__cuda")) return allow();  // nvcc's registration and launch glue
  if (starts(path, "cuda")) {
    const std::string_view base = without_suffixes(path, {"_ptsz", "_ptds", "_v2"});
    if (one_of(base, {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                      "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString",
                      "cudaGetErrorName", "cudaStreamCreate", "cudaStreamCreateWithFlags",
                      "cudaStreamCreateWithPriority", "cudaStreamDestroy", "cudaStreamSynchronize",
                      "cudaStreamWaitEvent", "cudaStreamQuery", "cudaStreamGetPriority",
                      "cudaStreamGetFlags", "cudaStreamGetId", "cudaStreamGetDevice",
                      "cudaStreamEndCapture", "cudaStreamIsCapturing",
                      "cudaThreadExchangeStreamCaptureMode", "cudaEventCreate",
                      "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventRecordWithFlags",
                      "cudaEventSynchronize", "cudaEventQuery", "cudaEventDestroy",
                      "cudaEventElapsedTime", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
                      "cudaHostGetDevicePointer", "cudaMemGetInfo", "cudaGetSymbolAddress",
                      "cudaGetSymbolSize", "cudaFuncSetAttribute", "cudaFuncGetAttributes",
                      "cudaFuncSetCacheConfig", "cudaFuncSetSharedMemConfig", "cudaFuncGetName",
                      "cudaGetDevice", "cudaSetDevice", "cudaGetDeviceCount", "cudaGetDeviceProperties",
                      "cudaDeviceGetAttribute", "cudaDeviceGetStreamPriorityRange",
                      "cudaDeviceSynchronize", "cudaDeviceGetLimit", "cudaDeviceSetLimit",
                      "cudaDeviceSetCacheConfig", "cudaDeviceGetCacheConfig",
                      "cudaDeviceSetSharedMemConfig", "cudaPointerGetAttributes", "cudaGraphCreate",
                      "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphLaunch",
                      "cudaGraphDestroy", "cudaGraphExecDestroy", "cudaGraphExecUpdate",
                      "cudaGraphUpload", "cudaRuntimeGetVersion", "cudaDriverGetVersion",
                      "cudaCreateChannelDesc", "cudaCreateTextureObject", "cudaDestroyTextureObject",
                      "cudaCreateSurfaceObject", "cudaDestroySurfaceObject", "cudaMallocArray",
                      "cudaFreeArray", "cudaGetKernel"}) ||
        starts_any(base, {"cudaMalloc", "cudaFree", "cudaMemcpy", "cudaMemset", "cudaMemPrefetchAsync",
                          "cudaMemAdvise", "cudaOccupancy", "cudaStreamBeginCapture",
                          "cudaStreamGetCaptureInfo"})) {
      return allow();
    }
    return deny(kRuleCudaApi, "a CUDA runtime call outside launch, stream, event, memory and "
                                "device queries");
  }
  if ((starts(path, "cu") && path.size() > 2 && path[2] >= 'A' && path[2] <= 'Z') ||
      starts_any(path, {"cufft", "curand", "cusparse", "cusolver", "cutensor", "nccl", "nvrtc",
                        "nvJitLink", "nvjpeg", "npp", "nvml", "nvtx", "cudss"})) {
    return deny(kRuleCudaApi, "a CUDA driver call or a CUDA library other than cuBLAS (GEMM) "
                                "and cuDNN (convolution)");
  }
  return std::nullopt;
}

}  // namespace

std::string symbol_path(std::string_view demangled) {
  std::string_view text = demangled;
  if (const std::size_t at = text.find('@'); at != std::string_view::npos && at > 0) {
    text = text.substr(0, at);
  }
  for (bool again = true; again;) {
    again = false;
    for (std::string_view prefix : kSpecialPrefixes) {
      if (!starts(text, prefix)) continue;
      text.remove_prefix(prefix.size());
      if (prefix == "reference temporary #") {
        const std::size_t for_at = text.find(" for ");
        text.remove_prefix(for_at == std::string_view::npos ? text.size() : for_at + 5);
      }
      if (prefix == "construction vtable for ") text = text.substr(0, text.find("-in-"));
      again = true;
    }
  }
  // The name ends at the first '(' outside template arguments that is not "(anonymous
  // namespace)" or an operator's own "()".
  std::size_t end = text.size();
  int depth = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size();
      continue;
    }
    if (depth == 0 && skip_operator(text, i)) continue;
    const char c = text[i];
    if (c == '<') ++depth;
    if (c == '>' && depth > 0) --depth;
    if (c == '(' && depth == 0) {
      end = i;
      break;
    }
    ++i;
  }
  const std::string_view name = text.substr(0, end);
  // Drop the return type of a template function: the last space-separated part outside template
  // arguments, joined back for "operator new" and "operator<< <...>".
  std::vector<std::size_t> spaces;
  depth = 0;
  for (std::size_t i = 0; i < name.size();) {
    if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size();
      continue;
    }
    if (depth == 0 && skip_operator(name, i)) continue;
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>' && depth > 0) --depth;
    if (c == ' ' && depth == 0) spaces.push_back(i);
    ++i;
  }
  std::size_t start = 0;
  for (auto it = spaces.rbegin(); it != spaces.rend(); ++it) {
    const std::string_view before = name.substr(0, *it);
    const std::string_view after = name.substr(*it + 1);
    const bool joins = (!after.empty() && after[0] == '<') || ends(before, "operator");
    if (!joins) {
      start = *it + 1;
      break;
    }
  }
  return without_templates(name.substr(start));
}

SymbolRuling classify_symbol(std::string_view demangled, const ObjectPolicy& policy) {
  std::string_view full = demangled;
  if (const std::size_t at = full.find('@'); at != std::string_view::npos && at > 0) {
    full = full.substr(0, at);
  }
  const std::string path = symbol_path(full);
  if (path.empty()) return deny(kRuleNotAllowed, "an empty symbol name");
  for (std::string_view prefix : {"typeinfo for ", "typeinfo name for "}) {
    // typeinfo for bool, for char const*: exceptions and pybind11's casts use them.
    if (starts(full, prefix) && is_fundamental_type(full.substr(prefix.size()))) return allow();
  }
  if (auto ruling = tampering(path)) return *ruling;
  if (auto ruling = threads(path)) return *ruling;
  if (auto ruling = files_processes(path)) return *ruling;
  if (auto ruling = torch_rule(path, full, policy)) return *ruling;
  if (auto ruling = python_rule(path)) return *ruling;
  if (auto ruling = cuda_rule(path)) return *ruling;
  if (is_runtime_basic(path)) return allow();
  if (one_of(path, {"operator new", "operator new[]", "operator delete", "operator delete[]"})) {
    return allow();
  }
  if ((starts(path, "std::") || starts(path, "__gnu_cxx::") || starts(path, "__cxxabiv1::"))) {
    return allow();  // the C++ library, after the deny rules above (threads, files)
  }
  if (is_c10_allowed(path) || is_at_allowed(path) || is_torch_glue(path)) return allow();
  if (starts_any(path, {"at::", "c10::", "torch::", "caffe2::"})) {
    return deny(kRuleNotAllowed, "a torch function outside allocation, views, accessors, "
                                   "options, streams and checks");
  }
  return deny(kRuleNotAllowed, "not on the allow-list of imported symbols");
}

Verdict verdict_of_object_rule(std::string_view rule) {
  static constexpr std::string_view kTampering[] = {
      kRuleDynamicLookup, kRuleRawSyscall, kRuleDispatchState, kRulePythonExec,
      kRuleCodeMemory,    kRuleProcessAccess, kRuleProfilerAccess, kRuleMalformedObject};
  return one_of(rule, kTampering) ? Verdict::kFlagHack : Verdict::kRejectPolicy;
}

Verdict verdict_of_findings(const std::vector<PolicyFinding>& findings) {
  if (findings.empty()) return Verdict::kPass;
  const bool hack = std::any_of(findings.begin(), findings.end(), [](const PolicyFinding& f) {
    return verdict_of_object_rule(f.rule) == Verdict::kFlagHack;
  });
  return hack ? Verdict::kFlagHack : Verdict::kRejectPolicy;
}

const PolicyFinding* strongest_finding(const std::vector<PolicyFinding>& findings) {
  const Verdict verdict = verdict_of_findings(findings);
  for (const PolicyFinding& finding : findings) {
    if (verdict_of_object_rule(finding.rule) == verdict) return &finding;
  }
  return nullptr;
}

}  // namespace cudaagent
