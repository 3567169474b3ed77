#include "gpuctl/util/parallel.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace gpuctl::util {

std::size_t parallel_for(std::size_t n, int max_parallel, const std::function<void(std::size_t)>& work,
                         const std::function<bool()>& may_start) {
  std::mutex mutex;
  std::size_t next = 0;
  bool closed = false;  // may_start said no: no index is taken after that
  auto take = [&]() -> std::optional<std::size_t> {
    std::lock_guard guard(mutex);
    if (closed || next >= n) return std::nullopt;
    if (may_start && !may_start()) {
      closed = true;
      return std::nullopt;
    }
    return next++;
  };
  auto worker = [&] {
    while (auto i = take()) work(*i);
  };
  const std::size_t threads_wanted = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, max_parallel)), n);
  if (threads_wanted <= 1) {
    worker();
    return next;
  }
  std::vector<std::thread> threads;
  threads.reserve(threads_wanted);
  for (std::size_t t = 0; t < threads_wanted; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return next;
}

}  // namespace gpuctl::util
