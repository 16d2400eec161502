#!/usr/bin/env bash
# Qualifies GPU AddressSanitizer before the weekly hip-asan suite runs (as aiter's
# qualify_gpu_asan.sh does): ROCm's ASan runtimes installed, the instrumented HIP, HSA and comgr
# libraries resolved from /opt/rocm/lib/asan (ldd, of a planted probe and of the suite's test
# executables), and a planted device out-of-bounds write that ASan must report. A sanitizer that
# cannot see that write would pass every test, so then the job fails before the suite.
#
# usage: ci/asan-qualify.sh [--install] [--build-dir build/hip-asan] [--arch gfx950] [--out DIR]
#   --install   apt-get install the missing ASan runtime packages (else: listed, exit 3)
# Exit codes: 0 qualified, 2 bad usage, 3 GPU ASan cannot be trusted here (the reason printed).
# Test hooks: DSV4_ASAN_CXX (/opt/rocm/llvm/bin/clang++), DSV4_ROCM_ASAN_LIB (/opt/rocm/lib/asan).
set -uo pipefail

die() { echo "asan-qualify: $*" >&2; exit 2; }
cannot() { echo "asan-qualify: FAILED: $*" >&2; exit 3; }
say() { echo "asan-qualify: $*"; }

cd "$(dirname "$0")/.." || exit 3
install=0 build=build/hip-asan arch=gfx950 out=out/asan-qualify
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1; shift ;;
    --build-dir) build=${2:-}; shift 2 ;;
    --arch) arch=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
cxx=${DSV4_ASAN_CXX:-/opt/rocm/llvm/bin/clang++}
asan_lib=${DSV4_ROCM_ASAN_LIB:-/opt/rocm/lib/asan}
mkdir -p "$out" || exit 3

# 1. ROCm's ASan runtimes.
packages=(hip-runtime-amd-asan hsa-rocr-asan comgr-asan rocm-core-asan)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$install" = 1 ] || cannot "ROCm's ASan runtimes are not installed: ${missing[*]} (run with --install, or use an image that has them)"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$out/apt.log" 2>&1 ||
    cannot "apt-get install ${missing[*]} failed (see $out/apt.log)"
fi
say "ASan runtimes: $(dpkg-query -W "${packages[@]}" 2>/dev/null | tr '\t\n' '= ' )"

# 2. The planted probe, built as the hip-asan preset builds (xnack+, shared ASan runtime).
probe=$out/asan-probe
"$cxx" -x hip --offload-arch="$arch:xnack+" -fsanitize=address -shared-libsan -g -O1 \
  -fno-omit-frame-pointer -frtlib-add-rpath -Wl,-rpath,"$asan_lib" ci/asan/probe.hip -o "$probe" \
  >"$out/compile.log" 2>&1 || cannot "the probe does not compile with $cxx (see $out/compile.log)"

export LD_LIBRARY_PATH=$asan_lib:/opt/rocm/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# 3. ldd: the instrumented libraries come from the ASan folder, the ASan runtime is linked.
check_ldd() {
  local exe=$1 log lib
  log=$out/ldd-$(basename "$exe").log
  ldd "$exe" >"$log" 2>&1 || cannot "ldd $exe failed (see $log)"
  for lib in libamdhip64 libhsa-runtime64 libamd_comgr; do
    grep -Eq "${lib}[^ ]* => ${asan_lib}/" "$log" ||
      cannot "$exe does not load the ASan $lib from $asan_lib: $(grep -E "$lib" "$log" | tr -s ' \t' ' ' || echo 'not linked')"
  done
  grep -q 'libclang_rt.asan' "$log" || cannot "$exe does not link the ASan runtime (libclang_rt.asan)"
  say "$exe: libamdhip64, libhsa-runtime64 and libamd_comgr from $asan_lib"
}
check_ldd "$probe"
suite_exe=$(find "$build" -maxdepth 4 -type f -name 'kernels_test_*' -perm -u+x 2>/dev/null | sort | head -n 1)
[ -n "$suite_exe" ] || cannot "no kernels_test_* executable in $build: build the hip-asan preset first"
check_ldd "$suite_exe"

# 4. The positive and negative controls.
export HSA_XNACK=1 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1}
timeout 120 "$probe" valid >"$out/valid.log" 2>&1 ||
  cannot "the probe's in-bounds write failed under ASan (exit $?, see $out/valid.log): the GPU or its ASan setup is broken"
timeout 120 "$probe" invalid >"$out/invalid.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || ! grep -q 'ERROR: AddressSanitizer: heap-buffer-overflow on amdgpu device' "$out/invalid.log"; then
  cat "$out/invalid.log"
  cannot "ASan did not report the planted device out-of-bounds write (exit $rc): the suite would pass without seeing anything"
fi
say "GPU ASan reported the planted out-of-bounds write (exit $rc) and passed the in-bounds one: qualified"
