#!/usr/bin/env bash
# The container of a GPU job, as the AMD fleets run them: started by a step (no `container:` key)
# with only this pod's GPUs, commands through `docker exec`, removed by an always() step.
#
#   ci/gpu-container.sh clear-vram
#       stop leftover GPU containers, wait until the pod's GPUs hold no VRAM (rocm-smi), fail if not
#   ci/gpu-container.sh resolve-image PATTERN [FALLBACK] [SGLANG_CHECKOUT]
#       print the image: {sglang_tag} = the checkout's newest tag, {date} = the newest of the last
#       7 days whose tag exists in the registry; FALLBACK when none does
#   ci/gpu-container.sh start [--no-gpu] [--hf-cache HOST:MOUNT:HF_HOME] NAME IMAGE [docker run options]
#       docker run --init with /dev/kfd and the devices of /etc/podinfo/gha-render-devices, the
#       workspace mounted at its own path, the HF cache mounted when the host has it
#   ci/gpu-container.sh exec NAME [-w DIR] [-e VAR[=VALUE]]... -- COMMAND...
#       docker exec in the workspace; GITHUB_* run identity passed on; the step summary the command
#       writes is appended to the host's $GITHUB_STEP_SUMMARY
#   ci/gpu-container.sh stop NAME
#       SIGTERM to the container's processes (run-suite stops its server), the workspace given back
#       to the runner's user, docker stop, docker rm
set -uo pipefail

die() { echo "gpu-container: $*" >&2; exit 2; }
workspace=${GITHUB_WORKSPACE:-$PWD}

vram_used_mib() {  # the most VRAM any visible GPU holds, in MiB (0 when rocm-smi is absent)
  command -v rocm-smi >/dev/null 2>&1 || { echo 0; return; }
  rocm-smi --showmeminfo vram --json 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
used = [int(v) for card in d.values() if isinstance(card, dict)
        for k, v in card.items() if "VRAM Total Used Memory" in k and str(v).isdigit()]
print(max(used) // (1 << 20) if used else 0)'
}

clear_vram() {
  local limit_mib=${DSV4_VRAM_LIMIT_MIB:-1024} used ids
  if command -v docker >/dev/null 2>&1; then
    # Containers holding a GPU device, left by cancelled or killed jobs.
    ids=$(docker ps -aq 2>/dev/null | while read -r id; do
      docker inspect "$id" 2>/dev/null | grep -qE '"PathOnHost": *"/dev/(kfd|dri)' && echo "$id"
    done)
    if [ -n "$ids" ]; then
      echo "gpu-container: removing leftover GPU containers: $(echo "$ids" | tr '\n' ' ')"
      echo "$ids" | xargs -r docker stop --time 30 >/dev/null 2>&1
      echo "$ids" | xargs -r docker rm -f >/dev/null 2>&1
    fi
  fi
  for attempt in 1 2 3 4 5 6; do
    used=$(vram_used_mib)
    if [ "$used" -le "$limit_mib" ]; then
      echo "gpu-container: VRAM clear (at most $used MiB used per GPU)"
      return 0
    fi
    echo "gpu-container: $used MiB of VRAM still held (attempt $attempt); waiting"
    sleep 20
  done
  rocm-smi --showpids 2>&1 || true
  echo "gpu-container: VRAM is not clear: this node needs attention before GPU jobs run" >&2
  return 1
}

resolve_image() {
  local pattern=$1 fallback=${2:-} checkout=${3:-} tag="" image day
  if [[ $pattern == *"{sglang_tag}"* ]]; then
    [ -n "$checkout" ] && tag=$(git -C "$checkout" describe --tags --abbrev=0 2>/dev/null)
    if [ -z "$tag" ]; then
      echo "gpu-container: no tag in '$checkout' for {sglang_tag}; using $fallback" >&2
      echo "$fallback"; return 0
    fi
    pattern=${pattern//\{sglang_tag\}/$tag}
  fi
  if [[ $pattern != *"{date}"* ]]; then echo "$pattern"; return 0; fi
  for back in 0 1 2 3 4 5 6; do
    day=$(date -u -d "$back days ago" +%Y%m%d)
    image=${pattern//\{date\}/$day}
    if docker image inspect "$image" >/dev/null 2>&1 || docker manifest inspect "$image" >/dev/null 2>&1; then
      echo "gpu-container: image $image" >&2
      echo "$image"; return 0
    fi
  done
  [ -n "$fallback" ] || die "no image matches '$pattern' in the last 7 days and there is no fallback"
  echo "gpu-container: no daily image in the last 7 days; release image $fallback" >&2
  echo "$fallback"
}

start() {
  local gpu=1 hf="" name image
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-gpu) gpu=0; shift ;;
      --hf-cache) hf=${2:-}; shift 2 ;;
      *) break ;;
    esac
  done
  [ $# -ge 2 ] || die "start needs NAME IMAGE"
  name=$1 image=$2; shift 2
  local args=(run -dt --init --name "$name" --user root --ulimit nofile=65536:65536
              -v "$workspace:$workspace" -w "$workspace")
  if [ "$gpu" = 1 ]; then
    # Only this pod's GPUs: the runner writes their render nodes to this file.
    local devices="--device=/dev/dri"
    [ -f /etc/podinfo/gha-render-devices ] && devices=$(cat /etc/podinfo/gha-render-devices)
    read -r -a device_args <<<"$devices"
    args+=(--device=/dev/kfd "${device_args[@]}" --group-add video --ipc=host
           --cap-add=SYS_PTRACE --security-opt seccomp=unconfined)
  fi
  if [ -n "$hf" ]; then
    IFS=: read -r host mount home <<<"$hf"
    if [ -d "$host" ]; then
      args+=(-v "$host:$mount" -e "HF_HOME=$home")
    else
      echo "gpu-container: no HF cache at $host on this runner; models download into the container"
    fi
  fi
  docker image inspect "$image" >/dev/null 2>&1 || docker pull "$image" || die "cannot pull $image"
  docker rm -f "$name" >/dev/null 2>&1
  # "$@": extra options from the registry (e.g. --shm-size 32g), split on spaces by the caller.
  docker "${args[@]}" "$@" "$image" sleep infinity >/dev/null || die "docker run failed for $image"
  docker exec "$name" git config --global --add safe.directory '*' >/dev/null 2>&1
  echo "gpu-container: $name started from $image"
}

exec_in() {
  [ $# -ge 1 ] || die "exec needs NAME"
  local name=$1; shift
  local dir=$workspace args=() summary="$workspace/.dsv4-step-summary.md"
  while [ $# -gt 0 ]; do
    case "$1" in
      -w) dir=$workspace/$2; shift 2 ;;
      -e) args+=(-e "$2"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || die "exec needs a command after --"
  for v in GITHUB_RUN_ID GITHUB_RUN_ATTEMPT GITHUB_SHA GITHUB_EVENT_NAME GITHUB_REF GITHUB_WORKSPACE; do
    [ -n "${!v:-}" ] && args+=(-e "$v")
  done
  : >"$summary"
  local rc=0
  docker exec -w "$dir" "${args[@]}" -e "GITHUB_STEP_SUMMARY=$summary" "$name" "$@" || rc=$?
  if [ -s "$summary" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$summary" >>"$GITHUB_STEP_SUMMARY"; fi
  rm -f "$summary"
  return $rc
}

stop() {
  [ $# -eq 1 ] || die "stop needs NAME"
  docker inspect "$1" >/dev/null 2>&1 || { echo "gpu-container: $1 is not running"; return 0; }
  # run-suite stops its server's process group on SIGTERM; --init forwards it and reaps.
  docker exec "$1" sh -c 'kill -TERM -1' >/dev/null 2>&1
  sleep 5
  # Files the container wrote as root go back to the runner's user, so the next checkout can clean.
  docker exec "$1" chown -R "$(id -u):$(id -g)" "$workspace" >/dev/null 2>&1
  docker stop --time 60 "$1" >/dev/null 2>&1
  docker rm -f "$1" >/dev/null 2>&1
  echo "gpu-container: $1 removed"
  return 0
}

cmd=${1:-}; shift || true
case "$cmd" in
  clear-vram) clear_vram ;;
  resolve-image) [ $# -ge 1 ] || die "resolve-image needs PATTERN"; resolve_image "$@" ;;
  start) start "$@" ;;
  exec) exec_in "$@" ;;
  stop) stop "$@" ;;
  -h|--help) sed -n '2,20p' "$0" ;;
  *) die "unknown command '$cmd' (clear-vram, resolve-image, start, exec, stop)" ;;
esac
