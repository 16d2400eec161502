#!/usr/bin/env bash
# Runs the bats tests of the CI scripts (ci/tests/*.bats: fakes for docker, rocm-smi, pip, ...).
# Exit 0 all pass, 1 a test failed, 77 bats is not installed (ctest reports it skipped; ci/deps.sh
# installs it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
command -v bats >/dev/null || { echo "bats: SKIPPED: not installed (apt-get install -y bats)"; exit 77; }
exec bats ci/tests
