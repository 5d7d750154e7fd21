// DeviceShare: tasks spread over devices, and a task that asks for a device alone gets it only
// once it is empty, with no new task let in meanwhile. The waits are checked by state, never by
// how long anything took: a thread that must stay blocked is checked after a pause, one that must
// go on is waited for without a deadline that could fail on a slow machine.
#include "cudaagent/filter/device_share.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <thread>

using cudaagent::DeviceShare;

namespace {

// Whether `future` is still waiting after a pause long enough for a runnable thread to get there.
template <class T>
bool still_waiting(std::future<T>& future) {
  return future.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
}

// Blocks until a task's wait to have `device` alone is registered. No deadline: on a loaded
// machine the waiting thread may start late, and a task launched before it registers would
// rightly get a seat, which is not what these tests are about.
void until_reserved(const DeviceShare& share, std::size_t device) {
  while (!share.reserved(device)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

TEST_CASE("device share: tasks go to the least busy device, and know when they shared it") {
  DeviceShare share(2);
  auto a = share.take(false, nullptr);
  auto b = share.take(false, nullptr);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a.value().device != b.value().device);
  CHECK_FALSE(share.shared(a.value()));
  CHECK_FALSE(share.shared(b.value()));
  auto c = share.take(false, nullptr);
  REQUIRE(c);
  CHECK(share.shared(c.value()));
  const auto& with_c = c.value().device == a.value().device ? a.value() : b.value();
  CHECK(share.shared(with_c));
  share.leave(a.value());
  share.leave(b.value());
  share.leave(c.value());
}

TEST_CASE("device share: alone waits for the device to empty and keeps new tasks out") {
  DeviceShare share(1);
  auto first = share.take(false, nullptr);
  REQUIRE(first);
  auto alone = std::async(std::launch::async, [&] { return share.take(true, nullptr); });
  until_reserved(share, 0);
  CHECK(still_waiting(alone));  // a task still runs there
  auto later = std::async(std::launch::async, [&] { return share.take(false, nullptr); });
  CHECK(still_waiting(later));  // no new task while one waits to be alone
  share.leave(first.value());
  auto alone_seat = alone.get();  // the device emptied: the alone task goes first
  REQUIRE(alone_seat);
  CHECK_FALSE(share.shared(alone_seat.value()));
  CHECK(still_waiting(later));  // and nothing joins it while it runs
  share.leave(alone_seat.value());
  auto later_seat = later.get();
  REQUIRE(later_seat);
  CHECK_FALSE(share.shared(later_seat.value()));
  share.leave(later_seat.value());
}

TEST_CASE("device share: a stop request ends every wait with a Status") {
  DeviceShare share(1);
  std::atomic<int> stop{0};
  auto first = share.take(false, &stop);
  REQUIRE(first);
  auto alone = std::async(std::launch::async, [&] { return share.take(true, &stop); });
  until_reserved(share, 0);
  auto later = std::async(std::launch::async, [&] { return share.take(false, &stop); });
  CHECK(still_waiting(alone));
  CHECK(still_waiting(later));
  stop.store(SIGTERM);
  auto alone_seat = alone.get();
  auto later_seat = later.get();
  CHECK_FALSE(alone_seat);
  CHECK_FALSE(later_seat);
  // Whatever went wrong above, give seats back so the last take cannot wait forever.
  if (alone_seat) share.leave(alone_seat.value());
  if (later_seat) share.leave(later_seat.value());
  share.leave(first.value());
  CHECK_FALSE(share.reserved(0));
  stop.store(0);
  auto again = share.take(true, &stop);  // the abandoned reservation left nothing behind
  REQUIRE(again);
  share.leave(again.value());
}
