#!/usr/bin/env bash
# The container of a GPU job, as the AMD fleets run them: started by a step (no `container:` key)
# with only this pod's GPUs, commands through `docker exec`, removed by an always() step.
#
#   ci/gpu-container.sh clear-vram [--vendor amd|nvidia] [--name CONTAINER]
#       stop and remove this job's containers (named CONTAINER, or labelled dsv4-ci.owner=
#       REPOSITORY/RUN_ID/JOB by `start`: an earlier attempt's); list every other container holding
#       a GPU and leave it running (the daemon may serve other runner pods); when VRAM is held,
#       kill the processes outside containers holding /dev/kfd or /dev/dri/* (nvidia:
#       /dev/nvidia*) (SIGTERM, then SIGKILL) and check again, three times; fail with fuser/lsof,
#       rocm-smi (nvidia-smi) and docker diagnostics when it stays held or when rocm-smi
#       (nvidia-smi) is missing
#   ci/gpu-container.sh resolve-image PATTERN [SGLANG_CHECKOUT] [--days N] [--not-before YYYYMMDD]
#       print the image: {sglang_tag} = SGLang's version tag (python/tools/get_version_tag.py
#       --tag-only: the highest v*.*.* tag across branches) and the tag before it, {date} = the
#       newest day of the last N (7) that has an image, never a day before --not-before; every
#       tag tried is listed; none found: exit 3 with the list (there is no older fallback)
#   ci/gpu-container.sh start [--no-gpu | --vendor amd|nvidia] [--hf-cache HOST:MOUNT:HF_HOME] [--workdir DIR] NAME IMAGE [docker run options]
#       docker run --init with /dev/kfd and every device of /etc/podinfo/gha-render-devices (a
#       missing or empty file refuses to start; nvidia: --gpus all), the workspace mounted at its
#       own path and, with --workdir, also at DIR, the commands' folder (one fixed path in every
#       job, whatever the runner's workspace, for builds made in one job and run in another), the HF
#       cache (which must exist) with SGLang's MIOpen cache and tilelang path; the image taken from
#       the runner's cache, else the LAN registry, else Docker Hub with retries and back-off (a
#       rate limit is could-not-run at once, naming it), after a docker login when
#       DOCKERHUB_USERNAME/DOCKERHUB_TOKEN are set (when not, the log and step summary say so);
#       labelled dsv4-ci.owner for clear-vram; DSV4_IMAGE, DSV4_IMAGE_DIGEST and DSV4_IMAGE_ID (the
#       image's content id, the same from every registry) set for the reports and ci/ship-build.sh
#   ci/gpu-container.sh login
#       the Docker Hub login of `start` alone (for a job that only inspects manifests)
#   ci/gpu-container.sh exec NAME [-w DIR] [-e VAR[=VALUE]]... -- COMMAND...
#       docker exec in the workspace ($DSV4_WORKDIR where set: the --workdir of start); GITHUB_* run
#       identity passed on; the step summary the command
#       writes is appended to the host's $GITHUB_STEP_SUMMARY
#   ci/gpu-container.sh stop NAME
#       SIGTERM to the container's processes (run-suite stops its server), the workspace given back
#       to the runner's user, docker stop, docker rm
#
# Exit codes: 0 done, 2 bad usage, 3 could not run (VRAM held, no rocm-smi, no image, no devices).
# Test hooks: DSV4_RENDER_DEVICES (the pod's device file), DSV4_DEV_DIR (/dev), DSV4_VRAM_WAIT_S
# (seconds between checks, 30), DSV4_PULL_ATTEMPTS (6), DSV4_PULL_BACKOFF_S (first wait, 30),
# DSV4_PROC_DIR (/proc), DSV4_LOCAL_REGISTRY (SGLang's LAN registry 10.245.143.50:5000; empty:
# none), DSV4_DOCKERHUB_SECRETS (the secret names, for messages).
set -uo pipefail

die() { echo "gpu-container: $*" >&2; exit 2; }
cannot() { echo "gpu-container: $*" >&2; exit 3; }
workspace=${GITHUB_WORKSPACE:-$PWD}
dev_dir=${DSV4_DEV_DIR:-/dev}
render_devices=${DSV4_RENDER_DEVICES:-/etc/podinfo/gha-render-devices}

vendor=amd
smi=rocm-smi

# The most VRAM any visible GPU holds, in MiB; fails (no output) when the answer of rocm-smi
# (nvidia-smi) cannot be read, so an unreadable answer never counts as clear.
vram_used_mib() {
  if [ "$vendor" = nvidia ]; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null |
      awk '/^ *[0-9]+ *$/ { n++; if ($1 > m) m = $1 } END { if (!n) exit 1; print m + 0 }'
    return
  fi
  rocm-smi --showmeminfo vram --json 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit("rocm-smi --showmeminfo vram --json did not print JSON")
used = [int(v) for card in d.values() if isinstance(card, dict)
        for k, v in card.items() if "VRAM Total Used Memory" in k and str(v).isdigit()]
if not used:
    sys.exit("rocm-smi reported no VRAM figure for any GPU")
print(max(used) // (1 << 20))'
}

gpu_device_files() {
  local f
  for f in "$dev_dir/kfd" "$dev_dir"/dri/renderD* "$dev_dir"/dri/card* "$dev_dir"/nvidia[0-9]*; do
    [ -e "$f" ] && echo "$f"
  done
}

# This job's identity on the host's docker daemon, which may serve several runner pods: the
# repository, run and job (every attempt of this job in this run is this job's).
job_owner() { echo "${GITHUB_REPOSITORY:-local}/${GITHUB_RUN_ID:-0}/${GITHUB_JOB:-local}"; }

# "ID NAME IMAGE OWNER" of every container that holds a GPU device (PathOnHost /dev/kfd,
# /dev/dri/*, /dev/nvidia*, or a gpu capability); OWNER is its dsv4-ci.owner label or "-".
gpu_containers() {
  command -v docker >/dev/null 2>&1 || return 0
  local id name image owner
  docker ps -a --format '{{.ID}} {{.Names}} {{.Image}} {{.Label "dsv4-ci.owner"}}' 2>/dev/null |
    while read -r id name image owner; do
      [ -n "$id" ] || continue
      docker inspect "$id" 2>/dev/null |
        grep -qE '"PathOnHost": *"/dev/(kfd|dri|nvidia)|"Capabilities": *\[ *\[ *"gpu"' || continue
      echo "$id $name $image ${owner:--}"
    done
}

# Stops and removes the GPU containers this job started (named CONTAINER, or labelled with this
# job's owner by `start`: an earlier attempt's); lists the others holding GPUs and leaves them be.
stop_own_containers() {
  local container=$1 own id name image owner others=0
  own=$(job_owner)
  while read -r id name image owner; do
    [ -n "$id" ] || continue
    if [ "$name" = "$container" ] || [ "$owner" = "$own" ]; then
      echo "gpu-container: removing this job's container $name ($id, $image)"
      docker stop --time 10 "$id" >/dev/null 2>&1
      docker rm -f "$id" >/dev/null 2>&1
    else
      others=$((others + 1))
      echo "gpu-container: NOT touching $name ($id, $image, owner ${owner}): not started by this job ($own)"
      summary_line "GPU container \`$name\` ($image, owner \`$owner\`) holds a GPU of this node; it is not this job's, so it was left running"
    fi
  done < <(gpu_containers)
  [ "$others" -eq 0 ] || echo "gpu-container: $others GPU container(s) of other jobs left running"
  return 0
}

# A line for the step summary (when the runner gives one).
summary_line() {
  [ -n "${GITHUB_STEP_SUMMARY:-}" ] && echo "- $*" >>"$GITHUB_STEP_SUMMARY"
  return 0
}

# The docker container (its 64-hex id) a process runs in, from its cgroup; empty: none.
container_of_pid() {
  grep -oE '[0-9a-f]{64}' "${DSV4_PROC_DIR:-/proc}/$1/cgroup" 2>/dev/null | head -n 1
}

# Sends SIGNAL to every process holding /dev/kfd or a /dev/dri node (fuser and lsof), but this
# script and its parents.
kill_gpu_holders() {
  local signal=$1 pids="" f p cid self=$$ parents=" "
  if ! command -v fuser >/dev/null 2>&1 && ! command -v lsof >/dev/null 2>&1; then
    echo "gpu-container: WARNING: neither fuser nor lsof is installed: device holders cannot be found"
    return 0
  fi
  for p in $$ $PPID; do parents+="$p "; done
  while read -r f; do
    [ -n "$f" ] || continue
    command -v fuser >/dev/null 2>&1 && pids+=" $(fuser "$f" 2>/dev/null)"
    command -v lsof >/dev/null 2>&1 && pids+=" $(lsof -t "$f" 2>/dev/null)"
  done < <(gpu_device_files)
  for p in $(echo "$pids" | tr ' ' '\n' | grep -E '^[0-9]+$' | sort -un); do
    [[ $parents == *" $p "* || $p == "$self" ]] && continue
    # This job's containers are gone by now: a process in a container is another job's.
    cid=$(container_of_pid "$p")
    if [ -n "$cid" ]; then
      echo "gpu-container: NOT signalling $p: it runs in container ${cid:0:12}, which is not this job's"
      continue
    fi
    echo "gpu-container: SIG$signal to $p (holds a GPU device)"
    kill "-$signal" "$p" 2>/dev/null
  done
  return 0
}

gpu_diagnostics() {
  local f
  echo "=== holders of the GPU device files (fuser) ==="
  if command -v fuser >/dev/null 2>&1; then
    while read -r f; do fuser -v "$f" 2>&1; done < <(gpu_device_files)
  else
    echo "fuser is not installed"
  fi
  echo "=== holders of the GPU device files (lsof) ==="
  if command -v lsof >/dev/null 2>&1; then
    while read -r f; do lsof "$f" 2>&1; done < <(gpu_device_files)
  else
    echo "lsof is not installed"
  fi
  if [ "$vendor" = nvidia ]; then
    echo "=== nvidia-smi ==="
    timeout 30 nvidia-smi 2>&1
  else
    echo "=== rocm-smi --showpids ==="
    timeout 30 rocm-smi --showpids 2>&1
    echo "=== rocm-smi --showmemuse ==="
    timeout 30 rocm-smi --showmemuse 2>&1
  fi
  echo "=== containers ==="
  command -v docker >/dev/null 2>&1 && docker ps -a 2>&1
  return 0
}

clear_vram() {
  local limit_mib=${DSV4_VRAM_LIMIT_MIB:-1024} wait_s=${DSV4_VRAM_WAIT_S:-30} used attempt
  local container=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) container=${2:-}; shift 2 ;;
      *) die "clear-vram: unknown argument '$1' (--vendor amd|nvidia, --name CONTAINER)" ;;
    esac
  done
  if ! command -v "$smi" >/dev/null 2>&1; then
    cannot "$smi is not installed: VRAM cannot be checked, so the GPUs are not known to be free"
  fi
  stop_own_containers "$container"
  for attempt in 0 1 2 3; do
    if [ "$attempt" -gt 0 ]; then
      echo "gpu-container: clearing, attempt $attempt of 3: SIGTERM, then SIGKILL, to the GPU device holders"
      stop_own_containers "$container"
      kill_gpu_holders TERM
      sleep "$wait_s"
      kill_gpu_holders KILL
      sleep "$wait_s"
    fi
    if used=$(vram_used_mib); then
      if [ "$used" -le "$limit_mib" ]; then
        echo "gpu-container: VRAM clear (at most $used MiB used per GPU, limit $limit_mib)"
        return 0
      fi
      echo "gpu-container: $used MiB of VRAM held on a GPU (limit $limit_mib)"
    else
      echo "gpu-container: VRAM use could not be read from $smi"
    fi
    [ "$attempt" -gt 0 ] && gpu_diagnostics
  done
  summary_line "VRAM of this node's GPUs is still held after 3 attempts; other jobs' containers were left running (listed in the log)"
  cannot "VRAM is not clear after 3 attempts: this node needs attention before GPU jobs run (diagnostics above; other jobs' containers were not touched)"
}

# SGLang's version tags of CHECKOUT ranked as python/tools/get_version_tag.py ranks them (v*.*.*,
# rc below the release, post above it, a tag its pattern cannot read lowest), highest first.
ranked_tags() {
  git -C "$1" tag --list 'v*.*.*' 2>/dev/null | python3 -c '
import re, sys
def key(tag):
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:(rc|post)(\d+))?$", tag.lstrip("v"))
    if not m:
        return (0, 0, 0, 0, 0)
    kind = {"rc": 0, None: 1, "post": 2}[m.group(4)]
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), kind, int(m.group(5) or 0))
tags = [t.strip() for t in sys.stdin if t.strip()]
print("\n".join(sorted(tags, key=key, reverse=True)))'
}

image_exists() {
  docker image inspect "$1" >/dev/null 2>&1 || docker manifest inspect "$1" >/dev/null 2>&1
}

resolve_image() {
  local pattern=$1 checkout="" days=7 not_before="" tags=() tried=() image day back tag own
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --days) days=${2:-}; shift 2 ;;
      --not-before) not_before=${2:-}; shift 2 ;;
      -*) die "resolve-image: unknown option '$1'" ;;
      *) checkout=$1; shift ;;
    esac
  done
  [[ $days =~ ^[1-9][0-9]*$ ]] || die "resolve-image: --days must be a positive number (got '$days')"
  [ -z "$not_before" ] || [[ $not_before =~ ^[0-9]{8}$ ]] ||
    die "resolve-image: --not-before must be YYYYMMDD (got '$not_before')"
  if [[ $pattern == *"{sglang_tag}"* ]]; then
    if [ -z "$checkout" ] || [ ! -d "$checkout" ]; then
      cannot "resolve-image: {sglang_tag} needs the SGLang checkout (got '${checkout:-nothing}')"
    fi
    mapfile -t tags < <(ranked_tags "$checkout")
    if [ -f "$checkout/python/tools/get_version_tag.py" ]; then
      # SGLang's own answer leads; ours only adds the tag before it.
      own=$(cd "$checkout" && python3 python/tools/get_version_tag.py --tag-only 2>/dev/null)
      if [ -n "$own" ] && [ "${tags[0]:-}" != "$own" ]; then
        echo "gpu-container: get_version_tag.py --tag-only says $own (the ranking here: ${tags[0]:-none})" >&2
        tags=("$own" "${tags[@]}")
      fi
    fi
    [ ${#tags[@]} -gt 0 ] || cannot "resolve-image: no v*.*.* tag in $checkout (check it out with fetch-depth: 0)"
    tags=("${tags[@]:0:2}")
    echo "gpu-container: SGLang version tag ${tags[0]} (get_version_tag.py --tag-only rule)${tags[1]:+, then ${tags[1]}}" >&2
  else
    tags=("")
  fi
  if [[ $pattern != *"{date}"* ]]; then
    image=${pattern//\{sglang_tag\}/${tags[0]}}
    image_exists "$image" || cannot "resolve-image: $image does not exist (docker manifest inspect)"
    echo "$image"
    return 0
  fi
  for ((back = 0; back < days; ++back)); do
    day=$(date -u -d "$back days ago" +%Y%m%d)
    if [ -n "$not_before" ] && [ "$day" -lt "$not_before" ]; then
      echo "gpu-container: not trying images before $not_before (older than the DeepSeek-V4 code)" >&2
      break
    fi
    for tag in "${tags[@]}"; do
      image=${pattern//\{sglang_tag\}/$tag}
      image=${image//\{date\}/$day}
      tried+=("$image")
      if image_exists "$image"; then
        echo "gpu-container: image $image (tried: ${tried[*]})" >&2
        echo "$image"
        return 0
      fi
    done
  done
  cannot "resolve-image: no image exists for '$pattern'; tried: ${tried[*]:-nothing}"
}

# Runs "$@" up to DSV4_PULL_ATTEMPTS times, waiting DSV4_PULL_BACKOFF_S seconds (doubled each time,
# at most 300) between attempts.
with_backoff() {
  local attempts=${DSV4_PULL_ATTEMPTS:-6} wait_s=${DSV4_PULL_BACKOFF_S:-30} n
  for ((n = 1; ; ++n)); do
    "$@" && return 0
    if [ "$n" -ge "$attempts" ]; then
      echo "gpu-container: '$*' failed $attempts times" >&2
      return 1
    fi
    echo "gpu-container: '$*' failed (attempt $n of $attempts); retrying in ${wait_s}s" >&2
    sleep "$wait_s"
    wait_s=$((wait_s * 2 > 300 ? 300 : wait_s * 2))
  done
}

# Logs in to Docker Hub when DOCKERHUB_USERNAME and DOCKERHUB_TOKEN are set (the workflow fills
# them from the secrets DSV4_DOCKERHUB_SECRETS names); says so in the log and the step summary
# when it does not, since anonymous pulls share Docker Hub's rate limit.
docker_login() {
  local secrets=${DSV4_DOCKERHUB_SECRETS:-DOCKERHUB_USERNAME/DOCKERHUB_TOKEN}
  if [ -z "${DOCKERHUB_USERNAME:-}" ] || [ -z "${DOCKERHUB_TOKEN:-}" ]; then
    echo "gpu-container: no Docker Hub login: the secrets $secrets are not set for this workflow; pulls are anonymous (Docker Hub's anonymous rate limit applies)"
    summary_line "No Docker Hub login: the secrets \`$secrets\` are not set for this workflow; images are pulled anonymously"
    anonymous=1
    return 0
  fi
  echo "gpu-container: logging in to Docker Hub as $DOCKERHUB_USERNAME"
  # The token goes through stdin only: never on a command line or in a log.
  # shellcheck disable=SC2016  # expanded by that sh, from its environment
  if with_backoff sh -c 'printf "%s" "$DOCKERHUB_TOKEN" | docker login -u "$DOCKERHUB_USERNAME" --password-stdin >/dev/null 2>&1'; then
    echo "gpu-container: Docker Hub login done"
  else
    echo "gpu-container: WARNING: Docker Hub login failed; pulling anonymously" >&2
    summary_line "Docker Hub login as \`$DOCKERHUB_USERNAME\` failed; images are pulled anonymously"
    anonymous=1
  fi
}
anonymous=0

# The registries an image is tried from, in SGLang's order (amd_ci_start_container.sh): the
# runner's image cache, the fleet's LAN registry (DSV4_LOCAL_REGISTRY; empty: none), then the
# public registry with retries and back-off. A rate limit ends the pull at once (could-not-run,
# naming it); none answering lists what each said.
pull_image() {
  local image=$1 lan=${DSV4_LOCAL_REGISTRY-10.245.143.50:5000} out tried=() attempts n wait_s
  if docker image inspect "$image" >/dev/null 2>&1; then
    echo "gpu-container: $image is in this runner's image cache"
    return 0
  fi
  tried+=("runner cache: not there")
  # Only images of Docker Hub (no registry host in the name) are mirrored on the LAN registry.
  if [ -n "$lan" ] && [[ ${image%%/*} != *[.:]* || $image != */* ]]; then
    if out=$(docker pull "$lan/$image" 2>&1); then
      docker tag "$lan/$image" "$image" >/dev/null 2>&1
      echo "gpu-container: pulled $image from the LAN registry $lan"
      return 0
    fi
    tried+=("$lan/$image: $(tail -n 1 <<<"$out")")
  fi
  attempts=${DSV4_PULL_ATTEMPTS:-6} wait_s=${DSV4_PULL_BACKOFF_S:-30}
  for ((n = 1; ; ++n)); do
    if out=$(docker pull "$image" 2>&1); then
      echo "gpu-container: pulled $image"
      return 0
    fi
    if grep -qiE 'toomanyrequests|rate limit' <<<"$out"; then
      local who="as ${DOCKERHUB_USERNAME:-}"
      [ "$anonymous" = 1 ] && who="anonymously (no login: set the secrets ${DSV4_DOCKERHUB_SECRETS:-DOCKERHUB_USERNAME/DOCKERHUB_TOKEN})"
      summary_line "Pulling \`$image\` hit Docker Hub's pull rate limit $who"
      cannot "pulling $image hit Docker Hub's pull rate limit $who: $(grep -iE -m1 'toomanyrequests|rate limit' <<<"$out")"
    fi
    if [ "$n" -ge "$attempts" ]; then
      tried+=("$image: $(tail -n 1 <<<"$out") ($attempts attempts)")
      break
    fi
    echo "gpu-container: 'docker pull $image' failed (attempt $n of $attempts): $(tail -n 1 <<<"$out"); retrying in ${wait_s}s" >&2
    sleep "$wait_s"
    wait_s=$((wait_s * 2 > 300 ? 300 : wait_s * 2))
  done
  local t
  echo "gpu-container: no registry gave $image; tried, in order:" >&2
  for t in "${tried[@]}"; do echo "  - $t" >&2; done
  return 1
}

start() {
  local gpu=1 hf="" name image workdir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-gpu) gpu=0; shift ;;
      --workdir) workdir=${2:-}; shift 2
        [[ $workdir == /?* ]] || die "--workdir must be an absolute path (got '$workdir')" ;;
      --vendor)
        case "${2:-}" in amd | nvidia) vendor=$2 ;; *) die "--vendor must be amd or nvidia (got '${2:-}')" ;; esac
        shift 2 ;;
      --hf-cache) hf=${2:-}; shift 2 ;;
      *) break ;;
    esac
  done
  [ $# -ge 2 ] || die "start needs NAME IMAGE"
  name=$1 image=$2; shift 2
  # The owner label is how a later clear-vram of this job (a re-run) knows the container is its own.
  local args=(run -dt --init --name "$name" --user root --ulimit nofile=65536:65536
              --label "dsv4-ci.owner=$(job_owner)" --label "dsv4-ci.attempt=${GITHUB_RUN_ATTEMPT:-1}"
              -v "$workspace:$workspace" -w "${workdir:-$workspace}")
  [ -z "$workdir" ] || args+=(-v "$workspace:$workdir" --label "dsv4-ci.workdir=$workdir")
  if [ "$gpu" = 1 ] && [ "$vendor" = nvidia ]; then
    args+=(--gpus all --cap-add=SYS_PTRACE)
  elif [ "$gpu" = 1 ]; then
    # Only this pod's GPUs: the runner writes their device options (one or more lines) to this
    # file; without it the container would see every GPU of the node.
    [ -s "$render_devices" ] ||
      cannot "$render_devices is missing or empty: refusing to start a container with every GPU of the node"
    local device_args=()
    read -r -d '' -a device_args <"$render_devices"
    args+=(--device=/dev/kfd "${device_args[@]}" --group-add video
           --cap-add=SYS_PTRACE --security-opt seccomp=unconfined)
  fi
  if [ -n "$hf" ]; then
    local host mount home
    IFS=: read -r host mount home <<<"$hf"
    if [ -z "$host" ] || [ -z "$mount" ] || [ -z "$home" ]; then
      die "--hf-cache needs HOST:MOUNT:HF_HOME (got '$hf')"
    fi
    # A missing cache would start a download of the whole model (1.6 TB for DeepSeek-V4-Pro).
    [ -d "$host" ] || cannot "the model cache $host does not exist on this runner (expected: --hf-cache $hf)"
    # SGLang's amd_ci_start_container.sh: the cache, MIOpen's databases in it, tilelang importable.
    args+=(-v "$host:$mount" -e "HF_HOME=$home"
           -e "MIOPEN_USER_DB_PATH=$mount/miopen-cache" -e "MIOPEN_CUSTOM_CACHE_DIR=$mount/miopen-cache"
           -e "PYTHONPATH=/opt/tilelang")
  fi
  docker_login
  pull_image "$image" || cannot "cannot pull $image from any registry (listed above)"
  local digest
  digest=$(docker image inspect --format '{{join .RepoDigests " "}}' "$image" 2>/dev/null)
  [ -n "$digest" ] || digest=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null)
  local image_id
  image_id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null)
  echo "gpu-container: image $image, digest ${digest:-unknown}, id ${image_id:-unknown}"
  args+=(-e "DSV4_IMAGE=$image" -e "DSV4_IMAGE_DIGEST=${digest:-unknown}" -e "DSV4_IMAGE_ID=${image_id:-unknown}")
  docker rm -f "$name" >/dev/null 2>&1
  # "$@": extra options from the registry (e.g. --shm-size 32g), split on spaces by the caller.
  docker "${args[@]}" "$@" "$image" sleep infinity >/dev/null || cannot "docker run failed for $image"
  docker exec "$name" git config --global --add safe.directory '*' >/dev/null 2>&1
  echo "gpu-container: $name started from $image"
}

exec_in() {
  [ $# -ge 1 ] || die "exec needs NAME"
  local name=$1; shift
  local dir=${DSV4_WORKDIR:-$workspace} args=() summary="$workspace/.dsv4-step-summary.md"
  while [ $# -gt 0 ]; do
    case "$1" in
      -w) dir=${DSV4_WORKDIR:-$workspace}/$2; shift 2 ;;
      -e) args+=(-e "$2"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || die "exec needs a command after --"
  for v in GITHUB_RUN_ID GITHUB_RUN_ATTEMPT GITHUB_SHA GITHUB_EVENT_NAME GITHUB_REF GITHUB_WORKSPACE \
           GITHUB_WORKFLOW GITHUB_REPOSITORY; do
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
# --vendor right after clear-vram or start picks the GPU vendor (default amd).
if [ "${1:-}" = --vendor ]; then
  case "${2:-}" in
    amd) ;;
    nvidia) vendor=nvidia smi=nvidia-smi ;;
    *) die "--vendor must be amd or nvidia (got '${2:-}')" ;;
  esac
  shift 2
fi
case "$cmd" in
  clear-vram) clear_vram "$@" ;;
  resolve-image) [ $# -ge 1 ] || die "resolve-image needs PATTERN"; resolve_image "$@" ;;
  start) start "$@" ;;
  exec) exec_in "$@" ;;
  login) docker_login ;;
  stop) stop "$@" ;;
  -h|--help) sed -n '2,43p' "$0" ;;
  *) die "unknown command '$cmd' (clear-vram, resolve-image, start, exec, stop, login)" ;;
esac
