// The filter's rules. Outputs are scanned once per tensor with a loop per dtype (a template, as
// in the comparator) for non-finite, all-zero and constant values; comparisons between runs use
// the verifier's comparator, so "deterministic" and "depends on its inputs" mean exactly what
// verification will later be able to tell apart.
#include "cudaagent/filter/checks.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <numeric>

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
                                "compile", "checked", "warmup", "timing", "compile_warmup",
                                "compile_timing"}) {
    if (phase == name) return true;
  }
  return false;
}

// The reason a failure in `phase` is filed under.
std::string check_for_phase(std::string_view phase) {
  if (phase == "forward" || phase == "warmup" || phase == "timing") return "eager";
  if (phase == "compile_warmup" || phase == "compile_timing") return "compile";
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

std::string stderr_tail(const std::string& err) {
  std::string text = err;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut_at = text.rfind('\n');
  return cut(cut_at == std::string::npos ? text : text.substr(cut_at + 1), 300);
}

// --- scanning tensors -------------------------------------------------------------------------

struct TensorScan {
  std::uint64_t nan = 0;
  std::uint64_t inf = 0;
  bool all_zero = true;
  bool constant = true;
  double first = 0;  // the constant's value, for the detail
};

template <class T>
T load(const std::byte* base, std::uint64_t index) {
  T value;
  std::memcpy(&value, base + index * sizeof(T), sizeof(T));
  return value;
}

template <class Decode>
TensorScan scan_values(const std::byte* p, std::uint64_t n, Decode decode) {
  TensorScan scan;
  if (n == 0) return scan;
  const double first = decode(p, 0);
  scan.first = first;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double v = decode(p, i);
    if (std::isnan(v)) {
      ++scan.nan;
    } else if (std::isinf(v)) {
      ++scan.inf;
    }
    if (v != 0.0) scan.all_zero = false;
    // Bitwise-minded equality: NaN never equals, so a tensor with a NaN is not "constant" here
    // (non_finite reports it).
    if (v != first) scan.constant = false;
  }
  return scan;
}

TensorScan scan_tensor(const TensorTree& t) {
  const std::byte* p = t.data.get();
  const std::uint64_t n = t.numel();
  switch (t.dtype) {
    case DType::kFloat32:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return static_cast<double>(load<float>(b, i));
      });
    case DType::kFloat64:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) { return load<double>(b, i); });
    case DType::kFloat16:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return float16_to_double(load<std::uint16_t>(b, i));
      });
    case DType::kBFloat16:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return bfloat16_to_double(load<std::uint16_t>(b, i));
      });
    case DType::kInt8:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return static_cast<double>(load<std::int8_t>(b, i));
      });
    case DType::kInt16:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return static_cast<double>(load<std::int16_t>(b, i));
      });
    case DType::kInt32:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return static_cast<double>(load<std::int32_t>(b, i));
      });
    case DType::kInt64:
      // Through double: two int64 values that differ only beyond 2^53 count as equal, which
      // only matters for a "constant" verdict on such values.
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return static_cast<double>(load<std::int64_t>(b, i));
      });
    case DType::kUInt8:
    case DType::kBool:
      return scan_values(p, n, [](const std::byte* b, std::uint64_t i) {
        return static_cast<double>(load<std::uint8_t>(b, i));
      });
  }
  return {};
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

std::string number_text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

// Calls visit(path, tensor) for every tensor, and other(path, description) for every value
// that is neither a tensor nor a container.
template <class Visit, class Other>
void walk(const TensorTree& tree, const std::string& path, Visit&& visit, Other&& other) {
  switch (tree.kind) {
    case ValueKind::kTensor:
      visit(path, tree);
      return;
    case ValueKind::kTuple:
    case ValueKind::kList:
      for (std::size_t i = 0; i < tree.items.size(); ++i) {
        walk(tree.items[i], path + "[" + std::to_string(i) + "]", visit, other);
      }
      return;
    case ValueKind::kDict:
      for (std::size_t i = 0; i < tree.items.size(); ++i) {
        std::string item_path = path;
        append_path_key(item_path, tree.keys[i]);
        walk(tree.items[i], item_path, visit, other);
      }
      return;
    case ValueKind::kOther:
      other(path, "a " + quote_for_message(tree.python_type));
      return;
    default:
      other(path, "a Python " + std::string(kind_name(tree.kind)));
      return;
  }
}

// Reasons from one draw's output; `draw` names it in details ("" for the first).
void scan_output(const TensorTree& output, std::string_view draw, std::vector<FilterReason>& reasons,
                 bool& has_tensor) {
  const std::string suffix = draw.empty() ? "" : " (" + std::string(draw) + ")";
  const auto add = [&](const char* check, std::string detail) {
    // One reason per check: the first tensor that shows it.
    for (const auto& reason : reasons) {
      if (reason.check == check) return;
    }
    reasons.push_back({check, std::move(detail) + suffix});
  };
  walk(
      output, "output",
      [&](const std::string& path, const TensorTree& t) {
        has_tensor = true;
        if (t.numel() == 0) return;
        const TensorScan scan = scan_tensor(t);
        const std::string what = path + " " + std::string(dtype_name(t.dtype)) + shape_text(t.shape);
        if (scan.nan + scan.inf > 0) {
          add("non_finite", what + " has " + std::to_string(scan.nan) + " NaN and " +
                                std::to_string(scan.inf) + " infinite values of " +
                                std::to_string(t.numel()));
        } else if (scan.all_zero) {
          add("all_zero", what + " is all zeros");
        } else if (scan.constant && t.numel() > 1) {
          add("constant", what + " is constant (every element " + number_text(scan.first) + ")");
        }
      },
      [&](const std::string& path, const std::string& description) {
        add("output", path + " is " + description + ", not a tensor");
      });
}

std::string tolerance_text(const CompareOptions& tolerance) {
  return "atol=" + number_text(tolerance.atol) + ", rtol=" + number_text(tolerance.rtol);
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

// "phase_seconds" ({known phase: seconds}), "write_seconds" and "peak_bytes"; each may be absent
// (a report of an older harness), none is ever trusted for more than a number to show.
Status read_phase_seconds(simdjson::dom::object& object, HarnessReport& report) {
  constexpr std::size_t kMaxPhases = 32;  // a dozen phases; a key repeated past that is garbage
  const auto usable = [](double seconds) { return std::isfinite(seconds) && seconds >= 0; };
  simdjson::dom::element element;
  if (!object["write_seconds"].get(element) &&
      (element.get_double().get(report.write_seconds) || !usable(report.write_seconds))) {
    return Status::error("report.json: 'write_seconds' is not a number of seconds");
  }
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

OutputJudgement judge_outputs(const TensorTree& a1, const TensorTree& a2, const TensorTree& b,
                              std::optional<bool> inputs_equal, const CompareOptions& tolerance) {
  OutputJudgement judgement;
  bool has_tensor = false, ignored = false;
  scan_output(a1, "", judgement.reasons, has_tensor);
  scan_output(b, "second input draw", judgement.reasons, ignored);
  if (!has_tensor) judgement.reasons.push_back({"output", "the output holds no tensor"});
  for (const auto& reason : judgement.reasons) {
    if (reason.check == "output") return judgement;  // nothing below is meaningful
  }
  CompareOptions options = tolerance;
  options.reject_degenerate = false;
  if (tensors_bytes_equal(a1, a2)) {
    judgement.determinism = "bitwise";
  } else if (const CompareResult same = compare_outputs(a1, a2, options); same.match) {
    judgement.determinism = "within tolerance";
  } else {
    judgement.determinism = "no";
    judgement.reasons.push_back({"determinism", "two runs on the same inputs differ beyond " +
                                                    tolerance_text(tolerance) + ": " + same.reason});
  }
  // Different draws differ at nearly every element of an honest task: the first one decides.
  CompareOptions any_difference = options;
  any_difference.stop_at_first_mismatch = true;
  if (const CompareResult across = compare_outputs(a1, b, any_difference); across.match) {
    std::string detail = "the outputs for two different input draws match within " +
                         tolerance_text(tolerance);
    if (inputs_equal.value_or(false)) detail += " (get_inputs returned the same inputs for both seeds)";
    judgement.reasons.push_back({"input_dependence", detail});
  }
  return judgement;
}

std::string compare_compiled(const TensorTree& eager, const TensorTree& compiled,
                             const CompareOptions& tolerance) {
  CompareOptions options = tolerance;
  options.reject_degenerate = false;
  const CompareResult result = compare_outputs(eager, compiled, options);
  if (result.match) return {};
  return "torch.compile's output differs from eager beyond " + tolerance_text(tolerance) + ": " +
         result.reason;
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
