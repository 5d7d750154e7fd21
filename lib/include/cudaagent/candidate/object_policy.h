// The binary-level policy of a candidate's native code (cudaagent(7), SANDBOX): the objects built
// from the candidate's own sources (kernels/*.cu, kernels/*.cpp; never the pristine binding.cpp)
// are checked on the trusted side, after the build and before anything runs. Key choice: the check
// reads what the objects import, by name, against an allow-list: allocation, views, accessors,
// tensor options, streams and device guards, error checks, the pybind11 and Python C API glue,
// libc/libstdc++ basics, the CUDA runtime's launch/stream/event/memory calls, cuBLAS GEMM and
// cuDNN convolution. A call compiles to an imported symbol whatever the source spelled (namespace
// alias, `using`, macro, `x.add(y)` -> at::_ops::add_Tensor::call), so this sees through them.
// Tampering (dynamic symbol lookup, raw system calls, dispatch-key state, running Python code,
// writable code) is FLAG_HACK; anything else outside the list is REJECT_POLICY. The operator audit
// runs inside the candidate's process and can be switched off from there; this cannot.
//
// What it does not see: code that finds a function by reading memory at run time (walking the
// loaded libraries from an address it was given) imports no listed symbol; a system-call
// instruction hidden inside another instruction's bytes is not decoded. The OS sandbox (seccomp,
// namespaces) bounds what such code can do, and on the GPU the kernel trace names every kernel's
// module, so torch's own kernels are seen whoever called them.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/object_lines.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/records/verdict.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent {

// Rule names of object findings (stable: they appear in records). FLAG_HACK:
inline constexpr std::string_view kRuleDynamicLookup = "dynamic-lookup";    // dlsym, dlopen, ...
inline constexpr std::string_view kRuleRawSyscall = "raw-syscall";          // syscall(), `syscall`
inline constexpr std::string_view kRuleDispatchState = "dispatch-state";    // dispatch-key TLS
inline constexpr std::string_view kRulePythonExec = "python-exec";          // PyRun_*, tracing
inline constexpr std::string_view kRuleCodeMemory = "code-memory";          // mprotect, W+X
inline constexpr std::string_view kRuleProcessAccess = "process-access";    // ptrace, prctl
inline constexpr std::string_view kRuleProfilerAccess = "profiler-access";  // CUPTI, cudaProfiler*
inline constexpr std::string_view kRuleMalformedObject = "malformed-object";  // nm lied
// REJECT_POLICY:
inline constexpr std::string_view kRuleTorchCompute = "torch-compute";      // at::native, _ops
inline constexpr std::string_view kRulePythonApi = "python-api";            // PyImport_*, ...
inline constexpr std::string_view kRuleThreads = "thread-creation";         // pthread_create, ...
inline constexpr std::string_view kRuleFilesProcesses = "files-processes";  // open, fork, ...
inline constexpr std::string_view kRuleCublas = "cublas-not-gemm";
inline constexpr std::string_view kRuleCudnn = "cudnn-not-convolution";
inline constexpr std::string_view kRuleCudaApi = "cuda-api-not-allowed";
inline constexpr std::string_view kRuleNotAllowed = "symbol-not-allowed";
inline constexpr std::string_view kRuleBindingSignature = "binding-signature";  // binding_signatures.h
inline constexpr std::string_view kRuleUnreadableObject = "unreadable-object";  // nm failed

// The verdict an object rule earns: FLAG_HACK for the tampering rules above, REJECT_POLICY for
// every other rule. The one table that both classify_symbol() and the stages' decisions use.
Verdict verdict_of_object_rule(std::string_view rule);

// The ATen operators the candidate's C++ may call through at::_ops (the harness's "allowed_ops":
// allocation, views, copies). Compute operators are not listed.
struct ObjectPolicy {
  std::set<std::string, std::less<>> allowed_ops;
};

// Reads "allowed_ops" of share/harness/policy.json (the file the operator audit uses), so the two
// layers allow the same operators. A Status when the file is missing or malformed.
Result<ObjectPolicy> load_object_policy(const std::string& policy_json_path);

struct SymbolRuling {
  Verdict verdict = Verdict::kPass;  // kPass (allowed), kRejectPolicy or kFlagHack
  std::string_view rule;             // empty when allowed
  std::string reason;                // for people, when not allowed
};

// Judges one imported symbol, demangled as `nm -C` prints it ("at::_ops::add_Tensor::call(...)",
// "dlsym", "typeinfo for c10::Error"); a trailing "@VERSION" is ignored. Deny rules come first,
// then the allow-list; anything unknown is kRejectPolicy / symbol-not-allowed. Pure; thread-safe.
SymbolRuling classify_symbol(std::string_view demangled, const ObjectPolicy& policy);

// The function or object name of a demangled symbol, without return type, parameters or template
// arguments: "float* at::TensorBase::data_ptr<float>() const" -> "at::TensorBase::data_ptr".
// Exposed for tests.
std::string symbol_path(std::string_view demangled);

// What nm and objdump said about one object.
struct ObjectFacts {
  std::string source;                      // "kernels/a.cu", for findings
  std::vector<std::string> undefined;      // demangled imports (U, w, v)
  std::vector<std::string> defined;        // demangled external definitions
  std::vector<std::string> local;          // demangled local definitions (nm's t, d, b, r, ...)
  std::vector<std::string> syscalls;       // "section+addr: instruction"
  std::vector<std::string> writable_code;  // sections both writable and executable
  std::vector<PythonSite> python_sites;    // references to Python, with their source lines
  std::string unreadable;                  // why the tools' output could not be read, if so
  // An output line of impossible shape (a symbol name holding a newline) is malformed-object
  // (FLAG_HACK); a tool that failed or timed out on the object is unreadable-object (REJECT_POLICY).
  bool unreadable_is_tampering = true;
};

// Parses `nm -C` output into `facts` (undefined, defined and local). A line of any other shape (a name
// holding a newline, say) sets facts.unreadable. Exposed for tests.
void parse_nm_output(std::string_view text, ObjectFacts& facts);
// Parses `objdump -h -d -l --inlines -r -w --no-show-raw-insn` output (or kept_objdump_lines of
// it): system-call instructions (syscall, sysenter, int $0x80) in any code section, sections both
// writable and executable, and every reference to Python with its source lines.
void parse_objdump_output(std::string_view text, ObjectFacts& facts);

// The findings for a set of objects linked together: an import defined by another of them is the
// candidate's own code and allowed. At most `max_per_object` symbol findings per object (then one
// "and N more"). A reference to Python from the candidate's own lines is python-api
// (object_lines.h); `glue_roots` are the header folders whose lines are the toolchain's, torch's
// and Python's (none: every line is the candidate's). Pure; thread-safe.
std::vector<PolicyFinding> judge_objects(const std::vector<ObjectFacts>& objects,
                                         const ObjectPolicy& policy,
                                         const std::vector<std::string>& glue_roots,
                                         std::size_t max_per_object = 12);

struct ObjectCheckOptions {
  ObjectPolicy policy;
  std::string nm = "/usr/bin/nm";
  std::string objdump = "/usr/bin/objdump";
  // Runs nm and objdump (in the OS sandbox, like the compilers: the objects are untrusted input);
  // run_process when not set. The build's runner (BuildOptions::runner) fits.
  std::function<Result<ProcessResult>(const ProcessSpec&)> runner;
  double timeout_seconds = 120;
};

// Checks the objects of `build` compiled from the candidate's own sources (steps whose source
// starts with "kernels/"; binding.cpp, the header and the link are not the candidate's). Returns
// the findings (empty: nothing against the policy); a Status when nm or objdump could not start.
// The verdict is FLAG_HACK if any finding has it, else REJECT_POLICY. Call it only on a build
// that succeeded. Thread-safe if the runner is.
Result<std::vector<PolicyFinding>> check_candidate_objects(const BuildResult& build,
                                                           const ObjectCheckOptions& options);

// What verify and profile both run after a successful build, so that profile never times code
// verify would reject: the allowed operators from `policy_json_path`, /usr/bin/nm and
// /usr/bin/objdump through `runner` (the build's sandboxed runner; run_process when empty).
Result<std::vector<PolicyFinding>> check_objects(
    const BuildResult& build, const std::string& policy_json_path,
    const std::function<Result<ProcessResult>(const ProcessSpec&)>& runner);

// The verdict a list of object findings earns: kPass when empty, kFlagHack when any finding's rule
// is a tampering rule, else kRejectPolicy.
Verdict verdict_of_findings(const std::vector<PolicyFinding>& findings);

// The first finding of the verdict the list earns (nullptr when empty): the one a stage names in
// its reason, so a candidate that both computes with torch and looks symbols up is told of the
// lookup.
const PolicyFinding* strongest_finding(const std::vector<PolicyFinding>& findings);

}  // namespace cudaagent
