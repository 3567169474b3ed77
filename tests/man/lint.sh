#!/usr/bin/env bash
# man.lint: the pages gpuctl writes from its command tree (gpuctl __man) are valid roff that
# groff formats without a single warning (-ww), one per command, each with the sections a man
# page has. Usage: lint.sh GPUCTL
set -euo pipefail
gpuctl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$gpuctl" __man "$dir"
count=0
for page in "$dir"/*.1; do
  count=$((count + 1))
  warnings=$(groff -man -ww -z "$page" 2>&1)
  if [ -n "$warnings" ]; then
    echo "$(basename "$page"): groff warns:" >&2
    echo "$warnings" >&2
    exit 1
  fi
  for section in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" ENVIRONMENT FILES "SEE ALSO"; do
    grep -q "^\.SH $section\$" "$page" || { echo "$(basename "$page"): no $section section" >&2; exit 1; }
  done
done
# The root page and one per command and subcommand of --help.
commands=$("$gpuctl" --help | awk '/^[A-Z][A-Za-z ]*:$/ {section=$0} section !~ /Options/ && /^  [a-z]/ {print $1}')
[ "$(echo "$commands" | wc -w)" -ge 10 ] || { echo "could not read the commands from gpuctl --help" >&2; exit 1; }
for c in $commands; do
  [ -f "$dir/gpuctl-$c.1" ] || { echo "no man page for gpuctl $c" >&2; exit 1; }
done
echo "$count man pages, groff -ww clean"
