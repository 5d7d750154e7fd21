// The filter's rules: how a job ended, what its report may say (validated and bounded, its
// findings about the outputs included) and the eager window.
#include "cudaagent/filter/checks.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <numeric>

#include "cudaagent/candidate/tensor_file.h"  // quote_for_message

namespace cudaagent {
namespace {

constexpr std::size_t kTextLimit = 2000;
constexpr std::size_t kMaxSamples = 1000;

std::string cut(std::string_view text, std::size_t limit = kTextLimit) {
  if (text.size() <= limit) return std::string(text);
  // Do not split a UTF-8 sequence: back up to a lead byte.
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + "...";
}

bool known_phase(std::string_view phase) {
  for (std::string_view name : {"start", "torch", "load", "interface", "init", "inputs", "forward",
                                "judge", "compile", "checked", "warmup", "timing",
                                "compile_warmup", "compile_timing"}) {
    if (phase == name) return true;
  }
  return false;
}

// The reason a failure in `phase` is filed under.
std::string check_for_phase(std::string_view phase) {
  if (phase == "forward" || phase == "warmup" || phase == "timing") return "eager";
  if (phase == "compile_warmup" || phase == "compile_timing") return "compile";
  if (phase == "judge") return "output";  // judging what a call returned failed
  return std::string(phase);
}

bool is_allocation_failure(std::string_view message) {
  for (std::string_view marker : {"out of memory", "can't allocate memory", "MemoryError",
                                  "Cannot allocate memory", "OutOfMemoryError"}) {
    if (message.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

bool is_disk_full(std::string_view message) {
  return message.find("No space left on device") != std::string_view::npos ||
         message.find("[Errno 28]") != std::string_view::npos;
}

std::string number_text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string stderr_tail(const std::string& err) {
  std::string text = err;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut_at = text.rfind('\n');
  return cut(cut_at == std::string::npos ? text : text.substr(cut_at + 1), 300);
}

}  // namespace

std::string format_ms(double ms) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, ms < 1000 ? "%.3g ms" : "%.0f ms", ms);
  return buffer;
}

namespace {

// A list of call times in milliseconds: finite, >= 0, at most kMaxSamples.
Status read_samples(simdjson::dom::object& object, const char* key, std::vector<double>& out) {
  simdjson::dom::array samples;
  if (object[key].get_array().get(samples)) {
    return Status::error(std::string("report.json: '") + key + "' is not an array");
  }
  for (auto sample : samples) {
    double ms = 0;
    if (sample.get_double().get(ms) || !std::isfinite(ms) || ms < 0) {
      return Status::error(std::string("report.json: '") + key + "' holds something other than a time >= 0");
    }
    if (out.size() == kMaxSamples) {
      return Status::error("report.json: more than " + std::to_string(kMaxSamples) + " samples");
    }
    out.push_back(ms);
  }
  return Status::ok();
}

// "phase_seconds" ({known phase: seconds}) and "peak_bytes"; each may be absent (a report of an
// older harness), none is ever trusted for more than a number to show.
Status read_phase_seconds(simdjson::dom::object& object, HarnessReport& report) {
  constexpr std::size_t kMaxPhases = 32;  // a dozen phases; a key repeated past that is garbage
  const auto usable = [](double seconds) { return std::isfinite(seconds) && seconds >= 0; };
  simdjson::dom::element element;
  std::int64_t peak = 0;
  if (!object["peak_bytes"].get(element) && (element.get_int64().get(peak) || peak < 0)) {
    return Status::error("report.json: 'peak_bytes' is not a byte count");
  }
  report.peak_bytes = static_cast<std::uint64_t>(peak);
  if (object["phase_seconds"].get(element)) return Status::ok();
  simdjson::dom::object phases;
  if (element.get_object().get(phases)) return Status::error("report.json: 'phase_seconds' is not an object");
  for (auto [key, value] : phases) {
    double seconds = 0;
    if (!known_phase(key) || value.get_double().get(seconds) || !usable(seconds) ||
        report.phase_seconds.size() == kMaxPhases) {
      return Status::error("report.json: 'phase_seconds' holds something other than seconds by phase");
    }
    report.phase_seconds.emplace_back(std::string(key), seconds);
  }
  return Status::ok();
}

bool known_finding(std::string_view check) {
  for (std::string_view name : {"output", "non_finite", "all_zero", "constant", "determinism",
                                "input_dependence"}) {
    if (check == name) return true;
  }
  return false;
}

// "outputs": null, or {determinism, findings: [{check, detail}], compile_differs: null or a
// string}. Bounded: a dozen findings at most (one per check and draw), details cut.
Status read_outputs(simdjson::dom::element element, HarnessReport& report) {
  constexpr std::size_t kMaxFindings = 16;
  if (element.is_null()) return Status::ok();
  const Status wrong = Status::error(
      "report.json: 'outputs' is not {determinism, findings: [{check, detail}], compile_differs}");
  simdjson::dom::object object;
  std::string_view determinism;
  simdjson::dom::array findings;
  simdjson::dom::element differs;
  if (element.get_object().get(object) || object["determinism"].get_string().get(determinism) ||
      object["findings"].get_array().get(findings) || object["compile_differs"].get(differs)) {
    return wrong;
  }
  if (determinism != "" && determinism != "bitwise" && determinism != "within tolerance" &&
      determinism != "no") {
    return Status::error("report.json: unknown determinism " + quote_for_message(determinism));
  }
  HarnessReport::Outputs outputs;
  outputs.determinism = std::string(determinism);
  for (auto finding : findings) {
    std::string_view check, detail;
    if (finding["check"].get_string().get(check) || finding["detail"].get_string().get(detail)) return wrong;
    if (!known_finding(check)) {
      return Status::error("report.json: unknown finding " + quote_for_message(check));
    }
    if (outputs.findings.size() == kMaxFindings) return Status::error("report.json: too many findings");
    outputs.findings.push_back({std::string(check), cut(detail)});
  }
  if (!differs.is_null()) {
    std::string_view why;
    if (differs.get_string().get(why)) return wrong;
    outputs.compile_differs = cut(why);
  }
  report.outputs = std::move(outputs);
  return Status::ok();
}

}  // namespace

Result<HarnessReport> parse_harness_report(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json.data(), json.size()).get(object)) {
    return Status::error("report.json is not a JSON object");
  }
  HarnessReport report;
  const auto text = [&](const char* key, std::string& out) -> Status {
    std::string_view value;
    if (object[key].get_string().get(value)) {
      return Status::error(std::string("report.json: '") + key + "' is not a string");
    }
    out = cut(value);
    return Status::ok();
  };
  if (auto s = text("mode", report.mode); !s) return s;
  if (auto s = text("phase", report.phase); !s) return s;
  if (auto s = text("torch", report.torch); !s) return s;
  if (report.mode != "check") {
    return Status::error("report.json: unknown mode " + quote_for_message(report.mode));
  }
  if (!known_phase(report.phase)) {
    return Status::error("report.json: unknown phase " + quote_for_message(report.phase));
  }
  if (object["done"].get_bool().get(report.done) ||
      object["has_compile"].get_bool().get(report.has_compile)) {
    return Status::error("report.json: 'done' or 'has_compile' is not a boolean");
  }
  simdjson::dom::element element;
  if (object["error"].get(element)) return Status::error("report.json: 'error' is missing");
  if (!element.is_null()) {
    simdjson::dom::object error;
    std::string_view phase, type, message;
    if (element.get_object().get(error) || error["phase"].get_string().get(phase) ||
        error["type"].get_string().get(type) || error["message"].get_string().get(message)) {
      return Status::error("report.json: 'error' is not {phase, type, message}");
    }
    if (!known_phase(phase)) {
      return Status::error("report.json: error in unknown phase " + quote_for_message(phase));
    }
    report.error = HarnessReport::Error{std::string(phase), cut(type, 200), cut(message)};
  }
  if (object["inputs_equal"].get(element)) return Status::error("report.json: 'inputs_equal' is missing");
  if (!element.is_null()) {
    bool equal = false;
    if (element.get_bool().get(equal)) return Status::error("report.json: 'inputs_equal' is not a boolean");
    report.inputs_equal = equal;
  }
  if (object["compile"].get(element)) return Status::error("report.json: 'compile' is missing");
  if (!element.is_null()) {
    simdjson::dom::object compile;
    HarnessReport::Compile parsed;
    std::string_view error;
    if (element.get_object().get(compile) || compile["ok"].get_bool().get(parsed.ok) ||
        compile["error"].get_string().get(error) || compile["seconds"].get_double().get(parsed.seconds) ||
        !std::isfinite(parsed.seconds)) {
      return Status::error("report.json: 'compile' is not {ok, error, seconds}");
    }
    parsed.error = cut(error);
    report.compile = parsed;
  }
  if (object["outputs"].get(element)) return Status::error("report.json: 'outputs' is missing");
  if (Status read = read_outputs(element, report); !read) return read;
  if (object["warmup_calls"].get_int64().get(report.warmup_calls) ||
      object["warmup_max_ms"].get_double().get(report.warmup_max_ms) ||
      !std::isfinite(report.warmup_max_ms)) {
    return Status::error("report.json: 'warmup_calls' or 'warmup_max_ms' is not a number");
  }
  for (auto [key, list] : {std::pair{"samples_ms", &report.samples_ms},
                           std::pair{"compile_samples_ms", &report.compile_samples_ms}}) {
    if (Status read = read_samples(object, key, *list); !read) return read;
  }
  if (Status read = read_phase_seconds(object, report); !read) return read;
  return report;
}

RunJudgement judge_run(const ProcessResult& process, const std::optional<HarnessReport>& report,
                       const std::string& report_problem) {
  RunJudgement judgement;
  judgement.phase = report ? report->phase : "";
  const std::string where = report ? " in " + report->phase : "";
  const std::string tail = stderr_tail(process.err);
  const auto infra = [&](std::string why) {
    judgement.end = RunJudgement::End::kInfra;
    judgement.infra_reason = std::move(why);
    return judgement;
  };
  const auto reject = [&](const char* check, std::string detail) {
    judgement.end = RunJudgement::End::kRejected;
    judgement.reasons.push_back({check, std::move(detail)});
    return judgement;
  };
  if (process.outcome == ProcessResult::Outcome::kSpawnFailed) {
    return infra("the harness did not start: " + process.describe());
  }
  if (process.outcome == ProcessResult::Outcome::kTimedOut) {
    return reject("timeout", process.describe() + where);
  }
  if (!report) {
    // The harness writes its report before anything else: without one it never ran (a sandbox
    // that could not be built, a missing interpreter).
    return infra("the harness left no usable report (" + report_problem + "); it " +
                 process.describe() + (tail.empty() ? "" : ": " + tail));
  }
  if (report->error) {
    const auto& error = *report->error;
    if (error.phase == "start" || error.phase == "torch") {
      return infra("the harness could not import torch or start the device: " + error.message);
    }
    if (is_allocation_failure(error.message)) return reject("memory", error.phase + ": " + error.message);
    if (is_disk_full(error.message)) return reject("disk", error.phase + ": " + error.message);
    return reject(check_for_phase(error.phase).c_str(), error.message);
  }
  if (report->done && process.outcome == ProcessResult::Outcome::kExited && process.exit_code == 0) {
    judgement.end = RunJudgement::End::kCompleted;
    return judgement;
  }
  if (report->phase == "start" || report->phase == "torch") {
    return infra("the harness " + process.describe() + " while importing torch" +
                 (tail.empty() ? "" : ": " + tail));
  }
  if (process.outcome == ProcessResult::Outcome::kSignaled && process.signal == SIGKILL) {
    return reject("memory", process.describe() + where + " (the out-of-memory killer's signal)");
  }
  return reject("crash", process.describe() + where + " before the harness finished" +
                             (tail.empty() ? "" : ": " + tail));
}

void judge_reported_outputs(const HarnessReport& report, bool judge_compile,
                            std::vector<FilterReason>& reasons, std::string& determinism,
                            std::string& compile_text) {
  if (!report.outputs) {
    reasons.push_back({"output", "the task's job ended its calls without judging their outputs"});
    return;
  }
  determinism = report.outputs->determinism;
  reasons.insert(reasons.end(), report.outputs->findings.begin(), report.outputs->findings.end());
  if (!judge_compile || !report.outputs->findings.empty()) return;  // compile not run: eager failed
  if (!report.has_compile) {
    compile_text = "skipped: torch " + report.torch + " has no torch.compile";
  } else if (!report.compile) {
    compile_text = "failed: the harness reported no compile result";
    reasons.push_back({"compile", "the harness reported no compile result"});
  } else if (!report.compile->ok) {
    compile_text = "failed: " + report.compile->error;
    reasons.push_back({"compile", report.compile->error});
  } else if (!report.outputs->compile_differs) {
    compile_text = "failed: the harness did not compare torch.compile's output with eager's";
    reasons.push_back({"compile", "the harness did not compare torch.compile's output with eager's"});
  } else if (!report.outputs->compile_differs->empty()) {
    compile_text = "failed: " + *report.outputs->compile_differs;
    reasons.push_back({"compile", *report.outputs->compile_differs});
  } else {
    compile_text = "ok";
  }
}

Result<EagerStats> eager_stats(const std::vector<double>& samples_ms) {
  if (samples_ms.empty()) return Status::error("no timing samples");
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  EagerStats stats;
  const std::size_t n = sorted.size();
  stats.runs = static_cast<std::int64_t>(n);
  stats.median_ms = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
  stats.min_ms = sorted.front();
  stats.max_ms = sorted.back();
  stats.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
  return stats;
}

std::optional<FilterReason> judge_window(const EagerStats& stats, double low_ms, double high_ms) {
  const std::string window = "[" + number_text(low_ms) + ", " + number_text(high_ms) + "] ms";
  if (stats.median_ms < low_ms) {
    return FilterReason{"eager_time", "median " + format_ms(stats.median_ms) + " is below the window " + window};
  }
  if (stats.median_ms > high_ms) {
    return FilterReason{"eager_time", "median " + format_ms(stats.median_ms) + " is above the window " + window};
  }
  return std::nullopt;
}

std::optional<std::string> compile_unavailable(std::string_view torch_version) {
  int major = 0, minor = 0;
  const std::string version(torch_version);
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2 || major >= 2) return std::nullopt;
  return "skipped: torch " + std::to_string(major) + "." + std::to_string(minor) +
         " has no torch.compile";
}

bool failed_for_shared_resources(const std::vector<FilterReason>& reasons) {
  return std::any_of(reasons.begin(), reasons.end(), [](const FilterReason& reason) {
    return reason.check == "memory" || reason.check == "disk";
  });
}

}  // namespace cudaagent
