"""Scenario gpus-fanout: `gpuctl gpus` over N real sshd hosts (tests/cluster's hosts with the fake
nvidia-smi, through bench/fleet_hosts.py), every 10th of them hung (ssh mode `hang`: the session
never answers), beside pdsh running the same remote command (gpuctl's probe script, read from
gpuctl itself) with the same per-host deadline, connect timeout, fan-out and ssh options.
Interleaved repetitions; every run of both tools is checked: every answering host read, every hung
host named as timed out."""
import json
import re
import shutil
from pathlib import Path

from controlplane import cluster, log
from fleet_hosts import FleetHosts
from measure import RunFailed, interleave, run_measured, tools_and_correctness

TOOLS = ("gpuctl", "pdsh")
FLEET = "bench-fanout"
PREFIX = "bf-"
FIXTURE = "telegraf__tesla-t4__515.105.01__v11.xml"
PRODUCT = "Tesla T4"
# ssh options gpuctl adds to every ssh it runs (besides -F); pdsh gets them too.
SSH_OPTIONS = "-o BatchMode=yes -o ServerAliveInterval=5 -o ServerAliveCountMax=3"


def fleet_yaml(hosts):
    return ("name: %s\nnodes:\n  - namePrefix: %s\n    count: %d\n    cpu: \"8\"\n    memory: 32Gi\n    gpus: 1\n"
            "    labelScheme: gke\n    ssh: {fixture: %s}\n" % (FLEET, PREFIX, hosts, FIXTURE))


def hung_names(hosts):
    """Every 10th host (bf-0, bf-10, ...): 10% of the fleet, spread over the sshd shards."""
    return {"%s%d" % (PREFIX, i) for i in range(0, hosts, 10)}


class GpusFanout:
    def __init__(self, cp, gpuctl, work_dir, hosts, deadline_s):
        self.cp, self.gpuctl = cp, str(Path(gpuctl).resolve())
        self.work = Path(work_dir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.n, self.deadline = hosts, deadline_s
        self.connect = max(1, deadline_s // 2)   # gpuctl's default for a short --ssh-timeout
        self.hung = hung_names(hosts)
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(cp.dir), "KUBECONFIG": str(cp.kubeconfig), "NO_COLOR": "1"}
        self.hosts = FleetHosts(self.work / "hosts", cp)

    # -- the hosts -------------------------------------------------------------------------------

    def setup(self):
        if not shutil.which("pdsh"):
            raise RunFailed("pdsh is missing (Debian package pdsh): run scripts/install-deps.sh")
        self.hosts.start()
        nodes = self.hosts.apply_fleet_text(fleet_yaml(self.n), source="bench gpus-fanout", wait=False)
        for name in sorted(self.hung):
            self.hosts.set_ssh_mode(name, "hang")
        self.addr = {n["name"]: n["ssh_address"] for n in nodes}
        self.ssh_config = self.hosts.ssh_info()["config_file"]
        self.host_list = self.work / "pdsh-hosts"
        self.host_list.write_text("".join(a + "\n" for a in sorted(self.addr.values())))
        self.remote = self.remote_command()
        log("gpus-fanout: %d sshd hosts (%d shards), %d hung; deadline %ds, connect timeout %ds" % (
            self.n, len(self.hosts.state["sshd"]), len(self.hung), self.deadline, self.connect))

    def remote_command(self):
        """gpuctl's remote command, exactly: one `gpuctl gpus` run through an ssh that records
        its last argument and fails."""
        fake = self.work / "record-ssh"
        fake.mkdir(exist_ok=True)
        got = self.work / "remote-command"
        cluster.write_file(fake / "ssh", '#!/bin/sh\nfor a; do last=$a; done\nprintf "%%s" "$last" >%s\nexit 255\n'
                           % got, 0o755)
        env = dict(self.env, PATH="%s:%s" % (fake, self.env["PATH"]))
        run_measured([self.gpuctl, "gpus", PREFIX + "1", "--ssh-config", self.ssh_config], env=env, timeout=60)
        if not got.exists() or not got.read_text():
            raise RunFailed("gpuctl gpus ran no ssh: its remote command is unknown")
        return got.read_text()

    def stop(self):
        self.hosts.delete_fleet_nodes(FLEET)
        self.hosts.down()

    # -- the two tools ---------------------------------------------------------------------------

    def argv(self, tool):
        if tool == "gpuctl":
            return [self.gpuctl, "gpus", "-l", "%s=%s" % (cluster.FLEET_LABEL, FLEET), "--ssh-config", self.ssh_config,
                    "--fanout", str(self.n), "--ssh-timeout", "%ds" % self.deadline,
                    "--connect-timeout", "%ds" % self.connect, "-o", "json"]
        return ["pdsh", "-R", "ssh", "-f", str(self.n), "-t", str(self.connect), "-u", str(self.deadline),
                "-w", "^" + str(self.host_list), self.remote]

    def tool_env(self, tool):
        if tool == "gpuctl":
            return self.env
        return dict(self.env, PDSH_SSH_ARGS_APPEND="-F %s %s" % (self.ssh_config, SSH_OPTIONS))

    def run(self, tool):
        out = self.work / ("%s.out" % tool)
        res = run_measured(self.argv(tool), out, env=self.tool_env(tool), timeout=3 * self.deadline + 120)
        text = out.read_text(errors="replace")
        (self.work / ("%s.err" % tool)).write_text(res["stderr"])
        errors = self.check_gpuctl(res, text) if tool == "gpuctl" else self.check_pdsh(res, text)
        return {"wall_s": res["wall_s"], "rss_kib": res["rss_kib"], "rc": res["rc"], "errors": errors[:10]}

    # -- correctness -----------------------------------------------------------------------------

    def check_gpuctl(self, res, text):
        """Exit 1 (hosts did not answer); every answering host ok with its one T4; every hung host
        timed_out after at least the deadline."""
        try:
            items = {i["name"]: i for i in json.loads(text)["items"]}
        except (ValueError, KeyError, TypeError) as e:
            return ["gpuctl's output is not its JSON (%s; exit %s): %s" % (e, res["rc"], res["stderr"][-500:])]
        errors = [] if res["rc"] == 1 else ["gpuctl exited %s, not 1" % res["rc"]]
        if set(items) != set(self.addr):
            errors.append("gpuctl reports %d hosts, the fleet has %d" % (len(items), len(self.addr)))
        for name, i in sorted(items.items()):
            if name in self.hung:
                if i.get("outcome") != "timed_out" or i.get("durationMs", 0) < self.deadline * 1000:
                    errors.append("%s (hung): %s after %s ms" % (name, i.get("outcome"), i.get("durationMs")))
            elif i.get("outcome") != "ok" or [g.get("productName") for g in i.get("gpus", [])] != [PRODUCT]:
                errors.append("%s: %s, %d GPUs" % (name, i.get("outcome"), len(i.get("gpus") or [])))
        return errors

    def check_pdsh(self, res, text):
        """Every answering host's transcript reached the probe's last line; pdsh named every hung
        host as a command timeout."""
        marker = re.match(r"sh -c 'P=([^;]+);", self.remote)
        done = "%s done" % (marker.group(1) if marker else "")
        answered = {line.split(": ", 1)[0] for line in text.splitlines() if line.endswith(done)}
        timed_out = set(re.findall(r"^pdsh@[^:]*: (\S+): command timeout$", res["stderr"], re.M))
        hung = {self.addr[n] for n in self.hung}
        errors = []
        if answered != set(self.addr.values()) - hung:
            errors.append("pdsh read %d answering hosts of %d" % (len(answered), len(self.addr) - len(hung)))
        if timed_out != hung:
            errors.append("pdsh named %d hosts as timed out, %d are hung" % (len(timed_out), len(hung)))
        return errors

    # -- the scenario ----------------------------------------------------------------------------

    def measure(self, reps):
        try:
            self.setup()
            runs = interleave("gpus-fanout", TOOLS, reps, self.run)
        finally:
            self.stop()
        out = {"hosts": self.n, "hung": len(self.hung), "deadline_s": self.deadline, "connect_timeout_s": self.connect,
               "remote_command": self.remote}
        out["tools"], out["correctness"] = tools_and_correctness(runs, {t: self.command(t) for t in TOOLS})
        g, p = out["tools"]["gpuctl"], out["tools"]["pdsh"]
        out["target"] = {"limit_s": round(1.1 * self.deadline, 1), "gpuctl_max_within_limit": g["max_s"] <= 1.1 * self.deadline,
                         "gpuctl_over_pdsh_median": round(g["median_s"] / p["median_s"], 3),
                         "no_slower_than_pdsh": g["median_s"] <= p["median_s"]}
        log("gpus-fanout correctness: %s" % ("ok" if out["correctness"]["ok"] else "ERRORS"))
        return out

    def command(self, tool):
        if tool == "gpuctl":
            return " ".join(self.argv(tool))
        return "PDSH_SSH_ARGS_APPEND='-F SSH_CONFIG %s' %s '<gpuctl's remote command>'" % (
            SSH_OPTIONS, " ".join(self.argv(tool)[:-1]))
