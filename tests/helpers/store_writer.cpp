// store_writer DB N BATCH [START]: puts results job_key = sha256_hex("job" + i), i in [START, N),
// BATCH at a time, and prints a batch's keys only after its put_batch returned ok. The printed keys
// are the acknowledged ones that the crash tests in tests/unit/result_store.cpp expect to survive.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cudaagent/base/sha256.h"
#include "cudaagent/records/result_store.h"

namespace {

bool parse_count(const char* text, long& out) {
  char* end = nullptr;
  out = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && out >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  long n = 0;
  long batch = 0;
  long start = 0;
  if ((argc != 4 && argc != 5) || !parse_count(argv[2], n) || !parse_count(argv[3], batch) ||
      batch == 0 || (argc == 5 && !parse_count(argv[4], start))) {
    std::fprintf(stderr, "usage: store_writer DB N BATCH [START]\n");
    return 2;
  }
  auto store = cudaagent::ResultStore::open(argv[1]);
  if (!store) {
    std::fprintf(stderr, "store_writer: %s\n", store.status().message().c_str());
    return 1;
  }
  std::vector<cudaagent::StoredResult> results;
  for (long first = start; first < n; first += batch) {
    results.clear();
    for (long i = first; i < n && i < first + batch; ++i) {
      const std::string number = std::to_string(i);
      results.push_back({cudaagent::sha256_hex("job" + number), "store_writer", "job" + number,
                         "{\"i\":" + number + "}"});
    }
    auto put = store.value().put_batch(results);
    if (!put) {
      std::fprintf(stderr, "store_writer: %s\n", put.status().message().c_str());
      return 1;
    }
    for (const auto& result : results) std::printf("%s\n", result.job_key.c_str());
    std::fflush(stdout);
  }
  return 0;
}
