// trace_summary TRACE START_NS END_NS STREAM|- [CANDIDATE_PATH...]: reads a kernel trace with
// cudaagent's reader and prints {"health": ..., "summary": ...} for the window, so the GPU test
// (tests/gpu/cupti_check.sh) checks the C++ classifier on a real trace. Exit 1 when the trace
// cannot be read, 2 on bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cudaagent/profile/kernel_trace.h"

namespace {

bool parse_u64(const char* text, std::uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(text, &end, 10);
  return end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t start = 0, end = 0, stream = 0;
  const bool has_stream = argc >= 5 && std::string(argv[4]) != "-";
  if (argc < 5 || !parse_u64(argv[2], start) || !parse_u64(argv[3], end) ||
      (has_stream && !parse_u64(argv[4], stream))) {
    std::fprintf(stderr, "usage: trace_summary TRACE START_NS END_NS STREAM|- [CANDIDATE_PATH...]\n");
    return 2;
  }
  auto trace = cudaagent::read_kernel_trace(argv[1]);
  if (!trace) {
    std::fprintf(stderr, "trace_summary: %s\n", trace.status().message().c_str());
    return 1;
  }
  cudaagent::SummarySettings settings;
  for (int i = 5; i < argc; ++i) settings.classify.candidate_paths.emplace_back(argv[i]);
  cudaagent::TraceWindow window{start, end, std::nullopt};
  if (has_stream) window.stream = static_cast<std::uint32_t>(stream);
  auto summary = cudaagent::summarize_trace(trace.value(), window, settings);
  if (!summary) {
    std::fprintf(stderr, "trace_summary: %s\n", summary.status().message().c_str());
    return 2;
  }
  std::string out;
  cudaagent::JsonWriter json(out);
  json.begin_object().key("health");
  cudaagent::write_trace_health(json, trace.value());
  json.key("summary");
  cudaagent::write_trace_summary(json, summary.value());
  json.end_object();
  std::printf("%s\n", out.c_str());
  return 0;
}
