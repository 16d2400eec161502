#!/usr/bin/env bash
# Packs dsv4-eval and dsv4-nightly of a built preset into DIR/dsv4-tools.tar.gz, laid out as
# DIR/dsv4-tools/build/{e2e,nightly}, with every shared library they need except glibc's and the
# C++ runtime (the image provides those) in DIR/dsv4-tools/build/lib, found through an $ORIGIN run
# path so nothing leaks into the server's LD_LIBRARY_PATH. Fails when the bundle needs a glibc or a
# libstdc++ newer than the oldest image it runs in has (SGLang's ROCm 7.2 images are Ubuntu 22.04:
# glibc 2.35, libstdc++ of GCC 12, GLIBCXX_3.4.30). A libstdc++ linked in statically would not do:
# Debian 12's calls arc4random, which glibc 2.35 lacks.
# usage: ci/bundle-tools.sh BUILD_DIR DIR [--max-glibc 2.N] [--max-glibcxx 3.4.N]
# Exit codes: 0 bundled, 1 a ceiling is exceeded, 2 bad usage, 3 could not run (no patchelf, no
# objdump with a ceiling given, a tool not built, symbols unreadable).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: ci/bundle-tools.sh BUILD_DIR DIR [--max-glibc 2.N]" >&2; exit 2; }
build=$1 dist=$2 max="" maxcxx=""
shift 2
while [ $# -gt 0 ]; do
  case "$1" in
    --max-glibc) max=${2:-}; shift 2 ;;
    --max-glibcxx) maxcxx=${2:-}; shift 2 ;;
    *) echo "bundle-tools: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command -v patchelf >/dev/null || { echo "bundle-tools: patchelf is missing (ci/deps.sh installs it)" >&2; exit 3; }
# Without objdump the runtime ceilings cannot be checked: that is no pass.
if [ -n "$max$maxcxx" ] && ! command -v objdump >/dev/null; then
  echo "bundle-tools: objdump is missing (binutils): the glibc and GLIBCXX ceilings cannot be checked" >&2
  exit 3
fi
root=$dist/dsv4-tools/build
rm -rf "$dist/dsv4-tools" && mkdir -p "$root/lib"
for t in e2e/dsv4-eval nightly/dsv4-nightly; do
  [ -x "$build/$t" ] || { echo "bundle-tools: $build/$t is not built" >&2; exit 3; }
  mkdir -p "$root/$(dirname "$t")"
  cp "$build/$t" "$root/$t"
  strip "$root/$t"
  # Shared libraries but the C library's own (the image provides those).
  ldd "$build/$t" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libresolv.so*) ;;
      libstdc++.so*|libgcc_s.so*) ;;
      *) cp -nL "$lib" "$root/lib/" ;;
    esac
  done
  depth=$(tr -cd / <<<"$t" | wc -c)
  patchelf --set-rpath "\$ORIGIN/$(printf '../%.0s' $(seq "$depth"))lib" "$root/$t"
done
for lib in "$root"/lib/*; do patchelf --set-rpath "\$ORIGIN" "$lib"; done
# The newest symbol version of PREFIX (GLIBC_2. or GLIBCXX_3.4.) the bundle needs: its last number.
newest() {
  for f in "$root"/*/dsv4-* "$root"/lib/*; do
    objdump -T "$f" 2>/dev/null | grep -o "$1[0-9]*" || true
  done | sed "s/^$1//" | sort -n -u | tail -1
}
status=0
if [ -n "$max" ]; then
  need=$(newest 'GLIBC_2\.')
  # Every dynamically linked executable needs some GLIBC_2.* symbol: none found is an unread file.
  [ -n "$need" ] || { echo "bundle-tools: objdump -T found no GLIBC_2.* symbol in the bundle: it could not be read" >&2; exit 3; }
  echo "bundle-tools: newest glibc symbol needed: GLIBC_2.$need (allowed: $max)"
  [ "$need" -gt "${max#2.}" ] && status=1
fi
if [ -n "$maxcxx" ]; then
  need=$(newest 'GLIBCXX_3\.4\.')
  # The tools are C++ and use the image's libstdc++: none found is an unread file.
  [ -n "$need" ] || { echo "bundle-tools: objdump -T found no GLIBCXX_3.4.* symbol in the bundle: it could not be read" >&2; exit 3; }
  echo "bundle-tools: newest libstdc++ symbol needed: GLIBCXX_3.4.$need (allowed: $maxcxx)"
  [ "$need" -gt "${maxcxx#3.4.}" ] && status=1
fi
if [ $status -ne 0 ]; then
  echo "bundle-tools: the bundle needs a newer C or C++ runtime than its images have; build it on an older base" >&2
  exit 1
fi
tar -czf "$dist/dsv4-tools.tar.gz" -C "$dist" dsv4-tools
echo "bundle-tools: $dist/dsv4-tools.tar.gz ($(du -h "$dist/dsv4-tools.tar.gz" | cut -f1))"
