// Every file in shared/fixtures/kubeconfig, loaded as kubectl would load it: either the
// expected values, or the error kubectl gives for it (in gpuctl's "kubeconfig FILE: context:
// entry: field: problem" form). Fragments are merged with tests/data/kubeconfig files.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/config.hpp"
#include "test_kubeconfig_support.hpp"

using Catch::Contains;
using Catch::StartsWith;
using gpuctl_test::expect_error;
using gpuctl_test::expect_loads;
using gpuctl_test::fixture;
using gpuctl_test::kubeconfig_env;
using gpuctl_test::only_file;
using gpuctl_test::read_file;
using gpuctl_test::replace_all;
using gpuctl_test::TempDir;
using gpuctl_test::test_data;

namespace {
// A fixture copied into a temp dir (so files next to it can be created), optionally edited.
std::string copy_fixture(const TempDir& dir, const std::string& name, const std::string& from = "",
                         const std::string& to = "") {
  std::string text = read_file(fixture(name));
  REQUIRE_FALSE(text.empty());
  if (!from.empty()) {
    std::string edited = replace_all(text, from, to);
    REQUIRE(edited != text);
    text = edited;
  }
  return dir.write(name, text);
}

const std::string kEksArn = "arn:aws:eks:region:111222333444:cluster/ExampleCluster";
}  // namespace

TEST_CASE("kubeconfig fixture: EKS exec v1alpha1 (aws eks get-token) is refused as kubectl does", "[kubeconfig]") {
  const std::string file = fixture("aws-cli__eks-kubeconfig__exec-v1alpha1-aws-get-token.yaml");
  std::string message = expect_error(only_file(file));
  CHECK_THAT(message, StartsWith("kubeconfig " + file + ": context \"" + kEksArn + "\": user \"" + kEksArn +
                                 "\": exec.apiVersion: exec plugin: invalid apiVersion "
                                 "\"client.authentication.k8s.io/v1alpha1\""));
  CHECK_THAT(message, Contains("v1alpha1 was removed in Kubernetes 1.24"));

  SECTION("the rest of the file decodes: with v1beta1 it loads") {
    TempDir dir;
    auto copy = copy_fixture(dir, "aws-cli__eks-kubeconfig__exec-v1alpha1-aws-get-token.yaml",
                             "client.authentication.k8s.io/v1alpha1", "client.authentication.k8s.io/v1beta1");
    auto rc = expect_loads(only_file(copy));
    CHECK(rc.server == "https://endpoint.amazonaws.com");
    CHECK(rc.context == kEksArn);
    CHECK(rc.cluster == kEksArn);
    CHECK(rc.user == kEksArn);
    CHECK(rc.namespace_name == "default");
    CHECK_THAT(rc.ca_pem, StartsWith("-----BEGIN CERTIFICATE-----\r\n"));
    CHECK_THAT(rc.ca_pem, Contains("-----END CERTIFICATE-----"));
    REQUIRE(rc.exec.has_value());
    CHECK(rc.exec->api_version == "client.authentication.k8s.io/v1beta1");
    CHECK(rc.exec->command == "aws");  // a bare name stays for the PATH lookup
    CHECK(rc.exec->args ==
          std::vector<std::string>{"--region", "us-west-2", "eks", "get-token", "--cluster-name", "ExampleCluster"});
    CHECK(rc.exec->interactive_mode == "IfAvailable");  // the v1beta1 default
    CHECK(rc.exec->env.empty());
    CHECK_FALSE(rc.exec->provide_cluster_info);
    CHECK(rc.bearer_token.empty());
  }
}

TEST_CASE("kubeconfig fixture: EKS two clusters with a malformed CA fails to load like kubectl", "[kubeconfig]") {
  const std::string file = fixture("aws-cli__eks-kubeconfig__two-clusters-aws-iam-authenticator-v1alpha1.yaml");
  // kubectl: error loading config file "...": illegal base64 data at input byte 168
  // (168 base64 characters then a lone '=' pad).
  CHECK(expect_error(only_file(file)) == "kubeconfig " + file +
                                             ": cluster \"arn:aws:eks:us-west-2:111222333444:cluster/Existing\": "
                                             "certificate-authority-data: illegal base64 data at input byte 168");
  // Any context: decoding fails before selection.
  CHECK_THAT(expect_error(only_file(file, "arn:aws:eks:region:111222333444:cluster/ExampleCluster")),
             Contains("illegal base64 data at input byte 168"));
}

TEST_CASE("kubeconfig fixture: Azure kubelogin users-only file needs clusters and contexts from elsewhere",
          "[kubeconfig]") {
  const std::string users = fixture("azure-kubelogin__exec-v1beta1-spn-secret__users-only.yaml");
  CHECK(expect_error(only_file(users)) == "kubeconfig " + users +
                                              ": no context selected: current-context is not set and --context was "
                                              "not given (no contexts are defined)");

  auto rc = expect_loads(kubeconfig_env(users + ":" + test_data("fragment-clusters.yaml")));
  CHECK(rc.context == "demouser");
  CHECK(rc.user == "demouser");
  CHECK(rc.server == "https://fragments.example.com:6443");
  CHECK(rc.ca_pem == gpuctl_test::kFakeCaPem);
  REQUIRE(rc.exec.has_value());
  CHECK(rc.exec->api_version == "client.authentication.k8s.io/v1beta1");
  CHECK(rc.exec->command == "kubelogin");
  CHECK(rc.exec->args == std::vector<std::string>{"get-token", "--environment", "AzurePublicCloud", "--server-id",
                                                  "<AAD server app ID>", "--client-id", "<AAD client app ID>",
                                                  "--client-secret", "<client_secret>", "--tenant-id",
                                                  "<AAD tenant ID>", "--login", "spn"});
  CHECK(rc.exec->env.empty());  // env: null
  CHECK(rc.exec->interactive_mode == "IfAvailable");
  CHECK(rc.origin == "kubeconfig " + test_data("fragment-clusters.yaml") + ", context \"demouser\"");
  CHECK(nlohmann::json::parse(rc.exec_cluster_config_json) ==
        nlohmann::json{{"audience", "gpuctl-tests"}, {"retries", 3}, {"quoted", "3"}});
}

TEST_CASE("kubeconfig fixture: fabric8 file with every user field", "[kubeconfig]") {
  const std::string name = "fabric8__all-user-fields-with-comments-no-apiversion.yaml";
  const std::string file = fixture(name);
  // kubectl cannot decode it either: "SOME_BASE64_..." has '_' at byte 4.
  CHECK(expect_error(only_file(file)) ==
        "kubeconfig " + file +
            ": cluster \"the-cluster\": certificate-authority-data: illegal base64 data at input byte 4");

  SECTION("with decodable data, kubectl's validation refuses the user and the cluster together") {
    TempDir dir;
    std::string text = read_file(file);
    text = replace_all(text, "SOME_BASE64_ENCODED_CERT_DATA_FOR_CA_CERT", gpuctl_test::kFakeCaB64);
    text = replace_all(text, "SOME_BASE64_ENCODED_CERT_DATA_FOR_CLIENT_CERT", gpuctl_test::kFakeCertB64);
    const std::string copy = dir.write("no-apiversion.yaml", text);
    std::string message = expect_error(only_file(copy));
    const std::string d = dir.str();
    CHECK(message ==
          "kubeconfig " + copy + ": context \"the-context\": " +
              "user \"the-user\": client-certificate-data and client-certificate are both specified (kubectl refuses "
              "this too): keep one; "
              "user \"the-user\": client-key-data and client-key are both specified (kubectl refuses this too): keep "
              "one; "
              "user \"the-user\": client-certificate: cannot read " +
              d +
              "/client.crt: No such file or directory; "
              "user \"the-user\": client-key: cannot read /absolute/path/client.key: No such file or directory; "
              "user \"the-user\": exec.apiVersion must be specified to use an exec credential plugin; "
              "user \"the-user\": exec.interactiveMode must be specified to use an exec credential plugin (Never, "
              "IfAvailable or Always); "
              "user \"the-user\": more than one authentication method found; found [token basicAuth], only one is "
              "allowed; "
              "cluster \"the-cluster\": certificate-authority-data and certificate-authority are both specified "
              "(kubectl refuses this too): keep one; "
              "cluster \"the-cluster\": certificate-authority: cannot read " +
              d + "/ca.crt: No such file or directory");
  }
}

TEST_CASE("kubeconfig fixture: fabric8 legacy gcp auth-provider", "[kubeconfig]") {
  const std::string name = "fabric8__auth-provider-gcp__legacy.yaml";
  const std::string file = fixture(name);
  // Resolved like filepath.Join: lexically cleaned.
  const std::string dir_of_fixture = std::filesystem::path(file).lexically_normal().parent_path().string();
  // The relative certificate-authority resolves next to the fixture, where it does not exist;
  // kubectl's validation stops there too ("unable to read certificate-authority ...").
  CHECK(expect_error(only_file(file)) ==
        "kubeconfig " + file + ": context \"production/172-28-128-4:8443/mmosley\": cluster \"172-28-128-4:8443\": " +
            "certificate-authority: cannot read " + dir_of_fixture + "/testns/ca.pem: No such file or directory");

  SECTION("with the CA next to a copy") {
    TempDir dir;
    const std::string copy = copy_fixture(dir, name);
    dir.write("testns/ca.pem", gpuctl_test::kFakeCaPem);
    std::string message = expect_error(only_file(copy));
    // kubectl__gcp-auth-plugin-removed.txt, on one line.
    std::string kubectl =
        read_file(std::string(GPUCTL_FIXTURES_DIR) + "/k8s-errors/kubectl__gcp-auth-plugin-removed.txt");
    kubectl = replace_all(gpuctl_test::replace_all(kubectl, "error: ", ""), "\n", " ");
    while (!kubectl.empty() && kubectl.back() == ' ') kubectl.pop_back();
    CHECK(message == "kubeconfig " + copy + ": context \"production/172-28-128-4:8443/mmosley\": user \"mmosley\": " +
                         "auth-provider \"gcp\": " + kubectl);

    auto rc = expect_loads(only_file(copy, "testns/172-28-128-4:8443/user"));
    CHECK(rc.server == "https://172.28.128.4:8443");
    CHECK(rc.namespace_name == "testns");
    CHECK(rc.bearer_token == "token");
    CHECK(rc.ca_pem == gpuctl_test::kFakeCaPem);
    CHECK(rc.user == "user/172-28-128-4:8443");

    auto root = expect_loads(only_file(copy, "production/172-28-128-4:8443/root"));
    CHECK(root.bearer_token == "supertoken");
    CHECK(root.namespace_name == "production");
  }
}

TEST_CASE("kubeconfig fixture: fabric8 exec v1 with env", "[kubeconfig]") {
  const std::string name = "fabric8__exec-v1-with-env.yaml";
  const std::string file = fixture(name);
  // v1 has no interactiveMode default: kubectl says "interactiveMode must be specified for test
  // to use exec authentication plugin".
  CHECK(expect_error(only_file(file)) ==
        "kubeconfig " + file +
            ": context \"test\": user \"test\": exec.interactiveMode must be specified to use an "
            "exec credential plugin (Never, IfAvailable or Always)");

  SECTION("with interactiveMode set") {
    TempDir dir;
    const std::string copy = copy_fixture(dir, name, "      command: ./token-generator",
                                          "      command: ./token-generator\n      interactiveMode: Never");
    auto rc = expect_loads(only_file(copy));
    CHECK(rc.server == "https://wherever");
    REQUIRE(rc.exec.has_value());
    CHECK(rc.exec->api_version == "client.authentication.k8s.io/v1");
    CHECK(rc.exec->command == dir.str() + "/token-generator");  // "./" resolved against the file's folder
    CHECK(rc.exec->args == std::vector<std::string>{"world"});
    REQUIRE(rc.exec->env.size() == 1);
    CHECK(rc.exec->env[0].name == "PART1");
    CHECK(rc.exec->env[0].value == "hello");
    CHECK(rc.exec->interactive_mode == "Never");
  }
}

TEST_CASE("kubeconfig fixture: fabric8 merge config 1 (tokens, basic auth, proxies)", "[kubeconfig]") {
  const std::string file = fixture("fabric8__merge-config-1-multi-context-token-basic.yaml");
  // The current context's user has a token and basic auth at once.
  CHECK(expect_error(only_file(file)) ==
        "kubeconfig " + file +
            ": context \"context-in-all-configs\": user \"config-1-user\": more than one "
            "authentication method found; found [token basicAuth], only one is allowed");

  auto rc = expect_loads(only_file(file, "config-1-context-2"));
  CHECK(rc.server == "https://config-1-2.example.com");
  CHECK(rc.proxy_url == "socks5://proxy.config-1-2.example.com");
  CHECK(rc.bearer_token == "config-1-user-2-token");
  CHECK(rc.username.empty());
  CHECK(rc.namespace_name == "default");
  CHECK(rc.ca_pem.empty());  // the system trust store

  auto dup = expect_loads(only_file(file, "duplicate-context"));
  CHECK(dup.server == "https://duplicate-cluster-in-1.example.com");
  CHECK(dup.proxy_url.empty());
  CHECK(dup.bearer_token == "duplicate-user-1-token");
}

TEST_CASE("kubeconfig fixture: fabric8 oidc auth-provider with a CA and insecure-skip-tls-verify", "[kubeconfig]") {
  const std::string name = "fabric8__oidc-auth-provider-with-id-refresh-token__3-contexts.yaml";
  const std::string file = fixture(name);
  // Resolved like filepath.Join: lexically cleaned.
  const std::string dir_of_fixture = std::filesystem::path(file).lexically_normal().parent_path().string();
  CHECK(expect_error(only_file(file)) ==
        "kubeconfig " + file + ": context \"production/172-28-128-4:8443/mmosley\": cluster \"172-28-128-4:8443\": " +
            "certificate-authority: cannot read " + dir_of_fixture + "/testns/ca.pem: No such file or directory");

  TempDir dir;
  const std::string copy = copy_fixture(dir, name);
  dir.write("testns/ca.pem", gpuctl_test::kFakeCaPem);
  std::string oidc = expect_error(only_file(copy));
  CHECK(oidc == "kubeconfig " + copy + ": context \"production/172-28-128-4:8443/mmosley\": user \"mmosley\": " +
                    "auth-provider \"oidc\" is not supported by gpuctl: use an exec credential plugin instead, such "
                    "as kubelogin (https://github.com/int128/kubelogin); see "
                    "https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
                    "#client-go-credential-plugins");
  // The token users reach the transport, which refuses a CA together with the insecure flag.
  CHECK(expect_error(only_file(copy, "testns/172-28-128-4:8443/user")) ==
        "kubeconfig " + copy + ": context \"testns/172-28-128-4:8443/user\": cluster \"172-28-128-4:8443\": " +
            "insecure-skip-tls-verify: specifying a root certificates file with the insecure flag is not allowed");
}

TEST_CASE("kubeconfig fixture: users fragment with a gcp auth-provider and elided client certificate data",
          "[kubeconfig]") {
  const std::string name = "issue__gcp-auth-provider-and-client-cert-users-fragment.yaml";
  const std::string file = fixture(name);
  const std::string clusters = test_data("fragment-clusters.yaml");
  // "...." (the reporter's redaction) is not base64: the whole file fails to decode.
  CHECK(expect_error(kubeconfig_env(file + ":" + clusters, "apps-06-user")) ==
        "kubeconfig " + file + ": user \"apps-06-user\": client-certificate-data: illegal base64 data at input byte 0");

  TempDir dir;
  std::string text = read_file(file);
  text = replace_all(text, "client-certificate-data:  ....", "client-certificate-data:  " + gpuctl_test::kFakeCertB64);
  text = replace_all(text, "client-key-data:  ...", "client-key-data:  " + gpuctl_test::kFakeKeyB64);
  const std::string copy = dir.write(name, text);

  auto rc = expect_loads(kubeconfig_env(copy + ":" + clusters, "apps-06-user"));
  CHECK(rc.client_cert_pem == gpuctl_test::kFakeCertPem);
  CHECK(rc.client_key_pem == gpuctl_test::kFakeKeyPem);
  CHECK(rc.namespace_name == "apps");
  CHECK(rc.bearer_token.empty());

  std::string gcp = expect_error(kubeconfig_env(copy + ":" + clusters, "gke-auth-provider"));
  CHECK_THAT(gcp,
             StartsWith("kubeconfig " + copy +
                        ": context \"gke-auth-provider\": user "
                        "\"gke_kore3-etri-cloudbarista_asia-northeast3_certificate-cluster\": auth-provider \"gcp\": "
                        "The gcp auth plugin has been removed."));
  CHECK_THAT(gcp, Contains("Please use the \"gke-gcloud-auth-plugin\" kubectl/client-go credential plugin instead."));
}

TEST_CASE("kubeconfig fixture: gcloud-generated exec user fragment", "[kubeconfig]") {
  // The fragment is a users[] item without its "- name:" line.
  TempDir dir;
  const std::string users =
      dir.write("users.yaml", "users:\n- name: gke-exec-user\n" +
                                  read_file(fixture("issue__gke-gcloud-auth-plugin-exec-user-fragment.yaml")));
  auto rc = expect_loads(kubeconfig_env(users + ":" + test_data("fragment-clusters.yaml"), "gke-exec"));
  REQUIRE(rc.exec.has_value());
  CHECK(rc.exec->api_version == "client.authentication.k8s.io/v1beta1");
  CHECK(rc.exec->command == "gke-gcloud-auth-plugin");
  CHECK(rc.exec->args.empty());  // args: null
  CHECK(rc.exec->env.empty());   // env: null
  // The folded plain scalar becomes one line.
  CHECK(rc.exec->install_hint ==
        "Install gke-gcloud-auth-plugin for use with kubectl by following "
        "https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke");
  CHECK(rc.exec->interactive_mode == "IfAvailable");
  CHECK(rc.exec->provide_cluster_info);
  CHECK(rc.server == "https://fragments.example.com:6443");
  // The exec_credential tests run this user's plugin (not installed) and check the installHint.
}

TEST_CASE("kubeconfig fixture: kubectl config view output with DATA+OMITTED", "[kubeconfig]") {
  const std::string file = fixture("issue__kubectl-config-view-data-omitted-basic-user.yaml");
  // "DATA+OMITTED" happens to be valid base64; kubectl then fails building the transport.
  CHECK(expect_error(only_file(file)) ==
        "kubeconfig " + file +
            ": context \"my-cluster-jenkins\": cluster \"my-cluster\": certificate-authority-data: "
            "unable to load root certificates: unable to parse bytes as PEM block (the data was "
            "omitted by \"kubectl config view\"; export the kubeconfig with \"kubectl config view "
            "--raw\")");

  TempDir dir;
  const std::string copy = copy_fixture(dir, "issue__kubectl-config-view-data-omitted-basic-user.yaml", "DATA+OMITTED",
                                        gpuctl_test::kFakeCaB64);
  auto rc = expect_loads(only_file(copy));
  CHECK(rc.server == "https://xxx.xxx.xxx.yyy");
  CHECK(rc.username == "jenkins-pipelin");
  CHECK(rc.password.empty());
  CHECK(rc.user == "jenkins-pipeline");
}

TEST_CASE("kubeconfig fixture: k8s-client-js empty users", "[kubeconfig]") {
  const std::string file = fixture("k8s-client-js__empty-user-kubeconfig.yaml");
  // context2 names no user: anonymous, as in kubectl. Its server is plain http, so kubectl
  // uses neither the CA nor insecure-skip-tls-verify.
  auto rc = expect_loads(only_file(file));
  CHECK(rc.context == "context2");
  CHECK(rc.cluster == "cluster2");
  CHECK(rc.user.empty());
  CHECK(rc.server == "http://example2.com");
  CHECK(rc.ca_pem.empty());
  CHECK_FALSE(rc.insecure_skip_tls_verify);
  CHECK(rc.bearer_token.empty());
  CHECK_FALSE(rc.exec.has_value());

  // user1 has an empty "user:"; trailing spaces after values are not part of them.
  auto one = expect_loads(only_file(file, "context1"));
  CHECK(one.server == "http://example.com");
  CHECK(one.user == "user1");
  CHECK(one.bearer_token.empty());
  CHECK(one.client_cert_pem.empty());

  SECTION("over https the CA and insecure flag conflict, as they would for kubectl") {
    TempDir dir;
    const std::string copy = copy_fixture(dir, "k8s-client-js__empty-user-kubeconfig.yaml", "http://", "https://");
    CHECK(expect_error(only_file(copy)) ==
          "kubeconfig " + copy +
              ": context \"context2\": cluster \"cluster2\": insecure-skip-tls-verify: specifying "
              "a root certificates file with the insecure flag is not allowed");
    // "Q0FEQVRB" is "CADATA": not PEM.
    CHECK(expect_error(only_file(copy, "context1")) ==
          "kubeconfig " + copy +
              ": context \"context1\": cluster \"cluster1\": certificate-authority-data: unable to "
              "load root certificates: unable to parse bytes as PEM block");
  }
}

TEST_CASE("kubeconfig fixture: k8s-client-js kubeconfig-2 (trailing whitespace, no final newline)", "[kubeconfig]") {
  const std::string file = fixture("k8s-client-js__kubeconfig-2.yaml");
  auto rc = expect_loads(only_file(file));
  CHECK(rc.context == "contextA");
  CHECK(rc.cluster == "clusterA");
  CHECK(rc.user == "userA");
  CHECK(rc.server == "http://example2.com");
  CHECK(rc.client_cert_pem.empty());  // plain http: kubectl sends no client certificate

  TempDir dir;
  const std::string copy = copy_fixture(dir, "k8s-client-js__kubeconfig-2.yaml", "http://", "https://");
  CHECK(expect_error(only_file(copy)) ==
        "kubeconfig " + copy +
            ": context \"contextA\": cluster \"clusterA\": certificate-authority-data: unable to "
            "load root certificates: unable to parse bytes as PEM block");
}

TEST_CASE("kubeconfig fixture: k8s-client-js proxy-url", "[kubeconfig]") {
  const std::string file = fixture("k8s-client-js__kubeconfig-proxy-url.yaml");
  auto a = expect_loads(only_file(file));
  CHECK(a.context == "contextA");
  CHECK(a.server == "http://example1.com");
  CHECK(a.proxy_url == "socks5://example:1187");

  auto c = expect_loads(only_file(file, "contextC"));
  CHECK(c.server == "http://example3.com");
  CHECK(c.proxy_url == "http://example:8080");

  // clusterB is https with CA data "CADAT@": the transport cannot use it.
  CHECK(expect_error(only_file(file, "contextB")) ==
        "kubeconfig " + file +
            ": context \"contextB\": cluster \"clusterB\": certificate-authority-data: unable to "
            "load root certificates: unable to parse bytes as PEM block");
  // clusterD's server has the deliberately wrong scheme "htto".
  CHECK(expect_error(only_file(file, "contextD")) ==
        "kubeconfig " + file +
            ": context \"contextD\": cluster \"clusterD\": server: unsupported protocol scheme "
            "\"htto\" in \"htto://exampleerror.com\" (want https://)");
  auto e = expect_loads(only_file(file, "contextE"));
  CHECK(e.server == "http://exampleerror.com");
  CHECK(e.proxy_url.empty());
  auto f = expect_loads(only_file(file, "contextF"));
  CHECK(f.server == "http://exampleerror.com");
  CHECK_THAT(expect_error(only_file(file, "contextG")), Contains("cluster \"clusterG\": certificate-authority-data"));
}

TEST_CASE("kubeconfig fixture: k8s-client-js kubeconfig with namespaces and basic auth", "[kubeconfig]") {
  const std::string file = fixture("k8s-client-js__kubeconfig.yaml");
  auto rc = expect_loads(only_file(file));
  CHECK(rc.context == "context2");
  CHECK(rc.namespace_name == "namespace2");
  CHECK(rc.server == "http://example2.com");
  CHECK(rc.user == "user2");

  auto options = only_file(file);
  options.namespace_name = "from-flag";
  CHECK(expect_loads(options).namespace_name == "from-flag");

  auto one = expect_loads(only_file(file, "context1"));
  CHECK(one.namespace_name == "default");
  CHECK(one.proxy_url == "socks5://localhost:1181");

  auto passwd = expect_loads(only_file(file, "passwd"));
  CHECK(passwd.user == "user3");
  CHECK(passwd.username.empty());  // plain http: no credentials

  TempDir dir;
  const std::string copy = copy_fixture(dir, "k8s-client-js__kubeconfig.yaml", "http://", "https://");
  CHECK_THAT(expect_error(only_file(copy, "passwd")),
             Contains("cluster \"cluster2\": insecure-skip-tls-verify: specifying a root certificates file with the "
                      "insecure flag is not allowed"));
}

TEST_CASE("kubeconfig fixture: k8s-client-js tls-server-name", "[kubeconfig]") {
  const std::string file = fixture("k8s-client-js__tls-server-name-kubeconfig.yaml");
  auto rc = expect_loads(only_file(file));
  CHECK(rc.context == "context");
  CHECK(rc.server == "http://example2.com");
  CHECK(rc.tls_server_name.empty());  // TLS settings are not used for plain http

  TempDir dir;
  // Over https without the insecure flag, the name and CA are used.
  std::string text = replace_all(read_file(file), "http://", "https://");
  text = replace_all(text, "Q0FEQVRBMg==", gpuctl_test::kFakeCaB64);
  text = replace_all(text, "VVNFUl9DQURBVEE=", gpuctl_test::kFakeCertB64);
  text = replace_all(text, "VVNFUl9DS0RBVEE=", gpuctl_test::kFakeKeyB64);
  const std::string secure = dir.write("secure.yaml", replace_all(text, "    insecure-skip-tls-verify: true\n", ""));
  auto s = expect_loads(only_file(secure));
  CHECK(s.server == "https://example2.com");
  CHECK(s.tls_server_name == "kube.example2.com");
  CHECK(s.ca_pem == gpuctl_test::kFakeCaPem);
  CHECK(s.client_cert_pem == gpuctl_test::kFakeCertPem);
  CHECK(s.client_key_pem == gpuctl_test::kFakeKeyPem);
  CHECK_FALSE(s.insecure_skip_tls_verify);

  const std::string insecure = dir.write("insecure.yaml", text);
  CHECK(expect_error(only_file(insecure)) ==
        "kubeconfig " + insecure +
            ": context \"context\": cluster \"cluster\": insecure-skip-tls-verify: specifying "
            "a root certificates file with the insecure flag is not allowed");
}
