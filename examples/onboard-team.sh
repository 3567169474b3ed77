#!/usr/bin/env bash
# Onboard a team: its namespace, a GPU quota (enforced: requests.nvidia.com/gpu) and the most GPUs
# one pod may ask for (a LimitRange). Safe to run again: what is already so is left unchanged,
# and a new GPUS resizes the quota in place.
#
#   onboard-team.sh [--dry-run[=client|server]] NAMESPACE GPUS [MAX_PER_POD]
#
#   onboard-team.sh ml-vision 16 8        # 16 GPUs for the team, at most 8 in one pod
#   onboard-team.sh --dry-run ml-nlp 8    # what would be written; nothing is sent
#
# MAX_PER_POD defaults to GPUS. --dry-run=server sends every write with dryRun=All (admission
# answers, nothing is stored); it needs the namespace to exist already.
set -euo pipefail

dry_run=""
case ${1:-} in
  --dry-run) dry_run=--dry-run=client; shift ;;
  --dry-run=*) dry_run=$1; shift ;;
esac
if (($# < 2 || $# > 3)); then
  echo "usage: onboard-team.sh [--dry-run[=client|server]] NAMESPACE GPUS [MAX_PER_POD]" >&2
  exit 2
fi
ns=$1 gpus=$2 max_per_pod=${3:-$2}

# `kubectl apply` is what makes this idempotent (`create` fails when the namespace exists).
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply ${dry_run:+"$dry_run"} -f -

# gpuctl writes only its own two objects (gpuctl-gpu-quota, gpuctl-gpu-limits), says
# "unchanged" or "configured: requests.nvidia.com/gpu 8 -> 16", and warns when the new quota is
# below what the team already uses.
gpuctl quota set "$ns" --gpus "$gpus" --max-per-pod "$max_per_pod" ${dry_run:+"$dry_run"}
