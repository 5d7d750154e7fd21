// Training metrics: one JSON object per iteration, named as veRL names them ("actor/pg_loss",
// "critic/vf_loss", ...) so curves can be laid beside a Python run's, and an SVG plot of their
// curves written by hand (a grid of small line charts; no plotting library). Pure C++.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

using MetricList = std::vector<std::pair<std::string, double>>;

// Appends one '\n'-terminated record: {"stage":S,"iteration":N[,"epoch":E],<name>:<value>,...}
// ("epoch" when epoch >= 0). Non-finite values are written as null (the JSON writer's rule).
void append_metrics_record(std::string& out, std::string_view stage, std::int64_t iteration,
                           const MetricList& metrics, std::int64_t epoch = -1);

// The value of `name` in `metrics`, or `fallback`.
double metric_value(const MetricList& metrics, std::string_view name, double fallback = 0.0);

struct MetricSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (iteration, value), finite values only
};

// The series of every numeric key (other than "iteration") in the records of `jsonl`, in order of
// first appearance, with "iteration" as x. Lines that are not objects are skipped.
std::vector<MetricSeries> metric_series_from_jsonl(std::string_view jsonl);

// An SVG document: one panel per series (at most `max_panels`, the first ones), each with its
// curve, the y range and the last value. Series with no points are left out.
std::string render_metrics_svg(const std::vector<MetricSeries>& series, std::string_view title,
                               std::size_t max_panels = 24);

}  // namespace cudaagent
