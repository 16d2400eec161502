#!/usr/bin/env bats
# ci/bundle-tools.sh with fakes for objdump, ldd, strip and patchelf: the glibc and GLIBCXX
# ceilings are checked, and a ceiling that cannot be checked (no objdump, nothing read) fails.

load helpers

setup() {
  setup_fakes
  BUILD=$TMP/build
  mkdir -p "$BUILD/e2e" "$BUILD/nightly"
  printf '#!/bin/sh\n' >"$BUILD/e2e/dsv4-eval"
  printf '#!/bin/sh\n' >"$BUILD/nightly/dsv4-nightly"
  chmod +x "$BUILD/e2e/dsv4-eval" "$BUILD/nightly/dsv4-nightly"
  printf 'lib\n' >"$TMP/libfoo.so.1"
  export FAKE_LIB=$TMP/libfoo.so.1
  fake ldd <<'EOS'
echo "	libfoo.so.1 => $FAKE_LIB (0x0)"
echo "	libc.so.6 => /lib/libc.so.6 (0x0)"
EOS
  fake strip <<'EOS'
exit 0
EOS
  fake patchelf <<'EOS'
exit 0
EOS
  only_tools env bash mkdir rm cp awk basename dirname tr wc seq grep sed sort tail tar gzip du cut
}

teardown() { teardown_fakes; }

# objdump printing symbol versions GLIBC_2.$1 and GLIBCXX_3.4.$2 (empty: none) for every file.
fake_objdump() {
  export FAKE_GLIBC=$1 FAKE_GLIBCXX=$2
  fake objdump <<'EOS'
[ -n "$FAKE_GLIBC" ] && echo "0000 DF *UND* 0000 GLIBC_2.$FAKE_GLIBC memcpy"
[ -n "$FAKE_GLIBCXX" ] && echo "0000 DF *UND* 0000 GLIBCXX_3.4.$FAKE_GLIBCXX _ZSt4cout"
exit 0
EOS
}

@test "bundle-tools: within the ceilings the bundle is packed" {
  fake_objdump 34 30
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/bundle-tools.sh" "$BUILD" "$TMP/dist" --max-glibc 2.35 --max-glibcxx 3.4.30
  show
  [ "$status" -eq 0 ]
  [[ $output == *"GLIBC_2.34 (allowed: 2.35)"* ]]
  [ -f "$TMP/dist/dsv4-tools.tar.gz" ]
  [ -f "$TMP/dist/dsv4-tools/build/lib/libfoo.so.1" ]
}

@test "bundle-tools: a symbol newer than the ceiling fails (exit 1)" {
  fake_objdump 38 30
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/bundle-tools.sh" "$BUILD" "$TMP/dist" --max-glibc 2.35 --max-glibcxx 3.4.30
  show
  [ "$status" -eq 1 ]
  [ ! -f "$TMP/dist/dsv4-tools.tar.gz" ]
}

@test "bundle-tools: without objdump the ceiling check is could-not-run, never a pass" {
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/bundle-tools.sh" "$BUILD" "$TMP/dist" --max-glibc 2.35
  show
  [ "$status" -eq 3 ]
  [[ $output == *"objdump is missing"* ]]
  [ ! -f "$TMP/dist/dsv4-tools.tar.gz" ]
}

@test "bundle-tools: objdump that reads no symbol version is could-not-run" {
  fake_objdump "" ""
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/bundle-tools.sh" "$BUILD" "$TMP/dist" --max-glibc 2.35 --max-glibcxx 3.4.30
  show
  [ "$status" -eq 3 ]
  [[ $output == *"found no GLIBC_2.* symbol"* ]]
  fake_objdump 34 ""
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/bundle-tools.sh" "$BUILD" "$TMP/dist" --max-glibc 2.35 --max-glibcxx 3.4.30
  [ "$status" -eq 3 ]
  [[ $output == *"found no GLIBCXX_3.4.* symbol"* ]]
}
