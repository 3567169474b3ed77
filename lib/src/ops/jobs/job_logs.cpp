#include "gpuctl/ops/jobs/job_logs.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "job_logs_internal.hpp"

namespace gpuctl::ops {

using json = nlohmann::json;

namespace job_logs_detail {

std::string log_container(const json& pod, const std::string& wanted) {
  if (!wanted.empty()) return wanted;
  const json& containers = kube::array_field(kube::field(pod, "spec"), "containers");
  for (const auto& c : containers) {
    if (kube::string_field(c, "name") == "main") return "main";
  }
  return containers.empty() ? std::string() : kube::string_field(containers[0], "name");
}

bool has_started(const json& pod) {
  std::string phase = kube::string_field(kube::field(pod, "status"), "phase");
  return phase == "Running" || phase == "Succeeded" || phase == "Failed";
}

void sort_oldest_first(std::vector<json>& pods) {
  std::sort(pods.begin(), pods.end(), [](const json& a, const json& b) {
    return kube::string_field(kube::field(a, "metadata"), "creationTimestamp") <
           kube::string_field(kube::field(b, "metadata"), "creationTimestamp");
  });
}

}  // namespace job_logs_detail

using namespace job_logs_detail;

JobLogFollower::JobLogFollower(kube::Client& client, std::string ns, std::string job, JobLogOptions options)
    : client_(client), ns_(std::move(ns)), job_(std::move(job)), options_(std::move(options)) {}

void JobLogFollower::poll() {
  auto notice = [&](const std::string& text) {
    if (options_.on_notice) options_.on_notice(text);
  };
  kube::ListOptions list;
  list.label_selector = "batch.kubernetes.io/job-name=" + job_;
  auto pods = client_.list(kube::paths::pods(ns_), list);
  if (!pods) {
    notice(fmt::format("cannot list the pods of job {}/{}: {}", ns_, job_, pods.error().message));
    return;
  }
  std::vector<json> started;
  for (auto& p : pods->items) {
    if (has_started(p) && !done_.contains(kube::string_field(kube::field(p, "metadata"), "uid")))
      started.push_back(std::move(p));
  }
  sort_oldest_first(started);
  for (const auto& pod : started) {
    done_.insert(kube::string_field(kube::field(pod, "metadata"), "uid"));
    std::string name = kube::name_of(pod);
    std::string container = log_container(pod, options_.container);
    notice(fmt::format("==> pod {} on node {} <==", name, kube::string_field(kube::field(pod, "spec"), "nodeName")));
    kube::Query query;
    query.add("follow", "true").add_if(!container.empty(), "container", container);
    bool stopped = false;
    auto streamed = client_.stream_text(kube::paths::pod_log(ns_, name), query, [&](std::string_view chunk) {
      if (options_.on_chunk && !options_.on_chunk(chunk)) {
        stopped = true;
        return false;
      }
      return true;
    });
    if (!streamed && !stopped)
      notice(fmt::format("logs of pod {} are not available: {}", name, streamed.error().message));
  }
}

}  // namespace gpuctl::ops
