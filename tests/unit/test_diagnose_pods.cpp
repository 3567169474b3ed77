// diagnose's pod, scheduling and storage checks over the fixtures' real messages
// (tests/fixtures/k8s-errors): each fires on its case with the numbers and is silent when healthy.
#include <catch2/catch.hpp>

#include "diagnose_builders.hpp"

using namespace gpuctl::testing::dx;

TEST_CASE("gpu-allocation-failed reads the kubelet's admission refusals by node and names the cause",
          "[diagnose][pods]") {
  // The describe "Message:" line of a pod the kubelet refused, verbatim after the label.
  std::string lost =
      fixture_line("k8s-errors/admission__getpreferredallocation-nvml-gpu-is-lost__describe-message.txt");
  lost = lost.substr(lost.find("Pod Allocate"));
  json refused = pod("ml", "train-0", "gpu-3", 1, "Failed");
  refused["status"]["reason"] = "UnexpectedAdmissionError";
  refused["status"]["message"] = lost;
  auto s = snapshot({{Source::pods, {refused, pod("ml", "ok-0", "gpu-1", 1)}}, {Source::events, {}}});
  auto found = d::check_gpu_allocation_failed(s);
  REQUIRE(found.size() == 1);
  CHECK(found[0].node == "gpu-3");
  CHECK(contains(found[0].summary,
                 "gpu-3 refused 1 GPU pod(s) at admission: a GPU fell off the bus (NVML: GPU is lost)"));
  CHECK(found[0].evidence[0].text == lost);

  // Events as the kubelet writes them (HAMi's and upstream's wording of the same refusal).
  for (const char* file : {"k8s-errors/admission__requested-number-unavailable__hami.txt",
                           "k8s-errors/admission__requested-number-unavailable__title.txt"}) {
    auto e = event("Pod", "ml", "train-1", "UnexpectedAdmissionError", fixture_line(file), "kubelet", "gpu-4");
    auto f = d::check_gpu_allocation_failed(snapshot({{Source::pods, {}}, {Source::events, {e}}}));
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == "gpu-4");
    CHECK(contains(f[0].summary, "fewer healthy GPUs than the scheduler counted"));
  }
  auto eof = fixture_line("k8s-errors/admission__describe-event__rpc-unavailable-eof.txt");
  auto f = d::check_gpu_allocation_failed(snapshot(
      {{Source::events,
        {event("Pod", "ml", "x", "UnexpectedAdmissionError", eof.substr(eof.find("Allocate")), "kubelet", "gpu-5")}}}));
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0].summary, "the device plugin went away during Allocate"));
  // Healthy: nothing.
  CHECK(d::check_gpu_allocation_failed(snapshot({{Source::pods, {pod("ml", "ok", "gpu-1", 1)}}})).empty());
}

TEST_CASE("gpu-pods-pending gives each pending GPU pod its cause in numbers", "[diagnose][pods]") {
  json a16 = gpu_node("gpu-a", 4);
  std::string sched = fixture_line("k8s-errors/sched__insufficient-gpu__1-node__k8s-1.1x.txt");

  SECTION("larger than any node") {
    auto s = snapshot({{Source::nodes, {a16}}, {Source::pods, {unschedulable_pod("ml", "big", 16, sched)}}});
    auto f = d::check_gpu_pods_pending(s);
    REQUIRE(f.size() == 1);
    CHECK(f[0].severity == Severity::error);
    CHECK(contains(f[0].summary,
                   "asks for 16 nvidia.com/gpu per pod and the largest node offers 4 (gpu-a): it can "
                   "never run"));
    CHECK(f[0].evidence[0].text == "Unschedulable: " + sched);
  }
  SECTION("an untolerated taint, with the toleration that nearly matches") {
    a16["spec"]["taints"] = json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}});
    json p = unschedulable_pod("ml", "p", 1, sched);
    p["spec"]["tolerations"] =
        json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Equal"}, {"value", "true"}, {"effect", "NoSchedule"}}});
    auto f = d::check_gpu_pods_pending(snapshot({{Source::nodes, {a16}}, {Source::pods, {p}}}));
    REQUIRE(f.size() == 1);
    CHECK(contains(f[0].summary, "1 have taint nvidia.com/gpu=present:NoSchedule, which it does not tolerate"));
    CHECK(contains(f[0].summary, "its toleration for nvidia.com/gpu has value \"true\""));
  }
  SECTION("a node selector no node with GPUs matches, with the values that exist") {
    json p = unschedulable_pod("ml", "p", 1, sched);
    p["spec"]["nodeSelector"] = {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}};
    auto f = d::check_gpu_pods_pending(snapshot({{Source::nodes, {a16}}, {Source::pods, {p}}}));
    REQUIRE(f.size() == 1);
    CHECK(contains(f[0].summary, "1 do not match its placement (nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)"));
    CHECK(contains(f[0].summary, "those nodes have nvidia.com/gpu.product=NVIDIA-A16-4Q"));
  }
  SECTION("no GPUs free now is a warning with the free count") {
    auto s = snapshot({{Source::nodes, {a16}},
                       {Source::pods, {pod("ml", "running", "gpu-a", 3), unschedulable_pod("ml", "p", 2, sched)}}});
    auto f = d::check_gpu_pods_pending(s);
    REQUIRE(f.size() == 1);
    CHECK(f[0].severity == Severity::warning);
    CHECK(contains(f[0].summary, "no nvidia.com/gpu free now: the 1 node(s) it may use have 1 free in total"));
  }
  SECTION("a claim that is not bound") {
    json p =
        unschedulable_pod("ml", "p", 1, "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.");
    p["spec"]["volumes"] = json::array({{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "data"}}}}});
    json pvc = {{"metadata", {{"name", "data"}, {"namespace", "ml"}}}, {"status", {{"phase", "Pending"}}}};
    auto f = d::check_gpu_pods_pending(snapshot({{Source::nodes, {a16}}, {Source::pods, {p}}, {Source::pvcs, {pvc}}}));
    REQUIRE(f.size() == 1);
    CHECK(contains(f[0].summary, "it waits for claim data (Pending)"));
  }
  SECTION("a GPU Job whose pods quota refuses, from the Job controller's FailedCreate event") {
    auto e = event("Job", "team-a", "train", "FailedCreate",
                   "Error creating: pods \"train-x7k2p\" is forbidden: exceeded quota: gpu, requested: "
                   "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8",
                   "job-controller");
    auto f = d::check_gpu_pods_pending(snapshot({{Source::nodes, {a16}}, {Source::events, {e}}}));
    REQUIRE(f.size() == 1);
    CHECK(f[0].object.kind == "Job");
    CHECK(contains(f[0].summary, "job team-a/train cannot create its pods: quota \"gpu\""));
    // A CPU quota refusal is not a GPU finding (the fixture's real message).
    auto cpu = event("Job", "team-a", "cpu", "FailedCreate",
                     fixture_line("k8s-errors/quota__kubectl-apply-exceeded-quota.txt"), "job-controller");
    CHECK(d::check_gpu_pods_pending(snapshot({{Source::nodes, {a16}}, {Source::events, {cpu}}})).empty());
  }
  SECTION("scheduled and CPU pods are silent") {
    auto s = snapshot({{Source::nodes, {a16}},
                       {Source::pods, {pod("ml", "running", "gpu-a", 1), unschedulable_pod("ml", "cpu", 0, sched)}}});
    CHECK(d::check_gpu_pods_pending(s).empty());
  }
}

TEST_CASE("oom-killed and restart-storm read container statuses", "[diagnose][pods]") {
  json p = pod("ml", "train-0", "gpu-a", 1);
  p["spec"]["containers"][0]["resources"]["limits"]["memory"] = "16Gi";
  p["status"]["containerStatuses"] = json::array(
      {{{"name", "main"},
        {"restartCount", 7},
        {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off 5m0s restarting failed"}}}}},
        {"lastState",
         {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}, {"finishedAt", "2026-12-06T11:57:00Z"}}}}}}});
  auto s = snapshot({{Source::pods, {p}}});
  auto oom = d::check_oom_killed(s);
  REQUIRE(oom.size() == 1);
  CHECK(contains(oom[0].summary, "ml/train-0 container main was OOMKilled at its memory limit 16Gi 3m ago"));
  CHECK(oom[0].node == "gpu-a");
  auto storm = d::check_restart_storm(s);
  REQUIRE(storm.size() == 1);
  CHECK(contains(storm[0].summary, "restarted 7 times, now in CrashLoopBackOff; last exit 137 (OOMKilled) 3m ago"));

  s.settings.restart_threshold = 8;
  CHECK(d::check_restart_storm(s).empty());
  CHECK(d::check_oom_killed(snapshot({{Source::pods, {pod("ml", "fine", "gpu-a", 1)}}})).empty());
}

TEST_CASE("pvc-unbound says which of class, size and access mode keeps every volume away", "[diagnose][storage]") {
  json pvc = {{"metadata", {{"name", "data"}, {"namespace", "ml"}, {"creationTimestamp", "2026-12-06T11:00:00Z"}}},
              {"spec",
               {{"storageClassName", "manual"},
                {"accessModes", {"ReadWriteMany"}},
                {"resources", {{"requests", {{"storage", "100Gi"}}}}}}},
              {"status", {{"phase", "Pending"}}}};
  auto pv = [](const std::string& name, const std::string& cls, const std::string& size, const std::string& mode) {
    return json{{"metadata", {{"name", name}}},
                {"spec", {{"storageClassName", cls}, {"capacity", {{"storage", size}}}, {"accessModes", {mode}}}},
                {"status", {{"phase", "Available"}}}};
  };
  json waiting = pod("ml", "train-0", "", 1, "Pending");
  waiting["spec"]["volumes"] = json::array({{{"name", "d"}, {"persistentVolumeClaim", {{"claimName", "data"}}}}});
  auto s = snapshot({{Source::pvcs, {pvc}},
                     {Source::pvs,
                      {pv("small", "manual", "50Gi", "ReadWriteMany"), pv("fast", "ssd", "1Ti", "ReadWriteOnce"),
                       pv("rwo", "manual", "200Gi", "ReadWriteOnce")}},
                     {Source::storage_classes, {}},
                     {Source::pods, {waiting}}});
  auto f = d::check_pvc_unbound(s);
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0].summary,
                 "claim ml/data is Pending: no PersistentVolume matches: of 3 Available, 1 have another "
                 "class than \"manual\", 1 are too small (at most 50Gi < 100Gi)"));
  CHECK(contains(f[0].summary, "1 lack access mode ReadWriteMany"));
  CHECK(contains(f[0].summary, "1 pod(s) wait on it: ml/train-0"));

  // WaitForFirstConsumer binds when a pod is scheduled: not a finding.
  pvc["spec"]["storageClassName"] = "local";
  json wffc = {{"metadata", {{"name", "local"}}},
               {"provisioner", "kubernetes.io/no-provisioner"},
               {"volumeBindingMode", "WaitForFirstConsumer"}};
  CHECK(d::check_pvc_unbound(snapshot({{Source::pvcs, {pvc}}, {Source::storage_classes, {wffc}}})).empty());

  // A parallel GPU Job on a ReadWriteOnce claim: a warning.
  json bound = pvc;
  bound["spec"]["accessModes"] = {"ReadWriteOnce"};
  bound["status"]["phase"] = "Bound";
  json job = {
      {"metadata", {{"name", "ddp"}, {"namespace", "ml"}}},
      {"spec",
       {{"parallelism", 4},
        {"template",
         {{"spec",
           {{"containers", json::array({{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}})},
            {"volumes", json::array({{{"name", "d"}, {"persistentVolumeClaim", {{"claimName", "data"}}}}})}}}}}}}};
  auto rwo = d::check_pvc_unbound(snapshot({{Source::pvcs, {bound}}, {Source::jobs, {job}}}));
  REQUIRE(rwo.size() == 1);
  CHECK(rwo[0].severity == Severity::warning);
  CHECK(contains(rwo[0].summary, "job ml/ddp runs 4 GPU pods at once on claim data, which is ReadWriteOnce"));
}

TEST_CASE("volume-mount-failed reads the kubelet's FailedMount messages into server, path and cause",
          "[diagnose][storage]") {
  json p = pod("ml", "train-0", "gpu-a", 1, "Pending");
  std::string missing = fixture("k8s-errors/mount__nfs-no-such-file-or-directory__systemd-run__one-line.txt");
  missing = missing.substr(0, missing.find_last_not_of('\n') + 1);
  auto f = d::check_volume_mount_failed(
      snapshot({{Source::pods, {p}},
                {Source::events, {event("Pod", "ml", "train-0", "FailedMount", missing, "kubelet", "gpu-a", 12)}}}));
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0].summary,
                 "1 GPU pod(s) stuck in ContainerCreating on gpu-a: the NFS export path does not exist on "
                 "the server (192.168.137.121:/nfs/nfs-data/nacos-nacos-datadir-nacos-0-pvc-"));
  CHECK(f[0].evidence[0].source == "event FailedMount from kubelet on gpu-a (x12)");
  CHECK(f[0].evidence[0].text == missing);

  std::string helper = fixture("k8s-errors/mount__e2e-log__nfs-wrong-fs-type.txt");
  helper = helper.substr(helper.find("MountVolume"));
  auto g = d::check_volume_mount_failed(
      snapshot({{Source::pods, {p}}, {Source::events, {event("Pod", "ml", "train-0", "FailedMount", helper)}}}));
  REQUIRE(g.size() == 1);
  CHECK(contains(g[0].summary, "the node has no NFS client (mount.nfs helper missing) (10.244.1.117:/exports); install nfs-common"));

  std::string timeout = fixture_line("k8s-errors/mount__nfs-bad-option-and-timed-out-waiting.txt", 5);
  timeout = timeout.substr(timeout.find("Unable to attach"));
  auto t = d::check_volume_mount_failed(
      snapshot({{Source::pods, {p}}, {Source::events, {event("Pod", "ml", "train-0", "FailedMount", timeout)}}}));
  REQUIRE(t.size() == 1);
  CHECK(contains(t[0].summary, "the volume was not attached or mounted in time"));
  // A CPU pod's mount failure is not diagnose's business; no events, no finding.
  CHECK(d::check_volume_mount_failed(snapshot({{Source::pods, {pod("ml", "cpu", "gpu-a", 0)}},
                                               {Source::events, {event("Pod", "ml", "cpu", "FailedMount", missing)}}}))
            .empty());
  CHECK(d::check_volume_mount_failed(snapshot({{Source::pods, {p}}})).empty());
}
