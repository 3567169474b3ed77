"""gpuctl submit -f with a JobSet and a Kubeflow PyTorchJob against the real API server: while the
cluster does not serve their APIs the submit is one line naming the API and what to install, exit 6;
with the upstream CRDs installed (tests/fixtures/workloads/crds, see SOURCES.md) and served by
discovery, the upstream example manifests are created, read back with kubectl and carry gpuctl's
defaults (GPU request = limit, the pool's toleration, --gpu-type's node selector, restartPolicy,
podFailurePolicy, ttl, runPolicy). No JobSet controller or training operator runs here, so nothing
reconciles the objects: no Job or pod is ever made from them, which the suite checks too. The CRDs
are deleted again at the end (also when a test fails), so the cluster is as before.

Own nodes (fleets/submit-workloads.yaml, prefix submitwl-) and namespaces (submitwl-*)."""
import json
import os

import yaml

import harness as h

FLEET = "submit-workloads"
GPU_TYPE = "RTX-4000-SFF"
PRODUCT_LABEL = "NVIDIA-RTX-4000-SFF-Ada-Generation"
POOL_TAINT_KEY = "example.com/gpu-pool"

# name -> (group, version, plural, fixture)
CRDS = {
    "jobsets.jobset.x-k8s.io": ("jobset.x-k8s.io", "v1alpha2", "jobsets", "workloads/crds/jobset.x-k8s.io_jobsets.yaml"),
    "pytorchjobs.kubeflow.org": ("kubeflow.org", "v1", "pytorchjobs", "workloads/crds/kubeflow.org_pytorchjobs.yaml"),
}


def setUpModule():
    h.apply_fleet_file(FLEET)
    # A run that died before its cleanup may have left them: the "not served" half needs them gone.
    for name in CRDS:
        delete_crd(name)


def tearDownModule():
    for name in CRDS:
        delete_crd(name)


def served(name):
    group, version, plural, _ = CRDS[name]
    r = h.kubectl("get", "--raw", "/apis/%s/%s" % (group, version), check=False)
    return r.rc == 0 and any(res["name"] == plural for res in json.loads(r.stdout).get("resources", []))


def established(name):
    crd = h.kubectl("get", "crd", name, "-o", "json")
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def install_crd(name):
    path = os.path.join(h.fixtures_dir(), CRDS[name][3])
    # Server-side: the CRDs are far above the 256 KiB last-applied annotation of a client-side apply.
    h.kubectl("apply", "--server-side", "--field-manager", "gpuctl-e2e", "-f", path, timeout=120)
    h.wait_for(lambda: established(name), 60, name + " to be Established")
    h.wait_for(lambda: served(name), 60, "discovery to serve " + name)


def delete_crd(name):
    h.kubectl("delete", "crd", name, "--ignore-not-found", "--wait=true", timeout=180)
    h.wait_for(lambda: not served(name), 60, "discovery to stop serving " + name)


def fixture_yaml(name):
    with open(os.path.join(h.fixtures_dir(), "workloads", name)) as f:
        return yaml.safe_load(f)


def resnet_jobset_with_gpus(gpus):
    """JobSet's upstream torchrun example, each worker given `gpus` GPUs (the example runs on CPUs)."""
    js = fixture_yaml("jobset-pytorch-resnet.yaml")
    container = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return js


def submit(*args, manifest=None):
    if manifest is not None:
        return h.gpuctl("submit", "-f", "-", *args, input=yaml.safe_dump(manifest))
    return h.gpuctl("submit", *args)


def one_line_error(test, r, exit_code):
    test.assertEqual(r.rc, exit_code, r)
    test.assertEqual(r.stdout, "", r)
    test.assertEqual(r.stderr.count("\n"), 1, r)


class SubmitWorkloadsTest(h.TestCase):
    def assert_gpu_pod_defaults(self, pod_spec, gpus):
        [container] = pod_spec["containers"]
        # As the manifest wrote them: a CRD keeps an int-or-string as sent, where a Job's would be "1".
        self.assertEqual(str(container["resources"]["requests"]["nvidia.com/gpu"]), str(gpus))
        self.assertEqual(str(container["resources"]["limits"]["nvidia.com/gpu"]), str(gpus))
        self.assertEqual(pod_spec["nodeSelector"], {"nvidia.com/gpu.product": PRODUCT_LABEL})
        self.assertIn(POOL_TAINT_KEY, [t.get("key") for t in pod_spec["tolerations"]])

    def test_1_refused_with_exit_6_while_the_apis_are_not_served(self):
        ns = self.namespace("submitwl-off")
        r = submit("-n", ns, "--gpu-type", GPU_TYPE, manifest=resnet_jobset_with_gpus(1))
        one_line_error(self, r, 6)
        self.assertIn("error: the cluster does not serve jobset.x-k8s.io/v1alpha2 JobSets (jobsets): install the "
                      "JobSet controller and its CRD", r.stderr)
        r = submit("-f", os.path.join(h.fixtures_dir(), "workloads/pytorchjob-mnist-nccl.yaml"), "-n", ns)
        one_line_error(self, r, 6)
        self.assertIn("does not serve kubeflow.org/v1 PyTorchJobs (pytorchjobs): install the Kubeflow training "
                      "operator v1", r.stderr)
        # Another kind keeps the Job's error, listing what is taken.
        r = submit("-n", ns, manifest={"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})
        one_line_error(self, r, 2)
        self.assertIn("gpuctl submit takes a batch/v1 Job, a jobset.x-k8s.io/v1alpha2 JobSet or a kubeflow.org/v1 "
                      "PyTorchJob", r.stderr)

    def test_2_jobset_created_with_the_defaults_once_served(self):
        ns = self.namespace("submitwl-js")
        try:
            install_crd("jobsets.jobset.x-k8s.io")
            # --wait cannot follow a JobSet: refused before anything is sent.
            r = submit("-n", ns, "--wait", manifest=resnet_jobset_with_gpus(1))
            one_line_error(self, r, 2)
            self.assertIn("--wait and --follow follow a batch/v1 Job, not a JobSet", r.stderr)

            # A pod no node can hold is refused before anything exists.
            r = submit("-n", ns, "--gpu-type", GPU_TYPE, manifest=resnet_jobset_with_gpus(8))
            self.assertEqual(r.rc, 3, r)
            self.assertIn("refused (gpu-capacity): no schedulable node with product %s has 8 GPUs" % PRODUCT_LABEL,
                          r.stderr)

            # The server dry run of the upstream example as it is: admitted, nothing created.
            r = submit("-f", os.path.join(h.fixtures_dir(), "workloads/jobset-paralleljobs.yaml"), "-n", ns,
                       "--dry-run=server")
            self.assertEqual(r.rc, 0, r)
            self.assertIn("JobSet %s/paralleljobs would be submitted (server dry run): 5 pods" % ns, r.stdout)
            self.assertEqual(h.kubectl("get", "jobsets", "-n", ns, "-o", "json")["items"], [])

            r = submit("-n", ns, "--gpu-type", GPU_TYPE, "--label", "team=ml", manifest=resnet_jobset_with_gpus(1))
            self.assertEqual(r.rc, 0, r)
            self.assertIn("JobSet %s/pytorch submitted: 4 pods: workers 4 x 1 nvidia.com/gpu" % ns, r.stdout)
            js = h.kubectl("get", "jobset", "pytorch", "-n", ns, "-o", "json")
            self.assertEqual(js["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpuctl")
            self.assertEqual(js["spec"]["ttlSecondsAfterFinished"], 604800)
            job_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
            self.assertEqual(job_spec["backoffLimit"], 0)  # the example's, kept
            self.assertEqual(job_spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["type"],
                             "DisruptionTarget")
            self.assertNotIn("ttlSecondsAfterFinished", job_spec)
            pod = job_spec["template"]
            self.assertEqual(pod["metadata"]["labels"]["team"], "ml")
            self.assertEqual(pod["spec"]["restartPolicy"], "Never")
            self.assert_gpu_pod_defaults(pod["spec"], 1)

            # Created again: the name is taken, said with the fix.
            r = submit("-n", ns, "--gpu-type", GPU_TYPE, manifest=resnet_jobset_with_gpus(1))
            self.assertEqual(r.rc, 1, r)
            self.assertIn("jobset %s/pytorch already exists" % ns, r.stderr)
            # Nothing runs a JobSet here: no Job and no pod ever comes of it.
            self.assertEqual(h.kubectl("get", "jobs,pods", "-n", ns, "-o", "json")["items"], [])
        finally:
            delete_crd("jobsets.jobset.x-k8s.io")

    def test_3_pytorchjob_created_with_the_defaults_once_served(self):
        ns = self.namespace("submitwl-pt")
        try:
            install_crd("pytorchjobs.kubeflow.org")
            r = submit("-f", os.path.join(h.fixtures_dir(), "workloads/pytorchjob-mnist-nccl.yaml"), "-n", ns,
                       "--gpu-type", GPU_TYPE, "-o", "name")
            self.assertEqual(r.rc, 0, r)
            self.assertEqual(r.stdout, "pytorchjob.kubeflow.org/pytorch-dist-mnist-nccl\n")
            pj = h.kubectl("get", "pytorchjob", "pytorch-dist-mnist-nccl", "-n", ns, "-o", "json")
            self.assertEqual(pj["spec"]["runPolicy"]["backoffLimit"], 2)
            self.assertEqual(pj["spec"]["runPolicy"]["ttlSecondsAfterFinished"], 604800)
            for replica_type in ("Master", "Worker"):
                replica = pj["spec"]["pytorchReplicaSpecs"][replica_type]
                self.assertEqual(replica["restartPolicy"], "OnFailure")  # the example's, kept
                self.assertNotIn("restartPolicy", replica["template"]["spec"])
                self.assert_gpu_pod_defaults(replica["template"]["spec"], 1)
            self.assertEqual(h.kubectl("get", "pods", "-n", ns, "-o", "json")["items"], [])
        finally:
            delete_crd("pytorchjobs.kubeflow.org")


if __name__ == "__main__":
    h.main()
