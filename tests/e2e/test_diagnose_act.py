"""Acting on diagnose's node-side findings against real sshd hosts (issue 16): `uncordon --verify`
keeps a node whose driver is not loaded cordoned with the finding as its reason (and one whose GPUs
cannot be verified, its record unchanged); `drain --rolling --uncordon` verifies by default and
stops at the broken node; `diagnose --quarantine` asks for --yes, cordons with the finding as the
reason, leaves cordoned nodes alone, and its circuit breaker cordons nothing when more nodes
qualify than --max-quarantine allows."""
import json

import harness as h

FLEET = "diagnose-act"
SELECTOR = "e2e.gpuctl.dev/fleet=" + FLEET
NODES = ["da-%d" % i for i in range(8)] + ["da-nodrv-0", "da-lost-0", "da-nossh-0"]
REASON = "gpuctl.io/cordon-reason"


def node_obj(name):
    return h.kubectl("get", "node", name, "-o", "json")


def cordoned(name):
    n = node_obj(name)
    return bool(n["spec"].get("unschedulable")), (n["metadata"].get("annotations") or {}).get(REASON)


class DiagnoseActTest(h.TestCase):
    @classmethod
    def setUpClass(cls):
        h.apply_fleet_file(FLEET)

    def setUp(self):
        # Every test starts from the fleet as written: all schedulable, both broken nodes broken.
        h.ssh_mode("da-nodrv-0", "driver-not-loaded")
        h.ssh_mode("da-lost-0", "gpu-lost", 1)
        for n in NODES:
            h.kubectl("uncordon", n)
            h.kubectl("annotate", "node", n, REASON + "-", check=False)

    def test_uncordon_verify_keeps_a_broken_node_cordoned_with_the_finding(self):
        for n in ("da-0", "da-nodrv-0", "da-nossh-0"):
            rc, _, err = h.gpuctl("cordon", n, "--reason", "driver upgrade")
            self.assertEqual(rc, 0, err)
        rc, out, err = h.gpuctl("uncordon", "da-0", "da-nodrv-0", "da-nossh-0", "--verify", *h.ssh_flags(),
                                "--ssh-timeout", "20s")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(cordoned("da-0"), (False, None))
        state, reason = cordoned("da-nodrv-0")
        self.assertTrue(state)
        self.assertTrue(reason.startswith("driver-broken: nvidia-smi fails on da-nodrv-0 (driver_not_loaded)"), reason)
        self.assertIn("error: node/da-nodrv-0: not uncordoned: driver-broken: nvidia-smi fails on da-nodrv-0", err)
        self.assertEqual(cordoned("da-nossh-0"), (True, "driver upgrade"))   # unverified: its record stays
        self.assertIn("node/da-nossh-0: not uncordoned: could not verify it", err)

        # Repaired: the same command uncordons it.
        h.ssh_mode("da-nodrv-0", "ok")
        r = h.gpuctl("uncordon", "da-nodrv-0", "--verify", *h.ssh_flags(), "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual([i["verification"]["result"] for i in r.json["items"]], ["passed"])
        self.assertEqual(cordoned("da-nodrv-0"), (False, None))

    def test_a_rolling_drain_verifies_before_uncordoning_and_stops_at_the_broken_node(self):
        rc, out, err = h.gpuctl("drain", "da-nodrv-0", "da-1", "--rolling", "--uncordon", "--grace-period", "0",
                                "--timeout", "60s", "--reason", "driver upgrade", *h.ssh_flags(), "--ssh-timeout", "20s")
        self.assertEqual(rc, 1, out + err)
        self.assertRegex(out, r"da-nodrv-0\s+failed\s+drained\s.*\sfailed\s")
        self.assertRegex(out, r"da-1\s+not_started")
        state, reason = cordoned("da-nodrv-0")
        self.assertTrue(state)
        self.assertTrue(reason.startswith("driver-broken: "), reason)
        self.assertEqual(cordoned("da-1"), (False, None))
        # --no-verify is the old behaviour: Ready is enough.
        rc, out, err = h.gpuctl("drain", "da-nodrv-0", "--rolling", "--uncordon", "--no-verify", "--grace-period", "0",
                                "--timeout", "60s")
        self.assertEqual(rc, 0, out + err)
        self.assertFalse(cordoned("da-nodrv-0")[0])

    def test_quarantine_asks_for_yes_and_its_circuit_breaker_holds(self):
        base = ("diagnose", "-l", SELECTOR, "--check", "driver-broken,xid-errors", *h.ssh_flags(), "--ssh-timeout", "20s")
        # Two of 11 GPU nodes qualify; 10% of 11 allows one: nothing is cordoned, even with --yes.
        rc, out, err = h.gpuctl(*base, "--quarantine", "--yes")
        self.assertEqual(rc, 3, out + err)
        self.assertIn("quarantine refused by the circuit breaker: 2 GPU node(s) qualify", err)
        self.assertEqual([n for n in NODES if cordoned(n)[0]], [])

        # Within the limit: the plan, then --yes is needed (exit 2); --dry-run changes nothing.
        rc, out, err = h.gpuctl(*base, "--quarantine", "--max-quarantine", "2")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("Quarantine: 2 GPU node(s) with critical node-side findings", out)
        self.assertRegex(out, r"da-lost-0\s+cordon\s+driver-broken: GPU 1 \(0000:11:1E\.0\) of da-lost-0 fails in nvidia-smi \(gpu_lost\)")
        self.assertRegex(out, r"da-nodrv-0\s+cordon\s+driver-broken: nvidia-smi fails on da-nodrv-0")
        rc, out, err = h.gpuctl(*base, "--quarantine", "--max-quarantine", "2", "--dry-run")
        self.assertEqual(rc, 4, out + err)
        self.assertEqual([n for n in NODES if cordoned(n)[0]], [])

        rc, out, err = h.gpuctl(*base, "--quarantine", "--max-quarantine", "2", "--yes")
        self.assertEqual(rc, 4, out + err)
        for n in ("da-nodrv-0", "da-lost-0"):
            state, reason = cordoned(n)
            self.assertTrue(state, n)
            self.assertTrue(reason.startswith("driver-broken: "), reason)
            self.assertIn('node/%s cordoned: reason "driver-broken: ' % n, out + err)
        self.assertEqual([n for n in NODES if cordoned(n)[0]], ["da-nodrv-0", "da-lost-0"])

        # Again: both are already cordoned, so the breaker has nothing to count and nothing is written.
        rv = node_obj("da-lost-0")["metadata"]["resourceVersion"]
        rc, out, err = h.gpuctl(*base, "--quarantine", "--yes")
        self.assertEqual(rc, 4, out + err)
        self.assertRegex(out, r"da-lost-0\s+already cordoned")
        self.assertEqual(node_obj("da-lost-0")["metadata"]["resourceVersion"], rv)

        # Repaired, uncordon --verify undoes the quarantine.
        h.ssh_mode("da-nodrv-0", "ok")
        h.ssh_mode("da-lost-0", "ok")
        r = h.gpuctl("uncordon", "da-nodrv-0", "da-lost-0", "--verify", *h.ssh_flags(), "-o", "json")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual([n for n in NODES if cordoned(n)[0]], [])
        self.assertEqual(json.dumps(sorted(i["verification"]["result"] for i in r.json["items"])), '["passed", "passed"]')


if __name__ == "__main__":
    h.main()
