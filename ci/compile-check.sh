#!/usr/bin/env bash
# Compile checks of every kernel source without a GPU: the hip-compile preset (hipcc objects for
# gfx90a;gfx940;gfx1030, clang-19 assembly and a resource report for gfx942 and gfx1030), then nvcc
# for sm_90a with ptxas' register/spill report. Exits non-zero on a compile error, a spill, or a
# wgmma pipeline ptxas waits inside (an injected warpgroup.wait, a serialized function).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
status=0

echo "== hip-compile: hipcc (gfx90a;gfx940;gfx1030) and clang-19 (gfx942, gfx1030 assembly)"
if cmake --preset hip-compile >/dev/null && cmake --build --preset hip-compile; then
  bash ci/amdgpu-resource-report.sh build/hip-compile/ci/hip-compile/asm || status=1
  ctest --preset hip-compile --output-on-failure || status=1
else
  echo "hip-compile: FAILED"
  status=1
fi

echo "== nvcc sm_90a"
nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
if [ -z "$nvcc" ]; then
  echo "nvcc sm_90a check NOT RUN: no nvcc on this machine (install the CUDA toolkit, or set PATH)"
else
  out=build/nvcc-check
  mkdir -p "$out"
  # One nvcc per source, as many at once as the machine has cores; the table keeps source order.
  # The cuda preset's device flags (RelWithDebInfo: -O2 -DNDEBUG), so that ptxas reports on the
  # code that ships: its pipeline reports can differ between optimisation levels.
  compile() {  # src -> $out/<name>.o, ptxas report in $out/<name>.ptxas.txt, exit status in .rc
    local src=$1 name
    name=$(basename "$src" .hip)
    "$nvcc" -x cu -std=c++17 -O2 -DNDEBUG -arch=sm_90a --fmad=false --expt-relaxed-constexpr \
      -Xptxas -v -Ikernels/include -Ikernels/gpu/include -Ireference/include \
      -c "$src" -o "$out/$name.o" >"$out/$name.ptxas.txt" 2>&1
    echo $? >"$out/$name.rc"
  }
  sources=(kernels/src/*.hip kernels/gpu/src/*.hip)
  rm -f "$out"/*.rc
  for src in "${sources[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
    compile "$src" &
  done
  wait
  # ptxas waiting inside a wgmma pipeline ("pattern|verdict"): C7517, a warpgroup.wait it injected
  # (an operand register written after the fence, or an A register reused before the wait); the
  # "serialized" reports (C7514, C7515 and their kin, matched by text), a whole function's
  # products serialized (a register of an in-flight product touched by another instruction, too
  # few registers, a call). The kernel stays correct and loses the overlap its design counts on.
  pipeline_reports=("C7517|ptxas injected a warpgroup.wait"
    "wgmma.mma_async instructions are serialized|ptxas serialized the wgmma pipeline")
  printf '| %-28s | %8s | %6s | %12s |\n' source registers stack "spill st/ld"
  for src in "${sources[@]}"; do
    name=$(basename "$src" .hip)
    log="$out/$name.ptxas.txt"
    if [ "$(cat "$out/$name.rc" 2>/dev/null)" != "0" ]; then
      cat "$log"
      echo "nvcc: $src FAILED"
      status=1
      continue
    fi
    regs=$(grep -oE 'Used [0-9]+ registers' "$log" | awk '{print $2}' | sort -n | tail -1)
    stack=$(grep -oE '[0-9]+ bytes stack frame' "$log" | awk '{print $1}' | sort -n | tail -1)
    spills=$(grep -oE '[0-9]+ bytes spill (stores|loads)' "$log" | awk '{s+=$1} END {print s+0}')
    printf '| %-28s | %8s | %6s | %12s |\n' "$name" "${regs:--}" "${stack:--}" "$spills"
    if [ "$spills" != "0" ]; then
      echo "nvcc: $src spills registers:"; grep -B2 spill "$log"; status=1
    fi
    for report in "${pipeline_reports[@]}"; do
      pattern=${report%%|*}
      if grep -q "$pattern" "$log"; then
        echo "nvcc: $src: ${report#*|}:"; grep "$pattern" "$log"; status=1
      fi
    done
  done
fi
[ $status -eq 0 ] && echo "compile checks: passed" || echo "compile checks: FAILED"
exit $status
