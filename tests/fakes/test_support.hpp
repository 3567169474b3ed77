#pragma once
// Shared helpers for unit tests: fixture files and a client over a FakeTransport.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "fakes/fake_transport.hpp"
#include "fakes/fixtures.hpp"
#include "gpuctl/kube/client.hpp"

namespace gpuctl::testing {

inline kube::RestConfig test_config() {
  kube::RestConfig c;
  c.server = "https://k8s.test:6443";
  c.context = "test";
  c.user = "tester";
  c.bearer_token = "secret-token";
  c.origin = "test config";
  return c;
}

// A client whose transport is `fake` (owned by the test) and which never sleeps.
struct FakeClient {
  FakeTransport* fake;
  std::vector<std::chrono::milliseconds> sleeps;
  std::unique_ptr<kube::Client> client;

  explicit FakeClient(kube::ClientOptions options = {}, kube::RestConfig config = test_config()) {
    auto transport = std::make_unique<FakeTransport>();
    fake = transport.get();
    options.sleep = [this](std::chrono::milliseconds d) { sleeps.push_back(d); };
    client = std::make_unique<kube::Client>(std::move(config), std::move(transport), std::move(options));
  }
};

// A Status body as the API server answers a refused request.
inline nlohmann::json status_body(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"status", "Failure"}, {"code", code}, {"reason", reason}, {"message", message}};
}

}  // namespace gpuctl::testing
