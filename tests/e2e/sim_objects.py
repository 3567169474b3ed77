"""Objects as the real components write them, for e2e suites (harness.py posts them).

Pure builders, no I/O: a core/v1 Event as the kubelet's legacy recorder writes it, an
events.k8s.io/v1 Event as kube-scheduler writes it, and the NVIDIA device plugin's DaemonSet as its
Helm chart, its static manifest or the GPU Operator deploys it.
"""
import datetime
import socket
import time

# -- Events --------------------------------------------------------------------------------------


def _time(t, micro=False):
    """None (now), epoch seconds, a datetime or an RFC 3339 string -> RFC 3339 (UTC)."""
    if isinstance(t, str):
        return t
    if t is None:
        t = time.time()
    if isinstance(t, datetime.datetime):
        t = t.timestamp()
    dt = datetime.datetime.fromtimestamp(float(t), datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _epoch(t):
    if isinstance(t, str):
        return datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
    if isinstance(t, datetime.datetime):
        return t.timestamp()
    return time.time() if t is None else float(t)


def object_reference(obj, field_path=None):
    """An ObjectReference from a whole object (kubectl get -o json) or a reference dict."""
    meta = obj.get("metadata")
    if meta is not None:
        kind = obj.get("kind", "Pod")
        ref = {"apiVersion": obj.get("apiVersion", "v1"), "kind": kind, "name": meta["name"]}
        if meta.get("namespace"):
            ref["namespace"] = meta["namespace"]
        # The kubelet refers to its Node by name: uid is the node's name (kubelet.go nodeRef).
        ref["uid"] = meta["name"] if kind == "Node" else meta.get("uid", "")
        if meta.get("resourceVersion") and kind != "Node":
            ref["resourceVersion"] = meta["resourceVersion"]
    else:
        ref = {k: v for k, v in obj.items() if v is not None}
        ref.setdefault("apiVersion", "v1")
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def event_name(ref, t):
    """client-go's GenerateEventName: <object name>.<unix nanoseconds in hex>."""
    return "%s.%x" % (ref["name"], int(_epoch(t) * 1e9))


def legacy_event(namespace, involved, reason, message, type="Warning", component="kubelet", host=None,
                 count=1, first=None, last=None, field_path=None):
    """core/v1 Event as client-go's tools/record writes it (kubelet, kube-controller-manager's
    controllers): source {component, host}, reportingComponent = component, reportingInstance =
    host, firstTimestamp/lastTimestamp/count, no eventTime."""
    ref = object_reference(involved, field_path)
    first_t = _epoch(first)
    last_t = _epoch(last) if last is not None else (first_t if count == 1 else time.time())
    source = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(ref, first_t), "namespace": namespace},   # named when first seen
        "involvedObject": ref, "reason": reason, "message": message, "type": type,
        "source": source, "firstTimestamp": _time(first_t), "lastTimestamp": _time(last_t), "count": int(count),
        "reportingComponent": component, "reportingInstance": host or "",
    }


def scheduler_event(namespace, regarding, reason, message, type="Warning", controller="default-scheduler",
                    host=None, count=1, first=None, last=None, action="Scheduling"):
    """events.k8s.io/v1 Event as kube-scheduler writes it (tools/events): reportingController
    default-scheduler, reportingInstance default-scheduler-<hostname>, action Scheduling, eventTime;
    repeats as a series. In core/v1 it reads with source {} and no first/lastTimestamp."""
    ref = object_reference(regarding)
    first_t = _epoch(first)
    ev = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": event_name(ref, first_t), "namespace": namespace},
        "regarding": ref, "reason": reason, "note": message, "type": type, "action": action,
        "eventTime": _time(first_t, micro=True), "reportingController": controller,
        "reportingInstance": "%s-%s" % (controller, host or socket.gethostname()),
    }
    if count > 1:
        ev["series"] = {"count": int(count), "lastObservedTime": _time(_epoch(last), micro=True)}
    return ev


# -- the NVIDIA device plugin's DaemonSet --------------------------------------------------------

DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# The chart's default affinity (values.yaml): NFD's NVIDIA PCI label, Tegra's CPU vendor, or GFD's
# nvidia.com/gpu.present=true.
HELM_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}]},
    {"matchExpressions": [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In",
                           "values": ["NVIDIA"]}]},
    {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]},
]}}}
PLUGIN_DIR = {"name": "kubelet-device-plugins-dir",
              "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}}
PLUGIN_MOUNT = {"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"}


def device_plugin_daemonset(namespace, name=None, flavor="helm", node_selector=None, image=DEVICE_PLUGIN_IMAGE,
                            labels=None, release="nvdp", tolerations=None):
    """The NVIDIA device plugin's DaemonSet with the names, labels and tolerations it really has:

    helm          (default) NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin
                  (templates/daemonset-device-plugin.yml, _helpers.tpl, values.yaml): DaemonSet
                  <release>-nvidia-device-plugin (helm install nvdp ... -> nvdp-nvidia-device-plugin),
                  labels app.kubernetes.io/name=nvidia-device-plugin, app.kubernetes.io/instance=<release>
                  (+ helm.sh/chart, app.kubernetes.io/version, managed-by Helm on the DaemonSet),
                  container nvidia-device-plugin-ctr, tolerations CriticalAddonsOnly and
                  nvidia.com/gpu:NoSchedule, the chart's node affinity, system-node-critical
    static        deployments/static/nvidia-device-plugin.yml: nvidia-device-plugin-daemonset
                  (kube-system), label name=nvidia-device-plugin-ds, container nvidia-device-plugin-ctr
    gpu-operator  NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml:
                  nvidia-device-plugin-daemonset (namespace gpu-operator), label
                  app=nvidia-device-plugin-daemonset, nodeSelector
                  nvidia.com/gpu.deploy.device-plugin=true, init containers toolkit-validation and
                  config-manager-init, containers nvidia-device-plugin and config-manager

    node_selector is added to the pod's nodeSelector (a suite keeps its pods on its own nodes with
    {"e2e.gpuctl.dev/fleet": NAME}); labels are added to the pod template's (and the DaemonSet's).
    No serviceAccountName (the chart's account would have to exist first)."""
    spec = {"priorityClassName": "system-node-critical", "tolerations": [dict(GPU_TOLERATION)],
            "volumes": [PLUGIN_DIR]}
    ds_labels = {}
    if flavor == "helm":
        name = name or "%s-nvidia-device-plugin" % release
        pod_labels = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": release}
        ds_labels = {"helm.sh/chart": "nvidia-device-plugin-0.17.0", "app.kubernetes.io/version": "0.17.0",
                     "app.kubernetes.io/managed-by": "Helm"}
        spec["tolerations"] = [{"key": "CriticalAddonsOnly", "operator": "Exists"}, dict(GPU_TOLERATION)]
        spec["affinity"] = HELM_AFFINITY
        spec["containers"] = [{"name": "nvidia-device-plugin-ctr", "image": image, "imagePullPolicy": "IfNotPresent",
                               "command": ["nvidia-device-plugin"],
                               "env": [{"name": "MPS_ROOT", "value": "/run/nvidia/mps"},
                                       {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                       {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
                               "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                               "volumeMounts": [PLUGIN_MOUNT]}]
    elif flavor == "static":
        name = name or "nvidia-device-plugin-daemonset"
        pod_labels = {"name": "nvidia-device-plugin-ds"}
        spec["containers"] = [{"name": "nvidia-device-plugin-ctr", "image": image,
                               "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                               "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                               "volumeMounts": [PLUGIN_MOUNT]}]
    elif flavor == "gpu-operator":
        name = name or "nvidia-device-plugin-daemonset"
        pod_labels = {"app": "nvidia-device-plugin-daemonset"}
        ds_labels = {"app": "nvidia-device-plugin-daemonset"}
        spec["nodeSelector"] = {"nvidia.com/gpu.deploy.device-plugin": "true"}
        config = [{"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
                  {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
                  {"name": "CONFIG_FILE_DST", "value": "/config/config.yaml"}]
        spec["initContainers"] = [
            {"name": "toolkit-validation", "image": image, "command": ["sh", "-c"],
             "args": ["until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container "
                      "stack to be setup; sleep 5; done"], "securityContext": {"privileged": True}},
            {"name": "config-manager-init", "image": image, "command": ["config-manager"],
             "env": [{"name": "ONESHOT", "value": "true"}] + config}]
        spec["containers"] = [
            {"name": "nvidia-device-plugin", "image": image, "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
             "securityContext": {"privileged": True},
             "env": [{"name": "PASS_DEVICE_SPECS", "value": "true"}, {"name": "FAIL_ON_INIT_ERROR", "value": "true"},
                     {"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}, {"name": "DEVICE_ID_STRATEGY", "value": "uuid"},
                     {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                     {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}],
             "volumeMounts": [PLUGIN_MOUNT]},
            {"name": "config-manager", "image": image, "command": ["config-manager"],
             "securityContext": {"privileged": True},
             "env": [{"name": "ONESHOT", "value": "false"}] + config}]
    else:
        raise ValueError("flavor must be helm, static or gpu-operator, not %r" % flavor)
    if tolerations is not None:
        spec["tolerations"] = list(tolerations)
    if node_selector:
        spec["nodeSelector"] = dict(spec.get("nodeSelector") or {}, **node_selector)
    pod_labels = dict(pod_labels, **(labels or {}))
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(ds_labels, **pod_labels)},
        "spec": {"selector": {"matchLabels": {k: v for k, v in pod_labels.items() if k not in (labels or {})}},
                 "updateStrategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": pod_labels}, "spec": spec}},
    }
