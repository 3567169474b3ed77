#include "gpuctl/ssh/runner.hpp"

#include "gpuctl/util/fanout.hpp"

namespace gpuctl::ssh {
namespace {

class OpenSshRunner final : public Runner {
 public:
  explicit OpenSshRunner(SshSettings settings) : settings_(std::move(settings)) {}

  Result<std::vector<HostRun>> run(const std::vector<std::string>& addresses, std::string_view remote_command,
                                   const RunOptions& options) override {
    std::vector<util::ProcessOptions> jobs;
    jobs.reserve(addresses.size());
    for (const auto& address : addresses) {
      util::ProcessOptions job;
      job.argv = ssh_argv(settings_, address, remote_command);
      job.capture_stderr = true;  // ssh's own failures are read from it (classify_ssh_run)
      job.timeout = settings_.deadline;
      jobs.push_back(std::move(job));
    }
    util::FanoutOptions fanout;
    fanout.max_parallel = options.max_parallel;
    fanout.output_cap = options.output_cap;
    fanout.on_finish = options.on_finish;
    GPUCTL_TRY_ASSIGN(auto finished, util::run_fanout(jobs, fanout));
    std::vector<HostRun> runs;
    runs.reserve(finished.size());
    for (auto& f : finished) {
      HostRun host;
      host.verdict = classify_ssh_run(f.process, settings_);
      host.process = std::move(f.process);
      host.truncated = f.truncated;
      host.duration = f.duration;
      runs.push_back(std::move(host));
    }
    return runs;
  }

 private:
  SshSettings settings_;
};

}  // namespace

std::unique_ptr<Runner> make_openssh_runner(SshSettings settings) {
  return std::make_unique<OpenSshRunner>(std::move(settings));
}

}  // namespace gpuctl::ssh
