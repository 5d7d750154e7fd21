// A stop request raised from another thread once a file appears: how the stop tests let a child
// (or a worker's job) get going before the "signal" comes, with no sleeps or timing.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

namespace cudaagent::testing {

class StopWhenFileAppears {
 public:
  // Sets `stop` to SIGTERM once `path` exists (or after `give_up_seconds`, so a broken test ends).
  StopWhenFileAppears(std::atomic<int>& stop, std::string path, double give_up_seconds = 60)
      : thread_([&stop, path = std::move(path), give_up_seconds] {
          const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(give_up_seconds);
          while (::access(path.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < end) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          stop.store(SIGTERM);
        }) {}
  ~StopWhenFileAppears() { thread_.join(); }
  StopWhenFileAppears(const StopWhenFileAppears&) = delete;
  StopWhenFileAppears& operator=(const StopWhenFileAppears&) = delete;

 private:
  std::thread thread_;
};

}  // namespace cudaagent::testing
