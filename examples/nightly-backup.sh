#!/usr/bin/env bash
# Nightly backup of the cluster's GPU admin state (node labels, taints and cordons, quotas,
# volumes, unfinished GPU jobs, ...): a dated archive in DIR, checked, and only the newest KEEP
# archives kept. Run by cron (see backup-cron); restore with `gpuctl restore ARCHIVE --dry-run`.
#
#   nightly-backup.sh DIR [KEEP]        KEEP defaults to 14
#
# Exit code: 0 when the new archive is written and reads back whole; otherwise gpuctl's (1: the
# cluster could not be read, nothing written) and no older archive is removed.
set -euo pipefail
export LC_ALL=C # the glob below sorts byte-wise: by the UTC time in the names

if (($# < 1 || $# > 2)); then
  echo "usage: nightly-backup.sh DIR [KEEP]" >&2
  exit 2
fi
dir=$1 keep=${2:-14}
case $keep in '' | *[!0-9]* | 0)
  echo "nightly-backup: KEEP must be a whole number of at least 1, not '$keep'" >&2
  exit 2
  ;;
esac
mkdir -p "$dir"

# gpuctl writes the archive 0600 under a temporary name in DIR, syncs it and renames it: a crash
# or a full disk never leaves a partial archive under this name.
archive="$dir/gpuctl-backup-$(date -u +%Y%m%dT%H%M%SZ).tar.gz"
gpuctl backup -f "$archive"
# Every file against its checksum: an archive that does not read back is no backup.
gpuctl backup inspect "$archive" >/dev/null

# Oldest first; remove all but the newest $keep.
archives=("$dir"/gpuctl-backup-*.tar.gz)
if ((${#archives[@]} > keep)); then
  rm -f -- "${archives[@]:0:${#archives[@]}-keep}"
fi
echo "nightly-backup: $archive written and checked; the newest $keep archive(s) kept"
