#pragma once
// An ssh::Runner that answers from a script and records what it was asked, as FakeTransport does
// for the API server. A host is answered by what the test scripted for its address; an address
// nobody scripted is answered "unreachable" and listed in unexpected(), so tests can assert on it.
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/ssh/runner.hpp"

namespace gpuctl::testing {

// A finished run as the OpenSSH runner reports it: ssh's verdict read from the process result.
inline ssh::HostRun classified_run(util::ProcessResult process, const ssh::SshSettings& settings = {},
                                   bool truncated = false) {
  ssh::HostRun run;
  run.verdict = ssh::classify_ssh_run(process, settings);
  run.process = std::move(process);
  run.truncated = truncated;
  return run;
}

// The remote command ran and exited with `exit_code`, printing `out`.
inline ssh::HostRun remote_ran(std::string out, int exit_code = 0, std::string err = {}) {
  util::ProcessResult p;
  p.exit_code = exit_code;
  p.stdout_text = std::move(out);
  p.stderr_text = std::move(err);
  return classified_run(std::move(p));
}

// ssh itself failed (exit 255) with this stderr, as OpenSSH prints it.
inline ssh::HostRun ssh_failed(std::string ssh_stderr) {
  util::ProcessResult p;
  p.exit_code = 255;
  p.stderr_text = std::move(ssh_stderr);
  return classified_run(std::move(p));
}

class FakeSshRunner : public ssh::Runner {
 public:
  struct Call {
    std::vector<std::string> addresses;
    std::string remote_command;
    int max_parallel = 0;
    std::size_t output_cap = 0;
  };

  FakeSshRunner& on(std::string address, ssh::HostRun run) {
    std::lock_guard guard(mutex_);
    answers_[std::move(address)] = std::move(run);
    return *this;
  }

  Result<std::vector<ssh::HostRun>> run(const std::vector<std::string>& addresses, std::string_view remote_command,
                                        const ssh::RunOptions& options) override {
    std::lock_guard guard(mutex_);
    calls_.push_back({addresses, std::string(remote_command), options.max_parallel, options.output_cap});
    std::vector<ssh::HostRun> runs;
    for (std::size_t i = 0; i < addresses.size(); i++) {
      auto it = answers_.find(addresses[i]);
      if (it == answers_.end()) {
        unexpected_.push_back(addresses[i]);
        runs.push_back(ssh_failed("ssh: connect to host " + addresses[i] + " port 22: Connection refused\n"));
      } else {
        runs.push_back(it->second);
      }
      if (options.on_finish) options.on_finish(i);
    }
    return runs;
  }

  const std::vector<Call>& calls() const { return calls_; }
  const std::vector<std::string>& unexpected() const { return unexpected_; }

 private:
  std::mutex mutex_;
  std::map<std::string, ssh::HostRun> answers_;
  std::vector<Call> calls_;
  std::vector<std::string> unexpected_;
};

}  // namespace gpuctl::testing
