"""kwok Stages for running pods whose containers restart (used by cluster.py's own_stages).

    sim.gpuctl.dev/outcome: crashloop   Running, Ready False, each container waiting in
                                        CrashLoopBackOff with the kubelet's back-off message,
                                        restartCount and lastState.terminated
    sim.gpuctl.dev/outcome: restarted   Running and Ready, each container running again after
                                        restartCount restarts, lastState.terminated the last one

Both read the pod's annotations sim.gpuctl.dev/restarts (crashloop default 6, restarted 1),
exit-code (default 1), reason (default Error; OOMKilled, ...), message (none by default) and
container (only that container restarts; default every container). Both fire on a Running pod,
also when the label is added later (kubectl label), once: the selector stops matching when the
status is written.
"""

SIM = "sim.gpuctl.dev"
OUTCOMES = ("crashloop", "restarted")

# The back-off the kubelet reports after N restarts (index N, 6 and more: 5m0s). The first restart
# is immediate, then 10s doubling up to MaxContainerBackOff 300s (kubelet v1.36
# kuberuntime_manager.go doBackOff; ReduceDefaultCrashLoopBackOffDecay is off by default).
BACKOFFS = '"10s" "10s" "20s" "40s" "1m20s" "2m40s"'


def _vars(default_restarts):
    return (
        "      {{ $now := Now }}\n"
        "      {{ $annotations := or .metadata.annotations dict }}\n"
        '      {{ $n := atoi ( or ( index $annotations "%(sim)s/restarts" ) "%(restarts)s" ) }}\n'
        '      {{ $code := or ( index $annotations "%(sim)s/exit-code" ) "1" }}\n'
        '      {{ $reason := or ( index $annotations "%(sim)s/reason" ) "Error" }}\n'
        '      {{ $message := or ( index $annotations "%(sim)s/message" ) "" }}\n'
        '      {{ $only := or ( index $annotations "%(sim)s/container" ) "" }}\n'
        % {"sim": SIM, "restarts": default_restarts})


LAST_TERMINATED = (
    "        lastState:\n"
    "          terminated:\n"
    "            exitCode: {{ $code }}\n"
    "            reason: {{ $reason | Quote }}\n"
    "            {{ with $message }}message: {{ . | Quote }}{{ end }}\n"
    "            startedAt: {{ $now | Quote }}\n"
    "            finishedAt: {{ $now | Quote }}\n")

RUNNING = (
    "      - image: {{ .image | Quote }}\n"
    "        name: {{ .name | Quote }}\n"
    "        ready: true\n"
    "        started: true\n"
    "        restartCount: %s\n"
    "%s"
    "        state:\n"
    "          running:\n"
    "            startedAt: {{ $now | Quote }}\n")


def _conditions(status, reason_and_message):
    out = ""
    for t in ("Ready", "ContainersReady"):
        out += ("      - lastTransitionTime: {{ $now | Quote }}\n%s"
                "        status: \"%s\"\n        type: %s\n" % (reason_and_message, status, t))
    return out


def _stage(name, outcome, not_yet, template):
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [
                {"key": '.metadata.labels["%s/outcome"]' % SIM, "operator": "In", "values": [outcome]},
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                not_yet,
            ]},
            "delay": {"durationMilliseconds": 1000,
                      "durationFrom": {"expressionFrom": '.metadata.annotations["%s/delay"]' % SIM}},
            "next": {"statusTemplate": template},
        },
    }


def crashloop_stage():
    unready = (
        "      {{ $unready := list }}\n"
        "      {{ range .spec.containers }}{{ if or ( not $only ) ( eq .name $only ) }}"
        "{{ $unready = append $unready .name }}{{ end }}{{ end }}\n")
    # kubelet: "back-off %s restarting failed container=%s pod=%s", pod as format.Pod: name_ns(uid)
    template = (
        _vars(6) + unready +
        "      {{ $backoff := \"5m0s\" }}\n"
        "      {{ if lt $n 6 }}{{ $backoff = index ( list %s ) $n }}{{ end }}\n"
        "      {{ $pod := printf \"%%s_%%s(%%s)\" .metadata.name .metadata.namespace .metadata.uid }}\n"
        "      conditions:\n" % BACKOFFS +
        _conditions("False", "        message: {{ printf \"containers with unready status: [%s]\" "
                             "( join \" \" $unready ) | Quote }}\n        reason: ContainersNotReady\n") +
        "      containerStatuses:\n"
        "      {{ range .spec.containers }}\n"
        "      {{ if or ( not $only ) ( eq .name $only ) }}\n"
        "      - image: {{ .image | Quote }}\n"
        "        name: {{ .name | Quote }}\n"
        "        ready: false\n"
        "        started: false\n"
        "        restartCount: {{ $n }}\n" + LAST_TERMINATED +
        "        state:\n"
        "          waiting:\n"
        "            reason: CrashLoopBackOff\n"
        "            message: {{ printf \"back-off %s restarting failed container=%s pod=%s\" $backoff .name $pod"
        " | Quote }}\n"
        "      {{ else }}\n" + RUNNING % ("0", "") +
        "      {{ end }}\n"
        "      {{ end }}\n"
        "      phase: Running\n")
    not_yet = {"key": ".status.containerStatuses.[].state.waiting.reason", "operator": "NotIn",
               "values": ["CrashLoopBackOff"]}
    return _stage("gpuctl-pod-crashloop", "crashloop", not_yet, template)


def restarted_stage():
    template = (
        _vars(1) +
        "      conditions:\n" + _conditions("True", "") +
        "      containerStatuses:\n"
        "      {{ range .spec.containers }}\n"
        "      {{ if or ( not $only ) ( eq .name $only ) }}\n" + RUNNING % ("{{ $n }}", LAST_TERMINATED) +
        "      {{ else }}\n" + RUNNING % ("0", "") +
        "      {{ end }}\n"
        "      {{ end }}\n"
        "      phase: Running\n")
    not_yet = {"key": ".status.containerStatuses.[].lastState.terminated.finishedAt", "operator": "DoesNotExist"}
    return _stage("gpuctl-pod-restarted", "restarted", not_yet, template)


def stages():
    return [crashloop_stage(), restarted_stage()]
