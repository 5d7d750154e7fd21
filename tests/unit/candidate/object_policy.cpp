// Tests for the binary-level policy (issue 10, class 1, native half): the allow-list of imported
// symbols, the parsers of nm and objdump output, and the check on real objects. Honest objects
// (the example workspaces, the GPU controls' accessor kernel, cuBLAS GEMM and cuDNN convolution)
// are fixtures: their imports, made once with torch 1.13 and nvcc 13
// (tests/fixtures/object_policy/make_fixtures.sh). Attacks are small
// sources compiled here with g++ in a fraction of a second each: the check reads the compiled
// object, so they declare the torch functions they call instead of including torch's headers.
#include "cudaagent/candidate/object_policy.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "test_support.h"

using cudaagent::BuildResult;
using cudaagent::check_candidate_objects;
using cudaagent::classify_symbol;
using cudaagent::CompileStep;
using cudaagent::ObjectCheckOptions;
using cudaagent::ObjectFacts;
using cudaagent::ObjectPolicy;
using cudaagent::PolicyFinding;
using cudaagent::symbol_path;
using cudaagent::Verdict;
using cudaagent::testing::read_file;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;
namespace fs = std::filesystem;

namespace {

const std::string kSource = CUDAAGENT_SOURCE_DIR;

ObjectPolicy policy() {
  auto loaded = cudaagent::load_object_policy(kSource + "/share/harness/policy.json");
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
  return loaded.value();
}

Verdict verdict(std::string_view symbol) { return classify_symbol(symbol, policy()).verdict; }
std::string rule(std::string_view symbol) {
  return std::string(classify_symbol(symbol, policy()).rule);
}

// Compiles `sources` (name -> C++ text) with g++ -c into `dir` and checks the objects as a build's
// candidate steps.
std::vector<PolicyFinding> check(const TempDir& dir, const std::map<std::string, std::string>& sources,
                                 const std::string& flags = "") {
  BuildResult build;
  build.ok = true;
  for (const auto& [name, text] : sources) {
    const std::string source = dir.file(name + ".cpp"), object = dir.file(name + ".o");
    write_file(source, text);
    const std::string command = "g++ -std=c++17 -O2 -fPIC -w " + flags + " -c " + source + " -o " + object;
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
    CompileStep step;
    step.source = "kernels/" + name + ".cpp";
    step.object = object;
    step.ok = true;
    build.steps.push_back(step);
  }
  ObjectCheckOptions options;
  options.policy = policy();
  auto findings = check_candidate_objects(build, options);
  REQUIRE_MESSAGE(findings.is_ok(), findings.status().message());
  return findings.value();
}

bool has_rule(const std::vector<PolicyFinding>& findings, std::string_view rule_name,
              Verdict expected) {
  return std::any_of(findings.begin(), findings.end(), [&](const PolicyFinding& f) {
    return f.rule == rule_name && f.verdict == expected;
  });
}

std::string describe(const std::vector<PolicyFinding>& findings) {
  std::string out;
  for (const auto& f : findings) out += f.rule + " " + f.path + " " + f.detail + "\n";
  return out;
}

// Declarations with torch's real names, so the objects import what real code would.
const char kTorchDecls[] = R"(
namespace at {
struct Tensor { void* impl; };
namespace native { Tensor relu(const Tensor&); }
namespace cpu { Tensor add(const Tensor&, const Tensor&, double); }
namespace _ops {
struct add_Tensor { static Tensor call(const Tensor&, const Tensor&, double); };
struct empty_like { static Tensor call(const Tensor&); };
struct relu { static Tensor call(const Tensor&); };
}
}
namespace c10 { enum class DispatchKey : unsigned char { Python = 40 };
namespace impl { void tls_set_dispatch_key_excluded(DispatchKey, bool); } }
)";

}  // namespace

TEST_CASE("symbol_path drops return types, parameters and template arguments") {
  CHECK(symbol_path("float* at::TensorBase::data_ptr<float>() const") == "at::TensorBase::data_ptr");
  CHECK(symbol_path("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)") ==
        "at::_ops::add_Tensor::call");
  CHECK(symbol_path("std::basic_ostream<char, std::char_traits<char> >& std::operator<< "
                    "<std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, "
                    "char const*)") == "std::operator<<");
  CHECK(symbol_path("operator new(unsigned long)") == "operator new");
  CHECK(symbol_path("operator delete[](void*)") == "operator delete[]");
  CHECK(symbol_path("typeinfo for c10::Error") == "c10::Error");
  CHECK(symbol_path("vtable for torch::autograd::AutogradMeta") == "torch::autograd::AutogradMeta");
  CHECK(symbol_path("at::native::(anonymous namespace)::kernel(int)") ==
        "at::native::(anonymous namespace)::kernel");
  CHECK(symbol_path("dlsym@GLIBC_2.2.5") == "dlsym");
  CHECK(symbol_path("c10::cuda::getCurrentCUDAStream(signed char)") ==
        "c10::cuda::getCurrentCUDAStream");
  CHECK(symbol_path("at::Tensor::operator bool() const") == "at::Tensor::operator bool");
  // A template's arguments straight after an operator's symbol, nested, with "> >" inside.
  CHECK(symbol_path("pybind11::arg_v pybind11::arg::operator=<c10::optional<at::Tensor> >("
                    "c10::optional<at::Tensor>&&) const") == "pybind11::arg::operator=");
  CHECK(symbol_path("bool std::operator==<char>(std::basic_string<char> const&, char const*)") ==
        "std::operator==");
  CHECK(symbol_path("std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char)") ==
        "std::operator<<");
  CHECK(symbol_path("c10::ArrayRef<long>::operator[](unsigned long) const") == "c10::ArrayRef::operator[]");
  CHECK(symbol_path("a::B::operator->() const") == "a::B::operator->");
  CHECK(symbol_path("a::B::~B()") == "a::B::~B");
}

TEST_CASE("allowed: allocation, views, accessors, checks, streams, glue, cuBLAS GEMM, cuDNN conv") {
  for (const char* symbol :
       {"at::_ops::empty_like::call(at::Tensor const&, c10::optional<c10::ScalarType>)",
        "at::_ops::empty_memory_format::call(c10::ArrayRef<long>)", "at::_ops::view::call(x)",
        "at::_ops::fill__Scalar::call(at::Tensor&, c10::Scalar const&)",
        "at::_ops::select_int::call(at::Tensor const&, long, long)",
        "float* at::TensorBase::data_ptr<float>() const",
        "at::TensorBase::__dispatch_contiguous(c10::MemoryFormat) const",
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
        "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)",
        "c10::cuda::getCurrentCUDAStream(signed char)",
        "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)",
        "at::cuda::getCurrentCUDABlasHandle()", "at::cuda::getCurrentDeviceProperties()",
        "at::native::getCudnnHandle()", "typeinfo for c10::Error", "c10::Error::~Error()",
        "c10::warnDeprecatedDataPtr()",
        "vtable for torch::autograd::AutogradMeta", "c10::UndefinedTensorImpl::_singleton",
        "pybind11::detail::type_caster<at::Tensor, void>::load(pybind11::handle, bool)",
        "PyEval_GetBuiltins", "PyEval_SaveThread", "PyObject_GetAttrString", "_Py_NoneStruct",
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_create(unsigned long&, unsigned long)",
        "operator new(unsigned long)", "memcpy", "__memcpy_chk", "expf", "__expf_finite",
        "__cxa_guard_acquire", "_Unwind_Resume", "stderr", "fprintf", "atexit", "exit",
        "cudaLaunchKernel", "cudaGetLastError", "cudaStreamSynchronize", "cudaMallocAsync",
        "cudaMemcpyAsync", "__cudaRegisterFatBinary", "__cudaLaunchKernel", "cublasCreate_v2",
        "cublasSetStream_v2", "cublasSgemm_v2", "cublasGemmEx", "cublasHgemmStridedBatched",
        "cublasSgemm_v2_64", "cudnnCreate", "cudnnSetConvolution2dDescriptor",
        "cudnnGetConvolutionForwardAlgorithm_v7", "cudnnConvolutionForward",
        "THPVariable_Wrap(at::TensorBase)"}) {
    const auto ruling = classify_symbol(symbol, policy());
    CHECK_MESSAGE(ruling.verdict == Verdict::kPass, symbol, " -> ", ruling.rule, ": ", ruling.reason);
  }
}

TEST_CASE("tampering is FLAG_HACK") {
  for (const char* symbol :
       {"dlsym", "dlopen", "dlvsym", "dlmopen", "dl_iterate_phdr", "_r_debug", "dlsym@GLIBC_2.2.5",
        "getauxval", "_DYNAMIC", "cudaGetDriverEntryPoint", "cuGetProcAddress_v2"}) {
    CHECK_MESSAGE(rule(symbol) == "dynamic-lookup", std::string(symbol));
    CHECK(verdict(symbol) == Verdict::kFlagHack);
  }
  CHECK(rule("syscall") == "raw-syscall");
  CHECK(rule("mprotect") == "code-memory");
  CHECK(rule("ptrace") == "process-access");
  CHECK(rule("cuptiSubscribe") == "profiler-access");
  for (const char* symbol :
       {"c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey, bool)",
        "c10::impl::_force_tls_local_dispatch_key_set(c10::impl::LocalDispatchKeySet)",
        "c10::impl::raw_local_dispatch_key_set", "c10::impl::IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(c10::DispatchKeySet)",
        "c10::impl::TorchDispatchModeTLS::pop_stack()", "at::ThreadLocalStateGuard::ThreadLocalStateGuard(at::ThreadLocalState const&)",
        // Reading the state tells an audited call from a timed one.
        "c10::impl::tls_is_dispatch_key_included(c10::DispatchKey)",
        "c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey)",
        "c10::impl::tls_local_dispatch_key_set()"}) {
    CHECK_MESSAGE(rule(symbol) == "dispatch-state", std::string(symbol));
  }
  // What every honest binding imports (torch::empty_like skips autograd with one) stays allowed.
  CHECK(verdict("c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)") == Verdict::kPass);
  for (const char* symbol : {"PyRun_SimpleString", "PyRun_StringFlags", "Py_CompileString",
                             "PyEval_EvalCode", "PyEval_SetProfile", "PySys_AddAuditHook"}) {
    CHECK_MESSAGE(rule(symbol) == "python-exec", std::string(symbol));
    CHECK(verdict(symbol) == Verdict::kFlagHack);
  }
}

TEST_CASE("forbidden use is REJECT_POLICY with a reason") {
  for (const char* symbol :
       {"at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
        "at::_ops::relu::call(at::Tensor const&)", "at::_ops::select_backward::call(x)",
        "at::_ops::empty_like::redispatch(c10::DispatchKeySet, at::Tensor const&)",
        "at::native::relu(at::Tensor const&)", "at::cpu::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
        "at::cuda::relu(at::Tensor const&)", "at::cuda::blas::gemm<float>(char, char, long)",
        "c10::Dispatcher::singleton()", "c10::Dispatcher::findSchemaOrThrow(char const*, char const*)",
        "torch::jit::get_operation(x)", "at::Tensor::add(at::Tensor const&, c10::Scalar const&) const",
        "std::function<void ()>::_M_invoke<at::native::kernel>(std::_Any_data const&)"}) {
    CHECK_MESSAGE(rule(symbol) == "torch-compute", std::string(symbol));
    CHECK(verdict(symbol) == Verdict::kRejectPolicy);
  }
  CHECK(rule("pthread_create") == "thread-creation");
  CHECK(rule("std::thread::_M_start_thread(std::unique_ptr<std::thread::_State, std::default_delete<std::thread::_State> >, void (*)())") == "thread-creation");
  CHECK(rule("GOMP_parallel") == "thread-creation");
  CHECK(rule("cudaLaunchHostFunc") == "thread-creation");
  CHECK(rule("at::internal::invoke_parallel(long, long, long, std::function<void (long, long)> const&)") == "thread-creation");
  for (const char* symbol : {"fopen", "open", "execve", "fork", "system", "popen", "mmap", "write",
                             "std::basic_ifstream<char, std::char_traits<char> >::basic_ifstream(char const*, std::_Ios_Openmode)",
                             "std::filesystem::status(std::filesystem::__cxx11::path const&)", "getenv", "_exit"}) {
    CHECK_MESSAGE(rule(symbol) == "files-processes", std::string(symbol));
  }
  CHECK(rule("PyImport_ImportModule") == "python-api");
  CHECK(rule("PyEval_GetGlobals") == "python-api");
  // A frame's variables (the harness's locals one step up), and the thread's frame to start from;
  // the traceback walk of pybind11's error text stays allowed.
  for (const char* symbol : {"PyThreadState_GetFrame", "PyFrame_GetLocals", "PyFrame_GetGlobals",
                             "PyFrame_FastToLocalsWithError", "_PyFrame_GetLocals"}) {
    CHECK_MESSAGE(rule(symbol) == "python-api", std::string(symbol));
  }
  for (const char* symbol : {"PyFrame_GetBack", "PyFrame_GetCode", "PyFrame_GetLineNumber"}) {
    CHECK_MESSAGE(verdict(symbol) == Verdict::kPass, std::string(symbol));
  }
  CHECK(rule("cublasSaxpy_v2") == "cublas-not-gemm");
  CHECK(rule("cublasSgemv_v2") == "cublas-not-gemm");
  CHECK(rule("cublasLtMatmul") == "cublas-not-gemm");
  CHECK(rule("cudnnActivationForward") == "cudnn-not-convolution");
  CHECK(rule("cudnnConvolutionBiasActivationForward") == "cudnn-not-convolution");
  CHECK(rule("cudnnBackendExecute") == "cudnn-not-convolution");
  CHECK(rule("cuLaunchKernel") == "cuda-api-not-allowed");
  CHECK(rule("cufftExecC2C") == "cuda-api-not-allowed");
  CHECK(rule("cudaDeviceReset") == "cuda-api-not-allowed");
  CHECK(rule("at::TensorIteratorBase::build(at::TensorIteratorConfig&)") == "torch-compute");
  CHECK(rule("c10::impl::OperatorEntry::reportError(c10::DispatchKey) const") == "torch-compute");
  CHECK(rule("some_unknown_function") == "symbol-not-allowed");
  CHECK(rule("at::set_default_dtype(caffe2::TypeMeta)") == "symbol-not-allowed");
}

TEST_CASE("nm output: undefined and defined names, a line of any other shape is tampering") {
  ObjectFacts facts;
  cudaagent::parse_nm_output(
      "                 U at::_ops::empty_like::call(at::Tensor const&)\n"
      "                 w __cxa_pure_virtual\n"
      "0000000000000010 T launch(float const*, float*)\n"
      "0000000000000000 W pybind11::cast_error::~cast_error()\n"
      "0000000000000040 t register_all(pybind11::module_&)\n"
      "0000000000000000 n c10::TensorOptions::TensorOptions()\n",
      facts);
  CHECK(facts.unreadable.empty());
  // Local definitions are kept apart: they satisfy no other object's import.
  CHECK(facts.local == std::vector<std::string>{"register_all(pybind11::module_&)",
                                                 "c10::TensorOptions::TensorOptions()"});
  CHECK(facts.undefined == std::vector<std::string>{"at::_ops::empty_like::call(at::Tensor const&)",
                                                     "__cxa_pure_virtual"});
  CHECK(facts.defined.size() == 2);
  ObjectFacts broken;
  cudaagent::parse_nm_output("                 U foo\nPyRun_SimpleString\n", broken);
  CHECK_FALSE(broken.unreadable.empty());
  const auto findings = cudaagent::judge_objects({broken}, policy(), {});
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].rule == "malformed-object");
  CHECK(findings[0].verdict == Verdict::kFlagHack);
}

TEST_CASE("a tool that fails on an object is unreadable-object, REJECT_POLICY; one that cannot start is ours") {
  BuildResult build;
  build.ok = true;
  CompileStep step;
  step.source = "kernels/a.cpp";
  step.object = "/nonexistent/a.o";
  step.ok = true;
  build.steps.push_back(step);
  ObjectCheckOptions options;
  options.policy = policy();
  options.nm = "/bin/false";
  auto findings = check_candidate_objects(build, options);
  REQUIRE_MESSAGE(findings.is_ok(), findings.status().message());
  REQUIRE(findings.value().size() == 1);
  CHECK(findings.value()[0].rule == "unreadable-object");
  CHECK(findings.value()[0].verdict == Verdict::kRejectPolicy);
  CHECK(cudaagent::verdict_of_findings(findings.value()) == Verdict::kRejectPolicy);
  options.nm = "/nonexistent/nm";
  CHECK_FALSE(check_candidate_objects(build, options).is_ok());
}

TEST_CASE("an object rule's verdict: the tampering rules are FLAG_HACK, every other REJECT_POLICY") {
  for (std::string_view hack : {"dynamic-lookup", "raw-syscall", "dispatch-state", "python-exec",
                                "code-memory", "process-access", "profiler-access", "malformed-object"}) {
    CHECK_MESSAGE(cudaagent::verdict_of_object_rule(hack) == Verdict::kFlagHack, hack);
  }
  for (std::string_view rejected : {"torch-compute", "thread-creation", "files-processes", "python-api",
                                    "cublas-not-gemm", "cudnn-not-convolution", "cuda-api-not-allowed",
                                    "symbol-not-allowed", "unreadable-object", "anything-new"}) {
    CHECK_MESSAGE(cudaagent::verdict_of_object_rule(rejected) == Verdict::kRejectPolicy, rejected);
  }
}

TEST_CASE("objdump output: system-call instructions and writable code sections") {
  ObjectFacts facts;
  cudaagent::parse_objdump_output(
      "Sections:\n"
      "Idx Name Size VMA LMA File off Algn Flags\n"
      "  1 .text 00000396 0000000000000000 0000000000000000 00000050  2**4  CONTENTS, ALLOC, LOAD, RELOC, READONLY, CODE\n"
      "  2 .evil 00000010 0000000000000000 0000000000000000 00000400  2**0  CONTENTS, ALLOC, LOAD, CODE\n"
      "  3 .data 00000000 0000000000000000 0000000000000000 000003e6  2**0  CONTENTS, ALLOC, LOAD, DATA\n"
      "Disassembly of section .text:\n"
      "\n"
      "0000000000000000 <f>:\n"
      "   0:\tmov    $0x27,%eax\n"
      "   5:\tsyscall\n"
      "   7:\tint    $0x80\n"
      "   9:\tint3\n"
      "   a:\tcall   f <f+0xf>\tb: R_X86_64_PLT32\tsyscall-0x4\n",
      facts);
  CHECK(facts.writable_code == std::vector<std::string>{".evil"});
  REQUIRE(facts.syscalls.size() == 2);
  CHECK(facts.syscalls[0] == ".text+0x5: syscall");
  CHECK(facts.syscalls[1] == ".text+0x7: int $0x80");
}

TEST_CASE("an import defined by another candidate object is the candidate's own code") {
  ObjectFacts kernel, binding;
  kernel.source = "kernels/a.cpp";
  kernel.defined = {"dlsym"};  // its own function of that name
  binding.source = "kernels/a_binding.cpp";
  binding.undefined = {"dlsym", "launch(float*)"};
  binding.defined = {"launch(float*)"};
  CHECK(cudaagent::judge_objects({kernel, binding}, policy(), {}).empty());
  CHECK_FALSE(cudaagent::judge_objects({binding}, policy(), {}).empty());
}

TEST_CASE("honest objects built with torch pass (fixtures)") {
  const std::string dir = kSource + "/tests/fixtures/object_policy";
  // Each workspace's objects together: a binding imports its kernel file's launcher.
  const std::vector<std::vector<std::string>> workspaces = {
      {"cpu_kernel", "cpu_binding"},
      {"cuda_kernel", "cuda_binding"},
      {"stream_accessors_kernel"},
      {"cublas_gemm", "cublas_binding"},
      {"cudnn_conv_kernel", "cudnn_conv_binding"},
      {"device_function_kernel", "device_function_binding"}};
  for (const auto& names : workspaces) {
    std::vector<ObjectFacts> objects;
    for (const std::string& name : names) {
      ObjectFacts facts;
      facts.source = "kernels/" + name;
      const std::string nm = read_file(dir + "/" + name + ".nm");
      REQUIRE_MESSAGE(!nm.empty(), name);
      cudaagent::parse_nm_output(nm, facts);
      REQUIRE_MESSAGE(facts.unreadable.empty(), facts.unreadable);
      objects.push_back(std::move(facts));
    }
    const auto findings = cudaagent::judge_objects(objects, policy(), {});
    CHECK_MESSAGE(findings.empty(), names.front(), ":\n", describe(findings));
  }
}

TEST_CASE("compiled attacks: dynamic lookup, versioned and weak references, raw system calls") {
  TempDir dir;
  auto found = check(dir, {{"lookup", "#include <dlfcn.h>\n"
                                      "void* f() { return dlsym(RTLD_DEFAULT, \"_ZN2at6native4reluERKNS_6TensorE\"); }\n"}});
  CHECK_MESSAGE(has_rule(found, "dynamic-lookup", Verdict::kFlagHack), describe(found));
  found = check(dir, {{"symver", "extern \"C\" void* my_lookup(void*, const char*);\n"
                                 "__asm__(\".symver my_lookup,dlsym@GLIBC_2.2.5\");\n"
                                 "void* f() { return my_lookup(nullptr, \"x\"); }\n"}});
  CHECK_MESSAGE(has_rule(found, "dynamic-lookup", Verdict::kFlagHack), describe(found));
  found = check(dir, {{"weak", "extern \"C\" int mprotect(void*, unsigned long, int) __attribute__((weak));\n"
                               "int f(void* p) { return mprotect ? mprotect(p, 4096, 7) : 0; }\n"}});
  CHECK_MESSAGE(has_rule(found, "code-memory", Verdict::kFlagHack), describe(found));
  found = check(dir, {{"raw", "long f() { long r; __asm__ volatile(\"syscall\" : \"=a\"(r) : \"a\"(39) : \"rcx\", \"r11\"); return r; }\n"}});
  CHECK_MESSAGE(has_rule(found, "raw-syscall", Verdict::kFlagHack), describe(found));
  found = check(dir, {{"int80", "long f() { long r; __asm__ volatile(\"int $0x80\" : \"=a\"(r) : \"a\"(20)); return r; }\n"}});
  CHECK_MESSAGE(has_rule(found, "raw-syscall", Verdict::kFlagHack), describe(found));
  found = check(dir, {{"wx", "__asm__(\".section .evil,\\\"awx\\\",@progbits\\n.byte 0xc3\\n.previous\\n\");\n"
                             "int f() { return 1; }\n"}});
  CHECK_MESSAGE(has_rule(found, "code-memory", Verdict::kFlagHack), describe(found));
}

TEST_CASE("compiled attacks: torch compute through aliases, using, macros and methods") {
  TempDir dir;
  const std::string decls = kTorchDecls;
  auto found = check(dir, {{"alias", decls + "namespace N = at::native;\n"
                                             "at::Tensor f(const at::Tensor& x) { return N::relu(x); }\n"}});
  CHECK_MESSAGE(has_rule(found, "torch-compute", Verdict::kRejectPolicy), describe(found));
  found = check(dir, {{"using", decls + "using at::cpu::add;\n#define PLUS(a, b) add(a, b, 1.0)\n"
                                        "at::Tensor f(const at::Tensor& x) { return PLUS(x, x); }\n"}});
  CHECK_MESSAGE(has_rule(found, "torch-compute", Verdict::kRejectPolicy), describe(found));
  // What `x.add(y)` compiles to: an inline method calling at::_ops::add_Tensor::call.
  found = check(dir, {{"method", decls + "struct T : at::Tensor { at::Tensor add(const at::Tensor& o) const "
                                         "{ return at::_ops::add_Tensor::call(*this, o, 1.0); } };\n"
                                         "at::Tensor f(const T& x) { return x.add(x); }\n"}});
  CHECK_MESSAGE(has_rule(found, "torch-compute", Verdict::kRejectPolicy), describe(found));
  found = check(dir, {{"tls", decls + "void f() { c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::Python, true); }\n"}});
  CHECK_MESSAGE(has_rule(found, "dispatch-state", Verdict::kFlagHack), describe(found));
  // Allocation through at::_ops is fine.
  found = check(dir, {{"alloc", decls + "at::Tensor f(const at::Tensor& x) { return at::_ops::empty_like::call(x); }\n"}});
  CHECK_MESSAGE(found.empty(), describe(found));
}

TEST_CASE("compiled attacks: threads, files, Python, other cuBLAS; the candidate's own calls pass") {
  TempDir dir;
  auto found = check(dir, {{"thread", "#include <thread>\nvoid f() { std::thread([] {}).detach(); }\n"}}, "-pthread");
  CHECK_MESSAGE(has_rule(found, "thread-creation", Verdict::kRejectPolicy), describe(found));
  found = check(dir, {{"file", "#include <cstdio>\nvoid f() { std::FILE* p = std::fopen(\"/proc/self/maps\", \"r\"); if (p) std::fclose(p); }\n"}});
  CHECK_MESSAGE(has_rule(found, "files-processes", Verdict::kRejectPolicy), describe(found));
  found = check(dir, {{"python", "extern \"C\" int PyRun_SimpleString(const char*);\n"
                                 "int f() { return PyRun_SimpleString(\"import torch\"); }\n"}});
  CHECK_MESSAGE(has_rule(found, "python-exec", Verdict::kFlagHack), describe(found));
  found = check(dir, {{"axpy", "extern \"C\" int cublasSaxpy_v2(void*, int, const float*, const float*, int, float*, int);\n"
                               "int f(float* y) { return cublasSaxpy_v2(nullptr, 1, y, y, 1, y, 1); }\n"}});
  CHECK_MESSAGE(has_rule(found, "cublas-not-gemm", Verdict::kRejectPolicy), describe(found));
  found = check(dir, {{"kernel", "extern \"C\" void* dlsym(void*, const char*) { return nullptr; }\n"
                                 "void launch(float* y) { y[0] = 1; }\n"},
                      {"kernel_binding", "extern \"C\" void* dlsym(void*, const char*);\n"
                                         "void launch(float* y);\n"
                                         "void* f(float* y) { launch(y); return dlsym(nullptr, \"x\"); }\n"}});
  CHECK_MESSAGE(found.empty(), describe(found));
}
