#!/usr/bin/env bash
# The main job: installs what is missing, builds the preset that fits this machine (hip where ROCm
# answers, cuda where an NVIDIA GPU answers, cpu otherwise), runs its suite and prints the summary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
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
spec=()
if [ "$preset" != cpu ]; then
  # GPU tests (shards of GoogleTest executables, RESOURCE_GROUPS gpus:1) spread over every GPU of
  # the machine; a GPU takes as many test processes at once as DSV4_GPU_MIB_PER_SLOT MiB (default
  # 4096; 8 tests held under 7.5 GiB on an H200: nightly/measurements/) fit in its memory, or
  # DSV4_GPU_SLOTS when set; -j (the host's cores) bounds them all.
  size=(--mib-per-slot "${DSV4_GPU_MIB_PER_SLOT:-4096}")
  [ -n "${DSV4_GPU_SLOTS:-}" ] && size=(--slots "$DSV4_GPU_SLOTS")
  nightly/gpu-resource-spec.sh "${size[@]}" -o "build/$preset/gpu-resource-spec.json" \
    && spec=(--resource-spec-file "$PWD/build/$preset/gpu-resource-spec.json")
fi
ctest --preset "$preset" -j "$(nproc)" "${spec[@]}" --output-junit junit.xml || status=1
python3 ci/summary.py "build/$preset" "build/$preset/junit.xml" || status=1

# The end-to-end job on its embedded default: dsv4-eval gsm8k (1319 questions written by the
# project) against the project's SGLang test server on loopback, behind the nightly gates.
eval_bin=build/$preset/e2e/dsv4-eval
server_bin=build/$preset/fixtures/server/dsv4-test-server
if [ -x "$eval_bin" ] && [ -x "$server_bin" ]; then
  demo=build/$preset/main-gsm8k
  rm -rf "$demo" && mkdir -p "$demo"
  "$server_bin" --write-data "$demo/questions.jsonl" --count 1319 --seed 1 >/dev/null
  "$server_bin" --port 0 --port-file "$demo/port" --data "$demo/questions.jsonl" \
    --correct-rate 0.95 --invalid-rate 0.01 --accept-length 3.2,3.4 >"$demo/server.log" 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
  for _ in $(seq 100); do [ -s "$demo/port" ] && break; sleep 0.1; done
  url="http://127.0.0.1:$(cat "$demo/port" 2>/dev/null)"
  if "$eval_bin" wait-ready --url "$url" --timeout 30 >/dev/null; then
    "$eval_bin" gsm8k --url "$url" --data "$demo/questions.jsonl" --num-questions 1319 \
      --parallel 512 --gate 'accuracy>0.92' --gate 'accept_length>3.0' --out "$demo/out" \
      --progress-interval 0
    rc=$?
    cat "$demo/out/report.md" 2>/dev/null
    [ $rc -eq 0 ] || status=1
  else
    echo "main: the test server did not become ready (log: $demo/server.log)"
    status=1
  fi
fi
exit $status
