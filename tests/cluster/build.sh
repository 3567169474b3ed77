#!/usr/bin/env bash
# Builds the local control plane's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, metrics-server) from the Go module proxy into a cache outside the repository,
# keyed by version. A warm cache makes this a no-op. Nothing built here is ever committed.
#
# Why wrapper modules: k8s.io/kubernetes requires its staging modules at v0.0.0, which the proxy
# does not serve, and etcd's server module carries ../ replace directives; both refuse
# `go install pkg@version`. A tiny module of our own that replaces each staging module with its
# published version builds them (the versions are pinned below).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
STAGING_VERSION=${STAGING_VERSION:-v0.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.14}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
# metrics-server v0.9.0: the release built against the Kubernetes v0.36 libraries (go 1.26.4;
# v0.9.1 needs go 1.26.10). Its binary carries its version in its name, so changing this does not
# invalidate the cache key of the other binaries (and a warm cache without it builds only it).
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.9.0}

CACHE_ROOT=${GPUCTL_CP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuctl-cp}
KEY="k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf '[cluster-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

all_present() {
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok "metrics-server-$METRICS_SERVER_VERSION"; do
    [ -x "$BIN/$b" ] || return 1
  done
}

if all_present; then
  # Warm cache: nothing to do. Print where the binaries are for callers.
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { log "error: Go is not installed; the control plane is built from Go modules (Go >= 1.26)"; exit 1; }
start=$(date +%s)
mkdir -p "$BIN" "$OUT/k8s" "$OUT/etcd" "$OUT/kwok" "$OUT/metrics-server"
log "cold build into $OUT (this takes 20-40 minutes on 2 cores; later runs reuse it)"

build_k8s() {
  local need=0
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do [ -x "$BIN/$b" ] || need=1; done
  [ $need = 1 ] || return 0
  cd "$OUT/k8s"
  [ -f go.mod ] || printf 'module local/k8sbuild\n\ngo 1.26.0\n' > go.mod
  log "kubernetes $K8S_VERSION: resolving staging modules"
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -n "$gomod" ] || { log "error: could not download k8s.io/kubernetes@$K8S_VERSION's go.mod"; exit 1; }
  # Derive the staging list from the published go.mod rather than hard-coding it.
  local m
  for m in $(awk '$2=="v0.0.0" && $1 ~ /^k8s\.io\// {print $1}' "$gomod" | sort -u); do
    go mod edit -replace="$m=$m@$STAGING_VERSION"
  done
  go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
  log "kubernetes $K8S_VERSION: downloading modules"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
         "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION"
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local d ldf="-s -w" p
  d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$d"
  done
  for p in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$BIN/$p" ] && continue
    log "kubernetes $K8S_VERSION: compiling $p"
    go build -trimpath -ldflags "$ldf" -o "$BIN/$p.tmp" "k8s.io/kubernetes/cmd/$p"
    mv "$BIN/$p.tmp" "$BIN/$p"
  done
}

build_etcd() {
  [ -x "$BIN/etcd" ] && return 0
  cd "$OUT/etcd"
  [ -f go.mod ] || printf 'module local/etcdbuild\n\ngo 1.26.0\n' > go.mod
  log "etcd $ETCD_VERSION: downloading modules"
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  log "etcd $ETCD_VERSION: compiling"
  local p=go.etcd.io/etcd/api/v3/version
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_kwok() {
  [ -x "$BIN/kwok" ] && return 0
  cd "$OUT/kwok"
  [ -f go.mod ] || printf 'module local/kwokbuild\n\ngo 1.26.0\n' > go.mod
  log "kwok $KWOK_VERSION: downloading modules"
  go get "sigs.k8s.io/kwok@$KWOK_VERSION"
  log "kwok $KWOK_VERSION: compiling"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" -o "$BIN/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok
  mv "$BIN/kwok.tmp" "$BIN/kwok"
}

build_metrics_server() {
  local out="$BIN/metrics-server-$METRICS_SERVER_VERSION"
  [ -x "$out" ] && return 0
  # The module has no replace directives, so `go install pkg@version` builds it exactly as
  # released (its own go.mod and go.sum); flags as its Makefile's build target.
  log "metrics-server $METRICS_SERVER_VERSION: downloading modules and compiling"
  GOBIN="$OUT/metrics-server" go install -trimpath \
    -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
    "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
  mv "$OUT/metrics-server/metrics-server" "$out"
}

(build_etcd)
(build_kwok)
(build_k8s)
(build_metrics_server)

all_present || { log "error: build finished but binaries are missing from $BIN"; exit 1; }
log "cold build done in $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s"
echo "$BIN"
