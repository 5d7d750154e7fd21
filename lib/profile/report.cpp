// Pure decisions and texts of cudaagent-profile (see report.h).
#include "cudaagent/profile/report.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/profile/timing_report.h"

namespace cudaagent {
namespace {

Result<RoundSamples> read_rounds(simdjson::dom::element value, const char* what) {
  RoundSamples rounds;
  simdjson::dom::array outer;
  if (value.get_array().get(outer)) return Status::error(std::string(what) + " must be an array of rounds");
  for (auto round : outer) {
    simdjson::dom::array inner;
    if (round.get_array().get(inner)) return Status::error(std::string(what) + ": a round is not an array");
    std::vector<double> samples;
    for (auto x : inner) {
      double number = 0;
      if (x.get_double().get(number)) return Status::error(std::string(what) + ": a sample is not a number");
      samples.push_back(number);
    }
    rounds.push_back(std::move(samples));
  }
  return rounds;
}

}  // namespace

int calls_per_round(double ms_per_call, double round_ms, int min_calls, int max_calls,
                    double input_bytes, double pool_bytes) {
  min_calls = std::max(min_calls, 1);
  max_calls = std::max(max_calls, min_calls);
  double calls = max_calls;
  if (std::isfinite(ms_per_call) && ms_per_call > 0 && std::isfinite(round_ms) && round_ms > 0) {
    calls = std::ceil(round_ms / ms_per_call);
  }
  if (std::isfinite(input_bytes) && input_bytes > 0 && std::isfinite(pool_bytes) && pool_bytes > 0) {
    calls = std::min(calls, std::floor(pool_bytes / input_bytes));
  }
  calls = std::clamp(calls, static_cast<double>(min_calls), static_cast<double>(max_calls));
  return static_cast<int>(calls);
}

SpeedupSummary unpaired_speedup(const TimeSummary& baseline, const TimeSummary& candidate) {
  SpeedupSummary speedup;
  speedup.median = baseline.median_ms / candidate.median_ms;
  speedup.ci_low = baseline.ci_low_ms / candidate.ci_high_ms;
  speedup.ci_high = baseline.ci_high_ms / candidate.ci_low_ms;
  speedup.rounds = candidate.rounds;
  return speedup;
}

std::string baseline_json(const BaselineSamples& samples) {
  std::string out;
  JsonWriter json(out);
  json.begin_object().key("eager");
  write_rounds(json, samples.eager);
  json.key("compile");
  if (samples.compile.empty()) {
    json.null();
  } else {
    write_rounds(json, samples.compile);
  }
  json.field("compile_status", samples.compile_status);
  json.field("calls_per_round", samples.calls_per_round);
  json.field("input_bytes", samples.input_bytes).field("output_bytes", samples.output_bytes);
  json.key("device").raw(samples.device_json).end_object();
  return out;
}

Result<BaselineSamples> parse_baseline(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(text.data(), text.size()).get(object)) return Status::error("not a JSON object");
  BaselineSamples samples;
  simdjson::dom::element value;
  if (object["eager"].get(value)) return Status::error("eager is missing");
  auto eager = read_rounds(value, "eager");
  if (!eager) return eager.status();
  samples.eager = std::move(eager).value();
  if (!object["compile"].get(value) && !value.is_null()) {
    auto compile = read_rounds(value, "compile");
    if (!compile) return compile.status();
    samples.compile = std::move(compile).value();
  }
  std::string_view status;
  if (object["compile_status"].get(status)) return Status::error("compile_status is missing");
  samples.compile_status = std::string(status);
  std::int64_t calls = 0;
  if (object["calls_per_round"].get(calls) || calls < 1) return Status::error("calls_per_round is missing");
  samples.calls_per_round = static_cast<int>(calls);
  if (object["input_bytes"].get(samples.input_bytes) || object["output_bytes"].get(samples.output_bytes)) {
    return Status::error("input_bytes or output_bytes is missing");
  }
  if (object["device"].get(value)) return Status::error("device is missing");
  samples.device_json = simdjson::minify(value);
  if (samples.eager.size() < 2) return Status::error("eager needs at least 2 rounds");
  return samples;
}

namespace {

// Leaves `out` as it is when the value is missing or of another type.
template <class T>
void read_optional(simdjson::simdjson_result<simdjson::dom::element> value, T& out) {
  if (value.get(out)) return;
}

std::string ms(double x) {
  char text[48];
  if (x >= 100) {
    std::snprintf(text, sizeof text, "%.1f ms", x);
  } else if (x >= 1) {
    std::snprintf(text, sizeof text, "%.3f ms", x);
  } else {
    std::snprintf(text, sizeof text, "%.1f us", x * 1000);
  }
  return text;
}

std::string line_for_time(std::string_view name, simdjson::dom::element entry) {
  double median = 0, cv = 0, low = 0, high = 0;
  std::int64_t rounds = 0, trials = 0;
  simdjson::dom::array ci;
  if (entry["median"].get(median) || entry["ci95"].get(ci) || ci.size() != 2 ||
      ci.at(0).get(low) || ci.at(1).get(high)) {
    return std::string(name) + ": not measured";
  }
  read_optional(entry["cv"], cv);
  read_optional(entry["rounds"], rounds);
  read_optional(entry["trials"], trials);
  char text[256];
  std::snprintf(text, sizeof text, "%-10s %s  (95%% CI %s - %s, CV %.1f%%, %lld calls in %lld rounds)",
                std::string(name).c_str(), ms(median).c_str(), ms(low).c_str(), ms(high).c_str(),
                cv * 100, static_cast<long long>(trials), static_cast<long long>(rounds));
  return text;
}

}  // namespace

std::string brief_text(simdjson::dom::element profile) {
  std::string out;
  std::string_view verdict = "?", reason;
  read_optional(profile["verdict"], verdict);
  read_optional(profile["reason"], reason);
  out += "verdict: " + std::string(verdict) + (reason.empty() ? "" : " (" + std::string(reason) + ")") + "\n";
  simdjson::dom::element times;
  if (!profile["times_ms"].get(times)) {
    for (const char* arm : {"candidate", "eager", "compile"}) {
      simdjson::dom::element entry;
      if (times[arm].get(entry) || entry.is_null()) {
        if (std::string_view(arm) == "compile") {
          std::string_view status = "not measured";
          read_optional(profile["compile"]["status"], status);
          out += "compile    " + std::string(status) + "\n";
        }
        continue;
      }
      out += line_for_time(arm, entry) + "\n";
    }
  }
  simdjson::dom::element speedups;
  std::vector<std::string> hints;
  if (!profile["speedup"].get(speedups)) {
    for (const char* base : {"eager", "compile"}) {
      simdjson::dom::element entry;
      double median = 0, low = 0, high = 0;
      simdjson::dom::array ci;
      if (speedups[base].get(entry) || entry.is_null() || entry["median"].get(median) ||
          entry["ci95"].get(ci) || ci.size() != 2 || ci.at(0).get(low) || ci.at(1).get(high)) {
        continue;
      }
      std::string_view comparison = "";
      read_optional(profile["comparison"][base], comparison);
      char text[200];
      std::snprintf(text, sizeof text, "speedup over %-7s %.3gx  (95%% CI %.3gx - %.3gx)%s%s\n", base,
                    median, low, high, comparison.empty() ? "" : ": ",
                    std::string(comparison).c_str());
      out += text;
      if (high < 1.0) {
        hints.push_back(std::string("slower than ") + (std::string_view(base) == "eager" ? "PyTorch eager" : "torch.compile") +
                        ": fuse operations, cut launches and memory traffic");
      }
    }
  }
  std::string raised;
  simdjson::dom::array flags;
  if (!profile["flags"].get(flags)) {
    for (auto flag : flags) {
      bool is_raised = false;
      std::string_view name, why;
      if (flag["raised"].get(is_raised) || !is_raised || flag["name"].get(name)) continue;
      read_optional(flag["reason"], why);
      raised += (raised.empty() ? "" : "; ") + std::string(name);
      hints.push_back(std::string(name) + ": " + std::string(why));
    }
  }
  out += "flags: " + (raised.empty() ? std::string("none") : raised) + "\n";
  double cv = 0;
  if (!profile["times_ms"]["candidate"]["cv"].get(cv) && cv > 0.05) {
    hints.push_back("the candidate's times vary (CV above 5%): look for host work or synchronisation in forward");
  }
  simdjson::dom::element kernels;
  simdjson::dom::array table;
  if (profile["kernels"].get(kernels) || kernels.is_null()) {
    hints.push_back("kernel table: not traced in this run (--kernel-trace)");
  } else if (!kernels.get(table)) {
    out += "kernels (timed calls, top " + std::to_string(table.size()) + "):\n";
    for (auto row : table) {
      std::string_view name = "?", launcher_class = "?";
      double share = 0, total_ms = 0;
      std::int64_t calls = 0;
      read_optional(row["name"], name);
      read_optional(row["class"], launcher_class);
      read_optional(row["share"], share);
      read_optional(row["total_ms"], total_ms);
      read_optional(row["calls"], calls);
      if (name.size() > 100) name = name.substr(0, 100);
      char text[320];
      std::snprintf(text, sizeof text, "  %5.1f%%  %9.3f ms  %6lld calls  %-12s %.*s\n", 100 * share, total_ms,
                    static_cast<long long>(calls), std::string(launcher_class).c_str(), static_cast<int>(name.size()),
                    name.data());
      out += text;
    }
  }
  for (const auto& hint : hints) out += "look at: " + hint + "\n";
  return out;
}

}  // namespace cudaagent
