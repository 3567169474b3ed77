#pragma once
// A bounded parallel-for: the one worker pool of gpuctl's fan-outs over API objects (drain's
// nodes, the rolling maintenance, diagnose's lists). Each worker takes the next index as soon as
// it is free, so a slow item never holds the others back.
#include <cstddef>
#include <functional>

namespace gpuctl::util {

// Calls work(i) for i = 0, 1, ... n-1, at most max_parallel at a time (1 or less: in the calling
// thread, in order). may_start() is asked before each index is taken; once it answers false no
// further index starts, and the ones running finish. Indices are taken in order, so the ones
// never started are exactly [returned value, n). work must not throw.
std::size_t parallel_for(std::size_t n, int max_parallel, const std::function<void(std::size_t)>& work,
                         const std::function<bool()>& may_start = {});

}  // namespace gpuctl::util
