#!/usr/bin/env bash
# Installs an SGLang checkout into the e2e container the way SGLang's AMD CI installer
# (scripts/ci/amd/amd_ci_install_dependency.sh) installs one, or checks that the image already
# holds SGLang built from the checkout's commit. Runs inside the container.
#
# usage: ci/sglang-install.sh SGLANG_DIR [--extras OPTIONAL] [--stage STAGE] [--gpu-archs GFX]
#        ci/sglang-install.sh SGLANG_DIR --image-from-commit
#
# Install: the old SGLang packages removed; the ROCm kernel package built from
# python/sglang/kernels/aot (its pyproject_rocm.toml, setup_rocm.py install; sgl-kernel/ in older
# checkouts); python/pyproject_other.toml made the package's pyproject (the ROCm one); pip install
# -e "python[EXTRAS]"; then the AITER check: the commit the Dockerfile's STAGE pins
# (AITER_COMMIT_DEFAULT in docker/rocm.Dockerfile) against the amd-aiter the image has, and
# AITER rebuilt at that commit when they differ (a dev or +g build of the image is kept, as
# SGLang's installer keeps it).
# The stage and the extras come from the image, as SGLang's installer reads them: its GPU_ARCH
# (gfx942 or gfx950, with -rocm720 or -rocm724) names the Dockerfile stage; an image without it
# is inferred (-rocm724 where PIP_CONSTRAINT or HSA_ENABLE_IPC_MODE_LEGACY=1 is set, -rocm720
# where torch's HIP is 7.2, else none) with the GPU of --gpu-archs, else of rocminfo. EXTRAS are
# SGLang's dev_hip,tracing (dev_hip_rocm724 on a rocm724 image) plus --extras; --stage overrides
# the stage.
# --image-from-commit: nothing installed; the image's sglang must carry the checkout's commit
# (+g<hash> in its version, or the release tag at HEAD).
# Exit codes: 0 done, 2 bad usage, 3 could not install or the image is from another commit.
# Test hooks: DSV4_AITER_REPO (https://github.com/ROCm/aiter.git), DSV4_AITER_DIR (/sgl-workspace/aiter).
set -uo pipefail

die() { echo "sglang-install: $*" >&2; exit 2; }
cannot() { echo "sglang-install: $*" >&2; exit 3; }
say() { echo "sglang-install: $*"; }

[ $# -ge 1 ] || die "usage: ci/sglang-install.sh SGLANG_DIR [--extras E] [--stage S] [--gpu-archs A] | --image-from-commit"
dir=$1; shift
optional="" stage="" archs="" verify=0
while [ $# -gt 0 ]; do
  case "$1" in
    --extras) optional=${2:-}; shift 2 ;;
    --stage) stage=${2:-}; shift 2 ;;
    --gpu-archs) archs=${2:-}; shift 2 ;;
    --image-from-commit) verify=1; shift ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[ -d "$dir/.git" ] || [ -f "$dir/.git" ] || cannot "$dir is not a git checkout of SGLang"
dir=$(cd "$dir" && pwd)
commit=$(git -C "$dir" rev-parse HEAD) || cannot "cannot read the commit of $dir"
say "SGLang checkout $dir at $commit"

installed_version() { pip show "$1" 2>/dev/null | sed -n 's/^Version: *//p' | head -n 1; }

if [ "$verify" = 1 ]; then
  version=$(installed_version sglang)
  [ -n "$version" ] || cannot "the image has no sglang package (pip show sglang)"
  hash=$(sed -n 's/.*[+.]g\([0-9a-f]\{7,40\}\).*/\1/p' <<<"$version")
  if [ -n "$hash" ]; then
    [[ $commit == "$hash"* ]] ||
      cannot "the image's sglang $version was built from $hash, the checkout is at $commit: use an image built from this commit, or install the checkout"
  else
    tag=$(git -C "$dir" describe --tags --exact-match HEAD 2>/dev/null)
    # A shallow checkout has no tags: ask the remote whether v$version names this commit.
    if [ -z "$tag" ] && git -C "$dir" ls-remote --tags origin 2>/dev/null |
      grep -qE "^${commit}[[:space:]]+refs/tags/v${version//./\\.}(\\^\\{\\})?$"; then
      tag=v$version
    fi
    [ "$tag" = "v$version" ] ||
      cannot "the image's sglang $version names no commit and the checkout's HEAD ($commit) is not v$version"
  fi
  say "the image's sglang $version was built from the checkout's commit $commit"
  exit 0
fi

retry() {
  local n
  for n in 1 2 3; do
    "$@" && return 0
    say "'$*' failed (attempt $n of 3)"
    [ "$n" -lt 3 ] && sleep 5
  done
  return 1
}

# 0. The image's GPU architecture and Dockerfile stage (SGLang: printenv GPU_ARCH in the image).
if [[ ${GPU_ARCH:-} =~ ^(gfx942|gfx950)(-rocm720|-rocm724)?$ ]]; then
  gfx=${BASH_REMATCH[1]} suffix=${BASH_REMATCH[2]}
  say "the image's GPU_ARCH is $GPU_ARCH"
else
  hip=$(python3 -c 'import torch; print(torch.version.hip or "")' 2>/dev/null)
  if [ -n "${PIP_CONSTRAINT:-}" ] || [ "${HSA_ENABLE_IPC_MODE_LEGACY:-}" = 1 ]; then
    suffix=-rocm724
  elif [[ $hip == 7.2* ]]; then
    suffix=-rocm720
  else
    suffix=""
  fi
  gfx=$archs
  [ -n "$gfx" ] || gfx=$(rocminfo 2>/dev/null | grep -o -m1 'gfx9[0-9a-f]*')
  [ -n "$gfx" ] || cannot "the image has no GPU_ARCH, and neither --gpu-archs nor rocminfo names the GPU"
  say "the image has no GPU_ARCH stamp (got '${GPU_ARCH:-}'); inferred $gfx$suffix (HIP ${hip:-unknown})"
fi
[ -n "$stage" ] || stage=$gfx$suffix
archs=$gfx
extras=dev_hip,tracing${optional:+,$optional}
[ "$suffix" = -rocm724 ] && extras=${extras/dev_hip/dev_hip_rocm724}
say "Dockerfile stage $stage, GPU_ARCHS $archs, extras [$extras]"

# 1. The old packages out, the ROCm kernel package built from the checkout.
for p in sgl-kernel sglang-kernel sglang; do pip uninstall -y "$p" >/dev/null 2>&1; done
find "$dir" -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null
if [ -f "$dir/python/sglang/kernels/aot/pyproject_rocm.toml" ]; then
  kdir=$dir/python/sglang/kernels/aot
  rm -f "$kdir/pyproject.toml" && mv "$kdir/pyproject_rocm.toml" "$kdir/pyproject.toml"
elif [ -f "$dir/sgl-kernel/setup_rocm.py" ]; then
  kdir=$dir/sgl-kernel
  [ -f "$kdir/pyproject_rocm.toml" ] && rm -f "$kdir/pyproject.toml" && mv "$kdir/pyproject_rocm.toml" "$kdir/pyproject.toml"
else
  cannot "no ROCm kernel build in $dir (looked for python/sglang/kernels/aot/pyproject_rocm.toml and sgl-kernel/setup_rocm.py)"
fi
say "building the kernel package in $kdir (setup_rocm.py install)"
(cd "$kdir" && python3 setup_rocm.py install) || cannot "the kernel build in $kdir failed"

# 2. The ROCm pyproject, then the package with its extras.
if [ -f "$dir/python/pyproject_other.toml" ]; then
  rm -f "$dir/python/pyproject.toml" && mv "$dir/python/pyproject_other.toml" "$dir/python/pyproject.toml"
  say "python/pyproject_other.toml is the package's pyproject (ROCm)"
elif ! grep -q 'dev_hip' "$dir/python/pyproject.toml" 2>/dev/null; then
  cannot "no ROCm pyproject in $dir/python (pyproject_other.toml, or a pyproject.toml with the dev_hip extra)"
fi
(cd "$dir" && retry pip install -e "python[$extras]") || cannot "pip install -e python[$extras] failed"

# 3. AITER: the commit the Dockerfile pins for this image's stage, against the image's.
dockerfile=$dir/docker/rocm.Dockerfile
[ -f "$dockerfile" ] || cannot "$dockerfile is missing: the AITER commit cannot be checked"
want=$(grep -E -A20 "^FROM .* AS ${stage}[[:space:]]*$" "$dockerfile" | grep -m1 'AITER_COMMIT_DEFAULT=' |
       sed 's/.*AITER_COMMIT_DEFAULT="\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/')
[ -n "$want" ] || cannot "no AITER_COMMIT_DEFAULT under the stage '$stage' of $dockerfile"
have=v$(installed_version amd-aiter)
say "AITER: the Dockerfile's $stage stage pins $want; the image has ${have#v}"
if [ "$have" = "$want" ]; then
  say "AITER matches"
elif [ "$have" != v ] && [[ $have =~ (dev|\+g[0-9a-f]+) ]]; then
  say "AITER $have is a dev or patched build: kept"
else
  aiter=${DSV4_AITER_DIR:-/sgl-workspace/aiter}
  say "AITER rebuilt at $want in $aiter (GPU_ARCHS=$archs)"
  pip uninstall -y amd-aiter >/dev/null 2>&1
  rm -rf "$aiter"
  git clone -q "${DSV4_AITER_REPO:-https://github.com/ROCm/aiter.git}" "$aiter" || cannot "cannot clone AITER"
  (cd "$aiter" && git checkout -q -f "$want" && git submodule update --init --recursive -q &&
    pip install -r requirements.txt && AITER_USE_SYSTEM_TRITON=1 GPU_ARCHS=$archs python3 setup.py develop) ||
    cannot "the AITER rebuild at $want failed"
fi
say "done: sglang $(installed_version sglang) from $commit, amd-aiter $(installed_version amd-aiter)"
