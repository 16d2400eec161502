#!/usr/bin/env bash
# Writes the CTest resource spec for this node's GPUs (resource type "gpus", one entry per visible
# device, ids 0..N-1 as the runtime numbers them), found with rocminfo or nvidia-smi.
# usage: nightly/gpu-resource-spec.sh [--slots N | --mib-per-slot M] [--output FILE]
#                                     [--backend auto|rocm|cuda] [--allow-none]
# --mib-per-slot sizes the slots by what a GPU holds: the smallest GPU's memory (nvidia-smi or
# rocm-smi) divided by M MiB, at least 1. Exit 0 written, 1 no GPU found (unless --allow-none) or
# its memory unreadable, 2 bad usage.
set -uo pipefail

slots=1 output=- backend=auto allow_none=0 mib_per_slot=
while [ $# -gt 0 ]; do
  case "$1" in  # an option without its value leaves it empty: reported below
    --slots) slots=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --mib-per-slot) mib_per_slot=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --output|-o) output=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --backend) backend=${2:-}; shift "$(($# > 1 ? 2 : 1))" ;;
    --allow-none) allow_none=1; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "gpu-resource-spec: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$slots" in ''|*[!0-9]*|0) echo "gpu-resource-spec: --slots must be a positive integer, got '$slots'" >&2; exit 2 ;; esac
case "$mib_per_slot" in '') ;; *[!0-9]*|0*) echo "gpu-resource-spec: --mib-per-slot must be a positive integer, got '$mib_per_slot'" >&2; exit 2 ;; esac
case "$backend" in auto|rocm|cuda) ;; *) echo "gpu-resource-spec: --backend must be auto, rocm or cuda, got '$backend'" >&2; exit 2 ;; esac

count_rocm() {  # GPU agents in rocminfo's listing
  command -v rocminfo >/dev/null || return 1
  rocminfo 2>/dev/null | grep -cE '^[[:space:]]*Device Type:[[:space:]]+GPU[[:space:]]*$'
}
mib_rocm() {  # total VRAM per GPU in MiB, from rocm-smi's CSV (bytes in the second column)
  command -v rocm-smi >/dev/null || return 1
  rocm-smi --showmeminfo vram --csv 2>/dev/null | awk -F, '$1 ~ /^card/ && $2 ~ /^[0-9]+$/ {print int($2 / 1048576)}'
}
mib_cuda() {  # total memory per GPU in MiB
  command -v nvidia-smi >/dev/null || return 1
  nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | grep -E '^[[:space:]]*[0-9]+[[:space:]]*$'
}
count_cuda() {  # one line per GPU
  command -v nvidia-smi >/dev/null || return 1
  nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -cE '^[[:space:]]*[0-9]+[[:space:]]*$'
}

n=0 source=none
if [ "$backend" != cuda ]; then
  c=$(count_rocm) && [ "${c:-0}" -gt 0 ] && { n=$c; source=rocminfo; }
fi
if [ "$n" -eq 0 ] && [ "$backend" != rocm ]; then
  c=$(count_cuda) && [ "${c:-0}" -gt 0 ] && { n=$c; source=nvidia-smi; }
fi

# A visible-devices list narrows what the runtime shows and renumbers it from 0.
if [ "$source" = rocminfo ]; then vars="ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES"
else vars="CUDA_VISIBLE_DEVICES"; fi
for v in $vars; do
  if [ -n "${!v+set}" ]; then
    list=${!v}
    if [ -z "$list" ]; then visible=0; else visible=$(tr ',' '\n' <<<"$list" | grep -c .); fi
    [ "$visible" -lt "$n" ] && { n=$visible; source="$source, $v=$list"; }
  fi
done

if [ "$n" -eq 0 ] && [ "$allow_none" -eq 0 ]; then
  echo "gpu-resource-spec: no GPU found (rocminfo and nvidia-smi list none, or a *_VISIBLE_DEVICES hides them)" >&2
  exit 1
fi

if [ -n "$mib_per_slot" ] && [ "$n" -gt 0 ]; then
  case "$source" in rocminfo*) mib=$(mib_rocm) ;; *) mib=$(mib_cuda) ;; esac
  smallest=$(printf '%s\n' "$mib" | grep -E '^[[:space:]]*[0-9]+[[:space:]]*$' | sort -n | head -n 1 | tr -d '[:space:]')
  if [ -z "$smallest" ] || [ "$smallest" -eq 0 ]; then
    echo "gpu-resource-spec: --mib-per-slot: cannot read the GPUs' memory (nvidia-smi --query-gpu=memory.total or rocm-smi --showmeminfo vram)" >&2
    exit 1
  fi
  slots=$((smallest / mib_per_slot))
  [ "$slots" -ge 1 ] || slots=1
  source="$source, $smallest MiB / $mib_per_slot MiB per slot"
fi

spec='{\n  "version": {"major": 1, "minor": 0},\n  "local": [\n    {\n      "gpus": ['
for ((i = 0; i < n; ++i)); do
  sep=','; [ $i -eq $((n - 1)) ] && sep=''
  spec+="\n        {\"id\": \"$i\", \"slots\": $slots}$sep"
done
spec+='\n      ]\n    }\n  ]\n}\n'
if [ "$output" = - ]; then
  printf '%b' "$spec"
else
  printf '%b' "$spec" >"$output" || { echo "gpu-resource-spec: cannot write '$output'" >&2; exit 2; }
fi
echo "gpu-resource-spec: $n GPUs ($source), $slots slot(s) each -> $output" >&2
