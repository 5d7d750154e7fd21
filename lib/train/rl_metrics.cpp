// Metrics records and their SVG plot. The plot is a fixed grid of panels, each a polyline scaled
// to its own x and y range; text goes through the same escaping as any XML text.
#include "cudaagent/train/rl_metrics.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "cudaagent/base/json_writer.h"

namespace cudaagent {
namespace {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

std::string coordinate(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

}  // namespace

void append_metrics_record(std::string& out, std::string_view stage, std::int64_t iteration,
                           const MetricList& metrics, std::int64_t epoch) {
  JsonWriter json(out);
  json.begin_object().field("stage", stage).field("iteration", iteration);
  if (epoch >= 0) json.field("epoch", epoch);
  for (const auto& [name, value] : metrics) json.field(name, value);
  json.end_object();
  out.push_back('\n');
}

double metric_value(const MetricList& metrics, std::string_view name, double fallback) {
  for (const auto& [key, value] : metrics) {
    if (key == name) return value;
  }
  return fallback;
}

std::vector<MetricSeries> metric_series_from_jsonl(std::string_view jsonl) {
  std::vector<MetricSeries> series;
  std::map<std::string, std::size_t, std::less<>> index;
  simdjson::dom::parser parser;
  std::size_t start = 0;
  while (start < jsonl.size()) {
    std::size_t end = jsonl.find('\n', start);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view line = jsonl.substr(start, end - start);
    start = end + 1;
    simdjson::dom::object record;
    if (line.empty() || parser.parse(line.data(), line.size()).get(record)) continue;
    double x = 0;
    if (record["iteration"].get_double().get(x)) continue;
    for (auto field : record) {
      double y = 0;
      if (field.key == "iteration" || field.value.get_double().get(y) || !std::isfinite(y))
        continue;
      auto found = index.find(field.key);
      if (found == index.end()) {
        found = index.emplace(std::string(field.key), series.size()).first;
        series.push_back({std::string(field.key), {}});
      }
      series[found->second].points.emplace_back(x, y);
    }
  }
  return series;
}

std::string render_metrics_svg(const std::vector<MetricSeries>& all_series, std::string_view title,
                               std::size_t max_panels) {
  std::vector<const MetricSeries*> shown;
  for (const auto& series : all_series) {
    if (!series.points.empty() && shown.size() < max_panels) shown.push_back(&series);
  }
  constexpr int kColumns = 4;
  constexpr double kPanelWidth = 300;
  constexpr double kPanelHeight = 170;
  constexpr double kTop = 40;
  constexpr double kMargin = 36;  // inside a panel, left of and below the plot area
  const auto rows = static_cast<int>((shown.size() + kColumns - 1) / kColumns);
  const double width = kColumns * kPanelWidth;
  const double height = kTop + std::max(rows, 1) * kPanelHeight;
  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coordinate(width) + "\" height=\"" +
         coordinate(height) + "\" viewBox=\"0 0 " + coordinate(width) + " " + coordinate(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"10\" y=\"24\" font-size=\"16\">" + xml_escape(title) + "</text>\n";
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const MetricSeries& series = *shown[i];
    const double left = static_cast<double>(i % kColumns) * kPanelWidth;
    const double top = kTop + static_cast<double>(i / kColumns) * kPanelHeight;
    const double plot_left = left + kMargin + 14;
    const double plot_top = top + 22;
    const double plot_width = kPanelWidth - kMargin - 28;
    const double plot_height = kPanelHeight - kMargin - 22;
    double x_min = series.points.front().first, x_max = x_min;
    double y_min = series.points.front().second, y_max = y_min;
    for (const auto& [x, y] : series.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
    const double x_span = x_max > x_min ? x_max - x_min : 1.0;
    const double y_span = y_max > y_min ? y_max - y_min : 1.0;
    svg += "<g>\n<text x=\"" + coordinate(left + 8) + "\" y=\"" + coordinate(top + 14) +
           "\" font-weight=\"bold\">" + xml_escape(series.name) + "</text>\n";
    svg += "<rect x=\"" + coordinate(plot_left) + "\" y=\"" + coordinate(plot_top) + "\" width=\"" +
           coordinate(plot_width) + "\" height=\"" + coordinate(plot_height) +
           "\" fill=\"none\" stroke=\"#bbb\"/>\n";
    svg += "<text x=\"" + coordinate(left + 4) + "\" y=\"" + coordinate(plot_top + 9) + "\">" +
           number_text(y_max) + "</text>\n";
    svg += "<text x=\"" + coordinate(left + 4) + "\" y=\"" + coordinate(plot_top + plot_height) +
           "\">" + number_text(y_min) + "</text>\n";
    svg += "<text x=\"" + coordinate(plot_left) + "\" y=\"" +
           coordinate(plot_top + plot_height + 14) + "\">" + number_text(x_min) + "</text>\n";
    svg += "<text x=\"" + coordinate(plot_left + plot_width) + "\" y=\"" +
           coordinate(plot_top + plot_height + 14) + "\" text-anchor=\"end\">" +
           number_text(x_max) + "</text>\n";
    svg += "<text x=\"" + coordinate(plot_left + plot_width) + "\" y=\"" + coordinate(top + 14) +
           "\" text-anchor=\"end\" fill=\"#555\">last " + number_text(series.points.back().second) +
           "</text>\n";
    svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
    for (const auto& [x, y] : series.points) {
      svg += coordinate(plot_left + (x - x_min) / x_span * plot_width) + "," +
             coordinate(plot_top + plot_height - (y - y_min) / y_span * plot_height) + " ";
    }
    svg += "\"/>\n</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace cudaagent
