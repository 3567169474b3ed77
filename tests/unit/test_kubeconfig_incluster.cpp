// In-cluster configuration (the pod's service account) and environment_load_options().
#include <catch2/catch.hpp>

#include <cstdlib>

#include "gpuctl/kube/config.hpp"
#include "test_kubeconfig_support.hpp"

using Catch::Contains;
using gpuctl::kube::LoadOptions;
using gpuctl_test::expect_error;
using gpuctl_test::expect_loads;
using gpuctl_test::TempDir;

namespace {
// A pod's view: service env vars, a service account folder, and no kubeconfig anywhere.
struct Pod {
  TempDir home;
  TempDir sa;
  LoadOptions options;
  Pod() {
    sa.write("token", "pod-token\n");
    sa.write("ca.crt", gpuctl_test::kFakeCaPem);
    options.home = home.str();
    options.service_host = "10.96.0.1";
    options.service_port = "443";
    options.service_account_dir = sa.str();
  }
};
}  // namespace

TEST_CASE("kubeconfig in-cluster: the service account is used when no kubeconfig exists", "[kubeconfig]") {
  Pod pod;
  auto rc = expect_loads(pod.options);
  CHECK(rc.server == "https://10.96.0.1:443");
  CHECK(rc.bearer_token == "pod-token");
  CHECK(rc.token_file == pod.sa.str() + "/token");
  CHECK(rc.ca_pem == gpuctl_test::kFakeCaPem);
  CHECK(rc.namespace_name == "default");
  CHECK(rc.origin == "in-cluster service account");
  CHECK(rc.context.empty());
  CHECK(rc.cluster.empty());
  CHECK(rc.user.empty());
  CHECK_FALSE(rc.exec.has_value());
}

TEST_CASE("kubeconfig in-cluster: namespace is --namespace, POD_NAMESPACE, the namespace file, then default",
          "[kubeconfig]") {
  Pod pod;
  pod.sa.write("namespace", "  from-file\n");
  CHECK(expect_loads(pod.options).namespace_name == "from-file");
  pod.options.pod_namespace = "from-env";
  CHECK(expect_loads(pod.options).namespace_name == "from-env");
  pod.options.namespace_name = "from-flag";
  CHECK(expect_loads(pod.options).namespace_name == "from-flag");
  pod.options.namespace_name.reset();
  pod.options.pod_namespace = "";
  pod.sa.write("namespace", "\n");
  CHECK(expect_loads(pod.options).namespace_name == "default");
}

TEST_CASE("kubeconfig in-cluster: IPv6 service hosts are bracketed", "[kubeconfig]") {
  Pod pod;
  pod.options.service_host = "fd00:10:96::1";
  pod.options.service_port = "6443";
  CHECK(expect_loads(pod.options).server == "https://[fd00:10:96::1]:6443");
}

TEST_CASE("kubeconfig in-cluster: errors name what is missing", "[kubeconfig]") {
  {
    Pod pod;
    pod.options.service_port.reset();
    CHECK(expect_error(pod.options) ==
          "in-cluster configuration: KUBERNETES_SERVICE_PORT is not set (both KUBERNETES_SERVICE_HOST and "
          "KUBERNETES_SERVICE_PORT are needed)");
  }
  {
    Pod pod;
    pod.options.service_host = "";
    CHECK_THAT(expect_error(pod.options), Contains("KUBERNETES_SERVICE_HOST is not set"));
  }
  {
    Pod pod;
    std::filesystem::remove(pod.sa.path() / "token");
    CHECK(expect_error(pod.options) == "in-cluster configuration: service account token: cannot read " + pod.sa.str() +
                                           "/token: No such file or directory");
  }
  {
    Pod pod;
    std::filesystem::remove(pod.sa.path() / "ca.crt");
    CHECK(expect_error(pod.options) == "in-cluster configuration: service account CA: cannot read " + pod.sa.str() +
                                           "/ca.crt: No such file or directory");
  }
  {
    Pod pod;
    pod.sa.write("ca.crt", "garbage");
    CHECK_THAT(expect_error(pod.options), Contains("unable to parse bytes as PEM block"));
  }
}

TEST_CASE("kubeconfig in-cluster: a kubeconfig, when there is one, wins", "[kubeconfig]") {
  Pod pod;
  pod.home.write(".kube/config", gpuctl_test::read_file(gpuctl_test::test_data("merge-config-2.yaml")));
  CHECK(expect_loads(pod.options).server == "https://config-2.example.com");
}

TEST_CASE("kubeconfig in-cluster: used when KUBECONFIG lists only missing files, or an empty one", "[kubeconfig]") {
  Pod pod;
  pod.options.kubeconfig_env = "/nonexistent/a:/nonexistent/b";
  CHECK(expect_loads(pod.options).server == "https://10.96.0.1:443");

  const std::string empty = pod.home.write("empty-config", "");
  pod.options.kubeconfig_env.reset();
  pod.options.kubeconfig = empty;
  CHECK(expect_loads(pod.options).bearer_token == "pod-token");

  const std::string comments = pod.home.write("comments-only", "# nothing here\n");
  pod.options.kubeconfig = comments;
  CHECK(expect_loads(pod.options).bearer_token == "pod-token");

  // --context cannot be honoured without a kubeconfig.
  pod.options.context = "prod";
  CHECK(expect_error(pod.options) == "context \"prod\" does not exist (--context): no kubeconfig found (" + comments +
                                         " has no clusters, users or contexts)");
}

TEST_CASE("kubeconfig: environment_load_options reads the process environment", "[kubeconfig]") {
  const char* names[] = {"KUBECONFIG", "HOME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    saved.push_back(v ? std::optional<std::string>(v) : std::nullopt);
  }
  ::setenv("KUBECONFIG", "/a:/b", 1);
  ::setenv("HOME", "/home/tester", 1);
  ::setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  ::setenv("POD_NAMESPACE", "ns1", 1);
  auto o = gpuctl::kube::environment_load_options();
  CHECK(o.kubeconfig_env == std::optional<std::string>("/a:/b"));
  CHECK(o.home == "/home/tester");
  CHECK(o.service_host == std::optional<std::string>("10.0.0.1"));
  CHECK(o.service_port == std::optional<std::string>("443"));
  CHECK(o.pod_namespace == std::optional<std::string>("ns1"));
  CHECK_FALSE(o.kubeconfig.has_value());
  CHECK_FALSE(o.context.has_value());
  CHECK_FALSE(o.namespace_name.has_value());
  CHECK(o.service_account_dir == "/var/run/secrets/kubernetes.io/serviceaccount");

  ::setenv("KUBECONFIG", "", 1);  // empty is the same as unset
  ::unsetenv("POD_NAMESPACE");
  auto o2 = gpuctl::kube::environment_load_options();
  CHECK_FALSE(o2.kubeconfig_env.has_value());
  CHECK_FALSE(o2.pod_namespace.has_value());

  for (std::size_t i = 0; i < saved.size(); ++i) {
    if (saved[i]) {
      ::setenv(names[i], saved[i]->c_str(), 1);
    } else {
      ::unsetenv(names[i]);
    }
  }
}
