"""The scenarios with hosts and nodes of their own (issue 14): gpus-fanout (bench/gpus_fanout.py)
and drain (bench/drain.py). They run once, after the sizes, on the populated control plane; their
results go to the results JSON's "fleet" and are printed as a table per scenario."""
from drain import Drain
from gpus_fanout import GpusFanout
from measure import tools_table

SCENARIOS = ("gpus-fanout", "drain")
PEER = {"gpus-fanout": "pdsh", "drain": "kubectl"}
# (full size, --quick)
HOSTS, SSH_TIMEOUT_S, DRAIN_PODS = (256, 16), (60, 10), (110, 20)


def add_args(ap):
    ap.add_argument("--hosts", type=int, help="gpus-fanout: sshd hosts, 10%% of them hung (default {}; --quick {})".format(*HOSTS))
    ap.add_argument("--ssh-timeout", type=int, help="gpus-fanout: the per-host deadline in seconds, for gpuctl and "
                    "pdsh alike (default %d; --quick %d)" % SSH_TIMEOUT_S)
    ap.add_argument("--drain-pods", type=int, help="drain: pods on the drained node, 4 of them DaemonSet pods "
                    "(default %d; --quick %d)" % DRAIN_PODS)


def run(a, cp, results):
    """Runs the selected scenarios; False when a correctness check failed."""
    q = 1 if a.quick else 0
    ok = True
    for name in (s for s in SCENARIOS if s in a.scenario):
        work = cp.dir / ("out-" + name)
        if name == "gpus-fanout":
            sc = GpusFanout(cp, a.gpuctl, work, a.hosts or HOSTS[q], a.ssh_timeout or SSH_TIMEOUT_S[q]).measure(a.reps)
        else:
            sc = Drain(cp, a.gpuctl, work, a.drain_pods or DRAIN_PODS[q]).measure(a.reps)
        results.setdefault("fleet", {})[name] = sc
        ok = ok and sc["correctness"]["ok"]
    return ok


def report(results):
    for name, sc in results.get("fleet", {}).items():
        print("\n" + tools_table(name, sc, PEER[name]))
        print("target: %s" % ", ".join("%s=%s" % kv for kv in sc["target"].items()))
        for who, key in (("gpuctl", "errors"), (PEER[name], "peer_errors")):
            if sc["correctness"].get(key):
                print("%s: %s's results were wrong:\n  %s" % (name, who, "\n  ".join(sc["correctness"][key])))
