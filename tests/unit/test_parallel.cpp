#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gpuctl/util/parallel.hpp"

using gpuctl::util::parallel_for;

TEST_CASE("util::parallel_for runs every index once, never more than max_parallel at a time", "[parallel]") {
  std::vector<std::atomic<int>> runs(50);
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  auto started = parallel_for(runs.size(), 4, [&](std::size_t i) {
    int now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    runs[i]++;
    --running;
  });
  CHECK(started == runs.size());
  for (const auto& r : runs) CHECK(r.load() == 1);
  CHECK(most.load() <= 4);
  CHECK(most.load() >= 2);  // it did run in parallel
}

TEST_CASE("util::parallel_for with one worker runs in order in the calling thread", "[parallel]") {
  std::vector<std::size_t> order;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  parallel_for(5, 1, [&](std::size_t i) {
    order.push_back(i);
    same_thread = same_thread && std::this_thread::get_id() == caller;
  });
  CHECK(order == std::vector<std::size_t>{0, 1, 2, 3, 4});
  CHECK(same_thread);
  CHECK(parallel_for(0, 8, [](std::size_t) { FAIL("no work for n = 0"); }) == 0);
}

TEST_CASE("util::parallel_for starts nothing new once may_start says no; the not started are the tail", "[parallel]") {
  for (int workers : {1, 3}) {
    INFO("workers " << workers);
    std::mutex mutex;
    std::set<std::size_t> done;
    std::atomic<bool> stop{false};
    auto started = parallel_for(
        20, workers,
        [&](std::size_t i) {
          if (i == 5) stop = true;
          std::lock_guard guard(mutex);
          done.insert(i);
        },
        [&] { return !stop.load(); });
    CHECK(started >= 6);
    CHECK(started < 20);
    CHECK(done.size() == started);
    CHECK(*done.rbegin() == started - 1);  // exactly [0, started) ran
  }
}
