#pragma once
// The seam between the operations and the nodes: run one fixed remote command on many hosts
// and get each host's result back, with ssh's own failures already classified. ops never
// assembles ssh argv or process options; the OpenSSH runner (make_openssh_runner) does, and
// tests/fakes/fake_ssh_runner.hpp replays scripted host answers through the same interface, as
// kube::Transport and FakeTransport do for the API server.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpuctl/error.hpp"
#include "gpuctl/ssh/ssh.hpp"
#include "gpuctl/util/process.hpp"

namespace gpuctl::ssh {

// One host's run of the remote command.
struct HostRun {
  // How ssh itself fared: ok when the remote command ran (its own result is in `process`).
  SshVerdict verdict;
  util::ProcessResult process;  // exit status, stdout, stderr; timed_out when the deadline killed it
  bool truncated = false;       // the output cap was hit and the run was stopped
  std::chrono::milliseconds duration{0};
};

struct RunOptions {
  int max_parallel = 32;
  // Bytes of stdout (and, separately, of stderr) kept per host: a runaway host cannot exhaust
  // gpuctl's memory.
  std::size_t output_cap = 8 * 1024 * 1024;
  // Called as each host finishes (its index in the addresses), for progress.
  std::function<void(std::size_t index)> on_finish;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Runs `remote_command` on every address, at most options.max_parallel at a time; results in
  // address order. An Error only when the runner itself fails (no pipes); an unreachable or
  // hung host is a HostRun with its verdict. When gpuctl is interrupted nothing new starts and
  // the hosts not finished are marked interrupted.
  virtual Result<std::vector<HostRun>> run(const std::vector<std::string>& addresses, std::string_view remote_command,
                                           const RunOptions& options) = 0;
};

// The system `ssh` (ssh_argv), one process group per host killed at settings.deadline.
std::unique_ptr<Runner> make_openssh_runner(SshSettings settings);

}  // namespace gpuctl::ssh
