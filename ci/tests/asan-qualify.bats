#!/usr/bin/env bats
# ci/asan-qualify.sh with fakes for dpkg-query, apt-get, the ROCm compiler, ldd and the probe it
# builds: the weekly GPU ASan job qualifies only when the runtimes are there, resolve from the
# ASan folder, and the planted device out-of-bounds write is reported.

load helpers

setup() {
  setup_fakes
  export DSV4_ASAN_CXX=$BIN/fake-clang DSV4_ROCM_ASAN_LIB=/opt/rocm/lib/asan
  export FAKE_INSTALLED=$TMP/installed FAKE_PROBE=reports FAKE_LDD=asan
  printf '%s\n' hip-runtime-amd-asan hsa-rocr-asan comgr-asan rocm-core-asan >"$FAKE_INSTALLED"
  BUILD=$TMP/build
  mkdir -p "$BUILD/unit/kernels"
  printf '#!/bin/sh\n' >"$BUILD/unit/kernels/kernels_test_kv_store"
  chmod +x "$BUILD/unit/kernels/kernels_test_kv_store"
  fake dpkg-query <<'EOS'
pkg=${!#}
if [ "${2#-f=}" != "$2" ]; then grep -qx "$pkg" "$FAKE_INSTALLED" && printf 'install ok installed'; exit 0; fi
exit 0
EOS
  fake apt-get <<'EOS'
[ "$1" = install ] && for p in "$@"; do case "$p" in -*|install) ;; *) echo "$p" >>"$FAKE_INSTALLED" ;; esac; done
exit 0
EOS
  # The compiler writes a probe whose behaviour FAKE_PROBE picks.
  fake fake-clang <<'EOS'
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
cat >"$out" <<'EOP'
#!/bin/sh
[ "$1" = valid ] && { echo "asan-probe: valid write done"; exit 0; }
case "$FAKE_PROBE" in
  reports) echo "==1==ERROR: AddressSanitizer: heap-buffer-overflow on amdgpu device 0 at pc 0x7f"; exit 1 ;;
  silent) echo "asan-probe: invalid write done"; exit 0 ;;
esac
EOP
chmod +x "$out"
EOS
  fake ldd <<'EOS'
lib=/opt/rocm/lib
[ "$FAKE_LDD" = asan ] && lib=/opt/rocm/lib/asan
for l in libamdhip64.so.7 libhsa-runtime64.so.1 libamd_comgr.so.3; do printf '\t%s => %s/%s (0x1)\n' "$l" "$lib" "$l"; done
printf '\tlibclang_rt.asan-x86_64.so => /opt/rocm/llvm/lib/clang/20/lib/linux/libclang_rt.asan-x86_64.so (0x1)\n'
EOS
}

teardown() { teardown_fakes; }

qualify() { run bash "$ROOT/ci/asan-qualify.sh" --build-dir "$BUILD" --out "$TMP/out" "$@"; }

@test "qualified: runtimes present, libraries from the ASan folder, the planted write reported" {
  qualify
  show
  [ "$status" -eq 0 ]
  [[ $output == *"reported the planted out-of-bounds write (exit 1)"* ]]
  grep -q "^fake-clang -x hip --offload-arch=gfx950:xnack+ -fsanitize=address -shared-libsan" "$FAKE_LOG"
  grep -q "^ldd $BUILD/unit/kernels/kernels_test_kv_store" "$FAKE_LOG"
  ! grep -q '^apt-get' "$FAKE_LOG"
}

@test "a planted write ASan does not report fails the job before the suite" {
  FAKE_PROBE=silent qualify
  show
  [ "$status" -eq 3 ]
  [[ $output == *"ASan did not report the planted device out-of-bounds write"* ]]
}

@test "missing ASan runtimes: listed without --install, installed with it" {
  printf '%s\n' hip-runtime-amd-asan comgr-asan >"$FAKE_INSTALLED"
  qualify
  show
  [ "$status" -eq 3 ]
  [[ $output == *"not installed: hsa-rocr-asan rocm-core-asan"* ]]
  qualify --install
  show
  [ "$status" -eq 0 ]
  grep -q '^apt-get install -y -qq --no-install-recommends hsa-rocr-asan rocm-core-asan' "$FAKE_LOG"
}

@test "instrumented libraries that do not resolve from /opt/rocm/lib/asan fail the qualification" {
  FAKE_LDD=plain qualify
  show
  [ "$status" -eq 3 ]
  [[ $output == *"does not load the ASan libamdhip64 from /opt/rocm/lib/asan"* ]]
}

@test "no hip-asan test executable to check is could-not-run" {
  rm -rf "$BUILD/unit"
  qualify
  show
  [ "$status" -eq 3 ]
  [[ $output == *"no kernels_test_* executable"* ]]
}
