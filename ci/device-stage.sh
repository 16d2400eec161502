#!/usr/bin/env bash
# Copies a built GPU preset's executables and CTest files (with the GPU executables' test lists
# and cmake/Dsv4GpuTests.cmake; no objects, no static libraries, stripped) to build/<preset>-stage,
# small enough to ship to a remote GPU machine whose checkout has the same path; there,
# `mv build/<preset>-stage build/<preset>` makes `ctest` run as built.
# usage: ci/device-stage.sh [preset]   (default cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-cuda}
src=build/$preset
dst=build/$preset-stage
[ -f "$src/CTestTestfile.cmake" ] || { echo "no configured build in $src" >&2; exit 2; }
rm -rf "$dst"
mkdir -p "$dst"
(cd "$src" && find . -type f \( -name 'CTestTestfile.cmake' -o -name '*_tests.cmake' \
    -o -name '*_include.cmake' -o -name 'Dsv4GpuTests.cmake' -o -name 'DartConfiguration.tcl' \
    -o -name 'CMakeCache.txt' \
    -o -perm -u+x \) -not -path '*/CMakeFiles/*' -print0 | tar --null -T - -cf -) | tar -xf - -C "$dst"
# ELF files (by their magic number; `file` is not in every image) lose their symbol tables.
find "$dst" -type f -perm -u+x -exec sh -c '[ "$(head -c 4 "$1" | tail -c 3)" = ELF ] && strip "$1"' _ {} \;
du -sh "$dst"
