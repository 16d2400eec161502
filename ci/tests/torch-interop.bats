#!/usr/bin/env bats
# ci/torch-interop.sh with fakes for python3 (torch, torch_dtypes.py) and ctest: the interop
# tests run with their variables set, and a skip or a missing torch is never a pass.

load helpers

setup() {
  setup_fakes
  export FAKE_CTEST=pass FAKE_TORCH=yes
  fake python3 <<'EOS'
if [ "$1" = -c ]; then [ "$FAKE_TORCH" = yes ]; exit; fi
case "$2" in
  write) echo torch >"$3" ;;
  check) [ -f "$3" ] ;;
esac
EOS
  fake ctest <<'EOS'
echo "env DSV4_TORCH_DTYPES=$DSV4_TORCH_DTYPES DSV4_TORCH_DTYPES_OUT=$DSV4_TORCH_DTYPES_OUT" >>"$FAKE_LOG"
while [ $# -gt 0 ]; do [ "$1" = --output-junit ] && x=$2; shift; done
case "$FAKE_CTEST" in
  pass) printf '<testsuite><testcase name="fixtures/SafetensorsTorchInterop.ReadsEveryDtypeTorchWrote" status="run"/>\n<testcase name="fixtures/SafetensorsTorchInterop.WritesEveryDtypeForTorch" status="run"/></testsuite>\n' >"$x"
        echo ours >"$DSV4_TORCH_DTYPES_OUT" ;;
  skip) printf '<testsuite><testcase name="a" status="run"><skipped message="set DSV4_TORCH_DTYPES"/></testcase>\n<testcase name="b" status="run"/></testsuite>\n' >"$x" ;;
esac
EOS
}

teardown() { teardown_fakes; }

@test "both interop tests run with their variables, and torch checks what the C++ wrote" {
  run bash "$ROOT/ci/torch-interop.sh" "$TMP/build" "$TMP/out"
  show
  [ "$status" -eq 0 ]
  grep -q "^env DSV4_TORCH_DTYPES=$TMP/out/torch.safetensors DSV4_TORCH_DTYPES_OUT=$TMP/out/ours.safetensors" "$FAKE_LOG"
  grep -q "^python3 replay/examples/torch_dtypes.py check $TMP/out/ours.safetensors" "$FAKE_LOG"
  grep -q "^ctest --test-dir $TMP/build -R SafetensorsTorchInterop" "$FAKE_LOG"
}

@test "a skipped interop test is could-not-run, and so is an image without torch" {
  FAKE_CTEST=skip run bash "$ROOT/ci/torch-interop.sh" "$TMP/build" "$TMP/out"
  show
  [ "$status" -eq 3 ]
  [[ $output == *"2 found, 1 skipped"* ]]
  FAKE_TORCH=no run bash "$ROOT/ci/torch-interop.sh" "$TMP/build" "$TMP/out2"
  [ "$status" -eq 3 ]
  [[ $output == *"torch is not importable"* ]]
}
