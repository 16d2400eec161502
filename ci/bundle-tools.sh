#!/usr/bin/env bash
# Packs dsv4-eval, dsv4-nightly and the test server of a built preset into DIR/dsv4-tools.tar.gz,
# laid out as DIR/dsv4-tools/build/{e2e,nightly,fixtures/server}, with every shared library they
# need except glibc's in DIR/dsv4-tools/build/lib (found through an $ORIGIN run path, so nothing
# leaks into the server's LD_LIBRARY_PATH). Fails when a binary needs a glibc newer than
# --max-glibc: the oldest glibc of the images the bundle runs in (SGLang's ROCm 7.2 images are
# Ubuntu 22.04, glibc 2.35).
# usage: ci/bundle-tools.sh BUILD_DIR DIR [--max-glibc 2.N]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: ci/bundle-tools.sh BUILD_DIR DIR [--max-glibc 2.N]" >&2; exit 2; }
build=$1 dist=$2 max=""
shift 2
[ "${1:-}" = --max-glibc ] && max=${2:-}
command -v patchelf >/dev/null || { echo "bundle-tools: patchelf is missing (ci/deps.sh installs it)" >&2; exit 3; }
root=$dist/dsv4-tools/build
rm -rf "$dist/dsv4-tools" && mkdir -p "$root/lib"
for t in e2e/dsv4-eval nightly/dsv4-nightly fixtures/server/dsv4-test-server; do
  [ -x "$build/$t" ] || { echo "bundle-tools: $build/$t is not built" >&2; exit 3; }
  mkdir -p "$root/$(dirname "$t")"
  cp "$build/$t" "$root/$t"
  strip "$root/$t"
  # Shared libraries but the C library's own (the image provides those).
  ldd "$build/$t" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libresolv.so*) ;;
      *) cp -nL "$lib" "$root/lib/" ;;
    esac
  done
  depth=$(tr -cd / <<<"$t" | wc -c)
  patchelf --set-rpath "\$ORIGIN/$(printf '../%.0s' $(seq "$depth"))lib" "$root/$t"
done
for lib in "$root"/lib/*; do patchelf --set-rpath "\$ORIGIN" "$lib"; done
if [ -n "$max" ]; then
  need=$(for f in "$root"/*/dsv4-* "$root"/fixtures/server/* "$root"/lib/*; do
           objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' || true
         done | sort -t. -k2 -n -u | tail -1)
  echo "bundle-tools: newest glibc symbol needed: ${need:-none}"
  if [ -n "$need" ] && [ "${need#GLIBC_2.}" -gt "${max#2.}" ]; then
    echo "bundle-tools: the bundle needs $need but must run with glibc $max; build it on an older base" >&2
    exit 1
  fi
fi
tar -czf "$dist/dsv4-tools.tar.gz" -C "$dist" dsv4-tools
echo "bundle-tools: $dist/dsv4-tools.tar.gz ($(du -h "$dist/dsv4-tools.tar.gz" | cut -f1))"
