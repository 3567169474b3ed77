#pragma once
// What submit --follow's JobLogFollower (job_logs.cpp) and gpuctl logs (job_logs_read.cpp) share:
// which container's log is read, which pods have a log yet, and the order they are read in.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuctl::ops::job_logs_detail {

// `wanted`, else the container named "main" (what gpuctl submit makes), else the pod's first.
std::string log_container(const nlohmann::json& pod, const std::string& wanted);

// Running, Succeeded or Failed: the kubelet has a log for it.
bool has_started(const nlohmann::json& pod);

// By creationTimestamp: a retry's pod after the one that failed.
void sort_oldest_first(std::vector<nlohmann::json>& pods);

}  // namespace gpuctl::ops::job_logs_detail
