"""gpuctl quota against the real API server: the quota gpuctl writes is enforced by the API server
itself (403 exceeded quota), a quota with the plain nvidia.com/gpu key is accepted and never
enforced until `gpuctl quota fix` rewrites it, set is idempotent, delete removes only gpuctl's
objects, and jobs refused by quota show up as held back. Pods need not be scheduled: quota
admission happens at pod creation."""
import json

import harness as h

GPU_KEY = "requests.nvidia.com/gpu"


def quota_obj(ns, name):
    return h.kubectl("get", "resourcequota", name, "-n", ns, "-o", "json")


def wait_counted(ns, name, key=GPU_KEY, value=None):
    """Until kube-controller-manager has filled status.used[key] (and, if given, with `value`)."""
    def counted():
        used = quota_obj(ns, name).get("status", {}).get("used", {})
        return key in used and (value is None or used[key] == str(value))
    h.wait_for(counted, 60, "quota %s/%s status.used[%s]%s" % (ns, name, key, "" if value is None else "=%s" % value))


def create_pod(ns, name, gpus):
    """POST the pod straight to the API server: (http status, body)."""
    return h.api_curl("/api/v1/namespaces/%s/pods" % ns, method="POST", data=h.gpu_pod(name, ns, gpus=gpus))


class QuotaTest(h.TestCase):
    def test_set_is_enforced_by_the_api_server_and_idempotent(self):
        ns = self.namespace("quota")
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "resourcequota/gpuctl-gpu-quota created\n")
        q = quota_obj(ns, "gpuctl-gpu-quota")
        self.assertEqual(q["spec"]["hard"], {GPU_KEY: "2"})
        self.assertEqual(q["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpuctl")
        wait_counted(ns, "gpuctl-gpu-quota")

        code, body = create_pod(ns, "three", 3)
        self.assertEqual(code, 403, body)
        self.assertIn("exceeded quota: gpuctl-gpu-quota", body)
        self.assertIn("limited: requests.nvidia.com/gpu=2", body)
        code, body = create_pod(ns, "two", 2)
        self.assertEqual(code, 201, body)

        def shows_used():
            doc = h.gpuctl("quota", "-n", ns, "-o", "json").json
            r = doc["items"][0]["quotas"][0]["resources"][0]
            return doc if (r["hard"], r["used"], r["free"]) == (2, 2, 0) else None
        doc = h.wait_for(shows_used, 60, "gpuctl quota to show 2 of 2 used")
        self.assertEqual(doc["kind"], "GPUQuotaList")
        self.assertEqual(doc["apiVersion"], "gpuctl.io/v1alpha1")
        self.assertEqual(doc["findings"], [])

        rc, out, err = h.gpuctl("quota", "-n", ns)
        self.assertEqual(rc, 0, err)
        self.assertIn("[##########]", out)

        before = quota_obj(ns, "gpuctl-gpu-quota")["metadata"]["resourceVersion"]
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "2")
        self.assertEqual((rc, out), (0, "resourcequota/gpuctl-gpu-quota unchanged\n"), err)
        self.assertEqual(quota_obj(ns, "gpuctl-gpu-quota")["metadata"]["resourceVersion"], before)

        # Dry runs write nothing; the client one prints the object that would be sent.
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "1", "--dry-run=client", "-o", "json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["items"][0]["spec"]["hard"], {GPU_KEY: "1"})
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "1", "--dry-run=server")
        self.assertEqual(rc, 0, err)
        self.assertIn("(server dry run)", out)
        self.assertEqual(quota_obj(ns, "gpuctl-gpu-quota")["spec"]["hard"], {GPU_KEY: "2"})

        # Below current use: configured, with a warning naming the numbers.
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "1")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "resourcequota/gpuctl-gpu-quota configured: requests.nvidia.com/gpu 2 -> 1\n")
        self.assertIn("already uses 2 requests.nvidia.com/gpu, more than the new quota of 1", err)
        self.assertEqual(quota_obj(ns, "gpuctl-gpu-quota")["spec"]["hard"], {GPU_KEY: "1"})
        self.assertEqual(h.pod("two", ns)["metadata"]["name"], "two")  # the running pod stays

        rc, out, err = h.gpuctl("quota", "delete", ns)
        self.assertEqual((rc, out), (0, "resourcequota/gpuctl-gpu-quota deleted\n"), err)
        self.assertEqual(h.kubectl("get", "resourcequota", "-n", ns, "-o", "json")["items"], [])
        rc, out, err = h.gpuctl("quota", "delete", ns)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("has no gpuctl quota", err)

    def test_max_per_pod_refuses_big_pods_and_admits_cpu_pods(self):
        ns = self.namespace("quota")
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "8", "--max-per-pod", "2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "resourcequota/gpuctl-gpu-quota created\nlimitrange/gpuctl-gpu-limits created\n")
        wait_counted(ns, "gpuctl-gpu-quota")
        code, body = create_pod(ns, "big", 3)
        self.assertEqual(code, 403, body)
        self.assertIn("maximum nvidia.com/gpu usage per", body)
        code, body = create_pod(ns, "cpu", 0)  # the LimitRange's default of 0 GPUs keeps CPU pods admissible
        self.assertEqual(code, 201, body)
        doc = h.gpuctl("quota", "-n", ns, "-o", "json").json
        self.assertEqual(doc["items"][0]["maxPerPod"], 2)
        rc, out, err = h.gpuctl("quota", "delete", ns)
        self.assertEqual(out, "resourcequota/gpuctl-gpu-quota deleted\nlimitrange/gpuctl-gpu-limits deleted\n", err)

    def test_plain_key_is_ineffective_until_fixed(self):
        ns = self.namespace("quota")
        h.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": ns},
                  "spec": {"hard": {"nvidia.com/gpu": "1"}}})
        rc, out, err = h.gpuctl("quota", "-n", ns)
        self.assertEqual(rc, 0, err)
        self.assertIn("NOT ENFORCED", out)
        self.assertIn("quota %s/gpus: key nvidia.com/gpu is never enforced by Kubernetes; use requests.nvidia.com/gpu "
                      "(gpuctl quota fix %s)" % (ns, ns), err)
        doc = h.gpuctl("quota", "-n", ns, "-o", "json").json
        self.assertEqual([(f["quota"], f["key"]) for f in doc["findings"]], [("gpus", "nvidia.com/gpu")])

        code, body = create_pod(ns, "two", 2)  # over the "quota" of 1, and admitted: it is not enforced
        self.assertEqual(code, 201, body)

        before = quota_obj(ns, "gpus")["metadata"]["resourceVersion"]
        rc, out, err = h.gpuctl("quota", "fix", ns, "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "resourcequota/gpus configured (namespace %s): nvidia.com/gpu=1 -> "
                              "requests.nvidia.com/gpu=1 (dry run)\n" % ns)
        self.assertEqual(quota_obj(ns, "gpus")["metadata"]["resourceVersion"], before)

        rc, out, err = h.gpuctl("quota", "fix", ns)
        self.assertEqual(rc, 0, err)
        self.assertEqual(quota_obj(ns, "gpus")["spec"]["hard"], {GPU_KEY: "1"})
        wait_counted(ns, "gpus", value=2)
        code, body = create_pod(ns, "one-more", 1)
        self.assertEqual(code, 403, body)
        self.assertIn("exceeded quota: gpus", body)

        rc, out, err = h.gpuctl("quota", "-n", ns)
        self.assertNotIn("never enforced", err)
        rc, out, err = h.gpuctl("quota", "fix", ns)
        self.assertEqual((rc, out), (0, "No quota with GPU keys Kubernetes does not enforce in namespace %s.\n" % ns), err)
        # Not gpuctl's: delete leaves it alone and names it.
        rc, out, err = h.gpuctl("quota", "delete", ns)
        self.assertEqual(rc, 1)
        self.assertIn("resourcequota/gpus", err)
        self.assertEqual(quota_obj(ns, "gpus")["metadata"]["name"], "gpus")

    def test_job_refused_by_quota_is_held_back(self):
        ns = self.namespace("quota")
        rc, out, err = h.gpuctl("quota", "set", ns, "--gpus", "1")
        self.assertEqual(rc, 0, err)
        wait_counted(ns, "gpuctl-gpu-quota")
        h.create(h.gpu_job("big-train", ns, gpus=2, outcome_=h.outcome("run")))

        def held():
            doc = h.gpuctl("quota", "-n", ns, "-o", "json").json
            return [x for x in doc["items"][0]["heldBack"] if x["name"] == "big-train"]
        entries = h.wait_for(held, 60, "gpuctl quota to list job big-train as held back")
        self.assertEqual(entries[0]["kind"], "Job")
        self.assertEqual(entries[0]["denial"], "QuotaExceeded")
        self.assertEqual(entries[0]["quota"], "gpuctl-gpu-quota")
        rc, out, err = h.gpuctl("quota", "-n", ns)
        self.assertIn("Held back by admission:", out)
        self.assertIn("job/big-train", out)


if __name__ == "__main__":
    h.main()
