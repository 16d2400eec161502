#!/usr/bin/env bats
# ci/ship-build.sh on a stand-in checkout (a git repository holding the two scripts) with a
# stand-in build (CTest files naming two executables, listed by the real ctest): pack writes the
# manifest; unpack at another path, from another commit or image, or of a tarball missing a test
# executable is refused (exit 3) naming the field and both values.

load helpers

setup() {
  setup_fakes
  command -v ctest >/dev/null || skip "ctest is not installed"
  WS=$TMP/ws
  make_checkout "$WS"
  make_build "$WS" hip
  export DSV4_IMAGE=rocm/pytorch:rocm7.2.4 DSV4_IMAGE_ID=sha256:aaaa
  unset GITHUB_REPOSITORY GITHUB_RUN_ID GITHUB_RUN_ATTEMPT
}

teardown() { teardown_fakes; }

# make_checkout DIR: a git repository with ci/ship-build.sh and ci/device-stage.sh committed.
make_checkout() {
  mkdir -p "$1/ci"
  cp "$ROOT/ci/ship-build.sh" "$ROOT/ci/device-stage.sh" "$1/ci/"
  printf 'build/\n*.tar.gz\n' >"$1/.gitignore"
  git -C "$1" init -q -b main
  git -C "$1" add -A
  git -C "$1" -c user.name=t -c user.email=t@t commit -q -m one
}

# make_build DIR PRESET: build/PRESET of DIR with a test at the top and one in kernels/, each
# naming its executable by its absolute path, as CMake writes them.
make_build() {
  local b=$1/build/$2
  mkdir -p "$b/kernels"
  printf '#!/bin/sh\necho ok\n' >"$b/tool"
  printf '#!/bin/sh\necho ok\n' >"$b/kernels/kv_store_tests"
  chmod +x "$b/tool" "$b/kernels/kv_store_tests"
  printf 'add_test(top "%s/tool")\nsubdirs("kernels")\n' "$b" >"$b/CTestTestfile.cmake"
  printf 'add_test(kernels/kv_store "%s/kernels/kv_store_tests")\n' "$b" >"$b/kernels/CTestTestfile.cmake"
  echo "CMAKE_CACHEFILE_DIR:INTERNAL=$b" >"$b/CMakeCache.txt"
}

pack_hip() {
  run bash "$WS/ci/ship-build.sh" pack hip "$TMP/out/dsv4-build-hip.tar.gz"
  show
  [ "$status" -eq 0 ]
}

@test "pack: the manifest records commit, image, image id, preset and path; unpack there verifies" {
  pack_hip
  tar -xzOf "$TMP/out/dsv4-build-hip.tar.gz" ./dsv4-build-manifest.txt >"$TMP/manifest"
  cat "$TMP/manifest"
  grep -qx "commit=$(git -C "$WS" rev-parse HEAD)" "$TMP/manifest"
  grep -qx "image=rocm/pytorch:rocm7.2.4" "$TMP/manifest"
  grep -qx "image_id=sha256:aaaa" "$TMP/manifest"
  grep -qx "preset=hip" "$TMP/manifest"
  grep -qx "path=$(cd "$WS" && pwd -P)" "$TMP/manifest"
  # The stage folder is gone; the tarball holds the executables and the CTest files.
  [ ! -e "$WS/build/hip-stage" ]
  tar -tzf "$TMP/out/dsv4-build-hip.tar.gz" | grep -qx './kernels/kv_store_tests'
  rm -rf "$WS/build"
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip
  show
  [ "$status" -eq 0 ]
  [[ $output == *"2 tests, every executable present"* ]]
  [[ $output == *"build/hip verified"* ]]
  [ -x "$WS/build/hip/kernels/kv_store_tests" ]
}

@test "unpack at another path is refused (exit 3), naming the field and both paths" {
  pack_hip
  cp -a "$WS" "$TMP/other"
  rm -rf "$TMP/other/build"
  run bash "$TMP/other/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip
  show
  [ "$status" -eq 3 ]
  [[ $output == *"path: the build's is '$(cd "$WS" && pwd -P)', this job's is '$(cd "$TMP/other" && pwd -P)'"* ]]
  [[ $output == *"refusing to run it"* ]]
}

@test "unpack of a build made from another commit is refused (exit 3), naming both commits" {
  pack_hip
  local built
  built=$(git -C "$WS" rev-parse HEAD)
  git -C "$WS" -c user.name=t -c user.email=t@t commit -q --allow-empty -m two
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip
  show
  [ "$status" -eq 3 ]
  [[ $output == *"commit: the build's is '$built', this job's is '$(git -C "$WS" rev-parse HEAD)'"* ]]
}

@test "unpack of a build made in another image, or another image under the same tag, is refused" {
  pack_hip
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip --image rocm/pytorch:other
  show
  [ "$status" -eq 3 ]
  [[ $output == *"image: the build's is 'rocm/pytorch:rocm7.2.4', this job's is 'rocm/pytorch:other'"* ]]
  DSV4_IMAGE_ID=sha256:bbbb run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip
  show
  [ "$status" -eq 3 ]
  [[ $output == *"image_id: the build's is 'sha256:aaaa', this job's is 'sha256:bbbb'"* ]]
  # Unpacked as another preset: the preset field.
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip-asan
  [ "$status" -eq 3 ]
  [[ $output == *"preset: the build's is 'hip', this job's is 'hip-asan'"* ]]
}

@test "a tarball missing a test executable the CTest files name is refused, naming it" {
  rm "$WS/build/hip/kernels/kv_store_tests"
  pack_hip
  rm -rf "$WS/build"
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip
  show
  [ "$status" -eq 3 ]
  [[ $output == *"1 test(s) whose executable is not in the build: kernels/kv_store (no executable found)"* ]]
}

@test "a build whose CTest files name no test is refused; so is a build without a manifest" {
  printf '' >"$WS/build/hip/CTestTestfile.cmake"
  pack_hip
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/out/dsv4-build-hip.tar.gz" hip
  show
  [ "$status" -eq 3 ]
  [[ $output == *"name no test"* ]]
  rm -rf "$WS/build"
  make_build "$WS" hip
  run bash "$WS/ci/ship-build.sh" verify hip
  show
  [ "$status" -eq 3 ]
  [[ $output == *"dsv4-build-manifest.txt is missing"* ]]
}

@test "bad usage is exit 2 naming the flag; a missing tarball or build is could-not-run" {
  DSV4_IMAGE= run bash "$WS/ci/ship-build.sh" pack hip "$TMP/x.tar.gz"
  show
  [ "$status" -eq 2 ]
  [[ $output == *"--image is empty and DSV4_IMAGE is not set"* ]]
  run bash "$WS/ci/ship-build.sh" pack "hip;rm" "$TMP/x.tar.gz"
  [ "$status" -eq 2 ]
  [[ $output == *"PRESET must be a preset name (got 'hip;rm')"* ]]
  run bash "$WS/ci/ship-build.sh" verify hip --imag x
  [ "$status" -eq 2 ]
  [[ $output == *"unknown argument '--imag'"* ]]
  run bash "$WS/ci/ship-build.sh" unpack "$TMP/none.tar.gz" hip
  [ "$status" -eq 3 ]
  [[ $output == *"none.tar.gz does not exist"* ]]
  run bash "$WS/ci/ship-build.sh" pack cuda "$TMP/x.tar.gz"
  [ "$status" -eq 3 ]
  [[ $output == *"no configured build in"* ]]
}
