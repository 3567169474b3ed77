#pragma once
// gpuctl submit --wait and --follow: the job watched to its end (its logs streamed with --follow,
// failed nodes avoided with --avoid-failed-nodes), the result line, the exit code of its result.
#include <chrono>
#include <string>

#include "app.hpp"
#include "exit_code.hpp"

namespace gpuctl::kube {
class Client;
}

namespace gpuctl::cli {

struct SubmitWait {
  std::chrono::milliseconds timeout{0};  // 0: wait for ever
  bool follow = false;                   // stream the pods' logs to stdout
  bool stdout_is_data = false;           // --parsable or -o: the result line goes to stderr
  bool avoid_failed_nodes = false;
};

Result<ExitCode> wait_and_report(AppContext& ctx, kube::Client& client, const std::string& ns, const std::string& name,
                                 const SubmitWait& options);

}  // namespace gpuctl::cli
