// nvidia-smi as a trusted outside witness of the GPU's state: run directly (never in a sandbox a
// candidate shares), with a scrubbed environment and a deadline.
#include "cudaagent/device/gpu_query.h"

#include <cstdlib>
#include <vector>

#include "cudaagent/sandbox/process.h"

namespace cudaagent {
namespace {

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r')) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && text[start] == ' ') ++start;
  return text.substr(start);
}

double number_or_zero(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end != text.c_str() && value > 0 ? value : 0.0;
}

}  // namespace

Result<GpuReading> parse_gpu_reading(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  const std::string text = trim(line);
  if (text.empty() || text.find('\n') != std::string::npos) {
    return Status::error("nvidia-smi printed " + std::to_string(text.empty() ? 0 : 2) +
                         "+ lines, expected one");
  }
  while (true) {
    const std::size_t comma = text.find(',', start);
    fields.push_back(trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (fields.size() != 6) return Status::error("nvidia-smi printed " + std::to_string(fields.size()) + " fields, expected 6");
  GpuReading reading;
  reading.name = fields[0];
  reading.driver = fields[1];
  reading.pstate = fields[2];
  reading.sm_mhz = number_or_zero(fields[3]);
  reading.memory_mhz = number_or_zero(fields[4]);
  reading.temperature_c = number_or_zero(fields[5]);
  return reading;
}

Result<GpuReading> query_gpu(const std::string& index, const std::string& nvidia_smi) {
  ProcessSpec spec;
  spec.argv = {nvidia_smi, "--query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,temperature.gpu",
               "--format=csv,noheader,nounits", "-i", index};
  spec.env = {"PATH=/usr/bin:/bin:/usr/local/bin", "LC_ALL=C"};
  spec.timeout_seconds = 10;
  auto run = run_process(spec);
  if (!run) return run.status();
  if (run.value().outcome != ProcessResult::Outcome::kExited || run.value().exit_code != 0) {
    return Status::error("nvidia-smi " + run.value().describe() + ": " + trim(run.value().out + run.value().err).substr(0, 200));
  }
  return parse_gpu_reading(run.value().out);
}

Result<std::string> query_gpu_uuid(const std::string& index, const std::string& nvidia_smi) {
  if (index.rfind("GPU-", 0) == 0 || index.rfind("MIG-", 0) == 0) return index;
  ProcessSpec spec;
  spec.argv = {nvidia_smi, "--query-gpu=uuid", "--format=csv,noheader", "-i", index};
  spec.env = {"PATH=/usr/bin:/bin:/usr/local/bin", "LC_ALL=C"};
  spec.timeout_seconds = 10;
  auto run = run_process(spec);
  if (!run) return run.status();
  const std::string uuid = trim(run.value().out);
  if (run.value().outcome != ProcessResult::Outcome::kExited || run.value().exit_code != 0 ||
      uuid.rfind("GPU-", 0) != 0 || uuid.find('\n') != std::string::npos) {
    return Status::error("nvidia-smi -i " + index + " gave no UUID: " +
                         trim(run.value().out + run.value().err).substr(0, 200));
  }
  return uuid;
}

std::string visible_gpu_index(const char* visible) {
  std::string first = visible != nullptr ? visible : "";
  first = trim(first.substr(0, first.find(',')));
  return first.empty() ? "0" : first;
}

}  // namespace cudaagent
