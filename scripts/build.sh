#!/usr/bin/env bash
# Configures and builds gpuctl into build/ (or $GPUCTL_BUILD_DIR). Idempotent; incremental.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUCTL_BUILD_DIR:-$root/build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
cmake --build "$build" --parallel "$(nproc)"
