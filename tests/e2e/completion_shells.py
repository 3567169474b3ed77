"""Real interactive shells in private tmux servers, for the completion e2e tests (test_completion.py).

Each Shell is one tmux server on its own socket (in a fresh temporary folder) running one shell
with an empty environment apart from what is given: a private HOME, XDG_* folders and INPUTRC,
so nothing of the developer's shell setup (bashrc, inputrc, zshrc, fish config, history, a
gpuctl config file, a completion cache) takes part. `gpuctl` on the shell's PATH is the binary
under test. The server is killed and the folder removed by close() (a context manager too).

Keys reach the shell through `tmux send-keys`; what the terminal shows is read back with
`tmux capture-pane -p` and polled against a deadline, never after a fixed sleep. A completion is
synchronous in all three shells (the line editor reads no further key until it is done), so a
marker typed after the TABs shows on the line only once the completion has run: typing one and
waiting for it is how a test knows the screen is final.
"""
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

PROMPT = "cmpl$ "
MARK = "@"  # typed after the TABs: no completion word holds it, and no shell binds it
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


class ShellError(AssertionError):
    pass


class Shell:
    """kind: "bash" (with bash-completion's library), "bash-plain" (without it), "zsh" (the script
    sourced), "zsh-fpath" (the script as _gpuctl on $fpath) or "fish"."""

    def __init__(self, kind, gpuctl, env=None, cwd=None, width=160, height=48):
        self.kind = kind
        self.root = Path(tempfile.mkdtemp(prefix="gpuctl-cmpl-"))
        self.socket = str(self.root / "tmux.sock")
        self.home = self.root / "home"
        self.cache = self.root / "cache"
        self.cwd = Path(cwd) if cwd else self.root / "cwd"
        bindir = self.root / "bin"
        for d in (self.home, self.cache, self.cwd, bindir, self.root / "config", self.root / "data"):
            d.mkdir(parents=True, exist_ok=True)
        os.symlink(gpuctl, bindir / "gpuctl")
        # No bell (it would only be noise), every list shown at once, no pager.
        (self.root / "inputrc").write_text("set bell-style none\nset completion-query-items 10000\n"
                                           "set page-completions off\n")
        self.env = {
            "HOME": str(self.home), "PATH": "%s:/usr/local/bin:/usr/bin:/bin" % bindir, "TERM": "screen",
            "LANG": "C.UTF-8", "XDG_CACHE_HOME": str(self.cache), "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "data"), "INPUTRC": str(self.root / "inputrc"),
            "PS1": PROMPT,
        }
        self.env.update(env or {})
        argv = {
            "bash": ["bash", "--norc", "--noprofile"],
            "bash-plain": ["bash", "--norc", "--noprofile"],
            "zsh": ["zsh", "-f"],
            "zsh-fpath": ["zsh", "-f"],
            "fish": ["fish", "--no-config"],
        }[kind]
        envargs = ["%s=%s" % kv for kv in sorted(self.env.items())]
        try:
            self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height),
                      "-c", str(self.cwd), "--", "env", "-i", *envargs, *argv)
            self._setup()
        except BaseException:
            self.close()
            raise

    # --- tmux ---------------------------------------------------------------------------------

    def tmux(self, *args):
        p = subprocess.run(["tmux", "-S", self.socket, *args], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        if p.returncode != 0:
            raise ShellError("tmux %s failed (exit %d): %s" % (" ".join(args), p.returncode, p.stderr.strip()))
        return p.stdout

    def close(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def type(self, text):
        """Types `text` literally (no key names)."""
        if text:
            self.tmux("send-keys", "-t", "t", "-l", text)

    def keys(self, *names):
        """Presses keys by tmux's names: Tab, Enter, C-c, C-u."""
        self.tmux("send-keys", "-t", "t", *names)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t")

    def wait_screen(self, predicate, timeout=10, what="the screen"):
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if predicate(s):
                return s
            if time.monotonic() >= deadline:
                raise ShellError("timed out after %ss waiting for %s; the %s screen:\n%s" % (
                    timeout, what, self.kind, s.rstrip()))
            time.sleep(0.05)

    def line(self, screen=None):
        """The line being edited: what follows the last prompt on the screen."""
        s = self.screen() if screen is None else screen
        lines = [ln for ln in s.splitlines() if ln.startswith(PROMPT.rstrip())]
        return lines[-1][len(PROMPT):].rstrip() if lines else None

    # --- the shell ----------------------------------------------------------------------------

    def run(self, command, timeout=20):
        """Runs a command line and waits for the shell's next prompt (a unique echo marks it)."""
        token = "done-%d" % time.monotonic_ns()
        self.type("%s; echo %s" % (command, token))
        self.keys("Enter")
        self.wait_screen(lambda s: any(ln.strip() == token for ln in s.splitlines())
                         and (s.rstrip().splitlines() or [""])[-1].startswith(PROMPT.rstrip()),
                         timeout, "`%s` to finish" % command)

    def clear(self):
        """Back to an empty screen holding only an empty prompt."""
        self.keys("C-c")
        self.run("clear")  # clears, then the echo prints below the fresh prompt
        self.keys("C-l")
        self.wait_screen(lambda s: s.strip() == PROMPT.strip(), 10, "an empty screen after clear")

    def _setup(self):
        # The shell's own first prompt (fish's and zsh's end in "#" for root, ">" or "%" else)
        self.wait_screen(lambda s: s.strip() != "", 20, "the shell's first prompt")
        if self.kind == "bash":
            self.run("source %s" % BASH_COMPLETION)
            self.run("source <(gpuctl completion bash)")
            self.run("declare -F _get_comp_words_by_ref >/dev/null || echo NO-BASH-COMPLETION")
        elif self.kind == "bash-plain":
            self.run("source <(gpuctl completion bash)")
        elif self.kind == "zsh":
            self.type("PS1='%s'; autoload -U compinit && compinit -u" % PROMPT)
            self.keys("Enter")
            self.run("source <(gpuctl completion zsh)")
        elif self.kind == "zsh-fpath":
            # As installed: the script is the autoloaded function _gpuctl, found on $fpath by compinit
            self.type("PS1='%s'; mkdir -p ~/.zfunc && gpuctl completion zsh > ~/.zfunc/_gpuctl" % PROMPT)
            self.keys("Enter")
            self.run("fpath=(~/.zfunc $fpath); autoload -U compinit && compinit -u")
        elif self.kind == "fish":
            self.type("function fish_prompt; printf '%%s' '%s'; end; set -g fish_autosuggestion_enabled 0;"
                      " set -g fish_greeting ''" % PROMPT)
            self.keys("Enter")
            self.run("gpuctl completion fish | source")
        if any(ln.strip() == "NO-BASH-COMPLETION" for ln in self.screen().splitlines()):
            raise ShellError("bash-completion's library did not load from %s" % BASH_COMPLETION)
        self.clear()

    def complete(self, text, tabs=1, timeout=10):
        """Types `text`, presses TAB `tabs` times, then the marker; returns (line, screen) once the
        marker shows, the line being what the prompt's line holds before the marker (the time
        that took is in last_tab_seconds)."""
        self.clear()
        self.type(text)
        t0 = time.monotonic()
        for _ in range(tabs):
            self.keys("Tab")
        self.type(MARK)
        s = self.wait_screen(lambda s: (self.line(s) or "").endswith(MARK), timeout,
                             "the completion of %r to finish" % text)
        self.last_tab_seconds = time.monotonic() - t0  # from the first TAB to an editable line again
        return self.line(s)[:-len(MARK)], s
