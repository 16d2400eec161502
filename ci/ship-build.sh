#!/usr/bin/env bash
# A GPU preset's build made once (the nightly's build job) and shipped to the GPU jobs, which
# refuse it unless it was made from their commit, in their image, at their path.
#
#   ci/ship-build.sh pack PRESET TARBALL [--image IMAGE]
#       build/PRESET of this checkout, as ci/device-stage.sh stages it (executables stripped, the
#       CTest files, no objects), with the manifest dsv4-build-manifest.txt (commit, image, image
#       id, preset, path, run) written into TARBALL (a .tar.gz)
#   ci/ship-build.sh unpack TARBALL PRESET [--image IMAGE]
#       TARBALL extracted as build/PRESET of this checkout (an earlier one replaced), then verify
#   ci/ship-build.sh verify PRESET [--image IMAGE]
#       build/PRESET's manifest against this checkout: the preset, the path (CTest and the build
#       tree hold absolute paths), the commit (git HEAD), the image (IMAGE, default $DSV4_IMAGE;
#       its id $DSV4_IMAGE_ID where both are known); then every test the CTest files name
#       (ctest --show-only) has its executable there, and there is at least one
#
# The checkout is the folder above this script (the GPU jobs run it at the fixed path the
# container mounts the workspace at: ci/gpu-container.sh start --workdir).
# Exit codes: 0 done, 2 bad usage, 3 could not run (no build, or a build that is not this
# checkout's: each mismatch names the field and both values).
set -uo pipefail

die() { echo "ship-build: $*" >&2; exit 2; }
cannot() { echo "ship-build: $*" >&2; exit 3; }
here=$(cd "$(dirname "$0")" && pwd -P)
root=$(cd "$here/.." && pwd -P)
manifest_name=dsv4-build-manifest.txt

# The options after the positional arguments: --image.
image=${DSV4_IMAGE:-}
parse_image() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --image) [ $# -ge 2 ] || die "--image needs a value"; image=$2; shift 2 ;;
      *) die "unknown argument '$1' (--image IMAGE)" ;;
    esac
  done
}

check_preset() {
  [[ $1 =~ ^[A-Za-z0-9_-]+$ ]] || die "PRESET must be a preset name (got '$1')"
}

commit_of_checkout() {
  git -C "$root" rev-parse HEAD 2>/dev/null || cannot "$root is not a git checkout: its commit cannot be read"
}

pack() {
  [ $# -ge 2 ] || die "usage: ci/ship-build.sh pack PRESET TARBALL [--image IMAGE]"
  local preset=$1 tarball=$2 commit stage
  shift 2
  check_preset "$preset"
  parse_image "$@"
  [ -n "$image" ] || die "pack: --image is empty and DSV4_IMAGE is not set: the build's image must be recorded"
  [ -f "$root/build/$preset/CTestTestfile.cmake" ] ||
    cannot "pack: no configured build in $root/build/$preset (cmake --preset $preset && cmake --build --preset $preset)"
  commit=$(commit_of_checkout) || exit
  bash "$here/device-stage.sh" "$preset" || cannot "pack: ci/device-stage.sh $preset failed"
  stage=$root/build/$preset-stage
  {
    echo "commit=$commit"
    echo "image=$image"
    echo "image_id=${DSV4_IMAGE_ID:-unknown}"
    echo "preset=$preset"
    echo "path=$root"
    echo "run=${GITHUB_REPOSITORY:-local}/${GITHUB_RUN_ID:-0}/${GITHUB_RUN_ATTEMPT:-1}"
  } >"$stage/$manifest_name"
  mkdir -p "$(dirname "$tarball")"
  tar -czf "$tarball" -C "$stage" . || cannot "pack: writing $tarball failed"
  rm -rf "$stage"
  echo "ship-build: packed build/$preset of $commit (image $image, at $root) into $tarball ($(du -h "$tarball" | cut -f1))"
  sed 's/^/  /' <(tar -xzOf "$tarball" "./$manifest_name")
}

unpack() {
  [ $# -ge 2 ] || die "usage: ci/ship-build.sh unpack TARBALL PRESET [--image IMAGE]"
  local tarball=$1 preset=$2 dst
  shift 2
  check_preset "$preset"
  parse_image "$@"
  [ -f "$tarball" ] || cannot "unpack: $tarball does not exist (the build job's artifact was not downloaded)"
  dst=$root/build/$preset
  [ -e "$dst" ] && echo "ship-build: replacing the existing $dst"
  rm -rf "$dst"
  mkdir -p "$dst"
  tar -xzf "$tarball" -C "$dst" || cannot "unpack: $tarball cannot be extracted"
  verify "$preset"
}

# The value of FIELD in MANIFEST (empty when absent).
field() { sed -n "s/^$1=//p" "$2" | head -n 1; }

verify() {
  [ $# -ge 1 ] || die "usage: ci/ship-build.sh verify PRESET [--image IMAGE]"
  local preset=$1 dir m commit problems=() got want f
  shift
  check_preset "$preset"
  parse_image "$@"
  [ -n "$image" ] || die "verify: --image is empty and DSV4_IMAGE is not set: the image to check against is unknown"
  dir=$root/build/$preset
  m=$dir/$manifest_name
  [ -f "$m" ] || cannot "verify: $m is missing: build/$preset is not a shipped build"
  commit=$(commit_of_checkout) || exit
  for f in preset path commit image; do
    got=$(field "$f" "$m")
    case "$f" in
      preset) want=$preset ;;
      path) want=$root ;;
      commit) want=$commit ;;
      image) want=$image ;;
    esac
    [ "$got" = "$want" ] || problems+=("$f: the build's is '${got:-none}', this job's is '$want'")
  done
  got=$(field image_id "$m")
  if [ -n "${DSV4_IMAGE_ID:-}" ] && [ "$got" != unknown ] && [ -n "$got" ] && [ "$got" != "$DSV4_IMAGE_ID" ]; then
    problems+=("image_id: the build's is '$got', this job's is '$DSV4_IMAGE_ID' (the image tag names another image now)")
  fi
  if [ ${#problems[@]} -gt 0 ]; then
    for f in "${problems[@]}"; do echo "ship-build: $f" >&2; done
    cannot "verify: build/$preset was not made for this job (${#problems[@]} field(s) differ, above): refusing to run it"
  fi
  command -v ctest >/dev/null 2>&1 || cannot "verify: ctest is not installed: the build's tests cannot be listed"
  local listing
  listing=$(cd "$dir" && ctest --show-only=json-v1 2>&1) || cannot "verify: ctest --show-only failed in $dir: $listing"
  python3 -c '
import json, os, sys
d = json.loads(sys.stdin.read())
tests = d.get("tests", [])
if not tests:
    sys.exit("the CTest files of %s name no test" % sys.argv[1])
missing = sorted("%s (%s)" % (t["name"], t["command"][0] if t.get("command") else "no executable found")
                 for t in tests if not t.get("command") or not os.access(t["command"][0], os.X_OK))
if missing:
    sys.exit("%d test(s) whose executable is not in the build: %s" % (len(missing), ", ".join(missing)))
print("ship-build: %d tests, every executable present" % len(tests))
' "$dir" <<<"$listing" || cannot "verify: build/$preset is incomplete (above): refusing to run it"
  echo "ship-build: build/$preset verified: commit $commit, image $image, path $root"
}

cmd=${1:-}
shift || true
case "$cmd" in
  pack) pack "$@" ;;
  unpack) unpack "$@" ;;
  verify) verify "$@" ;;
  -h | --help) sed -n '2,22p' "$0" ;;
  *) die "unknown command '$cmd' (pack, unpack, verify)" ;;
esac
