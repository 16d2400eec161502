#!/usr/bin/env bats
# ci/compile-check.sh on a stand-in checkout (the script, two kernel sources, a passing resource
# report) with fakes for cmake, ctest and nvcc: the nvcc step's verdict from ptxas' report alone
# (clean, a spill, an injected warpgroup.wait, a serialized wgmma pipeline), and a failed compile
# naming its source.

load helpers

setup() {
  setup_fakes
  WS=$TMP/ws
  mkdir -p "$WS/ci" "$WS/kernels/src" "$WS/kernels/gpu/src"
  cp "$ROOT/ci/compile-check.sh" "$WS/ci/"
  printf '#!/usr/bin/env bash\nexit 0\n' >"$WS/ci/amdgpu-resource-report.sh"
  : >"$WS/kernels/src/alpha.hip"
  : >"$WS/kernels/src/beta.hip"
  fake cmake <<<'exit 0'
  fake ctest <<<'exit 0'
  # ptxas' report of source $src as FAKE_PTXAS_<name> says: clean (default), spill, c7517,
  # c7514, fail
  fake nvcc <<'EOF2'
src=""
for a in "$@"; do case $a in *.hip) src=$a ;; esac; done
name=$(basename "$src" .hip)
var=FAKE_PTXAS_$name
case ${!var:-clean} in
  fail) echo "$src(3): error: expected a ';'"; exit 1 ;;
  spill) echo "ptxas info    : Used 255 registers"; echo "    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads" ;;
  c7517) echo "ptxas info    : (C7517) warpgroup.wait is injected in around line 9 by compiler to allow use of registers defined by GMMA in function 'k'"
         echo "ptxas info    : Used 200 registers"; echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ;;
  c7514) echo "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'k'"
         echo "ptxas info    : Used 255 registers"; echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ;;
  *) echo "ptxas info    : Used 64 registers"; echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ;;
esac
exit 0
EOF2
}

teardown() { teardown_fakes; }

@test "clean reports pass with each source's registers" {
  run bash "$WS/ci/compile-check.sh"
  show
  [ "$status" -eq 0 ]
  [[ "$output" == *"| alpha "*"|       64 |"* ]]
  [[ "$output" == *"compile checks: passed"* ]]
}

@test "a spill fails the check" {
  FAKE_PTXAS_beta=spill run bash "$WS/ci/compile-check.sh"
  show
  [ "$status" -eq 1 ]
  [[ "$output" == *"nvcc: kernels/src/beta.hip spills registers"* ]]
  [[ "$output" == *"compile checks: FAILED"* ]]
}

# Source $1's ptxas report $2 fails the check with verdict $3, quoted, and names no other source.
pipeline_fails() {
  local other=alpha
  [ "$1" = alpha ] && other=beta
  run env "FAKE_PTXAS_$1=$2" bash "$WS/ci/compile-check.sh"
  show
  [ "$status" -eq 1 ]
  [[ "$output" == *"nvcc: kernels/src/$1.hip: $3"* ]]
  [[ "$output" == *"${2^^}"* ]]
  [[ "$output" != *"$other.hip: $3"* ]]
  [[ "$output" == *"compile checks: FAILED"* ]]
}

@test "an injected warpgroup.wait fails the check and is quoted" {
  pipeline_fails alpha c7517 "ptxas injected a warpgroup.wait"
}

@test "a compile error fails the check naming the source" {
  FAKE_PTXAS_beta=fail run bash "$WS/ci/compile-check.sh"
  show
  [ "$status" -eq 1 ]
  [[ "$output" == *"nvcc: kernels/src/beta.hip FAILED"* ]]
}

@test "a serialized wgmma pipeline fails the check and is quoted" {
  pipeline_fails beta c7514 "ptxas serialized the wgmma pipeline"
}
