"""Scenarios jobs and quota: `gpuctl jobs -A -o json` and `gpuctl quota -A -o json` beside the
limit (curl of exactly the lists each reads, discovered from its `-v 2` log) and beside kubectl
(`kubectl get` of each of those lists, with the same selectors, as JSON). Correctness: gpuctl's
jobs (count, names, status, GPUs) and quotas (count, hard and used GPUs) against the raw lists
and what bench/populate_jobs.py wrote."""
import json

import populate_jobs
from controlplane import log
from scenario import ListScenario

GPU_KEY = "requests.nvidia.com/gpu"
STATUS = {"Running": "Running", "Complete": "Succeeded", "Failed": "Failed", "Suspended": "Suspended",
          "Pending": "Pending"}


class Jobs(ListScenario):
    name = "jobs"
    gpuctl_args = ("jobs", "-A", "-o", "json")
    gpuctl_out = "gpuctl.json"

    def correctness(self):
        """gpuctl lists exactly the GPU jobs of the raw list (every 7th job asks no GPU), each with
        the status and GPUs populate_jobs gave it."""
        raw = [j for j in self.pages_items().get("JobList", [])]
        gpu_jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]) for j in raw if populate_jobs.job_requests_gpu(j)}
        items = json.loads((self.work / self.gpuctl_out).read_bytes())["items"]
        got = {(i["namespace"], i["name"]): i for i in items}
        errors = []
        self.check_pages(errors)
        if len(items) != len(gpu_jobs) or set(got) != gpu_jobs:
            errors.append("gpuctl lists %d jobs, the raw list has %d GPU jobs (of %d)" % (len(items), len(gpu_jobs),
                                                                                            len(raw)))
        for (ns, name), i in got.items():
            idx = int(name.rsplit("-", 1)[1])
            want = {"status": STATUS[populate_jobs.job_state(idx)], "gpus": populate_jobs.job_gpus(idx)}
            if {k: i.get(k) for k in want} != want:
                errors.append("%s/%s: gpuctl %s, populate wrote %s" % (ns, name, {k: i.get(k) for k in want}, want))
        res = {"jobs": len(raw), "gpu_jobs": len(gpu_jobs), "gpuctl_jobs": len(items), "ok": not errors,
               "errors": errors[:20]}
        log("jobs correctness: %d jobs, %d GPU jobs, gpuctl lists %d: %s" % (
            len(raw), len(gpu_jobs), len(items), "ok" if not errors else "%d MISMATCHES" % len(errors)))
        return res


def whole_quantity(text):
    """A count as the API server writes it: it canonicalizes 2000 to "2k" (decimal SI suffixes;
    GPU counts are never fractional or binary)."""
    scale = {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}
    text = str(text)
    return int(text[:-1]) * scale[text[-1]] if text[-1:] in scale else int(text)


class Quota(ListScenario):
    name = "quota"
    gpuctl_args = ("quota", "-A", "-o", "json")
    gpuctl_out = "gpuctl.json"

    def correctness(self):
        """gpuctl shows every ResourceQuota of the raw list (all have GPU keys), each with the hard
        and used requests.nvidia.com/gpu of its spec and status."""
        raw = self.pages_items().get("ResourceQuotaList", [])
        want = {}
        for q in raw:
            st = q.get("status", {})
            want[(q["metadata"]["namespace"], q["metadata"]["name"])] = {
                "hard": whole_quantity(st.get("hard", {}).get(GPU_KEY, "-1")),
                "used": whole_quantity(st.get("used", {}).get(GPU_KEY, "-1"))}
        got = {}
        for item in json.loads((self.work / self.gpuctl_out).read_bytes())["items"]:
            for q in item.get("quotas", []):
                r = [x for x in q.get("resources", []) if x.get("key") == GPU_KEY]
                got[(item["namespace"], q["name"])] = {"hard": r[0].get("hard"), "used": r[0].get("used")} if r else {}
        errors = []
        self.check_pages(errors)
        if len(got) != len(want):
            errors.append("gpuctl shows %d quotas, the raw list has %d" % (len(got), len(want)))
        for key, w in want.items():
            if got.get(key) != w:
                errors.append("%s/%s: gpuctl %s, raw list %s" % (key[0], key[1], got.get(key), w))
        res = {"quotas": len(want), "gpuctl_quotas": len(got), "ok": not errors, "errors": errors[:20]}
        log("quota correctness: %d quotas, gpuctl shows %d: %s" % (len(want), len(got),
                                                                   "ok" if not errors else "%d MISMATCHES" % len(errors)))
        return res
