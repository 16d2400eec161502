#!/usr/bin/env bash
# Checks that the runner's Hugging Face cache holds a complete snapshot of each model, before a
# GPU job pulls an image or installs anything: config.json, every weight file its
# model.safetensors.index.json names (or a model.safetensors), and the tokenizer
# (tokenizer_config.json with tokenizer.json or tokenizer.model), each a non-empty file (the
# cache's symlinks followed to their blobs).
# usage: ci/model-cache.sh HF_HOME MODEL...   (MODEL: a Hugging Face id, e.g. org/name)
# The snapshot is the one refs/main names, else the newest under snapshots/.
# Exit codes: 0 every snapshot complete, 2 bad usage, 3 could not run (no cache, a model missing
# or incomplete: the files missing are listed).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: ci/model-cache.sh HF_HOME MODEL..." >&2; exit 2; }
home=$1; shift
[ -d "$home/hub" ] || { echo "model-cache: $home/hub does not exist: the model cache is not mounted on this runner" >&2; exit 3; }
status=0
for model in "$@"; do
  [[ $model == */* ]] || { echo "model-cache: '$model' is not a Hugging Face id (org/name)" >&2; exit 2; }
  repo=$home/hub/models--${model//\//--}
  snap=""
  if [ -s "$repo/refs/main" ]; then
    snap=$repo/snapshots/$(tr -d '[:space:]' <"$repo/refs/main")
  else
    snap=$(find "$repo/snapshots" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' 2>/dev/null |
           sort -rn | head -n 1 | cut -d' ' -f2-)
  fi
  if [ -z "$snap" ] || [ ! -d "$snap" ]; then
    echo "model-cache: $model: no snapshot in $repo (looked at refs/main and snapshots/)" >&2
    status=3
    continue
  fi
  want=(config.json tokenizer_config.json)
  if [ -e "$snap/tokenizer.json" ] || [ ! -e "$snap/tokenizer.model" ]; then want+=(tokenizer.json); else want+=(tokenizer.model); fi
  if [ -e "$snap/model.safetensors.index.json" ]; then
    if ! mapfile -t weights < <(python3 -c '
import json, sys
for f in sorted(set(json.load(open(sys.argv[1]))["weight_map"].values())):
    print(f)' "$snap/model.safetensors.index.json"); then
      echo "model-cache: $model: $snap/model.safetensors.index.json cannot be read" >&2
      status=3
      continue
    fi
    [ ${#weights[@]} -gt 0 ] || { echo "model-cache: $model: the index names no weight file" >&2; status=3; continue; }
    want+=(model.safetensors.index.json "${weights[@]}")
  else
    want+=(model.safetensors)
  fi
  missing=()
  for f in "${want[@]}"; do [ -s "$snap/$f" ] || missing+=("$f"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "model-cache: $model: ${#missing[@]} of ${#want[@]} files missing or empty in $snap: ${missing[*]:0:10}${missing[10]:+ ...}" >&2
    status=3
  else
    echo "model-cache: $model: complete (${#want[@]} files) in $snap"
  fi
done
exit $status
