// kubeconfig loading rules beyond the shared fixtures: the file list and merging, relative
// paths, selection and namespaces, cluster and user validation.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "gpuctl/kube/config.hpp"
#include "test_kubeconfig_support.hpp"

using Catch::Contains;
using Catch::StartsWith;
using gpuctl::kube::LoadOptions;
using gpuctl_test::expect_error;
using gpuctl_test::expect_loads;
using gpuctl_test::fixture;
using gpuctl_test::kubeconfig_env;
using gpuctl_test::only_file;
using gpuctl_test::TempDir;
using gpuctl_test::test_data;

namespace {
const std::string kConfig1 = fixture("fabric8__merge-config-1-multi-context-token-basic.yaml");
const std::string kConfig2 = test_data("merge-config-2.yaml");
const std::string kUsersOnly = test_data("merge-users-only.yaml");

// A one-context kubeconfig around the given cluster and user bodies (indented 4 spaces).
std::string single(const std::string& cluster_body, const std::string& user_body, const std::string& extra = "") {
  std::string text = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n" + cluster_body +
                     "users:\n- name: u\n  user:\n" + user_body +
                     "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n" + extra +
                     "current-context: ctx\n";
  return text;
}
const std::string kHttpsServer = "    server: https://127.0.0.1:6443\n";
}  // namespace

// --- the file list and merging ---

TEST_CASE("kubeconfig merge: the first file that defines a name wins wholesale", "[kubeconfig]") {
  auto rc = expect_loads(kubeconfig_env(kConfig1 + ":" + kConfig2, "duplicate-context"));
  CHECK(rc.server == "https://duplicate-cluster-in-1.example.com");
  CHECK(rc.proxy_url.empty());  // config-2's proxy-url is not merged into config-1's cluster
  CHECK(rc.bearer_token == "duplicate-user-1-token");
  CHECK(rc.namespace_name == "default");  // nor config-2's namespace into config-1's context
  CHECK(rc.origin == "kubeconfig " + kConfig1 + ", context \"duplicate-context\"");

  auto reversed = expect_loads(kubeconfig_env(kConfig2 + ":" + kConfig1, "duplicate-context"));
  CHECK(reversed.server == "https://duplicate-cluster-in-2.example.com");
  CHECK(reversed.proxy_url == "http://proxy-2.example.com:3128");
  CHECK(reversed.bearer_token == "duplicate-user-2-token");
  CHECK(reversed.namespace_name == "from-config-2");

  // Names only one file defines are all available.
  CHECK(expect_loads(kubeconfig_env(kConfig1 + ":" + kConfig2, "config-2-context")).bearer_token ==
        "config-2-user-token");
  CHECK(expect_loads(kubeconfig_env(kConfig1 + ":" + kConfig2, "config-1-context-2")).bearer_token ==
        "config-1-user-2-token");
}

TEST_CASE("kubeconfig merge: current-context comes from the first file that sets it", "[kubeconfig]") {
  // config-1 sets context-in-all-configs, whose user (token + basic auth) kubectl refuses.
  CHECK_THAT(expect_error(kubeconfig_env(kConfig1 + ":" + kConfig2)),
             StartsWith("kubeconfig " + kConfig1 + ": context \"context-in-all-configs\": user \"config-1-user\""));
  auto rc = expect_loads(kubeconfig_env(kConfig2 + ":" + kConfig1));
  CHECK(rc.context == "config-2-context");
  // A file without current-context does not reset it; its user still wins the name.
  auto later = expect_loads(kubeconfig_env(kUsersOnly + ":" + kConfig2 + ":" + kConfig1));
  CHECK(later.context == "config-2-context");
  CHECK(later.bearer_token == "token-from-users-only-file");
  CHECK(later.origin == "kubeconfig " + kConfig2 + ", context \"config-2-context\"");
}

TEST_CASE("kubeconfig merge: missing and empty entries in KUBECONFIG are skipped", "[kubeconfig]") {
  auto rc = expect_loads(kubeconfig_env("/nonexistent/a::" + kConfig2 + ":" + kConfig2 + ":/nonexistent/b"));
  CHECK(rc.context == "config-2-context");
  CHECK(rc.server == "https://config-2.example.com");

  // Every listed file missing: nothing to load; not in a pod either.
  CHECK(expect_error(kubeconfig_env("/nonexistent/a:/nonexistent/b")) ==
        "no configuration: set KUBECONFIG, use --kubeconfig, or create ~/.kube/config (KUBECONFIG lists "
        "/nonexistent/a, /nonexistent/b, none of which exists; not in a pod either: KUBERNETES_SERVICE_HOST is not "
        "set)");
}

TEST_CASE("kubeconfig: --kubeconfig reads only that file, which must exist", "[kubeconfig]") {
  LoadOptions o = only_file(kConfig2, "duplicate-context");
  o.kubeconfig_env = kConfig1;  // ignored
  auto rc = expect_loads(o);
  CHECK(rc.server == "https://duplicate-cluster-in-2.example.com");
  o.context = "config-1-context-2";
  CHECK(expect_error(o) == "kubeconfig " + kConfig2 +
                               ": context \"config-1-context-2\" does not exist (--context); available contexts: "
                               "context-in-all-configs, duplicate-context, config-2-context");

  CHECK(expect_error(only_file("/nonexistent/kubeconfig")) ==
        "kubeconfig /nonexistent/kubeconfig: cannot read: No such file or directory (--kubeconfig)");
}

TEST_CASE("kubeconfig: ~/.kube/config is used when KUBECONFIG is unset or empty", "[kubeconfig]") {
  TempDir home;
  home.write(".kube/config", gpuctl_test::read_file(kConfig2));
  LoadOptions o;
  o.home = home.str();
  CHECK(expect_loads(o).origin == "kubeconfig " + home.str() + "/.kube/config, context \"config-2-context\"");
  o.kubeconfig_env = "";
  CHECK(expect_loads(o).context == "config-2-context");
  o.kubeconfig_env = kConfig1;
  o.context = "config-1-context-2";
  CHECK(expect_loads(o).server == "https://config-1-2.example.com");

  TempDir empty_home;
  LoadOptions none;
  none.home = empty_home.str();
  CHECK(expect_error(none) == "no configuration: set KUBECONFIG, use --kubeconfig, or create ~/.kube/config (" +
                                  empty_home.str() +
                                  "/.kube/config does not exist; not in a pod either: KUBERNETES_SERVICE_HOST is not "
                                  "set)");
}

TEST_CASE("kubeconfig: unparseable files are errors that name the file", "[kubeconfig]") {
  TempDir dir;
  const std::string broken = dir.write("broken.yaml", "clusters:\n- name: a\n  cluster: {server: [\n");
  std::string message = expect_error(kubeconfig_env(kConfig2 + ":" + broken));
  CHECK_THAT(message, StartsWith("kubeconfig " + broken + ": yaml: line "));

  const std::string list = dir.write("list.yaml", "- a\n- b\n");
  CHECK(expect_error(only_file(list)) ==
        "kubeconfig " + list + ": not a kubeconfig: expected a mapping at the top level, got a list");

  const std::string kind = dir.write("kind.yaml", "apiVersion: v1\nkind: Pod\n");
  CHECK(expect_error(only_file(kind)) ==
        "kubeconfig " + kind + ": kind: \"Pod\" is not a kubeconfig (want kind: Config)");

  const std::string dup = dir.write("dup.yaml",
                                    "clusters:\n- name: a\n  cluster: {server: https://a}\n- name: a\n  "
                                    "cluster: {server: https://b}\n");
  CHECK(expect_error(only_file(dup)) == "kubeconfig " + dup + ": cluster \"a\": defined twice in clusters");

  const std::string typed = dir.write("typed.yaml", single("    server: [a, b]\n", "    token: t\n"));
  CHECK(expect_error(only_file(typed)) ==
        "kubeconfig " + typed + ": cluster \"c\": server: expected a string, got a list");

  const std::string flag = dir.write("flag.yaml", single(kHttpsServer + "    insecure-skip-tls-verify: maybe\n", ""));
  CHECK(expect_error(only_file(flag)) ==
        "kubeconfig " + flag + ": cluster \"c\": insecure-skip-tls-verify: expected true or false, got \"maybe\"");

  const std::string unreadable = dir.str() + "/a-folder";
  std::filesystem::create_directory(unreadable);
  CHECK(expect_error(kubeconfig_env(unreadable)) == "kubeconfig " + unreadable + ": cannot read: Is a directory");
}

// --- relative paths ---

TEST_CASE("kubeconfig: relative paths resolve against the folder of the file that defined them", "[kubeconfig]") {
  TempDir dir;
  dir.write("conf/certs/ca.pem", gpuctl_test::kFakeCaPem);
  dir.write("conf/certs/client.pem", gpuctl_test::kFakeCertPem);
  dir.write("keys/client.key", gpuctl_test::kFakeKeyPem);
  dir.write("conf/token.txt", "  token-from-file\n");
  const std::string main = dir.write("conf/config", R"(clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority: certs/ca.pem
contexts:
- name: certs
  context: {cluster: c, user: cert-user}
- name: token
  context: {cluster: c, user: token-user}
- name: exec-path
  context: {cluster: c, user: exec-path-user}
- name: exec-bare
  context: {cluster: c, user: exec-bare-user}
- name: other-file
  context: {cluster: c, user: user-from-other-file}
users:
- name: cert-user
  user:
    client-certificate: certs/client.pem
    client-key: ../keys/client.key
- name: token-user
  user:
    tokenFile: token.txt
- name: exec-path-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      interactiveMode: Never
      command: bin/../bin/plugin
- name: exec-bare-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: plugin
)");
  dir.write("elsewhere/secrets/token", "other-token");
  const std::string other = dir.write("elsewhere/config", R"(users:
- name: user-from-other-file
  user:
    tokenFile: secrets/token
)");
  const std::string list = main + ":" + other;

  auto certs = expect_loads(kubeconfig_env(list, "certs"));
  CHECK(certs.server == "https://127.0.0.1:6443");  // trailing slash dropped
  CHECK(certs.ca_pem == gpuctl_test::kFakeCaPem);
  CHECK(certs.client_cert_pem == gpuctl_test::kFakeCertPem);
  CHECK(certs.client_key_pem == gpuctl_test::kFakeKeyPem);

  auto token = expect_loads(kubeconfig_env(list, "token"));
  CHECK(token.bearer_token == "token-from-file");
  CHECK(token.token_file == dir.str() + "/conf/token.txt");

  auto exec_path = expect_loads(kubeconfig_env(list, "exec-path"));
  REQUIRE(exec_path.exec.has_value());
  CHECK(exec_path.exec->command == dir.str() + "/conf/bin/plugin");
  auto exec_bare = expect_loads(kubeconfig_env(list, "exec-bare"));
  REQUIRE(exec_bare.exec.has_value());
  CHECK(exec_bare.exec->command == "plugin");

  auto other_user = expect_loads(kubeconfig_env(list, "other-file"));
  CHECK(other_user.bearer_token == "other-token");
  CHECK(other_user.token_file == dir.str() + "/elsewhere/secrets/token");
}

TEST_CASE("kubeconfig: files the selected user or cluster names must be readable", "[kubeconfig]") {
  TempDir dir;
  const std::string key = dir.str() + "/k.pem";
  const std::string config = dir.write(
      "config",
      single(kHttpsServer, "    client-certificate-data: " + gpuctl_test::kFakeCertB64 + "\n    client-key: k.pem\n"));
  CHECK(expect_error(only_file(config)) == "kubeconfig " + config +
                                               ": context \"ctx\": user \"u\": client-key: cannot read " + key +
                                               ": No such file or directory");

  const std::string token = dir.write("token-config", single(kHttpsServer, "    tokenFile: /nonexistent/token\n"));
  CHECK(expect_error(only_file(token)) ==
        "kubeconfig " + token +
            ": context \"ctx\": user \"u\": tokenFile: cannot read /nonexistent/token: "
            "No such file or directory");
}

// --- selection and namespaces ---

TEST_CASE("kubeconfig: context selection errors name what is missing", "[kubeconfig]") {
  TempDir dir;
  const std::string no_current = dir.write("no-current.yaml", R"(clusters:
- {name: c, cluster: {server: https://a}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: one, context: {cluster: c, user: u}}
- {name: two, context: {cluster: missing-cluster, user: u}}
- {name: three, context: {cluster: c, user: missing-user}}
- {name: four, context: {user: u}}
)");
  CHECK(expect_error(only_file(no_current)) ==
        "kubeconfig " + no_current +
            ": no context selected: current-context is not set and --context was not given (available contexts: one, "
            "two, three, four)");
  CHECK(expect_loads(only_file(no_current, "one")).bearer_token == "t");
  CHECK(expect_error(only_file(no_current, "two")) ==
        "kubeconfig " + no_current +
            ": context \"two\": cluster \"missing-cluster\" does not exist; available clusters: c");
  CHECK(expect_error(only_file(no_current, "three")) ==
        "kubeconfig " + no_current + ": context \"three\": user \"missing-user\" does not exist; available users: u");
  CHECK(expect_error(only_file(no_current, "four")) ==
        "kubeconfig " + no_current + ": context \"four\": cluster is not set");

  const std::string dangling =
      dir.write("dangling.yaml", "current-context: gone\ncontexts:\n- {name: here, context: {cluster: c}}\n");
  CHECK(expect_error(only_file(dangling)) ==
        "kubeconfig " + dangling + ": current-context \"gone\" does not exist; available contexts: here");

  std::string many = "contexts:\n";
  for (int i = 0; i < 12; ++i) many += "- {name: ctx-" + std::to_string(i) + ", context: {cluster: c}}\n";
  const std::string long_list = dir.write("many.yaml", many);
  CHECK(expect_error(only_file(long_list, "nope")) ==
        "kubeconfig " + long_list +
            ": context \"nope\" does not exist (--context); 12 contexts are defined (list them with "
            "kubectl config get-contexts)");
}

TEST_CASE("kubeconfig: namespace is --namespace, else the context's, else default", "[kubeconfig]") {
  LoadOptions o = only_file(kConfig2, "duplicate-context");
  CHECK(expect_loads(o).namespace_name == "from-config-2");
  o.namespace_name = "flag-ns";
  CHECK(expect_loads(o).namespace_name == "flag-ns");
  o.namespace_name = "";
  CHECK(expect_loads(o).namespace_name == "from-config-2");
  o.namespace_name.reset();
  o.context = "config-2-context";
  CHECK(expect_loads(o).namespace_name == "default");
}

// --- clusters ---

TEST_CASE("kubeconfig: a CA together with insecure-skip-tls-verify is refused", "[kubeconfig]") {
  TempDir dir;
  const std::string data =
      dir.write("data.yaml", single(kHttpsServer + "    insecure-skip-tls-verify: true\n" +
                                        "    certificate-authority-data: " + gpuctl_test::kFakeCaB64 + "\n",
                                    "    token: t\n"));
  CHECK(expect_error(only_file(data)) == "kubeconfig " + data +
                                             ": context \"ctx\": cluster \"c\": insecure-skip-tls-verify: specifying a "
                                             "root certificates file with the insecure flag is not allowed");
  dir.write("ca.pem", gpuctl_test::kFakeCaPem);
  const std::string file = dir.write(
      "file.yaml", single(kHttpsServer + "    insecure-skip-tls-verify: true\n" + "    certificate-authority: ca.pem\n",
                          "    token: t\n"));
  CHECK_THAT(expect_error(only_file(file)),
             Contains("specifying a root certificates file with the insecure flag is not allowed"));

  const std::string insecure =
      dir.write("insecure.yaml", single(kHttpsServer + "    insecure-skip-tls-verify: true\n" +
                                            "    tls-server-name: api.internal\n" + "    disable-compression: true\n",
                                        "    token: t\n"));
  auto rc = expect_loads(only_file(insecure));
  CHECK(rc.insecure_skip_tls_verify);
  CHECK(rc.ca_pem.empty());
  CHECK(rc.tls_server_name == "api.internal");
  CHECK(rc.disable_compression);
  CHECK(rc.bearer_token == "t");
}

TEST_CASE("kubeconfig: proxy-url accepts http, https and socks5 only", "[kubeconfig]") {
  TempDir dir;
  auto with_proxy = [&](const std::string& proxy) {
    return only_file(dir.write("p.yaml", single(kHttpsServer + "    proxy-url: " + proxy + "\n", "")));
  };
  CHECK(expect_loads(with_proxy("http://proxy:3128")).proxy_url == "http://proxy:3128");
  CHECK(expect_loads(with_proxy("https://proxy:3129")).proxy_url == "https://proxy:3129");
  CHECK(expect_loads(with_proxy("socks5://proxy:1080")).proxy_url == "socks5://proxy:1080");
  CHECK(expect_loads(with_proxy("HTTP://proxy:3128")).proxy_url == "HTTP://proxy:3128");

  CHECK(expect_error(with_proxy("ftp://proxy:21")) ==
        "kubeconfig " + dir.str() +
            "/p.yaml: context \"ctx\": cluster \"c\": proxy-url: invalid 'proxy-url' "
            "\"ftp://proxy:21\": unsupported scheme \"ftp\", must be http, https, or socks5");
  CHECK_THAT(expect_error(with_proxy("socks5h://proxy:1080")), Contains("unsupported scheme \"socks5h\""));
  // Without "//", Go's url.Parse reads "proxy.example.com" as the scheme.
  CHECK_THAT(expect_error(with_proxy("proxy.example.com:3128")), Contains("unsupported scheme \"proxy.example.com\""));
  CHECK_THAT(expect_error(with_proxy("10.0.0.1:3128")),
             Contains("invalid 'proxy-url' \"10.0.0.1:3128\": could not parse: 10.0.0.1:3128"));
  CHECK_THAT(expect_error(with_proxy("proxy")), Contains("unsupported scheme \"\", must be http, https, or socks5"));
}

TEST_CASE("kubeconfig: the server URL", "[kubeconfig]") {
  TempDir dir;
  auto with_server = [&](const std::string& server) {
    return only_file(dir.write("s.yaml", single("    server: " + server + "\n", "    token: t\n")));
  };
  CHECK(expect_loads(with_server("HTTPS://rancher.example.com/k8s/clusters/c-1/?x=1#f")).server ==
        "https://rancher.example.com/k8s/clusters/c-1");
  // As in client-go, a server without a scheme is plain http, so no credentials are sent.
  auto bare = expect_loads(with_server("10.0.0.1:6443"));
  CHECK(bare.server == "http://10.0.0.1:6443");
  CHECK(bare.bearer_token.empty());
  CHECK(expect_error(with_server("\"\"")) ==
        "kubeconfig " + dir.str() + "/s.yaml: context \"ctx\": cluster \"c\": server: no server defined");
  CHECK_THAT(expect_error(with_server("ftp://x")), Contains("server: unsupported protocol scheme \"ftp\""));
  CHECK_THAT(expect_error(with_server("https://")), Contains("server: no host in \"https://\""));
}

TEST_CASE("kubeconfig: the cluster's exec extension becomes exec_cluster_config_json", "[kubeconfig]") {
  TempDir dir;
  const std::string file = dir.write("ext.yaml", single(kHttpsServer + R"(    extensions:
    - name: other
      extension: {ignored: true}
    - name: client.authentication.k8s.io/exec
      extension:
        audience: sts.example.com
        nested: {list: [1, "2", true, null, 1.5], empty: ""}
)",
                                                        R"(    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: plugin
      interactiveMode: IfAvailable
      provideClusterInfo: true
      installHint: "Run \e[1minstall\e[0m"
)"));
  auto rc = expect_loads(only_file(file));
  CHECK(nlohmann::json::parse(rc.exec_cluster_config_json) ==
        nlohmann::json::parse(R"({"audience":"sts.example.com","nested":{"list":[1,"2",true,null,1.5],"empty":""}})"));
  REQUIRE(rc.exec.has_value());
  CHECK(rc.exec->provide_cluster_info);
  CHECK(rc.exec->install_hint == "Run U+001B[1minstallU+001B[0m");
}

// --- users ---

TEST_CASE("kubeconfig: user validation follows client-go", "[kubeconfig]") {
  TempDir dir;
  auto user_error = [&](const std::string& user_body) {
    return expect_error(only_file(dir.write("u.yaml", single(kHttpsServer, user_body))));
  };
  const std::string prefix = "kubeconfig " + dir.str() + "/u.yaml: context \"ctx\": user \"u\": ";

  CHECK(user_error("    token: t\n    username: a\n    password: b\n") ==
        prefix + "more than one authentication method found; found [token basicAuth], only one is allowed");
  CHECK(user_error("    token: t\n    password: b\n") ==
        prefix + "more than one authentication method found; found [token basicAuth], only one is allowed");
  CHECK(user_error("    client-certificate-data: " + gpuctl_test::kFakeCertB64 + "\n") ==
        prefix + "client-key-data or client-key must be specified to use the clientCert authentication method");
  CHECK(user_error("    client-key-data: " + gpuctl_test::kFakeKeyB64 + "\n") ==
        prefix + "client-certificate-data or client-certificate must be specified to use client-key");
  CHECK(user_error("    as-groups: [system:masters]\n") ==
        prefix +
            "as-uid, as-groups and as-user-extra need as: requesting uid, groups or user-extra without "
            "impersonating a user");
  CHECK_THAT(user_error("    as-uid: \"1000\"\n"), Contains("without impersonating a user"));
  CHECK_THAT(user_error("    as-user-extra: {scopes: [view]}\n"), Contains("without impersonating a user"));
  CHECK(user_error("    auth-provider: {name: oidc}\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                   "command: kubelogin}\n") ==
        prefix + "auth-provider cannot be provided in combination with an exec plugin: keep one");
  CHECK(user_error("    client-certificate-data: " + gpuctl_test::kFakeCertB64 +
                   "\n    client-key-data: bm90IGEga2V5\n") ==
        prefix + "client-key-data: tls: failed to find any PEM data in key input");
  CHECK(user_error("    client-certificate-data: bm90IGEgY2VydA==\n    client-key-data: " + gpuctl_test::kFakeKeyB64 +
                   "\n") == prefix + "client-certificate-data: tls: failed to find any PEM data in certificate input");
}

TEST_CASE("kubeconfig: auth-provider is refused with a pointer to exec plugins", "[kubeconfig]") {
  TempDir dir;
  auto provider_error = [&](const std::string& name) {
    return expect_error(
        only_file(dir.write("a.yaml", single(kHttpsServer, "    auth-provider:\n      name: " + name + "\n"))));
  };
  const std::string prefix = "kubeconfig " + dir.str() + "/a.yaml: context \"ctx\": user \"u\": ";
  CHECK_THAT(provider_error("gcp"),
             StartsWith(prefix + "auth-provider \"gcp\": The gcp auth plugin has been removed."));
  CHECK(provider_error("azure") ==
        prefix +
            "auth-provider \"azure\": The azure auth plugin has been removed. Please use the "
            "https://github.com/Azure/kubelogin kubectl/client-go credential plugin instead. See "
            "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins "
            "for further details");
  CHECK_THAT(provider_error("oidc"), Contains("auth-provider \"oidc\" is not supported by gpuctl"));
  CHECK(provider_error("openstack") ==
        prefix +
            "auth-provider \"openstack\": no Auth Provider found for name \"openstack\"; gpuctl supports exec "
            "credential plugins instead (e.g. gke-gcloud-auth-plugin, kubelogin; see "
            "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins)");
}

TEST_CASE("kubeconfig: exec configuration is validated", "[kubeconfig]") {
  TempDir dir;
  auto load_exec = [&](const std::string& exec_body) {
    return only_file(dir.write("e.yaml", single(kHttpsServer, "    exec:\n" + exec_body)));
  };
  const std::string prefix = "kubeconfig " + dir.str() + "/e.yaml: context \"ctx\": user \"u\": ";

  CHECK(expect_error(load_exec("      apiVersion: client.authentication.k8s.io/v1\n      command: p\n")) ==
        prefix +
            "exec.interactiveMode must be specified to use an exec credential plugin (Never, IfAvailable or Always)");
  CHECK(expect_error(load_exec("      apiVersion: client.authentication.k8s.io/v1\n      command: p\n"
                               "      interactiveMode: Sometimes\n")) ==
        prefix + "exec.interactiveMode: invalid interactiveMode \"Sometimes\" (want Never, IfAvailable or Always)");
  CHECK(expect_error(load_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n")) ==
        prefix + "exec.command must be specified to use an exec credential plugin");
  CHECK(expect_error(load_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n      command: p\n"
                               "      env:\n      - {name: \"\", value: x}\n")) ==
        prefix + "exec.env[0].name must be specified");
  CHECK(expect_error(load_exec("      apiVersion: client.authentication.k8s.io/v2\n      command: p\n"
                               "      interactiveMode: Never\n")) ==
        prefix +
            "exec.apiVersion: exec plugin: invalid apiVersion \"client.authentication.k8s.io/v2\" (supported: "
            "client.authentication.k8s.io/v1, client.authentication.k8s.io/v1beta1)");

  auto rc =
      expect_loads(load_exec("      apiVersion: client.authentication.k8s.io/v1\n      command: p\n"
                             "      interactiveMode: Always\n      args: [\"a b\", \"--x=1\"]\n"
                             "      env:\n      - {name: A, value: \"1\"}\n      - {name: B}\n"));
  REQUIRE(rc.exec.has_value());
  CHECK(rc.exec->interactive_mode == "Always");
  CHECK(rc.exec->args == std::vector<std::string>{"a b", "--x=1"});
  REQUIRE(rc.exec->env.size() == 2);
  CHECK(rc.exec->env[1].name == "B");
  CHECK(rc.exec->env[1].value.empty());
  CHECK(rc.bearer_token.empty());
  CHECK(rc.exec_cluster_config_json.empty());
}

TEST_CASE("kubeconfig: impersonation and basic auth are passed on", "[kubeconfig]") {
  TempDir dir;
  const std::string file = dir.write("i.yaml", single(kHttpsServer, R"(    username: admin
    password: "s3cret"
    as: jane
    as-uid: "42"
    as-groups: [dev, ops]
    as-user-extra:
      scopes: [view, edit]
      reason: [audit]
)"));
  auto rc = expect_loads(only_file(file));
  CHECK(rc.username == "admin");
  CHECK(rc.password == "s3cret");
  CHECK(rc.impersonate_user == "jane");
  CHECK(rc.impersonate_uid == "42");
  CHECK(rc.impersonate_groups == std::vector<std::string>{"dev", "ops"});
  REQUIRE(rc.impersonate_extra.size() == 2);
  CHECK(rc.impersonate_extra[0].first == "scopes");
  CHECK(rc.impersonate_extra[0].second == std::vector<std::string>{"view", "edit"});
  CHECK(rc.impersonate_extra[1].first == "reason");
}

TEST_CASE("kubeconfig: a token and a tokenFile: the token first, the file path kept for re-reading", "[kubeconfig]") {
  TempDir dir;
  dir.write("tok", "file-token\n");
  const std::string file = dir.write("t.yaml", single(kHttpsServer, "    token: inline-token\n    tokenFile: tok\n"));
  auto rc = expect_loads(only_file(file));
  CHECK(rc.bearer_token == "inline-token");
  CHECK(rc.token_file == dir.str() + "/tok");
}

TEST_CASE("kubeconfig: over plain http no credentials or TLS settings are used, as in kubectl", "[kubeconfig]") {
  TempDir dir;
  const std::string file = dir.write(
      "h.yaml", single("    server: http://127.0.0.1:8001\n    tls-server-name: x\n", "    token: t\n    as: jane\n"));
  auto rc = expect_loads(only_file(file));
  CHECK(rc.server == "http://127.0.0.1:8001");
  CHECK(rc.bearer_token.empty());
  CHECK(rc.tls_server_name.empty());
  CHECK(rc.impersonate_user == "jane");  // impersonation headers are not credentials
}
