#pragma once
// Runs client.authentication.k8s.io exec credential plugins (v1 and v1beta1) and caches what
// they return in this process until it expires, as client-go does. The plugin's stderr goes
// straight to the user's terminal (the plugin may prompt or explain); its stdout is parsed.
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "gpuctl/error.hpp"
#include "gpuctl/kube/config.hpp"

namespace gpuctl::kube {

// A plugin's stdout is one small JSON object (a token, maybe a certificate); more than this is
// a broken plugin, and gpuctl stops it rather than fill its memory.
inline constexpr std::size_t kMaxExecOutputBytes = std::size_t{4} << 20;
inline constexpr std::chrono::seconds kExecNoticeAfter{5};

struct ExecCredential {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  // Absent: valid for the life of the process.
  std::optional<std::chrono::system_clock::time_point> expiration;
};

class ExecCredentialSource {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  // Told once when the plugin has run for kExecNoticeAfter without ending (it may wait for a
  // browser login; like kubectl we keep waiting, but the user learns what for).
  using Notice = std::function<void(std::string_view)>;

  // `config` supplies the exec block, and the cluster fields passed to the plugin in
  // KUBERNETES_EXEC_INFO when provideClusterInfo is set. `stdin_is_terminal` decides whether
  // the plugin runs interactively (interactiveMode Always fails without a terminal).
  ExecCredentialSource(const RestConfig& config, bool stdin_is_terminal, Clock clock = {}, Notice on_notice = {});

  // The cached credential while it is valid; otherwise runs the plugin. Errors name the
  // origin and user ("kubeconfig /x, context "c": user "u": getting credentials: ..."):
  // Errc::process when the plugin is not found, fails or prints no usable ExecCredential;
  // Errc::config when it cannot run as configured (interactiveMode Always without a terminal).
  Result<ExecCredential> get();
  // Runs the plugin again, unless the credential was already replaced since `stale` was
  // handed out (another request refreshed it first). Called once after a 401.
  Result<ExecCredential> refresh(const ExecCredential& stale);

 private:
  Result<ExecCredential> run_plugin();

  RestConfig config_;
  bool stdin_is_terminal_;
  Clock clock_;
  Notice on_notice_;
  std::mutex mutex_;
  std::optional<ExecCredential> cached_;
};

}  // namespace gpuctl::kube
