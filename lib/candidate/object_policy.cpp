// Reading a candidate's objects (object_policy.h): nm for what each object imports and defines,
// objdump for its code sections' system-call instructions and section flags. Both tools run like
// the compilers (in the sandbox, under a time limit): the objects are the candidate's bytes, and
// their parsers are not ours to trust. Their text output is parsed here, strictly: a line of an
// unexpected shape makes the object unreadable, which is a finding, never a pass.
#include "cudaagent/candidate/object_policy.h"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_set>

#include "cudaagent/base/files.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/candidate/binding_signatures.h"
#include "tool_text.h"

namespace cudaagent {
namespace {

using tool_text::for_each_line;
using tool_text::starts;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Names are the candidate's bytes: cut long ones and escape what a terminal would act on.
std::string escaped_name(std::string_view name) {
  std::string out;
  for (std::size_t i = 0; i < name.size() && i < 300; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (name.size() > 300) out += "...";
  return out;
}

std::string tool_failure(const std::string& tool, const ProcessResult& run) {
  std::string said = run.err.substr(0, 300);
  std::replace(said.begin(), said.end(), '\n', ' ');
  return tool + " " + run.describe() + (said.empty() ? "" : ": " + said);
}

}  // namespace

Result<ObjectPolicy> load_object_policy(const std::string& policy_json_path) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.load(policy_json_path).get(root); error) {
    return Status::error("cannot read the operator policy '" + policy_json_path +
                         "': " + simdjson::error_message(error));
  }
  simdjson::dom::array ops;
  if (root["allowed_ops"].get(ops)) {
    return Status::error("the operator policy '" + policy_json_path + "' has no allowed_ops list");
  }
  ObjectPolicy policy;
  const auto add = [&](simdjson::dom::array list, const std::string& key) {
    for (auto op : list) {
      std::string_view name;
      if (op.get(name)) {
        return Status::error("the operator policy '" + policy_json_path + "' has a non-string entry in " + key);
      }
      policy.allowed_ops.emplace(name);
    }
    return Status::ok();
  };
  if (Status status = add(ops, "allowed_ops"); !status) return status;
  // The host reads are the candidate's C++'s to make (its own code reading a value); the budget
  // on them is the Python audit's, for reads in model_new.py's forward.
  simdjson::dom::array host_reads;
  if (!root["host_read_ops"].get(host_reads)) {
    if (Status status = add(host_reads, "host_read_ops"); !status) return status;
  }
  return policy;
}

// nm prints "%016x %c %s" for a defined symbol and 16 spaces, " %c %s" for an undefined one; with
// -C the name is demangled and may hold spaces.
void parse_nm_output(std::string_view text, ObjectFacts& facts) {
  for_each_line(text, [&](std::string_view line) {
    if (line.empty() || !facts.unreadable.empty()) return;
    if (line.size() < 20 || line[16] != ' ' || line[18] != ' ') {
      facts.unreadable = "nm printed a line of unknown shape: " + escaped_name(line.substr(0, 80));
      return;
    }
    const std::string_view value = line.substr(0, 16);
    const char type = line[17];
    const std::string name(line.substr(19));
    const bool blank = value.find_first_not_of(' ') == std::string_view::npos;
    const bool hex = std::all_of(value.begin(), value.end(), is_hex);
    if (blank && (type == 'U' || type == 'w' || type == 'v')) {
      facts.undefined.push_back(name);
    } else if (hex && std::string_view("TWVDBRCiuGSA").find(type) != std::string_view::npos) {
      facts.defined.push_back(name);
    } else if (hex && std::string_view("tdbrgsanNp").find(type) != std::string_view::npos) {
      // A local definition satisfies no other object's import: kept apart from `defined`.
      facts.local.push_back(name);
    } else {
      facts.unreadable = "nm printed a line of unknown shape: " + escaped_name(line.substr(0, 80));
    }
  });
}

// `objdump -h -w` rows: "Idx Name Size VMA LMA File-off Algn Flags", the flags after "2**N";
// `-d -r -w --no-show-raw-insn`: "Disassembly of section NAME:" and instruction rows
// "  addr:<TAB>mnemonic operands[<TAB>reloc]".
void parse_objdump_output(std::string_view text, ObjectFacts& facts) {
  std::string section;
  for_each_line(text, [&](std::string_view line) {
    if (starts(line, "Disassembly of section ")) {
      section = std::string(line.substr(23, line.size() > 24 ? line.size() - 24 : 0));
      return;
    }
    const std::size_t align = line.find("  2**");
    if (section.empty() && align != std::string_view::npos && line.find(" CODE") != std::string_view::npos) {
      // A section header: code that is not read-only can be written at run time.
      std::string_view flags = line.substr(align + 5);
      flags = flags.substr(flags.find_first_not_of("0123456789"));
      if (flags.find("READONLY") == std::string_view::npos) {
        std::string_view head = line.substr(0, align);
        const std::size_t first = head.find_first_not_of(' ');
        head = head.substr(first == std::string_view::npos ? head.size() : first);
        head = head.substr(std::min(head.size(), head.find(' ') + 1));
        facts.writable_code.push_back(escaped_name(head.substr(0, head.find(' '))));
      }
      return;
    }
    if (section.empty()) return;
    const std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos || tab == 0 || line[tab - 1] != ':') return;
    std::string_view instruction = line.substr(tab + 1);
    instruction = instruction.substr(0, instruction.find('\t'));
    const std::size_t space = instruction.find(' ');
    const std::string_view mnemonic = instruction.substr(0, space);
    std::string_view operand = space == std::string_view::npos ? "" : instruction.substr(space);
    operand = operand.substr(std::min(operand.size(), operand.find_first_not_of(' ')));
    const bool raw = mnemonic == "syscall" || mnemonic == "sysenter" ||
                     (mnemonic == "int" && (operand == "$0x80" || operand == "0x80"));
    if (raw) {
      std::string_view address = line.substr(0, tab - 1);
      address = address.substr(std::min(address.size(), address.find_first_not_of(' ')));
      facts.syscalls.push_back(escaped_name(section) + "+0x" + std::string(address) + ": " +
                               std::string(mnemonic) + (operand.empty() ? "" : " ") +
                               std::string(operand));
    }
  });
  facts.python_sites = python_sites_of(text);
}

std::vector<PolicyFinding> judge_objects(const std::vector<ObjectFacts>& objects,
                                         const ObjectPolicy& policy,
                                         const std::vector<std::string>& glue_roots,
                                         std::size_t max_per_object) {
  std::unordered_set<std::string> defined;
  for (const ObjectFacts& object : objects) defined.insert(object.defined.begin(), object.defined.end());
  std::vector<PolicyFinding> findings;
  for (const ObjectFacts& object : objects) {
    if (!object.unreadable.empty()) {
      const std::string_view rule =
          object.unreadable_is_tampering ? kRuleMalformedObject : kRuleUnreadableObject;
      findings.push_back({std::string(rule), object.source, object.unreadable,
                          verdict_of_object_rule(rule)});
      continue;
    }
    for (const std::string& where : object.syscalls) {
      findings.push_back({std::string(kRuleRawSyscall), object.source,
                          "system-call instruction in the candidate's code (" + where + ")",
                          verdict_of_object_rule(kRuleRawSyscall)});
    }
    for (const std::string& name : object.writable_code) {
      findings.push_back({std::string(kRuleCodeMemory), object.source,
                          "section " + name + " is both writable and executable",
                          verdict_of_object_rule(kRuleCodeMemory)});
    }
    // One finding per candidate line that reaches Python (the first three: one is enough to
    // refuse, a few help the author).
    std::set<std::string> lines_seen;
    for (const PythonSite& site : object.python_sites) {
      if (lines_seen.size() >= 3) break;
      auto use = candidate_python_use(site, glue_roots);
      if (!use || !lines_seen.insert(use->substr(0, use->find(' '))).second) continue;
      findings.push_back({std::string(kRulePythonApi), object.source, *use,
                          verdict_of_object_rule(kRulePythonApi)});
    }
    // One finding per registered signature outside the allowed ones (binding_signatures.h).
    std::set<std::string> signatures_seen;
    for (const auto* names : {&object.defined, &object.local}) {
      for (const std::string& name : *names) {
        auto problem = binding_signature_problem(name);
        if (problem && signatures_seen.insert(binding_signature_of(name)).second) {
          findings.push_back({std::string(kRuleBindingSignature), object.source, *problem,
                              verdict_of_object_rule(kRuleBindingSignature)});
        }
      }
    }
    // One finding per symbol, FLAG_HACK ones first, at most max_per_object in all.
    std::set<std::string> seen;
    std::vector<PolicyFinding> mine;
    for (const std::string& name : object.undefined) {
      if (defined.count(name) != 0 || !seen.insert(name).second) continue;
      SymbolRuling ruling = classify_symbol(name, policy);
      if (ruling.verdict == Verdict::kPass) continue;
      mine.push_back({std::string(ruling.rule), object.source, escaped_name(name) + ": " + ruling.reason,
                      ruling.verdict});
    }
    std::stable_sort(mine.begin(), mine.end(), [](const PolicyFinding& a, const PolicyFinding& b) {
      return a.verdict == Verdict::kFlagHack && b.verdict != Verdict::kFlagHack;
    });
    if (mine.size() > max_per_object) {
      const std::size_t more = mine.size() - max_per_object;
      mine.resize(max_per_object);
      mine.push_back({std::string(kRuleNotAllowed), object.source,
                      "and " + std::to_string(more) + " more symbols outside the allow-list",
                      verdict_of_object_rule(kRuleNotAllowed)});
    }
    findings.insert(findings.end(), mine.begin(), mine.end());
  }
  return findings;
}

namespace {

// Where the tools' text for an object's bytes is kept: in the build cache the object came from
// (<cache>/object-tools/), under the SHA-256 of those bytes. The same bytes always read the same,
// and profile reads what verify read: each tool is a sandboxed process, four of them for a usual
// candidate. Empty (run the tools, keep nothing) without a cache or when the object cannot be read.
std::string tool_texts_stem(const std::string& cache_dir, const std::string& object) {
  if (cache_dir.empty()) return {};
  std::string bytes;
  if (!read_whole_file(object, bytes)) return {};
  const std::filesystem::path dir = std::filesystem::path(cache_dir) / "object-tools";
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return {};
  return (dir / sha256_hex(bytes)).string();
}

}  // namespace

Result<std::vector<PolicyFinding>> check_candidate_objects(const BuildResult& build,
                                                           const ObjectCheckOptions& options) {
  const auto run = [&](std::vector<std::string> argv) -> Result<ProcessResult> {
    ProcessSpec spec;
    spec.argv = std::move(argv);
    spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
    spec.timeout_seconds = options.timeout_seconds;
    spec.stdout_cap = std::size_t{64} << 20;
    spec.stderr_cap = 64 * 1024;
    spec.limits.address_space_bytes = std::uint64_t{4} << 30;
    spec.limits.cpu_seconds = static_cast<std::uint64_t>(options.timeout_seconds) + 1;
    spec.limits.file_size_bytes = std::uint64_t{1} << 20;  // they only read objects
    return options.runner ? options.runner(spec) : run_process(spec);
  };
  // A tool that ran and failed on an object the compiler made means a crafted object (or a broken
  // toolchain, which the honest controls show): a finding. A tool that cannot start is ours.
  const auto usable = [](const Result<ProcessResult>& done, const std::string& tool,
                         ObjectFacts& facts) -> Status {
    if (!done) return done.status();
    const ProcessResult& r = done.value();
    if (r.outcome == ProcessResult::Outcome::kSpawnFailed) {
      return Status::error("cannot run " + tool + ": " + r.spawn_error);
    }
    if (r.outcome != ProcessResult::Outcome::kExited || r.exit_code != 0) {
      if (facts.unreadable.empty()) facts.unreadable = tool_failure(tool, r);
    } else if (r.out_truncated && facts.unreadable.empty()) {
      facts.unreadable = tool + "'s output passed 64 MiB";
    }
    return Status::ok();
  };
  std::vector<ObjectFacts> objects;
  for (const CompileStep& step : build.steps) {
    if (!starts(step.source, "kernels/") || step.object.empty()) continue;
    ObjectFacts facts;
    facts.source = step.source;
    const std::string stem = tool_texts_stem(build.cache_dir, step.object);
    std::string nm_text, objdump_text;
    if (stem.empty() || !read_whole_file(stem + ".symbols", nm_text) ||
        !read_whole_file(stem + ".objdump-lines", objdump_text)) {
      auto nm = run({options.nm, "-C", step.object});
      if (Status status = usable(nm, "nm", facts); !status) return status;
      auto objdump =
          run({options.objdump, "-h", "-d", "-l", "--inlines", "-r", "-w", "--no-show-raw-insn",
               step.object});
      if (Status status = usable(objdump, "objdump", facts); !status) return status;
      if (!facts.unreadable.empty()) {
        facts.unreadable_is_tampering = false;
        objects.push_back(std::move(facts));
        continue;
      }
      nm_text = std::move(nm.value().out);
      // What the checks read of objdump's text, and only that: with line tables it prints
      // megabytes per object. Fresh and cached texts are parsed alike.
      objdump_text = kept_objdump_lines(objdump.value().out);
      // Only what both tools read whole is kept; the .symbols file last, so a reader that finds it
      // finds the other too.
      if (!stem.empty() && write_file_atomically(stem + ".objdump-lines", objdump_text)) {
        (void)write_file_atomically(stem + ".symbols", nm_text);
      }
    }
    parse_nm_output(nm_text, facts);
    parse_objdump_output(objdump_text, facts);
    objects.push_back(std::move(facts));
  }
  return judge_objects(objects, options.policy, build.glue_roots);
}

Result<std::vector<PolicyFinding>> check_objects(
    const BuildResult& build, const std::string& policy_json_path,
    const std::function<Result<ProcessResult>(const ProcessSpec&)>& runner) {
  auto policy = load_object_policy(policy_json_path);
  if (!policy) return policy.status();
  ObjectCheckOptions options;
  options.policy = std::move(policy).value();
  options.runner = runner;
  return check_candidate_objects(build, options);
}

}  // namespace cudaagent
