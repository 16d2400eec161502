#!/usr/bin/env bash
# The sanitizer preset's own proof: a planted missing barrier passes its plain test and
# compute-sanitizer racecheck reports it. Exit 0 proven, 1 not (or no tool: a check that cannot
# look fails), 77 skipped outside the sanitizer preset (DSV4_SANITIZE unset).
# usage: ci/sanitizer-planted.sh <planted test executable> <output folder>
set -uo pipefail
exe=${1:?usage: sanitizer-planted.sh EXE OUTDIR}
out=${2:?usage: sanitizer-planted.sh EXE OUTDIR}
if [ -z "${DSV4_SANITIZE:-}" ]; then
  echo "sanitizer-planted: DSV4_SANITIZE is not set; \`ctest --preset sanitizer\` sets it"
  exit 77
fi
tool=$(command -v compute-sanitizer || true)
[ -z "$tool" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && tool=$CUDA_HOME/bin/compute-sanitizer
[ -z "$tool" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && tool=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$tool" ]; then
  echo "sanitizer-planted: FAILED: compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
  exit 1
fi
mkdir -p "$out"
if ! "$exe" > "$out/plain.log" 2>&1; then
  echo "sanitizer-planted: the planted kernel failed its plain check (see $out/plain.log):"
  tail -20 "$out/plain.log"
  echo "sanitizer-planted: the plain tests see this race; the proof needs a race only racecheck sees"
  exit 1
fi
"$tool" --tool racecheck --racecheck-report hazard --error-exitcode 86 --print-limit 20 \
  --log-file "$out/racecheck.log" "$exe" > "$out/racecheck.out" 2>&1
rc=$?
hazards=$(grep -cE 'Race reported|Error: Race|hazard' "$out/racecheck.log" || true)
if [ "$rc" -eq 86 ] && [ "$hazards" -gt 0 ]; then
  echo "sanitizer-planted: racecheck reported the planted race ($hazards report lines; $out/racecheck.log):"
  grep -m 5 -E 'Race reported|Error: Race|hazard' "$out/racecheck.log"
  exit 0
fi
echo "sanitizer-planted: FAILED: racecheck exited $rc with $hazards hazard lines on a kernel missing a barrier"
tail -20 "$out/racecheck.log"
exit 1
