// The summary's figures, its text and JSON forms, and its plots.
#include "cudaagent/reward/summary.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/session.h"
#include "cudaagent/reward/svg.h"

namespace cudaagent {
namespace {

// Numbers for people: "%g" (thresholds, reward values), three digits, a speedup, a share.
std::string plain(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}
std::string digits3(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}
std::string times_text(double value) { return digits3(value) + "x"; }
std::string percent_text(double share) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f%%", share * 100);
  return text;
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

// Levels in numeric order where they are numbers ("2" before "10"), the rest after, by name.
std::vector<std::string> ordered_levels(const std::map<std::string, SummaryGroup>& levels) {
  std::vector<std::string> names;
  for (const auto& [name, group] : levels) names.push_back(name);
  const auto number = [](const std::string& text) {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    return end != text.c_str() && *end == 0 ? value : 1e300;
  };
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return number(a) < number(b);
  });
  return names;
}

std::string speedup_cell(const std::vector<double>& speedups) {
  const auto mean = SummaryGroup::geomean(speedups);
  return mean ? times_text(*mean) + " (n=" + std::to_string(speedups.size()) + ")" : "-";
}

void write_group_json(JsonWriter& json, const SummaryGroup& group) {
  json.begin_object().field("records", static_cast<std::int64_t>(group.records));
  json.field("passed", static_cast<std::int64_t>(group.passed)).field("pass_rate", group.pass_rate());
  json.key("verdicts").begin_object();
  for (const auto& [verdict, count] : group.verdicts) json.field(verdict, static_cast<std::int64_t>(count));
  json.end_object().key("speedup").begin_object();
  for (const auto& [name, speedups] : {std::pair{"eager", &group.eager}, std::pair{"compile", &group.compile}}) {
    json.key(name).begin_object().field("n", static_cast<std::int64_t>(speedups->size()));
    json.key("geomean");
    if (auto mean = SummaryGroup::geomean(*speedups)) {
      json.value(*mean);
    } else {
      json.null();
    }
    json.key("fast_p").begin_object();
    for (double p : fast_p_thresholds()) {
      json.key(plain(p));
      if (p > 0 && speedups->empty()) {
        json.null();  // the baseline was never measured
      } else {
        json.value(group.fast_p(*speedups, p));
      }
    }
    json.end_object().end_object();
  }
  json.end_object().key("reward").begin_object();
  json.field("mean", group.records > 0 ? group.reward_sum / static_cast<double>(group.records) : 0.0);
  json.key("histogram").begin_array();
  for (const auto& [value, count] : group.rewards) {
    json.begin_object().field("value", value).field("count", static_cast<std::int64_t>(count)).end_object();
  }
  json.end_array().end_object().end_object();
}

// The fast_p curve: for every threshold p from 0 to past the largest speedup, the share of all
// records that are PASS and faster than p. Exact: it only changes at the speedups themselves.
std::vector<std::pair<double, double>> fast_p_curve(const SummaryGroup& group,
                                                    const std::vector<double>& speedups, double x_max) {
  std::vector<double> sorted = speedups;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<double, double>> points{{0.0, group.fast_p(speedups, 0.0)}};
  for (double s : sorted) {
    if (s > x_max) break;
    points.emplace_back(s, group.fast_p(speedups, s));
  }
  points.emplace_back(x_max, group.fast_p(speedups, x_max));
  return points;
}

}  // namespace

Result<ScoredRecord> read_scored_record(simdjson::dom::object record) {
  if (record["error"].error() == simdjson::SUCCESS) return Status::error("error record");
  simdjson::dom::object reward;
  if (record["reward"].get(reward)) return Status::error("no reward key");
  ScoredRecord scored;
  std::string_view text;
  if (reward["verdict"].get(text)) return Status::error("reward.verdict is missing");
  scored.verdict = std::string(text);
  if (reward["value"].get(scored.reward)) {
    std::int64_t whole = 0;
    if (reward["value"].get(whole)) return Status::error("reward.value is not a number");
    scored.reward = static_cast<double>(whole);
  }
  if (!reward["form"].get(text)) scored.form = std::string(text);
  for (auto [name, out] : {std::pair{"eager", &scored.speedup_eager}, std::pair{"compile", &scored.speedup_compile}}) {
    double speedup = 0;
    if (!reward["inputs"][name]["speedup"].get(speedup) && std::isfinite(speedup) && speedup > 0) {
      *out = speedup;
    }
  }
  simdjson::dom::element level;
  if (!record["task"]["meta"]["level"].get(level)) {
    std::int64_t number = 0;
    if (!level.get(number)) {
      scored.level = std::to_string(number);
    } else if (!level.get(text)) {
      scored.level = std::string(text);
    }
  }
  return scored;
}

void SummaryGroup::add(const ScoredRecord& record) {
  ++records;
  ++verdicts[record.verdict];
  reward_sum += record.reward;
  ++rewards[record.reward];
  if (record.verdict != "PASS") return;
  ++passed;
  if (record.speedup_eager) eager.push_back(*record.speedup_eager);
  if (record.speedup_compile) compile.push_back(*record.speedup_compile);
}

double SummaryGroup::pass_rate() const {
  return records > 0 ? static_cast<double>(passed) / static_cast<double>(records) : 0.0;
}

double SummaryGroup::fast_p(const std::vector<double>& speedups, double p) const {
  if (records == 0) return 0.0;
  if (p <= 0) return pass_rate();  // fast_0: correct, whatever the speed
  const auto fast = std::count_if(speedups.begin(), speedups.end(), [p](double s) { return s > p; });
  return static_cast<double>(fast) / static_cast<double>(records);
}

std::optional<double> SummaryGroup::geomean(const std::vector<double>& speedups) {
  if (speedups.empty()) return std::nullopt;
  double sum = 0;
  for (double s : speedups) sum += std::log(s);
  return std::exp(sum / static_cast<double>(speedups.size()));
}

void ResultSummary::add(const ScoredRecord& record) {
  all_.add(record);
  if (!record.level.empty()) levels_[record.level].add(record);
  if (form_.empty()) {
    form_ = record.form;
  } else if (!record.form.empty() && record.form != form_) {
    form_ = "mixed";
  }
}

void ResultSummary::add_unscored(const std::string& reason) {
  ++unscored_;
  ++unscored_reasons_[reason];
}

std::string ResultSummary::text() const {
  const SummaryGroup& a = all_;
  std::string out = "scored records: " + std::to_string(a.records);
  if (unscored_ > 0) {
    out += " (and " + std::to_string(unscored_) + " not scored:";
    for (const auto& [reason, count] : unscored_reasons_) out += " " + reason + " " + std::to_string(count) + ";";
    out.back() = ')';
  }
  out += "\nverdicts:";
  for (const auto& [verdict, count] : a.verdicts) out += " " + verdict + " " + std::to_string(count);
  out += "\npass rate: " + percent_text(a.pass_rate()) + " (" + std::to_string(a.passed) + " of " +
         std::to_string(a.records) + ")\n\n";

  out += pad("speedup", 18) + pad("over eager", 22) + "over torch.compile\n";
  out += pad("geometric mean", 18) + pad(speedup_cell(a.eager), 22) + speedup_cell(a.compile) + "\n";
  // A baseline never measured (torch.compile on torch 1.13) has no fast_p above 0: "-".
  const auto fast_cell = [&a](const std::vector<double>& speedups, double p) {
    return p > 0 && speedups.empty() ? std::string("-") : percent_text(a.fast_p(speedups, p));
  };
  for (double p : fast_p_thresholds()) {
    out += pad("fast_" + plain(p), 18) + pad(fast_cell(a.eager, p), 22) + fast_cell(a.compile, p) + "\n";
  }

  out += "\nreward (" + (form_.empty() ? std::string("-") : form_) + "): mean " +
         digits3(a.records > 0 ? a.reward_sum / static_cast<double>(a.records) : 0.0) + "\n";
  std::uint64_t most = 1;
  for (const auto& [value, count] : a.rewards) most = std::max(most, count);
  const bool discrete = a.rewards.size() <= 12;
  if (discrete) {
    for (const auto& [value, count] : a.rewards) {
      const std::size_t bar = static_cast<std::size_t>(std::llround(40.0 * static_cast<double>(count) / static_cast<double>(most)));
      out += "  " + pad(plain(value), 8) + pad(std::to_string(count), 7) + std::string(bar, '#') + "\n";
    }
  } else {
    out += "  (" + std::to_string(a.rewards.size()) + " distinct values; see rewards.svg)\n";
  }

  if (!levels_.empty()) {
    out += "\nper level\n" + pad("level", 8) + pad("records", 9) + pad("pass rate", 11) +
           pad("fast_1 eager", 14) + pad("fast_1 compile", 16) + pad("geomean eager", 15) +
           pad("geomean compile", 17) + "mean reward\n";
    for (const std::string& name : ordered_levels(levels_)) {
      const SummaryGroup& g = levels_.at(name);
      const auto mean_eager = SummaryGroup::geomean(g.eager);
      const auto mean_compile = SummaryGroup::geomean(g.compile);
      out += pad(name, 8) + pad(std::to_string(g.records), 9) + pad(percent_text(g.pass_rate()), 11) +
             pad(g.eager.empty() ? "-" : percent_text(g.fast_p(g.eager, 1.0)), 14) +
             pad(g.compile.empty() ? "-" : percent_text(g.fast_p(g.compile, 1.0)), 16) +
             pad(mean_eager ? times_text(*mean_eager) : "-", 15) +
             pad(mean_compile ? times_text(*mean_compile) : "-", 17) +
             digits3(g.reward_sum / static_cast<double>(g.records)) + "\n";
    }
    if (a.records > 0) {
      std::uint64_t levelled = 0;
      for (const auto& [name, g] : levels_) levelled += g.records;
      if (levelled < a.records) {
        out += "(" + std::to_string(a.records - levelled) + " records have no task.meta.level)\n";
      }
    }
  }
  out += "\nWhat the numbers mean: the pass rate is the share of scored records whose final verdict\n"
         "is PASS (correct, and not flagged by the timing checks). Speedup is the baseline's time over\n"
         "the candidate's (median times; above 1 is faster). fast_p is the share of all scored records\n"
         "that pass and are more than p times as fast as the baseline (fast_0 is the pass rate,\n"
         "fast_1 'faster at all'). The geometric mean is over passing records with a measured speedup\n"
         "(n); \"-\" marks a baseline no record measured (torch 1.13 has no torch.compile). A CPU run\n"
         "of the bundled example is slower than eager by design: its kernel is plain C++, the point\n"
         "there is the path, not the speed.\n";
  return out;
}

std::string ResultSummary::json() const {
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("form", form_).field("not_scored", static_cast<std::int64_t>(unscored_));
  json.key("all");
  write_group_json(json, all_);
  json.key("levels").begin_object();
  for (const std::string& name : ordered_levels(levels_)) {
    json.key(name);
    write_group_json(json, levels_.at(name));
  }
  json.end_object().end_object();
  out.push_back('\n');
  return out;
}

Result<std::vector<std::string>> ResultSummary::write_plots(const std::string& dir) const {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Status::error("cannot create " + cudaagent::quoted(dir) + ": " + error.message());
  std::vector<std::pair<std::string, std::string>> files;

  BarChart rewards;
  rewards.title = "Reward histogram (" + std::to_string(all_.records) + " scored records)";
  rewards.x_label = "reward";
  rewards.y_label = "records";
  ChartSeries counts{"records", "#4c72b0", {}, {}};
  for (const auto& [value, count] : all_.rewards) {
    rewards.categories.push_back(plain(value));
    counts.values.push_back(static_cast<double>(count));
  }
  rewards.series.push_back(counts);
  files.emplace_back("rewards.svg", bar_chart_svg(rewards));

  LineChart fast;
  fast.title = "fast_p: share of records correct and faster than p";
  fast.x_label = "speedup threshold p";
  fast.y_label = "fast_p";
  fast.steps = true;
  fast.y_min = 0;
  fast.y_max = 1;
  double x_max = 2.5;
  for (double s : all_.eager) x_max = std::max(x_max, std::min(s * 1.1, 20.0));
  for (double s : all_.compile) x_max = std::max(x_max, std::min(s * 1.1, 20.0));
  fast.x_min = 0;
  fast.x_max = x_max;
  fast.marks = fast_p_thresholds();
  fast.series.push_back({"over eager", "#4c72b0", {}, fast_p_curve(all_, all_.eager, x_max)});
  fast.series.push_back({"over torch.compile", "#dd8452", {}, fast_p_curve(all_, all_.compile, x_max)});
  files.emplace_back("fast_p.svg", line_chart_svg(fast));

  if (!levels_.empty()) {
    BarChart levels;
    levels.title = "Per level";
    levels.x_label = "level";
    levels.y_label = "share of the level's records";
    levels.y_max = 1;
    ChartSeries pass{"pass rate", "#55a868", {}, {}};
    ChartSeries eager{"fast_1 over eager", "#4c72b0", {}, {}};
    ChartSeries compile{"fast_1 over torch.compile", "#dd8452", {}, {}};
    for (const std::string& name : ordered_levels(levels_)) {
      const SummaryGroup& g = levels_.at(name);
      levels.categories.push_back(name);
      pass.values.push_back(g.pass_rate());
      eager.values.push_back(g.fast_p(g.eager, 1.0));
      compile.values.push_back(g.fast_p(g.compile, 1.0));
    }
    levels.series = {pass, eager, compile};
    files.emplace_back("levels.svg", bar_chart_svg(levels));
  }

  std::vector<std::string> written;
  for (const auto& [name, svg] : files) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    // For people to open: readable like any other file they make (0644).
    if (!write_file_atomically(path, svg) || ::chmod(path.c_str(), 0644) != 0) {
      return Status::error("cannot write " + cudaagent::quoted(path));
    }
    written.push_back(path);
  }
  return written;
}

}  // namespace cudaagent
