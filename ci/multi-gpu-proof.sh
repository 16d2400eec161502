#!/usr/bin/env bash
# Times the GPU suite (`ctest -L gpu`) of a built GPU preset and writes what it shows:
#   multi     (a) on one GPU and (b) on every GPU of the node, at the same -j, each with a
#             resource spec from nightly/gpu-resource-spec.sh sized by what a GPU holds;
#   sharding  on one GPU: the sharded registration (the default) against one process per test
#             (DSV4_GPU_TEST_SHARDS=per-test), at the same -j;
#   all       both (the one-GPU sharded run serves both comparisons); the default with >= 2 GPUs.
# Each test's GPU comes from the device log of the test main (DSV4_DEVICE_LOG, one line per
# GoogleTest test: time, CTEST_RESOURCE_GROUP_0_GPUS, visible devices, executable, test).
# usage: ci/multi-gpu-proof.sh [--build-dir build/cuda] [--out DIR] [--jobs 12] [--mode M]
#                              [--mib-per-slot 4096] [--limit 240]
# Writes <out>/summary.md (also printed) and per run <out>/<run>/{ctest.log,junit.xml,junit/,
# devices.log,spec.json,smi.csv}. Exit 0 every run passed, 1 a test failed or a run was stopped at
# --limit seconds, 2 bad usage, 3 could not run (no build, no GPU, one GPU for multi).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/cuda out=$PWD/multi-gpu-proof jobs=12 mode='' mib_per_slot=4096 limit=240
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --out) out=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --jobs|-j) jobs=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --mode) mode=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --mib-per-slot) mib_per_slot=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --limit) limit=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "multi-gpu-proof: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in jobs mib_per_slot limit; do
  case "${!v}" in ''|*[!0-9]*|0*) echo "multi-gpu-proof: --${v//_/-} must be a positive integer, got '${!v}'" >&2; exit 2 ;; esac
done
case "$mode" in ''|multi|sharding|all) ;; *) echo "multi-gpu-proof: --mode must be multi, sharding or all, got '$mode'" >&2; exit 2 ;; esac
[ -z "$out" ] && { echo "multi-gpu-proof: --out needs a directory" >&2; exit 2; }
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
[ -f "$build/CTestTestfile.cmake" ] || { echo "multi-gpu-proof: no CTest tree in $build (build the cuda or hip preset)" >&2; exit 3; }
mkdir -p "$out" || exit 3
out=$(cd "$out" && pwd)

spec_tool=$root/nightly/gpu-resource-spec.sh
gpus=$(bash "$spec_tool" 2>/dev/null | grep -c '"id"')
[ "${gpus:-0}" -ge 1 ] || { echo "multi-gpu-proof: no GPU found (nightly/gpu-resource-spec.sh)" >&2; exit 3; }
if [ -z "$mode" ]; then
  if [ "$gpus" -ge 2 ]; then mode=all; else mode=sharding; fi
fi
if [ "$mode" != sharding ] && [ "$gpus" -lt 2 ]; then
  echo "multi-gpu-proof: --mode $mode needs at least two GPUs, this node has $gpus" >&2
  exit 3
fi

summary=$out/summary.md
{
  echo "# ctest -L gpu: one GPU against all, sharded against per-test"
  echo
  echo "Build \`$build\`, $(nproc) host cores, $gpus GPUs, \`-j $jobs\`, slots sized by" \
       "$mib_per_slot MiB per test process, at most $limit s per run, $(date -u +%FT%TZ)."
  command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | sed 's/ (UUID.*//; s/^/    /'
  echo
} >"$summary"
status=0

# Counts of a run's JUnit: CTest tests, and GoogleTest tests with each shard read from its XML.
count_junit() {  # junit.xml -> "ctest: P passed, ..., T test-seconds; GoogleTest tests: P passed, ..."
  python3 - "$1" <<'PY'
import os, re, sys
import xml.etree.ElementTree as ET
path = sys.argv[1]
def outcome(case):
    if case.find("failure") is not None or case.find("error") is not None or case.get("status") == "fail":
        return "failed"
    if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled") \
            or case.get("result") in ("skipped", "suppressed"):
        return "skipped"
    return "passed"
def fmt(c):
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
try:
    root = ET.parse(path).getroot()
except Exception as e:
    print(f"no JUnit ({e})")
    sys.exit(0)
ct = {"passed": 0, "failed": 0, "skipped": 0}
gt = dict(ct)
seconds = 0.0
for case in root.iter("testcase"):
    name, kind = case.get("name", ""), outcome(case)
    ct[kind] += 1
    seconds += float(case.get("time") or 0)
    xml = None
    if re.search(r"/shard-[0-9]+-of-[0-9]+$", name):
        m = re.search(r"GoogleTest XML: (\S+)", case.findtext("system-out") or "")
        for p in ([m.group(1)] if m else []) + [os.path.join(os.path.dirname(path), "junit", name + ".xml")]:
            if os.path.isfile(p):
                xml = p
                break
    if xml is None:
        gt[kind] += 1
        continue
    for t in ET.parse(xml).getroot().iter("testcase"):
        gt[outcome(t)] += 1
print(f"ctest: {fmt(ct)}, {seconds:.0f} test-seconds; GoogleTest tests: {fmt(gt)}")
PY
}

# One run: label, run name, how many GPUs (1 or all), extra environment (VAR=value ...).
run() {
  local label=$1 name=$2 which=$3; shift 3
  local dir=$out/$name
  rm -rf "$dir" && mkdir -p "$dir/junit"
  local -a vis=()
  [ "$which" = one ] && vis=(CUDA_VISIBLE_DEVICES=0 HIP_VISIBLE_DEVICES=0)
  if ! env "${vis[@]}" bash "$spec_tool" --mib-per-slot "$mib_per_slot" -o "$dir/spec.json" 2>"$dir/spec.log"; then
    echo "## $label: could not write the resource spec ($(cat "$dir/spec.log"))" >>"$summary"
    status=1
    return
  fi
  local smi=
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader,nounits \
      -lms 250 >"$dir/smi.csv" 2>/dev/null &
    smi=$!
  fi
  local t0 t1 rc
  t0=$(date +%s.%N)
  env "${vis[@]}" "$@" DSV4_DEVICE_LOG="$dir/devices.log" \
    timeout -k 10 "$limit" ctest --test-dir "$build" -L gpu -j "$jobs" \
      --resource-spec-file "$dir/spec.json" --output-junit "$dir/junit.xml" --output-on-failure \
      >"$dir/ctest.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  [ -n "$smi" ] && kill "$smi" 2>/dev/null && wait "$smi" 2>/dev/null
  # This run's shard XML beside its JUnit (the counts below and a later triage read it there).
  if [ -d "$build/junit" ]; then
    (cd "$build/junit" && find . -name 'shard-*-of-*.xml' -newer "$dir/spec.json" -print0 |
      xargs -0 -r cp --parents -t "$dir/junit/")
  fi
  local wall
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  eval "wall_$name=$wall"
  local verdict="exit $rc"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="stopped at the $limit s limit"; status=1; wall=">=$wall"; eval "wall_$name=$limit"
    stopped="$stopped $name"
  elif [ "$rc" -ne 0 ]; then status=1; fi
  {
    echo "## $label"
    echo
    echo "- command: \`${vis[*]:+${vis[*]} }$* ctest --test-dir $build -L gpu -j $jobs --resource-spec-file spec.json\`"
    echo "- resource spec: $(grep -c '"id"' "$dir/spec.json") GPU(s), $(grep -o '"slots": [0-9]*' "$dir/spec.json" | head -n 1 | grep -o '[0-9]*') slots each"
    echo "- wall time: **$wall s** ($verdict)"
    echo "- $(grep -E 'tests passed|tests failed' "$dir/ctest.log" | tail -n 1 | grep . || echo 'ctest printed no summary')"
    echo "- $(count_junit "$dir/junit.xml")"
    echo "- GoogleTest tests started per GPU (device log):" \
         "$(awk '{g = $2; if (match(g, /id:[0-9]+/)) g = "GPU " substr(g, RSTART + 3, RLENGTH - 3); n[g]++} END {for (g in n) printf "%s: %d; ", g, n[g]}' "$dir/devices.log" 2>/dev/null)"
    echo "- test processes (CUDA contexts): $(grep -c 'Test *#' "$dir/ctest.log")"
    if [ -s "$dir/smi.csv" ]; then
      echo "- peak memory / utilisation per GPU:" \
           "$(awk -F', ' '{if ($2 + 0 > m[$1]) m[$1] = $2 + 0; if ($3 + 0 > u[$1]) u[$1] = $3 + 0} END {for (g in m) printf "GPU %s %d MiB %d%%; ", g, m[g], u[g]}' "$dir/smi.csv")"
    fi
    echo
  } >>"$summary"
  echo "multi-gpu-proof: $label: $wall s ($verdict)" >&2
}

wall_one_sharded='' wall_all_sharded='' wall_one_per_test='' stopped=''
run "(a) one GPU, sharded" one_sharded one env -u DSV4_GPU_TEST_SHARDS
if [ "$mode" != sharding ]; then
  run "(b) all $gpus GPUs, sharded" all_sharded all env -u DSV4_GPU_TEST_SHARDS
fi
if [ "$mode" != multi ]; then
  run "(c) one GPU, one process per test (before sharding)" one_per_test one DSV4_GPU_TEST_SHARDS=per-test
fi

{
  echo "## Comparison"
  echo
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "n/a"}'; }
  [ -n "$stopped" ] && echo "- stopped at the limit (their time counts as $limit s, a lower bound):$stopped"
  [ -n "$wall_all_sharded" ] &&
    echo "- all $gpus GPUs against one (sharded, -j $jobs): $wall_all_sharded s vs $wall_one_sharded s, speed-up $(ratio "$wall_one_sharded" "$wall_all_sharded")"
  [ -n "$wall_one_per_test" ] &&
    echo "- sharded against per-test (one GPU, -j $jobs): $wall_one_sharded s vs $wall_one_per_test s, speed-up $(ratio "$wall_one_per_test" "$wall_one_sharded")"
} >>"$summary"
cat "$summary"
exit $status
