#!/usr/bin/env bats
# ci/gpu-container.sh with fakes for docker, rocm-smi, fuser, lsof and the pod's device file: the
# VRAM gate fails closed, the container gets exactly the pod's GPUs and a model cache that exists,
# pulls retry, the e2e image follows SGLang's version-tag rule.

load helpers

setup() {
  setup_fakes
  export DSV4_DEV_DIR=$TMP/dev DSV4_VRAM_WAIT_S=0 DSV4_RENDER_DEVICES=$TMP/gha-render-devices
  mkdir -p "$DSV4_DEV_DIR/dri"
  touch "$DSV4_DEV_DIR/kfd" "$DSV4_DEV_DIR/dri/renderD128" "$DSV4_DEV_DIR/dri/renderD136"
  export GITHUB_WORKSPACE=$TMP/ws
  mkdir -p "$GITHUB_WORKSPACE"
  unset DOCKERHUB_USERNAME DOCKERHUB_TOKEN GITHUB_STEP_SUMMARY DSV4_DOCKERHUB_SECRETS
  export DSV4_LOCAL_REGISTRY=""
  export GITHUB_REPOSITORY=o/r GITHUB_RUN_ID=9 GITHUB_JOB=kernels GITHUB_RUN_ATTEMPT=2
  # docker: the containers of $TMP/containers ("ID NAME IMAGE OWNER"; $TMP/inspect/ID its
  # inspect output); images listed in $TMP/images exist; pulls of them succeed.
  touch "$TMP/images" "$TMP/containers"
  mkdir -p "$TMP/inspect"
  fake docker <<'EOS'
case "$1 $2" in
  "ps -a") cat "$FAKE_CONTAINERS"; exit 0 ;;
  inspect*) cat "$FAKE_INSPECT/$2" 2>/dev/null; exit ;;
  "image inspect")
    img=${!#}
    grep -qxF "$img" "$FAKE_IMAGES" || exit 1
    [ "$3" = --format ] && echo "${img%%:*}@sha256:0123abcd"
    exit 0 ;;
  "manifest inspect") grep -qxF "$3" "$FAKE_IMAGES"; exit ;;
  pull*)
    if [ -f "$FAKE_PULL_OUTPUT" ]; then cat "$FAKE_PULL_OUTPUT" >&2; exit 1; fi
    n=$(cat "$FAKE_PULL_FAILS" 2>/dev/null || echo 0)
    if [ "$n" -gt 0 ]; then echo $((n - 1)) >"$FAKE_PULL_FAILS"; echo "Error response from daemon: timeout" >&2; exit 1; fi
    grep -qxF "$2" "$FAKE_REMOTE" 2>/dev/null || [ ! -f "$FAKE_REMOTE" ] || { echo "Error response from daemon: manifest unknown" >&2; exit 1; }
    echo "$2" >>"$FAKE_IMAGES" ;;
  login*) cat >"$FAKE_LOGIN_STDIN" ;;
esac
exit 0
EOS
  export FAKE_IMAGES=$TMP/images FAKE_PULL_FAILS=$TMP/pull-fails FAKE_LOGIN_STDIN=$TMP/login-stdin
  export FAKE_CONTAINERS=$TMP/containers FAKE_INSPECT=$TMP/inspect
  export FAKE_PULL_OUTPUT=$TMP/pull-output FAKE_REMOTE=$TMP/remote
}

# container ID NAME IMAGE OWNER [gpu]: a container on the host's daemon, holding /dev/kfd with gpu.
container() {
  echo "$1 $2 $3 $4" >>"$FAKE_CONTAINERS"
  if [ "${5:-}" = gpu ]; then
    echo '[{"HostConfig": {"Devices": [{"PathOnHost": "/dev/kfd", "PathInContainer": "/dev/kfd"}]}}]' >"$FAKE_INSPECT/$1"
  else
    echo '[{"HostConfig": {"Devices": []}}]' >"$FAKE_INSPECT/$1"
  fi
}

teardown() {
  [ -n "${HOLDER:-}" ] && kill "$HOLDER" 2>/dev/null
  teardown_fakes
}

# rocm-smi: VRAM use from $TMP/vram-mib ("held-by-holder": 4096 MiB while $HOLDER lives).
fake_rocm_smi() {
  fake rocm-smi <<'EOS'
[ "$1" = --showmeminfo ] || { echo "fake rocm-smi $*"; exit 0; }
state=$(cat "$FAKE_VRAM")
if [ "$state" = garbage ]; then echo "not json"; exit 0; fi
if [ "$state" = held-by-holder ]; then
  if kill -0 "$FAKE_HOLDER" 2>/dev/null; then state=4096; else state=0; fi
fi
echo "{\"card0\": {\"VRAM Total Memory (B)\": \"206141652992\", \"VRAM Total Used Memory (B)\": \"$((state << 20))\"}}"
EOS
  export FAKE_VRAM=$TMP/vram-mib
}

@test "clear-vram: rocm-smi missing is could-not-run, never a pass" {
  PATH="$BIN:/usr/bin:/bin"
  [ ! -x /usr/bin/rocm-smi ] || skip "this machine has a real rocm-smi"
  run bash "$ROOT/ci/gpu-container.sh" clear-vram
  show
  [ "$status" -eq 3 ]
  [[ $output == *"rocm-smi is not installed"* ]]
}

@test "clear-vram: clear VRAM passes without killing anything" {
  fake_rocm_smi
  echo 10 >"$FAKE_VRAM"
  run bash "$ROOT/ci/gpu-container.sh" clear-vram
  show
  [ "$status" -eq 0 ]
  [[ $output == *"VRAM clear (at most 10 MiB"* ]]
  ! grep -q '^fuser' "$FAKE_LOG"
}

@test "clear-vram: the holder of /dev/kfd is killed and VRAM checked again" {
  fake_rocm_smi
  sleep 300 &
  HOLDER=$!
  export FAKE_HOLDER=$HOLDER
  echo held-by-holder >"$FAKE_VRAM"
  fake fuser <<'EOS'
case "$*" in *"/kfd") kill -0 "$FAKE_HOLDER" 2>/dev/null && echo " $FAKE_HOLDER" ;; esac
exit 0
EOS
  run bash "$ROOT/ci/gpu-container.sh" clear-vram
  show
  [ "$status" -eq 0 ]
  [[ $output == *"SIGTERM to $HOLDER (holds a GPU device)"* ]]
  ! kill -0 "$HOLDER" 2>/dev/null
  grep -q "^fuser $DSV4_DEV_DIR/dri/renderD136" "$FAKE_LOG"
}

@test "clear-vram: VRAM that stays held fails after three attempts with fuser and lsof diagnostics" {
  fake_rocm_smi
  echo 8192 >"$FAKE_VRAM"
  fake fuser <<'EOS'
[ "$1" = -v ] && echo "USER PID ACCESS COMMAND $2: root 4242 F.... python3"
exit 0
EOS
  fake lsof <<'EOS'
[ "$1" = -t ] || echo "python3 4242 root mem CHR $1"
exit 0
EOS
  run bash "$ROOT/ci/gpu-container.sh" clear-vram
  show
  [ "$status" -eq 3 ]
  [ "$(grep -c '^rocm-smi --showmeminfo' "$FAKE_LOG")" -eq 4 ]
  [ "$(grep -c 'clearing, attempt' <<<"$output")" -eq 3 ]
  [[ $output == *"root 4242 F.... python3"* ]]
  [[ $output == *"python3 4242 root mem CHR $DSV4_DEV_DIR/kfd"* ]]
  [[ $output == *"fake rocm-smi --showpids"* ]]
  [[ $output == *"not clear after 3 attempts"* ]]
}

@test "clear-vram: only this job's containers are removed; a neighbour's GPU container is listed and survives" {
  fake_rocm_smi
  echo 10 >"$FAKE_VRAM"
  container aaa111 dsv4-kernels-9-1 rocm/pytorch:x o/r/9/kernels gpu   # this job, attempt 1
  container ddd444 dsv4-kernels-9-2 rocm/pytorch:x - gpu               # this job, by name
  container bbb222 neighbour-job rocm/sgl-dev:y other/repo/5/e2e gpu   # another pod's job
  container eee555 ci_sglang rocm/sgl-dev:z - gpu                      # SGLang's own job
  container ccc333 web nginx - none                                    # no GPU
  export GITHUB_STEP_SUMMARY=$TMP/summary.md
  run bash "$ROOT/ci/gpu-container.sh" clear-vram --vendor amd --name dsv4-kernels-9-2
  show
  [ "$status" -eq 0 ]
  grep -q '^docker stop --time 10 aaa111' "$FAKE_LOG"
  grep -q '^docker rm -f aaa111' "$FAKE_LOG"
  grep -q '^docker rm -f ddd444' "$FAKE_LOG"
  for id in bbb222 eee555 ccc333; do
    ! grep -qE "^docker (stop|rm|kill).*$id" "$FAKE_LOG" || { echo "$id was touched"; false; }
  done
  [[ $output == *"NOT touching neighbour-job (bbb222, rocm/sgl-dev:y, owner other/repo/5/e2e)"* ]]
  [[ $output == *"NOT touching ci_sglang"* ]]
  [[ $output != *"web"* ]]
  grep -q 'neighbour-job' "$GITHUB_STEP_SUMMARY"
}

@test "clear-vram: VRAM held by a neighbour's container fails closed without signalling its processes" {
  fake_rocm_smi
  echo 8192 >"$FAKE_VRAM"
  container bbb222 neighbour-job rocm/sgl-dev:y other/repo/5/e2e gpu
  fake fuser <<'EOS'
case "$*" in *"/kfd") echo " 4242" ;; esac
exit 0
EOS
  export DSV4_PROC_DIR=$TMP/proc
  mkdir -p "$DSV4_PROC_DIR/4242"
  echo "0::/system.slice/docker-$(printf 'b%.0s' {1..64}).scope" >"$DSV4_PROC_DIR/4242/cgroup"
  run bash "$ROOT/ci/gpu-container.sh" clear-vram --name dsv4-kernels-9-2
  show
  [ "$status" -eq 3 ]
  [[ $output == *"NOT signalling 4242"* ]]
  [[ $output != *"SIGTERM to 4242"* ]] && [[ $output != *"SIGKILL to 4242"* ]]
  ! grep -qE '^docker (stop|rm).*bbb222' "$FAKE_LOG"
  [[ $output == *"not clear after 3 attempts"* ]]
}

@test "clear-vram: an answer of rocm-smi that cannot be read is not clear" {
  fake_rocm_smi
  echo garbage >"$FAKE_VRAM"
  run bash "$ROOT/ci/gpu-container.sh" clear-vram
  show
  [ "$status" -eq 3 ]
  [[ $output == *"could not be read"* ]]
}

@test "start: a missing or empty render-device file refuses to start the GPU container" {
  echo img >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" start c1 img
  show
  [ "$status" -eq 3 ]
  [[ $output == *"$DSV4_RENDER_DEVICES is missing or empty"* ]]
  : >"$DSV4_RENDER_DEVICES"
  run bash "$ROOT/ci/gpu-container.sh" start c1 img
  [ "$status" -eq 3 ]
  ! grep -q '^docker run' "$FAKE_LOG"
}

@test "start: every line of the render-device file is used; no --ipc=host; the cache carries MIOpen and tilelang" {
  echo img >"$FAKE_IMAGES"
  printf -- '--device=/dev/dri/renderD128\n--device=/dev/dri/renderD136 --device=/dev/dri/card1\n' >"$DSV4_RENDER_DEVICES"
  mkdir -p "$TMP/cache"
  run bash "$ROOT/ci/gpu-container.sh" start --hf-cache "$TMP/cache:/sgl-data:/sgl-data/hf-cache" c1 img --shm-size 32g
  show
  [ "$status" -eq 0 ]
  line=$(grep '^docker run' "$FAKE_LOG")
  for want in --device=/dev/kfd --device=/dev/dri/renderD128 --device=/dev/dri/renderD136 \
      --device=/dev/dri/card1 "-v $TMP/cache:/sgl-data" "HF_HOME=/sgl-data/hf-cache" \
      "MIOPEN_USER_DB_PATH=/sgl-data/miopen-cache" "MIOPEN_CUSTOM_CACHE_DIR=/sgl-data/miopen-cache" \
      "PYTHONPATH=/opt/tilelang" "--shm-size 32g" "DSV4_IMAGE=img" "DSV4_IMAGE_DIGEST=img@sha256:0123abcd" \
      "--label dsv4-ci.owner=o/r/9/kernels" "--label dsv4-ci.attempt=2"; do
    [[ $line == *"$want"* ]] || { echo "missing '$want' in: $line"; false; }
  done
  [[ $line != *"--ipc"* ]]
}

@test "start --workdir: the workspace also at one fixed path, where exec runs; the image's id for ship-build" {
  echo img >"$FAKE_IMAGES"
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  run bash "$ROOT/ci/gpu-container.sh" start --workdir /dsv4-ci c1 img
  show
  [ "$status" -eq 0 ]
  line=$(grep '^docker run' "$FAKE_LOG")
  for want in "-v $GITHUB_WORKSPACE:$GITHUB_WORKSPACE " "-v $GITHUB_WORKSPACE:/dsv4-ci " "-w /dsv4-ci " \
      "--label dsv4-ci.workdir=/dsv4-ci" "DSV4_IMAGE_ID=img@sha256:0123abcd"; do
    [[ $line == *"$want"* ]] || { echo "missing '$want' in: $line"; false; }
  done
  DSV4_WORKDIR=/dsv4-ci run bash "$ROOT/ci/gpu-container.sh" exec c1 -- ctest -N
  show
  [ "$status" -eq 0 ]
  grep -q '^docker exec -w /dsv4-ci .* c1 ctest -N$' "$FAKE_LOG"
  DSV4_WORKDIR=/dsv4-ci run bash "$ROOT/ci/gpu-container.sh" exec c1 -w build -- ls
  grep -q '^docker exec -w /dsv4-ci/build .* c1 ls$' "$FAKE_LOG"
  run bash "$ROOT/ci/gpu-container.sh" start --workdir dsv4-ci c1 img
  [ "$status" -eq 2 ]
  [[ $output == *"--workdir must be an absolute path (got 'dsv4-ci')"* ]]
}

@test "start: a model cache that does not exist fails fast with its path" {
  echo img >"$FAKE_IMAGES"
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  run bash "$ROOT/ci/gpu-container.sh" start --hf-cache "$TMP/no-such-cache:/sgl-data:/sgl-data/hf-cache" c1 img
  show
  [ "$status" -eq 3 ]
  [[ $output == *"the model cache $TMP/no-such-cache does not exist"* ]]
  ! grep -q '^docker run' "$FAKE_LOG"
}

@test "start: pulls retry with back-off, after a login that keeps the token off every log" {
  fake sleep <<'EOS'
exit 0
EOS
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  echo 2 >"$FAKE_PULL_FAILS"
  export DOCKERHUB_USERNAME=ciuser DOCKERHUB_TOKEN=s3cr3t-t0ken
  run bash "$ROOT/ci/gpu-container.sh" start c1 rocm/sgl-dev:x
  show
  [ "$status" -eq 0 ]
  [ "$(grep -c '^docker pull rocm/sgl-dev:x' "$FAKE_LOG")" -eq 3 ]
  grep -q '^sleep 30$' "$FAKE_LOG"
  grep -q '^sleep 60$' "$FAKE_LOG"
  grep -q '^docker login -u ciuser --password-stdin' "$FAKE_LOG"
  [ "$(cat "$FAKE_LOGIN_STDIN")" = s3cr3t-t0ken ]
  ! grep -q s3cr3t "$FAKE_LOG"
  [[ $output != *s3cr3t* ]]
}

@test "start: a pull that keeps failing is could-not-run; no login without credentials" {
  fake sleep <<'EOS'
exit 0
EOS
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  echo 99 >"$FAKE_PULL_FAILS"
  run bash "$ROOT/ci/gpu-container.sh" start c1 rocm/sgl-dev:x
  show
  [ "$status" -eq 3 ]
  [ "$(grep -c '^docker pull' "$FAKE_LOG")" -eq 6 ]
  grep -q '^sleep 300$' "$FAKE_LOG"
  ! grep -q '^docker login' "$FAKE_LOG"
}

@test "start: without Docker Hub credentials the log and the step summary say the pull is anonymous" {
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  export GITHUB_STEP_SUMMARY=$TMP/summary.md DSV4_DOCKERHUB_SECRETS=DOCKERHUB_AMD_USERNAME/DOCKERHUB_AMD_TOKEN
  run bash "$ROOT/ci/gpu-container.sh" start c1 rocm/sgl-dev:x
  show
  [ "$status" -eq 0 ]
  [[ $output == *"no Docker Hub login: the secrets DOCKERHUB_AMD_USERNAME/DOCKERHUB_AMD_TOKEN are not set"* ]]
  grep -q 'No Docker Hub login: the secrets `DOCKERHUB_AMD_USERNAME/DOCKERHUB_AMD_TOKEN`' "$GITHUB_STEP_SUMMARY"
}

@test "start: an anonymous pull that hits the rate limit is could-not-run at once, naming the limit" {
  fake sleep <<'EOS'
exit 0
EOS
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  echo "Error response from daemon: toomanyrequests: You have reached your pull rate limit." >"$FAKE_PULL_OUTPUT"
  export GITHUB_STEP_SUMMARY=$TMP/summary.md DSV4_DOCKERHUB_SECRETS=DOCKERHUB_AMD_USERNAME/DOCKERHUB_AMD_TOKEN
  run bash "$ROOT/ci/gpu-container.sh" start c1 rocm/sgl-dev:x
  show
  [ "$status" -eq 3 ]
  [ "$(grep -c '^docker pull' "$FAKE_LOG")" -eq 1 ]
  [[ $output == *"hit Docker Hub's pull rate limit anonymously (no login: set the secrets DOCKERHUB_AMD_USERNAME/DOCKERHUB_AMD_TOKEN)"* ]]
  [[ $output == *"toomanyrequests"* ]]
  grep -q "rate limit" "$GITHUB_STEP_SUMMARY"
  ! grep -q '^docker run' "$FAKE_LOG"
}

@test "start: registries in SGLang's order (runner cache, LAN registry, Docker Hub), all listed when none answers" {
  fake sleep <<'EOS'
exit 0
EOS
  echo "--device=/dev/dri/renderD128" >"$DSV4_RENDER_DEVICES"
  export DSV4_LOCAL_REGISTRY=10.245.143.50:5000 DSV4_PULL_ATTEMPTS=2
  echo "10.245.143.50:5000/rocm/sgl-dev:x" >"$FAKE_REMOTE"
  run bash "$ROOT/ci/gpu-container.sh" start c1 rocm/sgl-dev:x
  show
  [ "$status" -eq 0 ]
  [[ $output == *"pulled rocm/sgl-dev:x from the LAN registry 10.245.143.50:5000"* ]]
  grep -q '^docker tag 10.245.143.50:5000/rocm/sgl-dev:x rocm/sgl-dev:x' "$FAKE_LOG"
  ! grep -q '^docker pull rocm/sgl-dev:x' "$FAKE_LOG"
  # None answers: the runner cache, the LAN registry and Docker Hub, in that order.
  : >"$FAKE_LOG"
  echo "nothing" >"$FAKE_REMOTE"
  run bash "$ROOT/ci/gpu-container.sh" start c1 rocm/sgl-dev:y
  show
  [ "$status" -eq 3 ]
  [ "$(grep '^docker pull' "$FAKE_LOG" | head -n 1)" = "docker pull 10.245.143.50:5000/rocm/sgl-dev:y" ]
  [ "$(grep -c '^docker pull rocm/sgl-dev:y' "$FAKE_LOG")" -eq 2 ]
  [[ $output == *"  - runner cache: not there"*"  - 10.245.143.50:5000/rocm/sgl-dev:y: Error response from daemon: manifest unknown"*"  - rocm/sgl-dev:y: Error response from daemon: manifest unknown (2 attempts)"* ]]
}

@test "resolve-image: an image without placeholders must exist" {
  echo "rocm/pytorch:present" >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" resolve-image rocm/pytorch:present
  [ "$status" -eq 0 ] && [ "$output" = rocm/pytorch:present ]
  run bash "$ROOT/ci/gpu-container.sh" resolve-image rocm/pytorch:absent
  show
  [ "$status" -eq 3 ]
  [[ $output == *"rocm/pytorch:absent does not exist"* ]]
}

# An SGLang checkout whose highest tag lives on a release branch, not reachable from main.
make_checkout() {
  local repo=$TMP/sglang
  git init -q -b main "$repo"
  git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m base
  git -C "$repo" tag v0.5.8.post1
  git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m next
  git -C "$repo" tag v0.5.9
  git -C "$repo" checkout -q -b release
  git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m rel
  git -C "$repo" tag v0.5.10rc0
  git -C "$repo" tag v0.5.10
  git -C "$repo" checkout -q main
  git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m dev
  echo "$repo"
}

@test "resolve-image: SGLang's tag rule (highest v*.*.* across branches), newest existing day, tags tried listed" {
  repo=$(make_checkout)
  [ "$(git -C "$repo" describe --tags --abbrev=0)" = v0.5.9 ]  # what git describe would have said
  d2=$(date -u -d '2 days ago' +%Y%m%d)
  d3=$(date -u -d '3 days ago' +%Y%m%d)
  printf 'rocm/sgl-dev:v0.5.10-rocm720-mi35x-%s\nrocm/sgl-dev:v0.5.9-rocm720-mi35x-%s\n' "$d3" "$d2" >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" resolve-image "rocm/sgl-dev:{sglang_tag}-rocm720-mi35x-{date}" "$repo"
  show
  [ "$status" -eq 0 ]
  # v0.5.10 leads, v0.5.10rc0 follows (rc below the release); the newest day with an image wins.
  [ "${lines[-1]}" = "rocm/sgl-dev:v0.5.10-rocm720-mi35x-$d3" ]
  [[ $output == *"version tag v0.5.10 "* ]]
  [[ $output == *"tried: rocm/sgl-dev:v0.5.10-rocm720-mi35x-$(date -u +%Y%m%d) rocm/sgl-dev:v0.5.10rc0-rocm720-mi35x-$(date -u +%Y%m%d)"* ]]
}

@test "resolve-image: no image in the window is could-not-run with every tag tried, and no older fallback" {
  repo=$(make_checkout)
  old=$(date -u -d '10 days ago' +%Y%m%d)
  echo "rocm/sgl-dev:v0.5.10-rocm720-mi35x-$old" >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" resolve-image "rocm/sgl-dev:{sglang_tag}-rocm720-mi35x-{date}" "$repo" --days 3
  show
  [ "$status" -eq 3 ]
  [[ $output == *"no image exists"* ]]
  [ "$(grep -o 'rocm/sgl-dev:v0.5.10[a-z0-9]*-rocm720-mi35x-[0-9]*' <<<"${lines[-1]}" | wc -l)" -eq 6 ]
}

@test "resolve-image: days before --not-before are never tried" {
  repo=$(make_checkout)
  d1=$(date -u -d '1 day ago' +%Y%m%d)
  echo "rocm/sgl-dev:v0.5.10-rocm720-mi35x-$d1" >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" resolve-image "rocm/sgl-dev:{sglang_tag}-rocm720-mi35x-{date}" "$repo" --not-before "$(date -u +%Y%m%d)"
  show
  [ "$status" -eq 3 ]
  [[ $output == *"not trying images before"* ]]
  ! grep -q "manifest inspect rocm/sgl-dev:v0.5.10-rocm720-mi35x-$d1" "$FAKE_LOG"
}

@test "resolve-image: the checkout's own get_version_tag.py leads when it disagrees" {
  repo=$(make_checkout)
  mkdir -p "$repo/python/tools"
  printf 'import sys\nassert "--tag-only" in sys.argv\nprint("v0.6.0")\n' >"$repo/python/tools/get_version_tag.py"
  today=$(date -u +%Y%m%d)
  echo "rocm/sgl-dev:v0.6.0-rocm720-mi35x-$today" >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" resolve-image "rocm/sgl-dev:{sglang_tag}-rocm720-mi35x-{date}" "$repo"
  show
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "rocm/sgl-dev:v0.6.0-rocm720-mi35x-$today" ]
}

@test "nvidia runners: nvidia-smi answers the VRAM check; the container gets --gpus all" {
  fake nvidia-smi <<'EOS'
[ "$1" = --query-gpu=memory.used ] && printf '3\n12\n'
exit 0
EOS
  run bash "$ROOT/ci/gpu-container.sh" clear-vram --vendor nvidia
  show
  [ "$status" -eq 0 ]
  [[ $output == *"VRAM clear (at most 12 MiB"* ]]
  echo img >"$FAKE_IMAGES"
  run bash "$ROOT/ci/gpu-container.sh" start --vendor nvidia c1 img
  show
  [ "$status" -eq 0 ]
  line=$(grep '^docker run' "$FAKE_LOG")
  [[ $line == *"--gpus all"* ]] && [[ $line != *kfd* ]]
  rm "$BIN/nvidia-smi"
  PATH="$BIN:/usr/bin:/bin"
  [ ! -x /usr/bin/nvidia-smi ] || skip "this machine has a real nvidia-smi"
  run bash "$ROOT/ci/gpu-container.sh" clear-vram --vendor nvidia
  [ "$status" -eq 3 ]
  [[ $output == *"nvidia-smi is not installed"* ]]
}
