#!/usr/bin/env bash
# The main job: installs what is missing, builds the preset that fits this machine (hip where ROCm
# answers, cuda where an NVIDIA GPU answers, cpu otherwise), runs its suite and prints the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
preset=cpu
if command -v rocminfo >/dev/null 2>&1 && rocminfo 2>/dev/null | grep -q 'gfx9[0-9a-f]*\|gfx1[0-9a-f]*'; then
  preset=hip
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  preset=cuda
fi
echo "main: preset $preset"
bash ci/deps.sh || { echo "main: could not install dependencies"; exit 3; }
cmake --preset "$preset" || exit 3
cmake --build --preset "$preset" -j "$(nproc)" || { echo "main: build FAILED"; exit 1; }
status=0
ctest --preset "$preset" -j "$(nproc)" --output-junit junit.xml || status=1
python3 ci/summary.py "build/$preset" "build/$preset/junit.xml" || status=1
exit $status
