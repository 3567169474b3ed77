"""What the `gpuctl diagnose` suites share on the real control plane: the diagnose-e2e fleet and,
in namespace dx-system, NVIDIA's device plugin (the Helm chart's DaemonSet, kept to the fleet's
nodes) and a DCGM exporter, as a GPU cluster runs them. The plugin's pod on dx-noplugin-0 crash-
loops with the real "could not load NVML" log (tests/fixtures/k8s-errors); the one on dx-ok-0 logs
a healthy start. Created once per cluster (idempotent), left for the cluster's `down`."""
import harness as h

FLEET = "diagnose-e2e"
SELECTOR = "e2e.gpuctl.dev/fleet=" + FLEET
NS = "dx-system"
PLUGIN = "nvdp-nvidia-device-plugin"
DCGM = "nvidia-dcgm-exporter"
ON_FLEET = {"e2e.gpuctl.dev/fleet": FLEET}


def dcgm_exporter():
    """The GPU Operator's DCGM exporter DaemonSet (name and app label as the operator writes them)."""
    labels = {"app": DCGM}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": DCGM, "namespace": NS, "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"nodeSelector": dict(ON_FLEET, **{"nvidia.com/gpu.present": "true"}),
                                           "tolerations": [h.GPU_TAINT],
                                           "containers": [{"name": "nvidia-dcgm-exporter",
                                                           "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"}]}}}}


def ensure():
    """The fleet, the plugin and the exporter; returns once the plugin's pods that matter run."""
    h.apply_fleet_file(FLEET)
    if h.kubectl("get", "namespace", NS, check=False, timeout=30).rc != 0:
        h.kubectl("create", "namespace", NS)
    if h.kubectl("get", "daemonset", PLUGIN, "-n", NS, check=False).rc != 0:
        h.create([h.device_plugin_daemonset(NS, node_selector=ON_FLEET), dcgm_exporter()])
    ok = h.daemonset_pod(NS, PLUGIN, "dx-ok-0")
    h.set_pod_logs(NS, ok["metadata"]["name"], {None: h.fixture("k8s-errors/deviceplugin__k3s-starting-grpc-server.log")},
                   stream="stderr")
    sick = h.daemonset_pod(NS, PLUGIN, "dx-noplugin-0")
    name = sick["metadata"]["name"]
    labels = sick["metadata"].get("labels") or {}
    if labels.get(h.OUTCOME_LABEL) != "crashloop":
        nvml = h.fixture("k8s-errors/deviceplugin__failed-to-initialize-nvml-could-not-load.log")
        h.set_pod_logs(NS, name, {None: nvml}, previous={None: nvml}, stream="stderr")
        h.set_pod_outcome(NS, name, "crashloop", restarts=6, exit_code=1)
    return {"ok": ok["metadata"]["name"], "crashing": name}
