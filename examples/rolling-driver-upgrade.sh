#!/usr/bin/env bash
# Rolling GPU driver upgrade over the nodes a label selector picks, MAX_UNAVAILABLE at a time.
# Each node is cordoned and drained, upgraded by UPGRADE_COMMAND, waited for until Ready, verified
# over ssh (nvidia-smi answers on every GPU, no critical finding) and only then uncordoned. The
# first failure starts no further node; a node whose check fails stays cordoned, with the finding
# as its cordon reason (`gpuctl nodes -o wide` shows it).
#
#   rolling-driver-upgrade.sh SELECTOR [DRAIN FLAGS...]     e.g.  pool=a100 --ssh-user ubuntu
#
# Environment:
#   UPGRADE_COMMAND  run once per node by /bin/sh, the node's name as "$1" (and $GPUCTL_NODE);
#                    `--` keeps a node name from ever being read as an ssh option.
#                    Default: ssh -- "$1" sudo /opt/gpu/upgrade-driver.sh
#                    (or: ansible-playbook upgrade-driver.yml --limit "$1")
#   MAX_UNAVAILABLE  nodes out of service at once (default 1)
#   DRAIN_TIMEOUT    give up draining a node after this long (default 30m)
#   EXEC_TIMEOUT     kill UPGRADE_COMMAND after this long (default 45m; a reboot is part of it)
#   WAIT_READY       wait this long for the node to be Ready again (default 15m)
# The ssh verification uses ~/.ssh/config, or GPUCTL_SSH_CONFIG, GPUCTL_SSH_USER, ... (or pass
# the --ssh-* flags).
#
# Exit code: 0 when every node was upgraded and is back in service; 1 when one failed (the table's
# RESULT and MESSAGE say which and why); 130 on Ctrl-C. Running it again goes over every selected
# node again, so UPGRADE_COMMAND should do nothing on a node that already has the new driver.
set -euo pipefail

if (($# < 1)); then
  echo "usage: rolling-driver-upgrade.sh SELECTOR [DRAIN FLAGS...]   (e.g. pool=a100)" >&2
  exit 2
fi
selector=$1
shift
# Single quotes: "$1" is expanded by gpuctl's /bin/sh for each node, never here.
upgrade=${UPGRADE_COMMAND:-'ssh -- "$1" sudo /opt/gpu/upgrade-driver.sh'}

# --ignore-daemonsets: the device plugin and monitoring run as DaemonSets on every GPU node.
# --delete-emptydir-data: scratch space of evicted jobs; their checkpoints belong on volumes.
# Pods without a controller are refused (no --force): a bare pod would be lost for good.
exec gpuctl drain -l "$selector" --rolling \
  --max-unavailable "${MAX_UNAVAILABLE:-1}" \
  --reason "driver upgrade" \
  --ignore-daemonsets --delete-emptydir-data \
  --timeout "${DRAIN_TIMEOUT:-30m}" \
  --exec "$upgrade" --exec-timeout "${EXEC_TIMEOUT:-45m}" \
  --wait-ready "${WAIT_READY:-15m}" \
  --uncordon \
  "$@"
