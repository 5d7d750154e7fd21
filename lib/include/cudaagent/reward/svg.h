// A small SVG writer for the plots of `cudaagent-reward --summary --plots`: a page, rectangles,
// lines, polylines and text (escaped), and the two charts the summary draws from them. Not a
// plotting library: fixed layout, linear axes with round ticks, no fonts beyond the viewer's
// sans-serif. Every document it writes is standalone XML that browsers and image viewers open.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cudaagent {

class Svg {
 public:
  Svg(double width, double height);

  Svg& rect(double x, double y, double width, double height, std::string_view fill,
            std::string_view tooltip = {});
  Svg& line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            bool dashed = false);
  Svg& polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                double width = 2);
  // `anchor`: start, middle or end. `rotate`: degrees about (x, y).
  Svg& text(double x, double y, std::string_view content, double size = 12,
            std::string_view anchor = "start", std::string_view fill = "#222", double rotate = 0);

  // The whole document, XML declaration included.
  std::string str() const;

 private:
  double width_, height_;
  std::string body_;
};

// "1", "0.25", "1e+03": numbers for axis ticks and labels (%g with up to 4 digits).
std::string svg_number(double value);

// Round tick values covering [low, high]: about `count` of them, at 1, 2 or 5 times a power of 10.
std::vector<double> nice_ticks(double low, double high, int count = 5);

struct ChartSeries {
  std::string name;
  std::string color;                                // "#1f77b4"
  std::vector<double> values;                       // bar charts: one per category
  std::vector<std::pair<double, double>> points;    // line charts: (x, y), x increasing
};

// Bars of each category side by side, one per series, with a legend when there are several.
struct BarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<ChartSeries> series;
  double y_max = 0;  // 0: from the data
};
std::string bar_chart_svg(const BarChart& chart);

// Step or straight lines through each series' points, with a legend.
struct LineChart {
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  double x_min = 0, x_max = 0;  // x_max <= x_min: from the data
  double y_min = 0, y_max = 0;  // y_max <= y_min: from the data
  bool steps = false;           // draw as a step function (value holds until the next x)
  std::vector<double> marks;    // vertical dashed lines at these x (the fast_p thresholds)
};
std::string line_chart_svg(const LineChart& chart);

}  // namespace cudaagent
