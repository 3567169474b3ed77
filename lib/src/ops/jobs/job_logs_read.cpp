// gpuctl logs JOB: the logs of a Job's pods, each line with its pod (see job_logs.hpp). Without
// follow, one GET per started pod, oldest first. With follow, one stream per pod, each in a
// thread of its own, lines handed over one at a time as they arrive; the pods of retries are
// picked up by polling the pod list until the Job has ended.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gpuctl/kube/client.hpp"
#include "gpuctl/kube/objects.hpp"
#include "gpuctl/kube/paths.hpp"
#include "gpuctl/ops/jobs/job_logs.hpp"
#include "gpuctl/util/cancel.hpp"
#include "job_logs_internal.hpp"
#include "job_status_internal.hpp"

namespace gpuctl::ops {
namespace {

using json = nlohmann::json;
using namespace job_logs_detail;

constexpr std::string_view kIndexLabel = "batch.kubernetes.io/job-completion-index";

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string completion_index(const json& pod) {
  const json& labels = kube::field(kube::field(pod, "metadata"), "labels");
  std::string index = kube::string_field(labels, kIndexLabel);
  if (index.empty()) index = kube::string_field(kube::field(kube::field(pod, "metadata"), "annotations"), kIndexLabel);
  return index;
}

// Splits chunks into lines for one pod and hands each over under the shared lock.
class LineSink {
 public:
  LineSink(const JobLogsRequest& request, std::mutex& lock, JobLogLine head)
      : request_(request), lock_(lock), head_(std::move(head)) {}

  bool add(std::string_view chunk) {
    buffer_.append(chunk);
    std::size_t start = 0;
    for (std::size_t nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n', start)) {
      if (!emit(std::string_view(buffer_).substr(start, nl - start))) return false;
      start = nl + 1;
    }
    buffer_.erase(0, start);
    return true;
  }

  bool finish() { return buffer_.empty() || emit(buffer_); }  // a last line without its newline

 private:
  bool emit(std::string_view text) {
    std::lock_guard guard(lock_);
    JobLogLine line = head_;
    line.text = text;
    return !request_.on_line || request_.on_line(line);
  }

  const JobLogsRequest& request_;
  std::mutex& lock_;
  JobLogLine head_;
  std::string buffer_;
};

class JobLogsReader {
 public:
  JobLogsReader(kube::Client& client, const JobLogsRequest& request) : client_(client), request_(request) {}
  ~JobLogsReader() { join(); }

  Result<JobLogsResult> run() {
    auto job = client_.get(kube::paths::job(request_.ns, request_.job));
    if (!job) {
      Error e = job.error();
      if (e.is_not_found())
        e.message = fmt::format("job \"{}\" not found in namespace \"{}\"", request_.job, request_.ns);
      return std::unexpected(std::move(e));
    }
    selector_ = job_pod_selector(*job);
    while (true) {
      bool ended = false;
      if (request_.follow) {
        // Read before the pods: once it has ended, the list that follows holds every pod it made.
        GPUCTL_TRY_ASSIGN(json now, client_.get(kube::paths::job(request_.ns, request_.job)));
        ended = job_status_detail::true_condition(now, "Complete") != nullptr ||
                job_status_detail::true_condition(now, "Failed") != nullptr;
      }
      GPUCTL_TRY_ASSIGN(std::vector<json> pods, chosen_pods());
      for (auto& pod : pods) start(std::move(pod));
      if (!request_.follow || stopped_ || util::cancelled()) break;
      if (ended && all_streams_ended()) break;
      if (!util::sleep_unless_cancelled(request_.poll_interval)) break;
    }
    join();
    if (util::cancelled())
      return std::unexpected(util::cancelled_error(fmt::format("the logs of job {}/{}", request_.ns, request_.job)));
    if (pods_read_ == 0 && !request_.pod.empty() && lost_.empty()) {
      Error e;
      e.code = Errc::invalid_argument;  // --pod names nothing the job ran
      e.message = fmt::format("job {}/{} has no started pod {} {:?}", request_.ns, request_.job,
                              all_digits(request_.pod) ? "with completion index" : "named", request_.pod);
      return std::unexpected(std::move(e));
    }
    GPUCTL_TRY_ASSIGN(JobSummary summary,
                      fetch_job_summary(client_, request_.ns, request_.job, std::chrono::system_clock::now()));
    return JobLogsResult{std::move(summary), pods_read_, lost_};
  }

 private:
  // The started pods not read yet that --pod selects, oldest first.
  Result<std::vector<json>> chosen_pods() {
    kube::ListOptions list;
    list.label_selector = selector_;
    GPUCTL_TRY_ASSIGN(kube::ListResult pods, client_.list(kube::paths::pods(request_.ns), list));
    std::vector<json> out;
    for (auto& p : pods.items) {
      std::string uid = kube::string_field(kube::field(p, "metadata"), "uid");
      if (!has_started(p) || seen_.contains(uid)) continue;
      if (!request_.pod.empty() && request_.pod != (all_digits(request_.pod) ? completion_index(p) : kube::name_of(p)))
        continue;
      seen_.insert(uid);
      out.push_back(std::move(p));
    }
    sort_oldest_first(out);
    return out;
  }

  void start(json pod) {
    if (!request_.follow) {
      read(pod);
      return;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    ended_.push_back(done);
    threads_.emplace_back([this, pod = std::move(pod), done] {
      read(pod);
      done->store(true);
    });
  }

  // One pod's log, whole or followed; a failure is a notice and the pod is named at the end.
  void read(const json& pod) {
    const std::string name = kube::name_of(pod);
    const std::string container = log_container(pod, request_.container);
    kube::Query query;
    query.add_if(request_.follow, "follow", "true")
        .add_if(!container.empty(), "container", container)
        .add_if(request_.previous, "previous", "true")
        .add_if(request_.tail_lines.has_value(), "tailLines", std::to_string(request_.tail_lines.value_or(0)))
        .add_if(request_.since_seconds.has_value(), "sinceSeconds", std::to_string(request_.since_seconds.value_or(0)));
    LineSink sink(request_, lock_, {name, completion_index(pod), container, {}});
    bool refused = false;  // on_line said stop
    auto streamed = client_.stream_text(kube::paths::pod_log(request_.ns, name), query, [&](std::string_view chunk) {
      refused = !sink.add(chunk);
      return !refused && !stopped_;
    });
    if (!refused && streamed) refused = !sink.finish();
    std::lock_guard guard(lock_);
    if (refused) stopped_ = true;
    if (streamed || refused) {
      ++pods_read_;
    } else if (!util::cancelled()) {
      lost_.push_back(name);
      if (request_.on_notice)
        request_.on_notice(fmt::format("logs of pod {} are not available: {}", name, streamed.error().message));
    }
  }

  bool all_streams_ended() const {
    return std::all_of(ended_.begin(), ended_.end(), [](const auto& d) { return d->load(); });
  }

  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }

  kube::Client& client_;
  const JobLogsRequest& request_;
  std::string selector_;
  std::set<std::string> seen_;  // pod uids read or being read
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<std::atomic<bool>>> ended_;
  std::mutex lock_;  // on_line and on_notice, and what follows
  std::atomic<bool> stopped_{false};
  int pods_read_ = 0;
  std::vector<std::string> lost_;
};

}  // namespace

Result<JobLogsResult> read_job_logs(kube::Client& client, const JobLogsRequest& request) {
  JobLogsReader reader(client, request);
  return reader.run();
}

}  // namespace gpuctl::ops
