#!/usr/bin/env bash
# Runs the two PyTorch interop tests of the safetensors reader and writer where torch is (the
# kernels suite's ROCm PyTorch image): torch writes every dtype (replay/examples/torch_dtypes.py
# write), the C++ reads them (DSV4_TORCH_DTYPES) and writes its own (DSV4_TORCH_DTYPES_OUT), torch
# loads those back (torch_dtypes.py check). Without this step both tests skip in every workflow.
# usage: ci/torch-interop.sh BUILD_DIR OUT_DIR   (OUT_DIR/junit.xml is the tests' JUnit)
# Exit codes: 0 both tests ran and passed, 1 a test or the check failed, 2 bad usage, 3 could not
# run (no torch, a test skipped or missing).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
[ $# -eq 2 ] || { echo "usage: ci/torch-interop.sh BUILD_DIR OUT_DIR" >&2; exit 2; }
build=$1
mkdir -p "$2" || exit 3
out=$(cd "$2" && pwd)
say() { echo "torch-interop: $*"; }
python3 -c 'import torch' 2>/dev/null || { say "torch is not importable here: the interop tests cannot run" >&2; exit 3; }
if ! python3 -c 'import safetensors' 2>/dev/null; then
  say "installing safetensors"
  pip install safetensors >"$out/pip.log" 2>&1 || { say "pip install safetensors failed (see $out/pip.log)" >&2; exit 3; }
fi
python3 replay/examples/torch_dtypes.py write "$out/torch.safetensors" ||
  { say "torch_dtypes.py write failed" >&2; exit 3; }
status=0
DSV4_TORCH_DTYPES=$out/torch.safetensors DSV4_TORCH_DTYPES_OUT=$out/ours.safetensors \
  ctest --test-dir "$build" -R 'SafetensorsTorchInterop\.' --output-junit "$out/junit.xml" \
  --output-on-failure || status=1
[ -f "$out/junit.xml" ] || { say "ctest wrote no JUnit file" >&2; exit 3; }
ran=$(grep -c '<testcase' "$out/junit.xml")
skipped=$(grep -c '<skipped' "$out/junit.xml")
if [ "$ran" -lt 2 ] || [ "$skipped" -gt 0 ]; then
  say "expected the 2 SafetensorsTorchInterop tests to run: $ran found, $skipped skipped" >&2
  exit 3
fi
if [ -f "$out/ours.safetensors" ]; then
  python3 replay/examples/torch_dtypes.py check "$out/ours.safetensors" || status=1
else
  say "the C++ wrote no $out/ours.safetensors" >&2
  status=1
fi
[ $status -eq 0 ] && say "torch read what the C++ wrote and the C++ read what torch wrote"
exit $status
