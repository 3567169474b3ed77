#!/usr/bin/env bash
# Installs gpuctl's build and test dependencies from Debian's packages. Idempotent: packages
# already present are left alone, and nothing is done when all are there.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build ccache pkg-config
  libcli11-dev libyaml-cpp-dev libcurl4-openssl-dev nlohmann-json3-dev libfmt-dev libpugixml-dev
  zlib1g-dev
  # tests
  catch2
  # the e2e checks of diagnose's outputs: real readers of JUnit (xmllint against the XSD that
  # Jenkins validates with) and of Prometheus' text format (the official client's parser)
  libxml2-utils python3-prometheus-client
  # the man pages gpuctl writes are checked with groff -ww (tests/man/lint.sh)
  groff-base
  # the .deb (cpack -G DEB): dpkg-shlibdeps computes its Depends; package.deb checks it with
  # lintian and renders the installed pages with man (tests/package/deb.sh)
  dpkg-dev lintian man-db
  # the local cluster (tests/cluster): PKI, real sshd hosts, network namespaces, ports
  openssl openssh-server openssh-client iproute2 procps curl python3 python3-yaml
  # `gpuctl --via prometheus` is tested against a real Prometheus (2.42 in bookworm) scraping
  # dcgm-exporter expositions (tests/cluster/sim_prometheus.py), plain and behind TLS + basic auth
  prometheus
  # the e2e tests of proxy-url: a real HTTP CONNECT proxy and a real SOCKS5 proxy
  tinyproxy microsocks
  # scripts/bench: GNU time reports a measured child's peak RSS (the bench's own RSS stays out);
  # gnuplot renders the plots of docs/benchmarks (bench/plot.py); pdsh is the peer of `gpuctl gpus`
  # in the gpus-fanout scenario
  time gnuplot-nox pdsh
  # e2e.completion drives the completion scripts in real shells, each in its own tmux server:
  # bash with bash-completion's library (and without it), zsh's compinit, and fish
  zsh bash-completion tmux fish
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
