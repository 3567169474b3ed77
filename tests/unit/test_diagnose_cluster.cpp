// diagnose's device plugin, job, taint, quota, version and monitoring checks: each fires on its
// case (device plugin logs are the fixtures' real ones) and is silent on a healthy cluster.
#include <catch2/catch.hpp>

#include "diagnose_builders.hpp"

using namespace gpuctl::testing::dx;

namespace {

// The GPU Operator's device plugin DaemonSet (name and labels as the operator writes them).
json plugin_daemon_set() {
  return {{"metadata",
           {{"name", "nvidia-device-plugin-daemonset"},
            {"namespace", "gpu-operator"},
            {"labels", {{"app", "nvidia-device-plugin-daemonset"}}}}},
          {"spec",
           {{"selector", {{"matchLabels", {{"app", "nvidia-device-plugin-daemonset"}}}}},
            {"template",
             {{"spec",
               {{"nodeSelector", {{"nvidia.com/gpu.present", "true"}}},
                {"containers", json::array({{{"name", "nvidia-device-plugin"}}})}}}}}}},
          {"status", {{"desiredNumberScheduled", 2}, {"numberReady", 2}, {"updatedNumberScheduled", 2}}}};
}

json plugin_pod(const std::string& node, const std::string& image = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0") {
  json p = owned(pod("gpu-operator", "nvidia-device-plugin-daemonset-" + node, node, 0), "DaemonSet",
                 "nvidia-device-plugin-daemonset");
  p["spec"]["containers"][0]["image"] = image;
  p["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  p["status"]["containerStatuses"] =
      json::array({{{"name", "main"}, {"restartCount", 0}, {"state", {{"running", json::object()}}}}});
  return p;
}

}  // namespace

TEST_CASE("device-plugin-unhealthy: a pod on every GPU node, Ready, steady, one version", "[diagnose][plugin]") {
  json n1 = gpu_node("gpu-1", 4), n2 = gpu_node("gpu-2", 4);
  auto healthy = snapshot({{Source::nodes, {n1, n2}},
                           {Source::daemon_sets, {plugin_daemon_set()}},
                           {Source::plugin_pods, {plugin_pod("gpu-1"), plugin_pod("gpu-2")}}});
  CHECK(d::check_device_plugin_unhealthy(healthy).empty());

  SECTION("a GPU node the DaemonSet's selector leaves out") {
    n2["metadata"]["labels"].erase("nvidia.com/gpu.present");
    auto f = d::check_device_plugin_unhealthy(snapshot({{Source::nodes, {n1, n2}},
                                                        {Source::daemon_sets, {plugin_daemon_set()}},
                                                        {Source::plugin_pods, {plugin_pod("gpu-1")}}}));
    REQUIRE(f.size() == 1);
    CHECK(f[0].severity == Severity::critical);
    CHECK(f[0].node == "gpu-2");
    CHECK(contains(f[0].summary,
                   "gpu-2 has no device plugin pod: gpu-operator/nvidia-device-plugin-daemonset's placement "
                   "(nvidia.com/gpu.present=true) does not match the node"));
  }
  SECTION("a crash-looping pod, and two versions") {
    json sick = plugin_pod("gpu-2", "nvcr.io/nvidia/k8s-device-plugin:v0.14.0");
    sick["status"]["conditions"][0]["status"] = "False";
    sick["status"]["containerStatuses"][0] = {{"name", "main"},
                                              {"restartCount", 6},
                                              {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
                                              {"lastState", {{"terminated", {{"exitCode", 1}, {"reason", "Error"}}}}}};
    auto f = d::check_device_plugin_unhealthy(snapshot({{Source::nodes, {n1, n2}},
                                                        {Source::daemon_sets, {plugin_daemon_set()}},
                                                        {Source::plugin_pods, {plugin_pod("gpu-1"), sick}}}));
    REQUIRE(f.size() == 2);
    CHECK(f[0].node == "gpu-2");
    CHECK(contains(f[0].summary, "is CrashLoopBackOff (restarted 6 times, last exit 1 (Error))"));
    CHECK(contains(f[1].summary, "runs 2 versions: nvcr.io/nvidia/k8s-device-plugin:v0.14.0 on 1 node(s) (gpu-2)"));
  }
  SECTION("one plugin DaemonSet per pool: a node is missing its plugin only when none runs there") {
    json a = plugin_daemon_set(), b = plugin_daemon_set();
    b["metadata"]["name"] = "nvidia-device-plugin-h100";
    json on_2 = owned(plugin_pod("gpu-2"), "DaemonSet", "nvidia-device-plugin-h100");
    auto s = snapshot(
        {{Source::nodes, {n1, n2}}, {Source::daemon_sets, {a, b}}, {Source::plugin_pods, {plugin_pod("gpu-1"), on_2}}});
    CHECK(d::check_device_plugin_unhealthy(s).empty());
    s.lists[Source::plugin_pods] = {plugin_pod("gpu-1")};
    auto f = d::check_device_plugin_unhealthy(s);
    REQUIRE(f.size() == 1);
    CHECK(contains(f[0].summary,
                   "gpu-2 has no device plugin pod: the DaemonSet controller has not created "
                   "gpu-operator/nvidia-device-plugin-daemonset's pod; the DaemonSet controller has not "
                   "created gpu-operator/nvidia-device-plugin-h100's pod"));
  }
  SECTION("no plugin DaemonSet at all, unless --device-plugin-selector names it") {
    json renamed = plugin_daemon_set();
    renamed["metadata"]["name"] = "gpu-plugin";
    renamed["metadata"]["labels"] = {{"team", "infra"}};
    auto s = snapshot({{Source::nodes, {n1}}, {Source::daemon_sets, {renamed}}, {Source::plugin_pods, {}}});
    auto f = d::check_device_plugin_unhealthy(s);
    REQUIRE(f.size() == 1);
    CHECK(contains(f[0].summary, "no NVIDIA device plugin DaemonSet found"));
    s.settings.device_plugin_selector = "team=infra";
    auto g = d::check_device_plugin_unhealthy(s);
    REQUIRE(g.size() == 1);  // now found; its pod is missing on gpu-1
    CHECK(contains(g[0].summary,
                   "gpu-1 has no device plugin pod: the DaemonSet controller has not created "
                   "gpu-operator/gpu-plugin's pod"));
  }
}

TEST_CASE("device-plugin-log-errors classifies the fixtures' real plugin logs", "[diagnose][plugin]") {
  struct Case {
    const char* file;
    const char* cause;
  };
  for (const Case& c :
       {Case{"deviceplugin__register-context-deadline-exceeded__2018.log",
             "could not register with the kubelet (context deadline exceeded)"},
        Case{"deviceplugin__register-context-deadline-exceeded__2017.log",
             "could not register with the kubelet (context deadline exceeded)"},
        Case{"deviceplugin__failed-to-initialize-nvml-could-not-load.log", "NVML could not be loaded"},
        Case{"deviceplugin__v0.17-incompatible-strategy-auto.log", "no usable device discovery strategy"},
        Case{"deviceplugin__amd-klog-registration-failed-context-deadline.log",
             "could not register with the kubelet (context deadline exceeded)"}}) {
    INFO(c.file);
    std::string text = fixture(std::string("k8s-errors/") + c.file);
    json log = {{"namespace", "gpu-operator"},
                {"pod", "nvidia-device-plugin-daemonset-x"},
                {"container", "nvidia-device-plugin"},
                {"node", "gpu-3"},
                {"previous", false},
                {"text", text}};
    auto f = d::check_device_plugin_log_errors(snapshot({{Source::plugin_logs, {log}}}));
    REQUIRE(!f.empty());
    CHECK(f[0].node == "gpu-3");
    bool named = false;
    for (const auto& finding : f) named = named || contains(finding.summary, c.cause);
    CHECK(named);
    CHECK(contains(text, f[0].evidence[0].text));  // quoted verbatim
  }
  // A healthy start-up (k3s's plugin serving its socket) and a healthy v0.14 CRI log: nothing.
  for (const char* file :
       {"deviceplugin__k3s-starting-grpc-server.log", "deviceplugin__v0.14-containerd-cri-log-format.log"}) {
    json log = {{"namespace", "kube-system"},
                {"pod", "p"},
                {"node", "gpu-3"},
                {"text", fixture(std::string("k8s-errors/") + file)}};
    INFO(file);
    CHECK(d::check_device_plugin_log_errors(snapshot({{Source::plugin_logs, {log}}})).empty());
  }
  // With timestamps=true each line starts with the kubelet's RFC 3339 time: it becomes the evidence's time.
  json stamped = {{"namespace", "k"},
                  {"pod", "p"},
                  {"node", "gpu-3"},
                  {"text",
                   "2026-12-06T11:59:00.123456789Z 2018/11/27 03:44:12 Could not register device plugin: context "
                   "deadline exceeded\n"}};
  auto f = d::check_device_plugin_log_errors(snapshot({{Source::plugin_logs, {stamped}}}));
  REQUIRE(f.size() == 1);
  CHECK(f[0].evidence[0].time == "2026-12-06T11:59:00.123456789Z");
  CHECK(f[0].evidence[0].text == "2018/11/27 03:44:12 Could not register device plugin: context deadline exceeded");
}

TEST_CASE("gpu-job-failed names the GPU cause from termination messages and logs; jobs-not-cleaned counts old ones",
          "[diagnose][jobs]") {
  json job = {{"metadata", {{"name", "train"}, {"namespace", "ml"}}},
              {"spec",
               {{"template",
                 {{"spec",
                   {{"containers",
                     json::array({{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}}}}},
              {"status",
               {{"conditions", json::array({{{"type", "Failed"},
                                             {"status", "True"},
                                             {"reason", "BackoffLimitExceeded"},
                                             {"message", "Job has reached the specified backoff limit"},
                                             {"lastTransitionTime", "2026-12-06T11:30:00Z"}}})}}}};
  json failed = owned(pod("ml", "train-abc", "gpu-1", 1, "Failed"), "Job", "train");
  failed["status"]["containerStatuses"] = json::array(
      {{{"name", "m"},
        {"state",
         {{"terminated",
           {{"exitCode", 1}, {"reason", "Error"}, {"message", "nvml error: driver/library version mismatch"}}}}}}});
  auto f = d::check_gpu_job_failed(snapshot({{Source::jobs, {job}}, {Source::pods, {failed}}}));
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0].summary,
                 "job ml/train failed (BackoffLimitExceeded): the NVIDIA kernel module and user-space library differ"));
  CHECK(f[0].evidence[1].text == "exitCode=1 reason=Error: nvml error: driver/library version mismatch");

  // Only the log says why: the seed's silent failure.
  failed["status"]["containerStatuses"][0]["state"]["terminated"].erase("message");
  json log = {{"namespace", "ml"},
              {"pod", "train-abc"},
              {"job", "train"},
              {"text", "loading model\nRuntimeError: CUDA driver version is insufficient for CUDA runtime version\n"}};
  auto g =
      d::check_gpu_job_failed(snapshot({{Source::jobs, {job}}, {Source::pods, {failed}}, {Source::job_logs, {log}}}));
  REQUIRE(g.size() == 1);
  CHECK(contains(g[0].summary, "the node's driver is older than the container's CUDA runtime needs"));

  // Failed before the window: not reported. Finished long ago without a TTL: jobs-not-cleaned.
  job["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-20T10:00:00Z";
  CHECK(d::check_gpu_job_failed(snapshot({{Source::jobs, {job}}})).empty());
  auto old = d::check_jobs_not_cleaned(snapshot({{Source::jobs, {job}}}));
  REQUIRE(old.size() == 1);
  CHECK(old[0].severity == Severity::info);
  INFO(old[0].summary);
  CHECK(contains(old[0].summary, "1 finished GPU Job(s) in ml are older than 24h and have no ttlSecondsAfterFinished"));
  CHECK(old[0].remedy[1] == "gpuctl jobs clean -n ml --older-than 24h");
  job["spec"]["ttlSecondsAfterFinished"] = 3600;
  CHECK(d::check_jobs_not_cleaned(snapshot({{Source::jobs, {job}}})).empty());
}

TEST_CASE("gpu-node-untainted and gpu-taint-untolerated judge the pools' taints", "[diagnose][policy]") {
  json taint = {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}};
  json a = gpu_node("gpu-a", 4), b = gpu_node("gpu-b", 4), c = gpu_node("gpu-c", 4);
  a["spec"]["taints"] = json::array({taint});
  b["spec"]["taints"] = json::array({taint});
  json tolerating = pod("ml", "t", "gpu-a", 1);
  tolerating["spec"]["tolerations"] = json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}});
  auto s = snapshot(
      {{Source::nodes, {a, b, c}}, {Source::pods, {tolerating, pod("web", "nginx", "gpu-c", 0)}}, {Source::jobs, {}}});
  auto f = d::check_gpu_node_untainted(s);
  REQUIRE(f.size() == 2);
  CHECK(contains(f[0].summary,
                 "gpu-c has no NoSchedule taint while 2 of the 3 NVIDIA-A16-4Q nodes have "
                 "nvidia.com/gpu=present:NoSchedule"));
  CHECK(f[0].remedy[0] == "gpuctl taint gpu-c nvidia.com/gpu=present:NoSchedule");
  CHECK(contains(f[1].summary, "gpu-c runs 1 pod(s) that use no GPU (web: 1)"));
  CHECK(d::check_gpu_taint_untolerated(s).empty());

  // One node of two tainted for maintenance (the sandbox's demo-a10g-1) is that node's state, not a
  // pool's taint: neither check speaks of it.
  json m1 = gpu_node("m-1", 4), m2 = gpu_node("m-2", 4);
  m1["spec"]["taints"] = json::array({{{"key", "maintenance"}, {"value", "true"}, {"effect", "NoSchedule"}}});
  auto maintenance = snapshot({{Source::nodes, {m1, m2}}, {Source::pods, {}}, {Source::jobs, {}}});
  CHECK(d::check_gpu_node_untainted(maintenance).empty());
  CHECK(d::check_gpu_taint_untolerated(maintenance).empty());

  s.lists[Source::pods] = {pod("ml", "no-toleration", "", 1, "Pending")};
  auto g = d::check_gpu_taint_untolerated(s);
  REQUIRE(g.size() == 1);
  CHECK(contains(g[0].summary,
                 "no GPU workload tolerates nvidia.com/gpu=present:NoSchedule, the taint of 2 GPU node(s)"));
}

TEST_CASE("quota checks reuse gpuctl quota's view", "[diagnose][policy]") {
  json never = {{"metadata", {{"name", "gpus"}, {"namespace", "team-a"}}},
                {"spec", {{"hard", {{"nvidia.com/gpu", "4"}}}}}};
  auto f = d::check_quota_not_enforced(snapshot({{Source::quotas, {never}}}));
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0].summary, "nvidia.com/gpu"));
  CHECK(f[0].remedy[0] == "gpuctl quota fix team-a");

  json full = {
      {"metadata", {{"name", "gpu"}, {"namespace", "team-b"}}},
      {"spec", {{"hard", {{"requests.nvidia.com/gpu", "8"}}}}},
      {"status", {{"hard", {{"requests.nvidia.com/gpu", "8"}}}, {"used", {{"requests.nvidia.com/gpu", "8"}}}}}};
  auto held =
      event("Job", "team-b", "train", "FailedCreate",
            "Error creating: pods \"train-x\" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=4, "
            "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8",
            "job-controller");
  auto s = snapshot(
      {{Source::quotas, {full}}, {Source::pods, {pod("team-b", "run", "gpu-1", 8)}}, {Source::events, {held}}});
  auto g = d::check_quota_exhausted(s);
  REQUIRE(g.size() == 1);
  CHECK(contains(g[0].summary,
                 "team-b is at its GPU limit (8 nvidia.com/gpu of 8 used) and holds back 1 workload(s): Job train"));
  s.lists[Source::events] = {};
  CHECK(d::check_quota_exhausted(s).empty());
  CHECK(d::check_quota_not_enforced(snapshot({{Source::quotas, {full}}})).empty());
}

TEST_CASE("kubelet-version-skew and monitoring-missing", "[diagnose][policy]") {
  json old = gpu_node("gpu-old", 4), same = gpu_node("gpu-1", 4);  // the fixture's kubelet: v1.31.6+rke2r1
  same["status"]["nodeInfo"]["kubeletVersion"] = "v1.36.3";
  json version = {{"major", "1"}, {"minor", "36"}, {"gitVersion", "v1.36.3"}};
  auto f = d::check_kubelet_version_skew(snapshot({{Source::nodes, {old, same}}, {Source::server_version, {version}}}));
  REQUIRE(f.size() == 2);
  CHECK(contains(f[0].summary, "gpu-old's kubelet v1.31.6+rke2r1 is 5 minor versions behind the API server v1.36.3"));
  CHECK(contains(f[1].summary, "the NVIDIA-A16-4Q pool runs 2 kubelet versions"));
  old["status"]["nodeInfo"]["kubeletVersion"] = "v1.36.3";
  CHECK(d::check_kubelet_version_skew(snapshot({{Source::nodes, {old, same}}, {Source::server_version, {version}}}))
            .empty());

  json apis = {{"kind", "APIGroupList"}, {"groups", json::array({{{"name", "apps"}}, {{"name", "batch"}}})}};
  auto m = d::check_monitoring_missing(
      snapshot({{Source::nodes, {same}}, {Source::api_groups, {apis}}, {Source::daemon_sets, {}}}));
  REQUIRE(m.size() == 2);
  CHECK(contains(m[0].summary, "no metrics API"));
  CHECK(contains(m[1].summary, "no DCGM exporter"));
  apis["groups"].push_back({{"name", "metrics.k8s.io"}});
  json dcgm = {{"metadata",
                {{"name", "nvidia-dcgm-exporter"},
                 {"namespace", "gpu-operator"},
                 {"labels", {{"app", "nvidia-dcgm-exporter"}}}}}};
  CHECK(d::check_monitoring_missing(
            snapshot({{Source::nodes, {same}}, {Source::api_groups, {apis}}, {Source::daemon_sets, {dcgm}}}))
            .empty());
}
