// How fast the filter's trusted side reads and judges a task's output files: the part of every
// task's time that grows with its output (the checks write out_a1, out_a2, out_b and out_compile;
// the filter reads all four and compares them). Writes four float32 files of --mib MiB each in
// --dir, then times reading them, judge_outputs and compare_compiled, --repeat times. Prints one
// JSON line per repetition: {"mib", "read_s", "judge_s", "compile_s", "gb_per_s"}.
//
//   filter_judge_bench [--mib 1024] [--repeat 3] [--dir /tmp]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cudaagent/candidate/tensor_file.h"
#include "cudaagent/filter/checks.h"

namespace {

using cudaagent::TensorTree;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A float32 tensor of `count` values from `seed`, plus `nudge` on every element (a reordered sum).
TensorTree make_tensor(std::size_t count, unsigned seed, float nudge) {
  std::vector<float> values(count);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (auto& v : values) v = normal(rng) + nudge;
  std::vector<std::byte> bytes(count * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(cudaagent::DType::kFloat32, {static_cast<std::int64_t>(count)}, std::move(bytes));
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 1024;
  int repeat = 3;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mib") mib = std::atol(argv[i + 1]);
    else if (flag == "--repeat") repeat = std::atoi(argv[i + 1]);
    else if (flag == "--dir") dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: filter_judge_bench [--mib N] [--repeat N] [--dir DIR]\n");
      return 2;
    }
  }
  if (mib < 1 || mib > 4000 || repeat < 1) {
    std::fprintf(stderr, "filter_judge_bench: --mib 1..4000, --repeat >= 1\n");
    return 2;
  }
  const std::size_t count = static_cast<std::size_t>(mib) << 18;  // float32 elements in mib MiB
  const std::string base = dir + "/filter_judge_bench." + std::to_string(::getpid());
  const std::vector<std::pair<std::string, TensorTree>> files = {
      {base + ".a1", make_tensor(count, 1, 0)},
      {base + ".a2", make_tensor(count, 1, 0)},
      {base + ".b", make_tensor(count, 2, 0)},
      {base + ".compile", make_tensor(count, 1, 1e-6f)}};
  for (const auto& [path, tree] : files) {
    if (auto written = cudaagent::write_tensor_file(path, tree); !written) {
      std::fprintf(stderr, "filter_judge_bench: %s\n", written.message().c_str());
      return 1;
    }
  }
  const cudaagent::CompareOptions tolerance;
  int status = 0;
  for (int r = 0; r < repeat && status == 0; ++r) {
    auto start = std::chrono::steady_clock::now();
    std::vector<TensorTree> trees;
    for (const auto& file : files) {
      auto read = cudaagent::read_tensor_file(file.first);
      if (!read) {
        std::fprintf(stderr, "filter_judge_bench: %s\n", read.status().message().c_str());
        status = 1;
        break;
      }
      trees.push_back(std::move(read).value());
    }
    if (status != 0) break;
    const double read_s = seconds_since(start);
    start = std::chrono::steady_clock::now();
    const auto judged = cudaagent::judge_outputs(trees[0], trees[1], trees[2], false, tolerance);
    const double judge_s = seconds_since(start);
    start = std::chrono::steady_clock::now();
    const std::string differs = cudaagent::compare_compiled(trees[0], trees[3], tolerance);
    const double compile_s = seconds_since(start);
    if (!judged.reasons.empty() || !differs.empty()) {
      std::fprintf(stderr, "filter_judge_bench: the honest outputs were judged wrong\n");
      status = 1;
    }
    const double gb = 4.0 * static_cast<double>(mib) * (1 << 20) / 1e9;
    std::printf("{\"mib\": %ld, \"read_s\": %.3f, \"judge_s\": %.3f, \"compile_s\": %.3f, \"gb_per_s\": %.2f}\n",
                mib, read_s, judge_s, compile_s, gb / (read_s + judge_s + compile_s));
  }
  for (const auto& file : files) ::unlink(file.first.c_str());
  return status;
}
