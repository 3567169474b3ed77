"""gpuctl gpus and gpuctl diagnose over 200 real sshd sessions at once, four of them hung: each run
ends within one --ssh-timeout plus a small margin (never the sum of deadlines), every answering
node is read, and the hung ones are killed and named (diagnose: a broken driver, not an
unreachable node)."""
import json
import time

import harness as h

SELECTOR = "e2e.gpuctl.dev/fleet=fanout-200"
HUNG = {"fo-0", "fo-50", "fo-100", "fo-150"}
# On the 2-core CI machine 200 sessions of the fake nvidia-smi (a Python program) take about a
# minute of CPU together; the deadline leaves room for that, so only the hung hosts reach it.
DEADLINE = 150
MARGIN = 30


class FanoutTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file("fanout-200")
        for n in HUNG:
            h.ssh_mode(n, "hang")

    @classmethod
    def tearDownClass(cls):
        for n in HUNG:
            h.ssh_mode(n, "ok")

    def test_200_hosts_within_one_deadline(self):
        t0 = time.monotonic()
        rc, out, err = h.gpuctl("gpus", "-l", SELECTOR, *h.ssh_flags(), "--fanout", "256",
                                "--ssh-timeout", "%ds" % DEADLINE, "--connect-timeout", "60s", "-o", "json",
                                timeout=DEADLINE + 120)
        elapsed = time.monotonic() - t0
        self.assertEqual(rc, 1, err)
        items = json.loads(out)["items"]
        self.assertEqual(len(items), 200)
        outcomes = {i["name"]: i["outcome"] for i in items}
        self.assertEqual({n for n, o in outcomes.items() if o != "ok"}, HUNG, err)
        for i in items:
            if i["name"] in HUNG:
                self.assertEqual(i["outcome"], "timed_out")
                self.assertGreaterEqual(i["durationMs"], DEADLINE * 1000)
            else:
                self.assertEqual(len(i["gpus"]), 1)
                self.assertEqual(i["gpus"][0]["productName"], "Tesla T4")
        print("200 hosts in %.1fs (deadline %ds)" % (elapsed, DEADLINE))
        self.assertLess(elapsed, DEADLINE + MARGIN)

    def test_diagnose_200_hosts_within_one_deadline(self):
        t0 = time.monotonic()
        r = h.gpuctl("diagnose", "-l", SELECTOR, "--check", "node-unreachable,driver-broken,xid-errors,gpu-count-mismatch",
                     *h.ssh_flags(), "--fanout", "256", "--ssh-timeout", "%ds" % DEADLINE, "--connect-timeout", "60s",
                     "-o", "json", timeout=DEADLINE + 120)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.rc, 4, r.stderr)
        found = {(f["node"], f["check"]) for f in r.json["findings"]}
        self.assertEqual(found, {(n, "driver-broken") for n in HUNG}, r.stderr)
        for f in r.json["findings"]:
            self.assertIn("did not finish before the deadline", f["summary"])
        print("diagnose: 200 hosts in %.1fs (deadline %ds)" % (elapsed, DEADLINE))
        self.assertLess(elapsed, DEADLINE + MARGIN)


if __name__ == "__main__":
    h.main()
