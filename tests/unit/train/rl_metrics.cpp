// Metrics records, reading their series back, and the SVG plot.
#include "cudaagent/train/rl_metrics.h"

#include <doctest/doctest.h>

#include <cmath>

#include "test_support.h"

using namespace cudaagent;

TEST_CASE("metrics records and their series") {
  std::string text;
  append_metrics_record(text, "ppo", 1, {{"actor/pg_loss", 0.5}, {"critic/vf_loss", NAN}}, 0);
  CHECK(text ==
        "{\"stage\":\"ppo\",\"iteration\":1,\"epoch\":0,\"actor/pg_loss\":0.5,\"critic/"
        "vf_loss\":null}\n");
  append_metrics_record(text, "ppo", 2, {{"actor/pg_loss", 0.25}, {"critic/vf_loss", 1.0}});
  text += "not json\n";
  auto series = metric_series_from_jsonl(text);
  REQUIRE(series.size() == 3);  // epoch, actor/pg_loss, critic/vf_loss
  CHECK(series[1].name == "actor/pg_loss");
  CHECK(series[1].points == std::vector<std::pair<double, double>>{{1, 0.5}, {2, 0.25}});
  CHECK(series[2].points.size() == 1);  // the null is not a point
  CHECK(metric_value({{"a", 3.0}}, "a") == 3.0);
  CHECK(metric_value({{"a", 3.0}}, "b", -1.0) == -1.0);
}

TEST_CASE("the SVG has one panel per series and escapes names") {
  std::vector<MetricSeries> series{
      {"loss<1>", {{1, 2.0}, {2, 1.0}, {3, 0.5}}}, {"empty", {}}, {"flat", {{1, 1.0}}}};
  const std::string svg = render_metrics_svg(series, "run & test");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("loss&lt;1&gt;") != std::string::npos);
  CHECK(svg.find("run &amp; test") != std::string::npos);
  CHECK(svg.find("empty") == std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++polylines;
  CHECK(polylines == 2);
  // The first point of the falling curve is at the top of its plot, the last at the bottom.
  CHECK(svg.find("points=\"50.0,62.0 ") != std::string::npos);
  CHECK(render_metrics_svg(series, "t", 1).find("flat") == std::string::npos);
}
