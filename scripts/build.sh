#!/usr/bin/env bash
# Configures and builds gpuctl into build/ (or $GPUCTL_BUILD_DIR). Idempotent; incremental.
# GPUCTL_BUILD_TARGETS="gpuctl" builds only those targets (scripts/sandbox: no unit tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUCTL_BUILD_DIR:-$root/build}
# ccache (when installed) can then serve a checkout in another folder (paths relative to the
# repository, the working directory left out of the hash) and the precompiled-header sources;
# settings already in the environment win.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
targets=()
for t in ${GPUCTL_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
