#!/usr/bin/env bats
# ci/sglang-install.sh against a stand-in SGLang checkout, with fakes for pip and python3 and a
# local AITER repository: SGLang's AMD install order, the AITER check, and the same-commit check.

load helpers

setup() {
  setup_fakes
  SG=$TMP/sglang
  mkdir -p "$SG/python/sglang/kernels/aot" "$SG/docker"
  echo kernels >"$SG/python/sglang/kernels/aot/pyproject_rocm.toml"
  echo cuda >"$SG/python/sglang/kernels/aot/pyproject.toml"
  echo cuda >"$SG/python/pyproject.toml"
  echo '[project.optional-dependencies] dev_hip = []' >"$SG/python/pyproject_other.toml"
  cat >"$SG/docker/rocm.Dockerfile" <<'EOS'
FROM $BASE_IMAGE_942 AS gfx942
ENV AITER_COMMIT_DEFAULT="v0.1.4"
FROM $BASE_IMAGE_950_ROCM720 AS gfx950-rocm720
ARG X=1
ENV AITER_COMMIT_DEFAULT="v0.1.9"
FROM $BASE_IMAGE_942_ROCM720 AS gfx942-rocm720
ENV AITER_COMMIT_DEFAULT="v0.1.9"
FROM $BASE_IMAGE_950_ROCM724 AS gfx950-rocm724
ENV AITER_COMMIT_DEFAULT="v0.1.9"
EOS
  git -C "$SG" init -q -b main
  git -C "$SG" add -A
  git -C "$SG" -c user.name=t -c user.email=t@t commit -qm sglang
  HEAD_SHA=$(git -C "$SG" rev-parse HEAD)
  # The AITER repository, with the pinned commit tagged.
  export DSV4_AITER_REPO=$TMP/aiter-origin DSV4_AITER_DIR=$TMP/aiter
  git init -q -b main "$DSV4_AITER_REPO"
  echo torch >"$DSV4_AITER_REPO/requirements.txt"
  git -C "$DSV4_AITER_REPO" add -A
  git -C "$DSV4_AITER_REPO" -c user.name=t -c user.email=t@t commit -qm aiter
  git -C "$DSV4_AITER_REPO" tag v0.1.9
  export FAKE_AITER_VERSION=0.1.5 FAKE_SGLANG_VERSION=0.5.11
  # SGLang's ROCm 7.2 MI35x images are stamped so (docker/rocm.Dockerfile's ENV GPU_ARCH).
  export GPU_ARCH=gfx950-rocm720
  unset PIP_CONSTRAINT HSA_ENABLE_IPC_MODE_LEGACY FAKE_HIP
  fake pip <<'EOS'
if [ "$1" = show ]; then
  case "$2" in
    amd-aiter) [ -n "$FAKE_AITER_VERSION" ] && echo "Version: $FAKE_AITER_VERSION" ;;
    sglang) echo "Version: $FAKE_SGLANG_VERSION" ;;
  esac
fi
exit 0
EOS
  fake python3 <<'EOS'
if [ "$1" = -c ]; then echo "${FAKE_HIP:-}"; exit 0; fi
echo "  in $PWD with GPU_ARCHS=${GPU_ARCHS:-} pyproject=$(cat pyproject.toml 2>/dev/null)" >>"$FAKE_LOG"
EOS
}

teardown() { teardown_fakes; }

@test "install: kernel build, ROCm pyproject, extras, and AITER rebuilt at the Dockerfile's pin" {
  run bash "$ROOT/ci/sglang-install.sh" "$SG"
  show
  [ "$status" -eq 0 ]
  [[ $output == *"at $HEAD_SHA"* ]]
  # The order SGLang's installer uses.
  grep -n . "$FAKE_LOG" >"$TMP/numbered"
  n_uninstall=$(grep -m1 'pip uninstall -y sglang$' "$TMP/numbered" | cut -d: -f1)
  n_kernel=$(grep -m1 'python3 setup_rocm.py install' "$TMP/numbered" | cut -d: -f1)
  n_install=$(grep -m1 'pip install -e python\[dev_hip,tracing\]' "$TMP/numbered" | cut -d: -f1)
  n_aiter=$(grep -m1 'python3 setup.py develop' "$TMP/numbered" | cut -d: -f1)
  [ "$n_uninstall" -lt "$n_kernel" ] && [ "$n_kernel" -lt "$n_install" ] && [ "$n_install" -lt "$n_aiter" ]
  grep -q "in $SG/python/sglang/kernels/aot with GPU_ARCHS= pyproject=kernels" "$FAKE_LOG"
  [ "$(cat "$SG/python/pyproject.toml")" = '[project.optional-dependencies] dev_hip = []' ]
  [[ $output == *"pins v0.1.9; the image has 0.1.5"* ]]
  grep -q "in $TMP/aiter with GPU_ARCHS=gfx950" "$FAKE_LOG"
  grep -q '^pip install -r requirements.txt' "$FAKE_LOG"
  [ "$(git -C "$TMP/aiter" rev-parse HEAD)" = "$(git -C "$DSV4_AITER_REPO" rev-parse v0.1.9)" ]
}

@test "install: the stage, GPU arch and extras come from the image's GPU_ARCH (rocm724: dev_hip_rocm724)" {
  GPU_ARCH=gfx950-rocm724 run bash "$ROOT/ci/sglang-install.sh" "$SG" --extras test
  show
  [ "$status" -eq 0 ]
  [[ $output == *"Dockerfile stage gfx950-rocm724, GPU_ARCHS gfx950, extras [dev_hip_rocm724,tracing,test]"* ]]
  grep -q 'pip install -e python\[dev_hip_rocm724,tracing,test\]' "$FAKE_LOG"
  [[ $output == *"the Dockerfile's gfx950-rocm724 stage pins v0.1.9"* ]]
}

@test "install: an image without GPU_ARCH is inferred from torch's HIP and the GPU rocminfo names" {
  fake rocminfo <<'EOS'
echo "  Name:                    gfx942"
EOS
  GPU_ARCH="" FAKE_HIP=7.2.53211 run bash "$ROOT/ci/sglang-install.sh" "$SG"
  show
  [ "$status" -eq 0 ]
  [[ $output == *"inferred gfx942-rocm720 (HIP 7.2.53211)"* ]]
  grep -q "in $TMP/aiter with GPU_ARCHS=gfx942" "$FAKE_LOG"
  # HSA_ENABLE_IPC_MODE_LEGACY marks a rocm724 image; --gpu-archs names the GPU before rocminfo.
  git -C "$SG" checkout -q -- . && rm -rf "$TMP/aiter"
  : >"$FAKE_LOG"
  GPU_ARCH="" HSA_ENABLE_IPC_MODE_LEGACY=1 run bash "$ROOT/ci/sglang-install.sh" "$SG" --gpu-archs gfx950
  show
  [ "$status" -eq 0 ]
  [[ $output == *"inferred gfx950-rocm724"* ]]
  grep -q 'pip install -e python\[dev_hip_rocm724,tracing\]' "$FAKE_LOG"
  # Nothing names the GPU: could-not-run, nothing installed.
  rm "$BIN/rocminfo"
  : >"$FAKE_LOG"
  PATH="$BIN:/usr/bin:/bin" GPU_ARCH="" run bash "$ROOT/ci/sglang-install.sh" "$SG"
  [ "$status" -eq 3 ]
  [[ $output == *"neither --gpu-archs nor rocminfo names the GPU"* ]]
  ! grep -q '^pip install' "$FAKE_LOG"
}

@test "install: an image whose AITER matches the pin is not rebuilt; a dev build is kept" {
  FAKE_AITER_VERSION=0.1.9 run bash "$ROOT/ci/sglang-install.sh" "$SG"
  show
  [ "$status" -eq 0 ]
  [[ $output == *"AITER matches"* ]]
  ! grep -q 'setup.py develop' "$FAKE_LOG"
  git -C "$SG" checkout -q -- .
  FAKE_AITER_VERSION=0.1.8.dev12+g1234abc run bash "$ROOT/ci/sglang-install.sh" "$SG"
  [ "$status" -eq 0 ]
  [[ $output == *"dev or patched build: kept"* ]]
}

@test "install: a Dockerfile without the image's stage, or a checkout without a ROCm kernel build, cannot install" {
  run bash "$ROOT/ci/sglang-install.sh" "$SG" --stage gfx950-rocm999
  show
  [ "$status" -eq 3 ]
  [[ $output == *"no AITER_COMMIT_DEFAULT under the stage 'gfx950-rocm999'"* ]]
  git -C "$SG" checkout -q -- .
  rm "$SG/python/sglang/kernels/aot/pyproject_rocm.toml"
  git -C "$SG" -c user.name=t -c user.email=t@t commit -qam nokernel
  run bash "$ROOT/ci/sglang-install.sh" "$SG"
  [ "$status" -eq 3 ]
  [[ $output == *"no ROCm kernel build"* ]]
}

@test "--image-from-commit: the image's sglang must carry the checkout's commit" {
  FAKE_SGLANG_VERSION="0.5.11.dev3+g${HEAD_SHA:0:9}" run bash "$ROOT/ci/sglang-install.sh" "$SG" --image-from-commit
  show
  [ "$status" -eq 0 ]
  ! grep -q 'pip install' "$FAKE_LOG"
  FAKE_SGLANG_VERSION="0.5.11.dev3+gdeadbeef1" run bash "$ROOT/ci/sglang-install.sh" "$SG" --image-from-commit
  [ "$status" -eq 3 ]
  [[ $output == *"built from deadbeef1, the checkout is at $HEAD_SHA"* ]]
  FAKE_SGLANG_VERSION="0.5.11" run bash "$ROOT/ci/sglang-install.sh" "$SG" --image-from-commit
  [ "$status" -eq 3 ]
  git -C "$SG" tag v0.5.11
  FAKE_SGLANG_VERSION="0.5.11" run bash "$ROOT/ci/sglang-install.sh" "$SG" --image-from-commit
  [ "$status" -eq 0 ]
}

@test "--image-from-commit: a shallow checkout without tags asks its remote for the release tag" {
  git clone -q --bare "$SG" "$TMP/origin.git"
  git -C "$TMP/origin.git" tag -a v0.5.11 -m release "$HEAD_SHA"
  git clone -q --depth 1 "file://$TMP/origin.git" "$TMP/shallow"
  git -C "$TMP/shallow" tag -d v0.5.11 >/dev/null 2>&1 || true
  [ -z "$(git -C "$TMP/shallow" tag)" ]
  FAKE_SGLANG_VERSION="0.5.11" run bash "$ROOT/ci/sglang-install.sh" "$TMP/shallow" --image-from-commit
  show
  [ "$status" -eq 0 ]
  FAKE_SGLANG_VERSION="0.5.12" run bash "$ROOT/ci/sglang-install.sh" "$TMP/shallow" --image-from-commit
  [ "$status" -eq 3 ]
}
