// DeviceShare: tasks spread over devices, and a task that asks for a device alone gets it only
// once it is empty, with no new task let in meanwhile. The waits are checked by state, never by
// how long anything took: a thread that must stay blocked is checked after a pause, one that must
// go on is waited for without a deadline that could fail on a slow machine.
#include "cudaagent/filter/device_share.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <future>
#include <random>
#include <thread>
#include <vector>

using cudaagent::DeviceShare;

namespace {

// Whether `future` is still waiting after a pause long enough for a runnable thread to get there.
template <class T>
bool still_waiting(std::future<T>& future) {
  return future.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
}

// Blocks until `count` tasks wait for a seat. No deadline, for the same reason as below.
void until_queued(const DeviceShare& share, std::size_t count) {
  while (share.queued() != count) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Blocks until `count` tasks wait to grow. No deadline, as above.
void until_growing(const DeviceShare& share, std::size_t count) {
  while (share.growing() != count) std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
  auto a = share.take(false, 0, nullptr);
  auto b = share.take(false, 0, nullptr);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a.value().device != b.value().device);
  CHECK_FALSE(share.shared(a.value()));
  CHECK_FALSE(share.shared(b.value()));
  auto c = share.take(false, 0, nullptr);
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
  auto first = share.take(false, 0, nullptr);
  REQUIRE(first);
  auto alone = std::async(std::launch::async, [&] { return share.take(true, 0, nullptr); });
  until_reserved(share, 0);
  CHECK(still_waiting(alone));  // a task still runs there
  auto later = std::async(std::launch::async, [&] { return share.take(false, 0, nullptr); });
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
  auto first = share.take(false, 0, &stop);
  REQUIRE(first);
  auto alone = std::async(std::launch::async, [&] { return share.take(true, 0, &stop); });
  until_reserved(share, 0);
  auto later = std::async(std::launch::async, [&] { return share.take(false, 0, &stop); });
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
  auto again = share.take(true, 0, &stop);  // the abandoned reservation left nothing behind
  REQUIRE(again);
  share.leave(again.value());
}

TEST_CASE("device share: a task waits until its memory fits the budget, and an empty device takes any") {
  DeviceShare share(1, 10);
  auto big = share.take(false, 25, nullptr);  // over the budget, but the device is empty
  REQUIRE(big);
  auto next = std::async(std::launch::async, [&] { return share.take(false, 1, nullptr); });
  until_queued(share, 1);
  CHECK(still_waiting(next));
  share.leave(big.value());
  auto next_seat = next.get();
  REQUIRE(next_seat);
  auto fits = share.take(false, 9, nullptr);  // 1 + 9 <= 10
  REQUIRE(fits);
  auto over = std::async(std::launch::async, [&] { return share.take(false, 1, nullptr); });
  until_queued(share, 1);
  CHECK(still_waiting(over));  // 1 + 9 + 1 > 10
  share.leave(fits.value());
  auto over_seat = over.get();
  REQUIRE(over_seat);
  CHECK(share.shared(over_seat.value()));
  share.leave(next_seat.value());
  share.leave(over_seat.value());
  CHECK(share.queued() == 0);
}

TEST_CASE("device share: tasks are seated in turn, so a large one is not overtaken by small ones") {
  DeviceShare share(1, 10);
  auto first = share.take(false, 6, nullptr);
  REQUIRE(first);
  auto large = std::async(std::launch::async, [&] { return share.take(false, 6, nullptr); });
  until_queued(share, 1);
  auto small = std::async(std::launch::async, [&] { return share.take(false, 2, nullptr); });
  until_queued(share, 2);
  CHECK(still_waiting(small));  // 6 + 2 would fit, but the large task asked first
  CHECK(still_waiting(large));
  share.leave(first.value());
  auto large_seat = large.get();
  REQUIRE(large_seat);
  auto small_seat = small.get();  // 6 + 2 fit
  REQUIRE(small_seat);
  share.leave(large_seat.value());
  share.leave(small_seat.value());
}

TEST_CASE("device share: without a budget, or without an estimate, tasks are admitted by count") {
  DeviceShare counted(1);
  auto a = counted.take(false, 1ULL << 40, nullptr);
  auto b = counted.take(false, 1ULL << 40, nullptr);
  REQUIRE(a);
  REQUIRE(b);
  counted.leave(a.value());
  counted.leave(b.value());
  DeviceShare budgeted(1, 10);
  auto c = budgeted.take(false, 10, nullptr);
  auto unknown = budgeted.take(false, 0, nullptr);
  REQUIRE(c);
  REQUIRE(unknown);
  budgeted.leave(c.value());
  budgeted.leave(unknown.value());
}

TEST_CASE("device share: a stop request ends a wait for memory, and its turn is given up") {
  DeviceShare share(1, 10);
  std::atomic<int> stop{0};
  auto first = share.take(false, 8, &stop);
  REQUIRE(first);
  auto waiting = std::async(std::launch::async, [&] { return share.take(false, 8, &stop); });
  until_queued(share, 1);
  stop.store(SIGTERM);
  auto seat = waiting.get();
  CHECK_FALSE(seat);
  if (seat) share.leave(seat.value());
  CHECK(share.queued() == 0);
  stop.store(0);
  share.leave(first.value());
  auto again = share.take(false, 8, &stop);  // the abandoned turn left nothing behind
  REQUIRE(again);
  share.leave(again.value());
}

TEST_CASE("device share: a task lends what it does not hold while shrunk, and waits to take it back") {
  DeviceShare share(1, 100);
  // 60 bytes at its peak, 20 while shrunk.
  auto a = share.take(false, 60, nullptr, 20);
  REQUIRE(a);
  // 60 + 50: over the budget, so b waits...
  auto b = std::async(std::launch::async, [&] { return share.take(false, 50, nullptr); });
  until_queued(share, 1);
  CHECK(still_waiting(b));
  share.shrink(a.value());  // ...until a holds only 20: 20 + 50 fits (no room is kept for a's 40)
  CHECK(share.shrunk(a.value()));
  auto b_seat = b.get();
  REQUIRE(b_seat);
  // a's 40 do not fit beside b's 50 (70 + 40): it waits for b to end.
  auto a_grows = std::async(std::launch::async, [&] { return share.grow(a.value(), nullptr); });
  CHECK(still_waiting(a_grows));
  share.leave(b_seat.value());
  CHECK(a_grows.get().is_ok());
  CHECK_FALSE(share.shrunk(a.value()));
  // Shrinking is once per seat: a holds its whole estimate from now on.
  share.shrink(a.value());
  CHECK_FALSE(share.shrunk(a.value()));
  auto c = std::async(std::launch::async, [&] { return share.take(false, 50, nullptr); });
  until_queued(share, 1);
  CHECK(still_waiting(c));  // 60 + 50 > 100
  share.leave(a.value());
  auto c_seat = c.get();
  REQUIRE(c_seat);
  share.leave(c_seat.value());
}

TEST_CASE("device share: a growth waits for memory others hold, and no new task gets in meanwhile") {
  DeviceShare share(1, 100);
  auto a = share.take(false, 50, nullptr, 10);
  REQUIRE(a);
  share.shrink(a.value());  // holds 10
  auto d = share.take(false, 50, nullptr, 10);  // 10 + 50
  REQUIRE(d);
  share.shrink(d.value());  // 20
  auto b = share.take(false, 60, nullptr);  // 20 + 60
  REQUIRE(b);
  auto a_grows = std::async(std::launch::async, [&] { return share.grow(a.value(), nullptr); });
  until_growing(share, 1);  // 80 + 40: it waits for a task to end
  CHECK(still_waiting(a_grows));
  // e's 10 would fit (80 + 10), but a task waits to grow: e waits too.
  auto e = std::async(std::launch::async, [&] { return share.take(false, 10, nullptr); });
  until_queued(share, 1);
  CHECK(still_waiting(e));
  share.leave(b.value());  // 20 + 40 fits: a grows; then e gets in (60 + 10)
  CHECK(a_grows.get().is_ok());
  auto e_seat = e.get();
  REQUIRE(e_seat);
  share.leave(a.value());
  share.leave(d.value());
  share.leave(e_seat.value());
}

TEST_CASE("device share: a task let in only because the device was empty never shrinks") {
  DeviceShare share(1, 100);
  // Over the budget: it runs by itself, and a growth of 140 could never fit beside anyone.
  auto big = share.take(false, 150, nullptr, 10);
  REQUIRE(big);
  share.shrink(big.value());
  CHECK_FALSE(share.shrunk(big.value()));
  auto small = std::async(std::launch::async, [&] { return share.take(false, 10, nullptr); });
  until_queued(share, 1);
  CHECK(still_waiting(small));
  share.leave(big.value());
  auto small_seat = small.get();
  REQUIRE(small_seat);
  share.leave(small_seat.value());
  // Without a budget (admission by count), nothing shrinks either.
  DeviceShare counted(1);
  auto seat = counted.take(false, 60, nullptr, 20);
  REQUIRE(seat);
  counted.shrink(seat.value());
  CHECK_FALSE(counted.shrunk(seat.value()));
  counted.leave(seat.value());
}

TEST_CASE("device share: a stop request ends a wait to grow") {
  DeviceShare share(1, 100);
  auto a = share.take(false, 50, nullptr, 10);
  REQUIRE(a);
  share.shrink(a.value());
  auto d = share.take(false, 50, nullptr, 10);
  REQUIRE(d);
  share.shrink(d.value());
  auto b = share.take(false, 40, nullptr);
  REQUIRE(b);
  REQUIRE(share.grow(a.value(), nullptr).is_ok());
  std::atomic<int> stop{0};
  auto d_grows = std::async(std::launch::async, [&] { return share.grow(d.value(), &stop); });
  CHECK(still_waiting(d_grows));
  stop = SIGTERM;
  CHECK_FALSE(d_grows.get().is_ok());
  CHECK(share.shrunk(d.value()));  // still holding only its resident bytes, which leave() returns
  share.leave(d.value());
  share.leave(a.value());
  share.leave(b.value());
  // Everything was given back: two tasks of half the budget fit side by side.
  auto first = share.take(false, 50, nullptr);
  auto second = share.take(false, 50, nullptr);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(share.shared(second.value()));
  share.leave(first.value());
  share.leave(second.value());
}

TEST_CASE("device share: tasks that shrink and grow at random all end (no deadlock without a reserve)") {
  // Every task takes its estimate (now and then one over the budget, which runs alone and never
  // shrinks), gives all but its resident bytes back while "compiling", takes them back and ends,
  // on threads that run at once. If admission without room for growths could deadlock, a wait
  // here would never end, and CTest's time limit would fail the test.
  DeviceShare share(1, 100);
  std::vector<std::thread> threads;
  std::atomic<int> ended{0}, failed{0};
  for (unsigned t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t + 1);
      for (int i = 0; i < 200; ++i) {
        const std::uint64_t bytes = 1 + random() % 120;
        const std::uint64_t resident = 1 + random() % bytes;
        auto seat = share.take(false, bytes, nullptr, resident);
        if (!seat) { ++failed; return; }
        share.shrink(seat.value());
        std::this_thread::yield();
        if (!share.grow(seat.value(), nullptr)) ++failed;
        share.leave(seat.value());
        ++ended;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failed.load() == 0);
  CHECK(ended.load() == 8 * 200);
  CHECK(share.queued() == 0);
}
