#!/usr/bin/env bash
# package.deb: the .deb that `cpack -G DEB` makes from the build tree is lintian-clean, installs
# with dpkg into an empty root, and there gpuctl runs, `man gpuctl` renders and kubectl-gpu is a
# link to gpuctl; `cmake --install` (--prefix, and DESTDIR) lays out the very same files.
# Usage: deb.sh BUILD_DIR CMAKE CPACK. Everything it makes is in a temporary folder.
set -euo pipefail
build=$(cd "$1" && pwd)
cmake=$2
cpack=$3
fail() { echo "package.deb: $*" >&2; exit 1; }
for tool in lintian dpkg dpkg-deb dpkg-shlibdeps man readelf gzip; do
  command -v "$tool" >/dev/null || fail "$tool is not installed: run scripts/install-deps.sh"
done
version=$("$build/gpuctl" --version | awk '{print $2}')
[ -n "$version" ] || fail "could not read the version from $build/gpuctl --version"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # dpkg and man may run as another user (man-db drops to 'man')

# --- The package and its control fields -------------------------------------------------------
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack -G DEB failed"; }
debs=("$tmp"/out/gpuctl_*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || fail "cpack made no single gpuctl_*.deb: ${debs[*]}"
deb=${debs[0]}
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = gpuctl ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', gpuctl --version says $version"
[ "$(field Section)" = admin ] || fail "Section is '$(field Section)'"
[ "$(field Recommends)" = openssh-client ] || fail "Recommends is '$(field Recommends)'"
depends=$(field Depends)
# libc6 and libstdc++6 come from dpkg-shlibdeps (it ran); libcurl4 from libcurl's shlibs file,
# since gpuctl loads libcurl with dlopen where dpkg-shlibdeps cannot see it.
for p in libc6 libstdc++6 libyaml-cpp libcurl4; do
  [[ ", $depends" == *", $p"* ]] || fail "Depends has no $p: $depends"
done
if dpkg-deb -c "$deb" | awk '$2 != "root/root"' | grep .; then fail "files not owned by root/root (above)"; fi

# lintian: no error and no warning (the info-level tags that remain are explained in
# cmake/GpuctlPackage.cmake).
lintian_rc=0
lintian --fail-on error,warning --display-info "$deb" >"$tmp/lintian.log" 2>&1 || lintian_rc=$?
grep -v 'running with root privileges' "$tmp/lintian.log" >&2 || true
[ $lintian_rc -eq 0 ] || fail "lintian reported errors or warnings (above)"

# --- Installed into an empty root ---------------------------------------------------------------
# A minimal dpkg database holding only the host's entries for the packages named in Depends: dpkg
# then checks, with no --force-depends, that Debian's packages at this machine's versions satisfy
# them (and the binary below runs against exactly those libraries). --force-not-root lets a
# non-root test run dpkg --root (the files then belong to the user running it); --log keeps the
# host's /var/log/dpkg.log out of it.
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/log"
touch "$root/var/lib/dpkg/available"
for p in $(echo "$depends" | tr ',' '\n' | sed 's/(.*//; s/|.*//; s/ //g'); do
  dpkg-query -s "$p" >>"$root/var/lib/dpkg/status" 2>/dev/null || fail "Depends names $p, which this machine does not have"
  echo >>"$root/var/lib/dpkg/status"
  touch "$root/var/lib/dpkg/info/$(dpkg-query -W -f '${binary:Package}' "$p").list"
done
dpkg --root="$root" --force-not-root --log="$root/var/log/dpkg.log" -i "$deb" >"$tmp/dpkg.log" 2>&1 ||
  { cat "$tmp/dpkg.log" >&2; fail "dpkg -i into an empty root failed"; }
[ "$(dpkg --root="$root" -s gpuctl | sed -n 's/^Status: //p')" = "install ok installed" ] || fail "gpuctl is not installed in $root"

bin=$root/usr/bin
out=$("$bin/gpuctl" --version) || fail "the installed gpuctl --version failed"
[[ $out == "gpuctl $version (commit "* ]] || fail "installed gpuctl --version printed: $out"
[ "$(readlink "$bin/kubectl-gpu")" = gpuctl ] || fail "kubectl-gpu is not a relative link to gpuctl"
[[ $("$bin/kubectl-gpu" --version) == "gpuctl $version "* ]] || fail "kubectl-gpu --version does not run gpuctl"
if readelf -S "$bin/gpuctl" | grep -E '\.symtab|\.debug_'; then fail "the packaged gpuctl is not stripped"; fi
for page in gpuctl kubectl-gpu gpuctl-drain; do
  text=$(MANWIDTH=80 man -M "$root/usr/share/man" -P cat "$page" 2>&1) || fail "man $page failed: $text"
  grep -q '^NAME' <<<"$text" || fail "man $page renders no NAME section: $text"
done
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
  "$root/usr/share/doc/gpuctl/copyright" || fail "copyright is not in the machine-readable format"
[[ $(gzip -dc "$root/usr/share/doc/gpuctl/changelog.gz" | head -1) == "gpuctl ($version) "* ]] ||
  fail "changelog.gz does not start with version $version"

# --- The layout: the package's, and cmake --install's with --prefix and with DESTDIR -------------
# One line per file or link (type, path under the prefix, link target), sorted.
layout() { (cd "$1" && find . -mindepth 1 ! -type d -printf '%y %P %l\n' | sort); }
"$cmake" --install "$build" --strip --prefix "$tmp/prefix" >/dev/null
DESTDIR=$tmp/dest "$cmake" --install "$build" --strip --prefix /usr >/dev/null
layout "$root/usr" >"$tmp/deb.layout"
layout "$tmp/prefix" >"$tmp/prefix.layout"
layout "$tmp/dest/usr" >"$tmp/dest.layout"
[ -z "$(find "$tmp/dest" -mindepth 1 -maxdepth 1 ! -name usr)" ] || fail "DESTDIR install wrote outside DESTDIR/usr"
diff -u "$tmp/deb.layout" "$tmp/prefix.layout" >&2 || fail "cmake --install --prefix differs from the .deb (above)"
diff -u "$tmp/deb.layout" "$tmp/dest.layout" >&2 || fail "cmake --install with DESTDIR differs from the .deb (above)"

# Every file is where it belongs and nothing else is installed.
pages=$(ls "$build/man" | grep -c '\.1$')
[ "$(grep -c '^f share/man/man1/gpuctl.*\.1\.gz $' "$tmp/deb.layout")" -eq "$pages" ] ||
  fail "not all $pages man pages of $build/man are installed gzipped in share/man/man1"
for want in "f bin/gpuctl " "l bin/kubectl-gpu gpuctl" "f share/man/man1/gpuctl.1.gz " \
  "l share/man/man1/kubectl-gpu.1.gz gpuctl.1.gz" "f share/doc/gpuctl/copyright " "f share/doc/gpuctl/changelog.gz " \
  "f share/bash-completion/completions/gpuctl " "f share/zsh/site-functions/_gpuctl " \
  "f share/fish/vendor_completions.d/gpuctl.fish " "f bin/kubectl_complete-gpu "; do
  grep -qxF "$want" "$tmp/deb.layout" || fail "not installed: $want"
done
unexpected=$(grep -vE '^(f bin/gpuctl |l bin/kubectl-gpu gpuctl|l share/man/man1/kubectl-gpu\.1\.gz gpuctl\.1\.gz|l share/man/man1/kubectl_complete-gpu\.1\.gz gpuctl-completion\.1\.gz|f share/man/man1/gpuctl[a-z-]*\.1\.gz |f share/doc/gpuctl/(copyright|changelog\.gz) |f share/bash-completion/completions/gpuctl |f share/zsh/site-functions/_gpuctl |f share/fish/vendor_completions.d/gpuctl\.fish |f bin/kubectl_complete-gpu )$' "$tmp/deb.layout" || true)
[ -z "$unexpected" ] || fail "installed where nothing belongs: $unexpected"
# Completion works from the installed files alone: bash's function, run as bash runs it on TAB
# (the installed gpuctl first on PATH), completes "dr" to drain; zsh's file is a completion
# function; kubectl_complete-gpu answers in cobra's protocol.
words=$(PATH="$bin:$PATH" bash -c '
  source "$1/usr/share/bash-completion/completions/gpuctl" && complete -p gpuctl >/dev/null || exit 1
  COMP_LINE="gpuctl dr" COMP_POINT=9 COMP_WORDS=(gpuctl dr) COMP_CWORD=1
  __gpuctl_complete && printf "%s\n" "${COMPREPLY[@]}"' bash "$root") || fail "the installed bash completion does not load"
[ "$words" = drain ] || fail "the installed bash completion completes 'gpuctl dr' to '$words', not 'drain'"
head -1 "$root/usr/share/zsh/site-functions/_gpuctl" | grep -q '^#compdef gpuctl' ||
  fail "_gpuctl does not start with #compdef gpuctl"
[ -x "$bin/kubectl_complete-gpu" ] || fail "kubectl_complete-gpu is not executable"
"$bin/kubectl_complete-gpu" no | grep -qx 'nodes.*' || fail "kubectl_complete-gpu does not complete 'no' to nodes"
echo "completion: bash completes from the installed script, zsh's _gpuctl and kubectl_complete-gpu answer"
echo "$(basename "$deb"): lintian clean, installs into an empty root; $(wc -l <"$tmp/deb.layout") files, same layout as cmake --install"
