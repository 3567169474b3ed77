#pragma once
// The read-plan-write loop every writer of gpuctl uses (node edits, quota set, quota fix; restore
// next). A write carries the resourceVersion of what was read, so a 409 Conflict means somebody
// else wrote the object in between: read it again, plan again on what is there now, write again.
// Only conflicts are retried, and only max_attempts times in all; any other error ends the loop.
#include "gpuctl/error.hpp"

namespace gpuctl::ops {

// `attempt(n)` does one whole read-plan-write (n = 0 first; from 1 on it must read afresh) and
// returns its Result. `conflicts` counts the retries made. The last attempt's Result is
// returned: success, the first error that is not a conflict, or the conflict of the last attempt
// (`error().is_conflict()`: the caller says the object kept changing).
template <typename Attempt>
auto retry_on_conflict(int max_attempts, int& conflicts, Attempt&& attempt) -> decltype(attempt(0)) {
  for (int n = 0;; ++n) {
    auto result = attempt(n);
    if (result || !result.error().is_conflict() || n + 1 >= max_attempts) return result;
    ++conflicts;
  }
}

}  // namespace gpuctl::ops
