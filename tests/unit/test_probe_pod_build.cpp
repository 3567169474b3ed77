// `--via pod` (issue 21) without I/O: the probe pod as it is sent, what a pod's status says, the
// flags read into options, and the probe script run as an unprivileged pod runs it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "fakes/fixtures.hpp"
#include "gpuctl/gpu/probe.hpp"
#include "gpuctl/ops/fleet/probe_pods.hpp"
#include "probe_pod_flags.hpp"

using nlohmann::json;
using namespace gpuctl;
using namespace std::chrono_literals;
using testing::cat;

namespace {

json pod(const std::string& name, const std::string& phase, json container_state) {
  json p = {{"metadata", {{"name", name}, {"namespace", "gpuctl-system"}}},
            {"spec", {{"nodeName", "n"}}},
            {"status", {{"phase", phase}}}};
  if (!container_state.is_null())
    p["status"]["containerStatuses"] = json::array({{{"name", "probe"}, {"state", container_state}}});
  return p;
}
json waiting(const std::string& reason, const std::string& message) {
  return pod("p", "Pending", {{"waiting", {{"reason", reason}, {"message", message}}}});
}

ops::PodProbeOptions options() {
  ops::PodProbeOptions o;
  o.deadline = 10s;
  o.run_id = "r1";
  o.owner = "tester@box pid=1";
  return o;
}

}  // namespace

TEST_CASE("probe_pods: the pod pinned to its node, tolerating every taint, unprivileged by default", "[probe_pods]") {
  ops::PodProbeOptions o = options();
  o.image_pull_secrets = {"regcred"};
  o.image_pull_policy = "IfNotPresent";
  json p = ops::build_probe_pod("gpu-a", o);
  CHECK(p["metadata"]["generateName"] == "gpuctl-probe-");
  CHECK(p["metadata"]["namespace"] == "gpuctl-system");
  CHECK(p["metadata"]["labels"] == json{{"app.kubernetes.io/name", "gpuctl-probe"},
                                        {"app.kubernetes.io/managed-by", "gpuctl"},
                                        {"probe.gpuctl.io/node", "gpu-a"},
                                        {"probe.gpuctl.io/run", "r1"}});
  CHECK(p["metadata"]["annotations"]["probe.gpuctl.io/owner"] == "tester@box pid=1");
  CHECK(p["metadata"]["annotations"]["probe.gpuctl.io/node"] == "gpu-a");
  const json& spec = p["spec"];
  CHECK(spec["nodeName"] == "gpu-a");
  CHECK(spec["tolerations"] == json::array({{{"operator", "Exists"}}}));
  CHECK(spec["restartPolicy"] == "Never");
  CHECK(spec["runtimeClassName"] == "nvidia");
  CHECK(spec["automountServiceAccountToken"] == false);
  CHECK(spec["enableServiceLinks"] == false);
  CHECK(spec["terminationGracePeriodSeconds"] == 0);
  CHECK(spec["activeDeadlineSeconds"] == 40);  // 10 s deadline + 30 s for the kubelet
  CHECK(spec["imagePullSecrets"] == json::array({{{"name", "regcred"}}}));
  CHECK_FALSE(spec.contains("hostPID"));
  REQUIRE(spec["containers"].size() == 1);
  const json& c = spec["containers"][0];
  CHECK(c["name"] == "probe");
  CHECK(c["image"] == "busybox:1.36");
  CHECK(c["imagePullPolicy"] == "IfNotPresent");
  CHECK(c["command"] == json::array({"sh", "-c", std::string(gpu::probe_script())}));
  CHECK(c["env"] == json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                                 {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}},
                                 {{"name", "GPUCTL_PROBE_UNPRIVILEGED"}, {"value", "1"}}}));
  CHECK(c["resources"]["requests"]["cpu"] == "50m");
  CHECK(c["resources"]["limits"]["memory"] == "256Mi");
  CHECK(c["securityContext"]["allowPrivilegeEscalation"] == false);
  CHECK_FALSE(c["resources"]["limits"].contains("nvidia.com/gpu"));  // the probe takes no GPU from workloads

  SECTION("privileged: the host's PIDs, the kernel log read") {
    o.privileged = true;
    o.runtime_class = "";
    json q = ops::build_probe_pod("gpu-a", o);
    CHECK(q["spec"]["hostPID"] == true);
    CHECK(q["spec"]["containers"][0]["securityContext"] == json{{"privileged", true}});
    CHECK_FALSE(q["spec"].contains("runtimeClassName"));
    for (const auto& e : q["spec"]["containers"][0]["env"]) CHECK(e["name"] != "GPUCTL_PROBE_UNPRIVILEGED");
  }
  SECTION("a node name that is no label value is in the annotation only") {
    const std::string long_name = std::string(70, 'n') + ".example.com";
    json q = ops::build_probe_pod(long_name, o);
    CHECK_FALSE(q["metadata"]["labels"].contains("probe.gpuctl.io/node"));
    CHECK(q["metadata"]["annotations"]["probe.gpuctl.io/node"] == long_name);
    CHECK(q["spec"]["nodeName"] == long_name);
  }
}

TEST_CASE("probe_pods: a pod's status read into a stage, an outcome and why", "[probe_pods]") {
  using ops::ProbePodStage;
  auto v = ops::classify_probe_pod(pod("p", "Succeeded", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}));
  CHECK(v.stage == ProbePodStage::finished);
  CHECK(v.exit_code == 0);
  v = ops::classify_probe_pod(pod("p", "Running", {{"running", {{"startedAt", "2026-12-07T10:00:00Z"}}}}));
  CHECK(v.stage == ProbePodStage::running);
  v = ops::classify_probe_pod(waiting("ImagePullBackOff", "Back-off pulling image \"busybox:nope\""));
  CHECK(v.stage == ProbePodStage::stuck);
  CHECK(v.outcome == "image_pull_failed");
  CHECK_THAT(v.message, Catch::Contains("busybox:nope") && Catch::Contains("--probe-image"));
  v = ops::classify_probe_pod(waiting("CreateContainerError", "no such runtime handler"));
  CHECK(v.outcome == "probe_failed");
  v = ops::classify_probe_pod(waiting("ContainerCreating", ""));
  CHECK(v.stage == ProbePodStage::waiting);
  CHECK(v.message == "ContainerCreating");
  json rejected = pod("p", "Failed", nullptr);
  rejected["status"]["reason"] = "OutOfpods";
  rejected["status"]["message"] = "Node didn't have enough resource: pods, requested: 1, used: 110, capacity: 110";
  v = ops::classify_probe_pod(rejected);
  CHECK(v.stage == ProbePodStage::stuck);
  CHECK(v.outcome == "unschedulable");
  CHECK_THAT(v.message, Catch::Contains("full of pods") && Catch::Contains("capacity: 110"));
  v = ops::classify_probe_pod(pod("p", "Pending", nullptr));
  CHECK(v.stage == ProbePodStage::waiting);
}

TEST_CASE("probe_pods: flags read into options, with the environment's namespace and image", "[probe_pods]") {
  std::map<std::string, std::string> vars;
  cli::EnvLookup env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  cli::ProbePodFlags f;
  auto o = cli::validate_probe_pod_flags(f, 8, env);
  REQUIRE(o);
  CHECK(o->namespace_name == "gpuctl-system");
  CHECK(o->image == "busybox:1.36");
  CHECK(o->runtime_class == "nvidia");
  CHECK(o->deadline == 60s);
  CHECK(o->fanout == 8);
  CHECK(o->env.size() == 2);
  vars = {{"GPUCTL_PROBE_NAMESPACE", "ops"}, {"GPUCTL_PROBE_IMAGE", "registry.local/busybox:1.36"}};
  f.env = {"NVIDIA_VISIBLE_DEVICES=void", "EXTRA=a=b"};
  f.timeout = "90s";
  f.runtime_class = "";
  o = cli::validate_probe_pod_flags(f, 8, env);
  REQUIRE(o);
  CHECK(o->namespace_name == "ops");
  CHECK(o->image == "registry.local/busybox:1.36");
  CHECK(o->env ==
        std::vector<std::pair<std::string, std::string>>{{"NVIDIA_VISIBLE_DEVICES", "void"}, {"EXTRA", "a=b"}});
  CHECK(o->deadline == 90s);
  CHECK(o->runtime_class.empty());
  f.namespace_name = "flag-wins";
  CHECK(cli::validate_probe_pod_flags(f, 8, env)->namespace_name == "flag-wins");

  auto refused = [&](cli::ProbePodFlags bad, const std::string& words) {
    auto r = cli::validate_probe_pod_flags(bad, 8, env);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::Contains(words));
  };
  cli::ProbePodFlags bad;
  bad.env = {"NOVALUE"};
  refused(bad, "--probe-env \"NOVALUE\"");
  bad = {};
  bad.env = {"GPUCTL_PROBE_UNPRIVILEGED=0"};
  refused(bad, "--probe-privileged");
  bad = {};
  bad.timeout = "0s";
  refused(bad, "--probe-timeout");
  bad = {};
  bad.timeout = "soon";
  refused(bad, "--probe-timeout");
  bad = {};
  bad.namespace_name = "Not_A_Namespace";
  refused(bad, "--probe-namespace");
  bad = {};
  bad.image = "busy box";
  refused(bad, "--probe-image");
}

TEST_CASE("probe_pods: the script skips the kernel log and Fabric Manager in an unprivileged pod", "[probe_pods]") {
  if (!std::filesystem::exists("/bin/sh")) {
    WARN("no /bin/sh: skipped");
    return;
  }
  auto dir = std::filesystem::temp_directory_path() / cat("gpuctl-probe-pods-", std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "bin");
  // A journalctl that would answer: the probe must not ask it.
  for (const char* tool : {"journalctl", "dmesg"}) {
    std::ofstream(dir / "bin" / tool) << "#!/bin/sh\necho asked >>" << (dir / "asked").string() << "\necho x\n";
    std::filesystem::permissions(dir / "bin" / tool, std::filesystem::perms::owner_all);
  }
  std::ofstream(dir / "bin" / "nvidia-smi") << "#!/bin/sh\nexit 9\n";
  std::filesystem::permissions(dir / "bin" / "nvidia-smi", std::filesystem::perms::owner_all);
  std::ofstream(dir / "cmd") << gpu::probe_script();
  std::string cmd = cat("cd '", dir.string(), "' && GPUCTL_PROBE_UNPRIVILEGED=1 PATH='", (dir / "bin").string(),
                        ":/usr/bin:/bin' /bin/sh -c \"$(cat cmd)\" >out 2>err </dev/null");
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::string out = testing::read_file((dir / "out").string());
  CHECK_FALSE(std::filesystem::exists(dir / "asked"));
  gpu::ProbeTranscript t = gpu::parse_probe_transcript(out);
  CHECK(t.kernel_source == "skipped");
  CHECK(t.finished);
  for (const auto& s : t.steps) CHECK(s.name != "kernel");
  gpu::NodeGpuReport r = gpu::parse_probe_output(0, out, "");
  CHECK(r.facts.kernel_log_source == "skipped");
  CHECK_THAT(r.facts.kernel_log_error, Catch::Contains("--probe-privileged"));
  CHECK(r.kind == gpu::NvsmiErrorKind::driver_not_loaded);
  std::filesystem::remove_all(dir);
}
