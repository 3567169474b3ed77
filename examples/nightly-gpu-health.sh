#!/usr/bin/env bash
# Nightly GPU health check for CI: `gpuctl diagnose` over the GPU nodes, written as a JUnit report
# (one testsuite per check, one failing testcase per broken node or pod), and diagnose's exit code
# as the job's result, so the pipeline goes red when a node breaks and says which one.
#
#   nightly-gpu-health.sh [DIAGNOSE FLAGS...]      e.g.  -l pool=a100 --suppress known-issues.yaml
#
# Environment: GPU_HEALTH_REPORT (default gpu-health.xml), the report to write; KUBECONFIG; the
# node side runs over ssh (~/.ssh/config, or GPUCTL_SSH_CONFIG, GPUCTL_SSH_USER, ...).
#
# Exit codes (diagnose's own, so CI can tell them apart):
#   0  healthy: nothing at or above --fail-on (default: error) and every check ran
#   4  something is broken: the report's failures name the check, the node and what to run
#   5  nothing found, but some checks could not run (RBAC, ...): the report's skipped tests say why
#   1  diagnose could not run (cluster unreachable, credentials refused): no report is written
#   2  bad flags or a bad --suppress file: no report is written
#
# GitLab CI (a scheduled pipeline):
#   gpu-health:
#     script: examples/nightly-gpu-health.sh --suppress known-issues.yaml
#     artifacts: {when: always, reports: {junit: gpu-health.xml}}
# Jenkins: sh 'examples/nightly-gpu-health.sh', then junit 'gpu-health.xml' in a post { always } block.
set -euo pipefail

report=${GPU_HEALTH_REPORT:-gpu-health.xml}
tmp=$(mktemp "$report.XXXXXX")
trap 'rm -f "$tmp"' EXIT

rc=0
gpuctl diagnose -o junit "$@" >"$tmp" || rc=$?

case $rc in
  0 | 4 | 5)
    # A whole report: put it in place in one rename, so a reader never sees half of one.
    chmod 644 "$tmp"
    mv -f "$tmp" "$report"
    ;;
  *)
    echo "nightly-gpu-health: diagnose could not run (exit $rc); no report written" >&2
    ;;
esac
case $rc in
  0) echo "nightly-gpu-health: healthy; report in $report" >&2 ;;
  4) echo "nightly-gpu-health: GPU problems found; see the failures in $report" >&2 ;;
  5) echo "nightly-gpu-health: nothing found, but some checks could not run; see $report" >&2 ;;
esac
exit "$rc"
