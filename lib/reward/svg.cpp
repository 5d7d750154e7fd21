// The SVG writer and the two charts. Layout: a fixed plot area inside margins for the title, the
// axis labels and the legend; data coordinates map linearly onto it.
#include "cudaagent/reward/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cudaagent {
namespace {

constexpr double kWidth = 640, kHeight = 400;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 60;

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text: drop them.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out.push_back(c);
    }
  }
}

std::string fixed(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// Maps data onto the plot area.
struct Frame {
  double x_min, x_max, y_min, y_max;
  double px(double x) const {
    return kLeft + (x - x_min) / (x_max - x_min) * (kWidth - kLeft - kRight);
  }
  double py(double y) const {
    return kHeight - kBottom - (y - y_min) / (y_max - y_min) * (kHeight - kTop - kBottom);
  }
};

void frame_and_labels(Svg& svg, const std::string& title, const std::string& x_label,
                      const std::string& y_label, const Frame& frame, const std::vector<double>& y_ticks) {
  svg.text(kWidth / 2, 24, title, 15, "middle");
  for (double tick : y_ticks) {
    const double y = frame.py(tick);
    svg.line(kLeft, y, kWidth - kRight, y, "#ddd");
    svg.text(kLeft - 6, y + 4, svg_number(tick), 11, "end", "#555");
  }
  svg.line(kLeft, kHeight - kBottom, kWidth - kRight, kHeight - kBottom, "#333");
  svg.line(kLeft, kTop, kLeft, kHeight - kBottom, "#333");
  svg.text(kWidth / 2, kHeight - 14, x_label, 12, "middle");
  svg.text(16, (kTop + kHeight - kBottom) / 2, y_label, 12, "middle", "#222", -90);
}

void legend(Svg& svg, const std::vector<ChartSeries>& series) {
  if (series.size() < 2) return;
  double x = kLeft + 10;
  for (const ChartSeries& s : series) {
    svg.rect(x, kTop + 4, 10, 10, s.color);
    svg.text(x + 14, kTop + 13, s.name, 11);
    x += 24 + 7 * static_cast<double>(s.name.size());
  }
}

}  // namespace

Svg::Svg(double width, double height) : width_(width), height_(height) {}

Svg& Svg::rect(double x, double y, double width, double height, std::string_view fill,
               std::string_view tooltip) {
  body_ += "<rect x=\"" + fixed(x) + "\" y=\"" + fixed(y) + "\" width=\"" + fixed(width) +
           "\" height=\"" + fixed(height) + "\" fill=\"";
  append_escaped(body_, fill);
  body_ += "\"";
  if (tooltip.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>";
    append_escaped(body_, tooltip);
    body_ += "</title></rect>\n";
  }
  return *this;
}

Svg& Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               bool dashed) {
  body_ += "<line x1=\"" + fixed(x1) + "\" y1=\"" + fixed(y1) + "\" x2=\"" + fixed(x2) + "\" y2=\"" +
           fixed(y2) + "\" stroke=\"";
  append_escaped(body_, stroke);
  body_ += "\" stroke-width=\"" + fixed(width) + "\"" +
           (dashed ? std::string(" stroke-dasharray=\"4 3\"") : std::string()) + "/>\n";
  return *this;
}

Svg& Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                   double width) {
  body_ += "<polyline fill=\"none\" stroke=\"";
  append_escaped(body_, stroke);
  body_ += "\" stroke-width=\"" + fixed(width) + "\" points=\"";
  for (const auto& [x, y] : points) body_ += fixed(x) + "," + fixed(y) + " ";
  body_ += "\"/>\n";
  return *this;
}

Svg& Svg::text(double x, double y, std::string_view content, double size, std::string_view anchor,
               std::string_view fill, double rotate) {
  body_ += "<text x=\"" + fixed(x) + "\" y=\"" + fixed(y) + "\" font-size=\"" + fixed(size) +
           "\" text-anchor=\"";
  append_escaped(body_, anchor);
  body_ += "\" fill=\"";
  append_escaped(body_, fill);
  body_ += "\"";
  if (rotate != 0) body_ += " transform=\"rotate(" + fixed(rotate) + " " + fixed(x) + " " + fixed(y) + ")\"";
  body_ += ">";
  append_escaped(body_, content);
  body_ += "</text>\n";
  return *this;
}

std::string Svg::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "width=\"" + fixed(width_) + "\" height=\"" + fixed(height_) + "\" viewBox=\"0 0 " +
         fixed(width_) + " " + fixed(height_) + "\" font-family=\"sans-serif\">\n" +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body_ + "</svg>\n";
}

std::string svg_number(double value) {
  if (std::fabs(value) < 1e-12) return "0";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

std::vector<double> nice_ticks(double low, double high, int count) {
  if (!(high > low) || count < 1) return {low};
  const double raw = (high - low) / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * power;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double tick = std::ceil(low / step) * step; tick <= high + step * 1e-9; tick += step) {
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
    if (ticks.size() > 100) break;
  }
  return ticks;
}

std::string bar_chart_svg(const BarChart& chart) {
  Svg svg(kWidth, kHeight);
  double top = chart.y_max;
  for (const ChartSeries& s : chart.series) {
    for (double value : s.values) top = std::max(top, value);
  }
  if (!(top > 0)) top = 1;
  const std::vector<double> ticks = nice_ticks(0, top);
  const Frame frame{0, 1, 0, std::max(top, ticks.back())};
  frame_and_labels(svg, chart.title, chart.x_label, chart.y_label, frame, ticks);
  const std::size_t groups = std::max<std::size_t>(chart.categories.size(), 1);
  const double group_width = (kWidth - kLeft - kRight) / static_cast<double>(groups);
  const double bar_width =
      group_width * 0.8 / static_cast<double>(std::max<std::size_t>(chart.series.size(), 1));
  for (std::size_t g = 0; g < chart.categories.size(); ++g) {
    const double left = kLeft + group_width * static_cast<double>(g) + group_width * 0.1;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const ChartSeries& series = chart.series[s];
      if (g >= series.values.size()) continue;
      const double value = series.values[g];
      const double y = frame.py(value);
      svg.rect(left + bar_width * static_cast<double>(s), y, bar_width * 0.95,
               kHeight - kBottom - y, series.color,
               chart.categories[g] + (series.name.empty() ? "" : " " + series.name) + ": " +
                   svg_number(value));
      svg.text(left + bar_width * (static_cast<double>(s) + 0.5), y - 4, svg_number(value), 10,
               "middle", "#333");
    }
    svg.text(left + group_width * 0.4, kHeight - kBottom + 16, chart.categories[g], 11, "middle");
  }
  legend(svg, chart.series);
  return svg.str();
}

std::string line_chart_svg(const LineChart& chart) {
  Svg svg(kWidth, kHeight);
  double x_min = chart.x_min, x_max = chart.x_max, y_min = chart.y_min, y_max = chart.y_max;
  if (!(x_max > x_min) || !(y_max > y_min)) {
    double lo_x = 1e300, hi_x = -1e300, lo_y = 1e300, hi_y = -1e300;
    for (const ChartSeries& s : chart.series) {
      for (const auto& [x, y] : s.points) {
        lo_x = std::min(lo_x, x);
        hi_x = std::max(hi_x, x);
        lo_y = std::min(lo_y, y);
        hi_y = std::max(hi_y, y);
      }
    }
    if (!(x_max > x_min)) {
      x_min = lo_x < hi_x ? lo_x : 0;
      x_max = lo_x < hi_x ? hi_x : 1;
    }
    if (!(y_max > y_min)) {
      y_min = lo_y < hi_y ? std::min(lo_y, 0.0) : 0;
      y_max = lo_y < hi_y ? hi_y : 1;
    }
  }
  const std::vector<double> y_ticks = nice_ticks(y_min, y_max);
  const Frame frame{x_min, x_max, y_min, std::max(y_max, y_ticks.back())};
  frame_and_labels(svg, chart.title, chart.x_label, chart.y_label, frame, y_ticks);
  for (double tick : nice_ticks(x_min, x_max, 8)) {
    svg.text(frame.px(tick), kHeight - kBottom + 16, svg_number(tick), 11, "middle", "#555");
  }
  for (double mark : chart.marks) {
    if (mark < x_min || mark > x_max) continue;
    svg.line(frame.px(mark), kTop, frame.px(mark), kHeight - kBottom, "#999", 1, true);
  }
  for (const ChartSeries& s : chart.series) {
    std::vector<std::pair<double, double>> points;
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto [x, y] = s.points[i];
      if (chart.steps && i > 0) points.emplace_back(frame.px(x), points.back().second);
      points.emplace_back(frame.px(x), frame.py(y));
    }
    if (!points.empty()) svg.polyline(points, s.color);
  }
  legend(svg, chart.series);
  return svg.str();
}

}  // namespace cudaagent
