"""Peers the bench installs itself from their registries, never vendored: kubectl-view-allocations
from crates.io, with `cargo install --locked` at a pinned version into
~/.cache/gpuctl-bench/peers (only when it is not there yet). It compiles for minutes on a small
machine, so start() launches it in the background (nice -n 10) before the cluster is populated
and wait() joins it before the first scenario that runs it. Without cargo, or when the install
fails, the peer is "unavailable" with the reason and the bench runs without it; --quick never
compiles it (it uses it when already installed)."""
import os
import shutil
import subprocess
import time
from pathlib import Path

from controlplane import log

VIEW_ALLOCATIONS = "kubectl-view-allocations"
VIEW_ALLOCATIONS_TOOL = "view-allocations"  # its name in the tables and results
VIEW_ALLOCATIONS_VERSION = "3.1.0"  # what `cargo install --locked` picked on 2026-12-06
PEERS_ROOT = Path.home() / ".cache" / "gpuctl-bench" / "peers"


class Peer:
    """A peer's executable (path) or why there is none (reason)."""

    def __init__(self, name, path=None, reason=None, version=None):
        self.name, self.path, self.reason, self.version = name, path, reason, version


def installed_version(exe):
    try:
        p = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30)
        return p.stdout.split()[-1] if p.returncode == 0 and p.stdout.split() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def find_cargo():
    cargo = shutil.which("cargo")
    home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo") / "bin" / "cargo"
    return cargo or (str(home) if os.access(home, os.X_OK) else None)


class ViewAllocations:
    def __init__(self, root=PEERS_ROOT):
        self.root = Path(root)
        self.exe = self.root / "bin" / VIEW_ALLOCATIONS
        self.proc = None
        self.peer = None
        self.t0 = None

    def start(self, compile_allowed=True):
        """Uses the installed build, or starts compiling it (or says why it cannot)."""
        if installed_version(self.exe) == VIEW_ALLOCATIONS_VERSION:
            self.peer = Peer(VIEW_ALLOCATIONS, str(self.exe), version=VIEW_ALLOCATIONS_VERSION)
            return
        if not compile_allowed:
            self.peer = Peer(VIEW_ALLOCATIONS, reason="not installed (--quick never compiles it; a run without "
                                                      "--quick installs it with cargo)")
            return
        cargo = find_cargo()
        if not cargo:
            self.peer = Peer(VIEW_ALLOCATIONS, reason="cargo is missing (install Rust, e.g. rustup, to have it)")
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_path = self.root / "install.log"
        argv = ["nice", "-n", "10", cargo, "install", "--locked", "--force", "--version", VIEW_ALLOCATIONS_VERSION,
                "--root", str(self.root), VIEW_ALLOCATIONS]
        log("compiling %s %s from crates.io in the background (minutes on 2 cores; log %s)" % (
            VIEW_ALLOCATIONS, VIEW_ALLOCATIONS_VERSION, self.log_path))
        with open(self.log_path, "wb") as f:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.t0 = time.time()

    def wait(self):
        """The Peer, once the install (if any) has ended."""
        if self.peer is None and self.proc is not None:
            if self.proc.poll() is None:
                log("waiting for the compile of %s to end" % VIEW_ALLOCATIONS)
            rc = self.proc.wait()
            got = installed_version(self.exe)
            if rc == 0 and got == VIEW_ALLOCATIONS_VERSION:
                log("%s %s installed in %.0fs" % (VIEW_ALLOCATIONS, got, time.time() - self.t0))
                self.peer = Peer(VIEW_ALLOCATIONS, str(self.exe), version=got)
            else:
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
                self.peer = Peer(VIEW_ALLOCATIONS, reason="cargo install failed (exit %s): %s" % (rc, " / ".join(tail)))
                log("%s unavailable: %s" % (VIEW_ALLOCATIONS, self.peer.reason))
        return self.peer

    def stop(self):
        """On an early exit: the compile goes with the bench."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            self.proc.wait()
