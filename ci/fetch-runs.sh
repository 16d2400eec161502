#!/usr/bin/env bash
# Downloads the artifacts of a workflow's last completed runs into OUT/<run id>/ (gh run list and
# gh run download; GH_TOKEN needs actions: read), for the report job's triage.
# usage: ci/fetch-runs.sh --workflow FILE|NAME --branch B --event E|any --limit N [--exclude RUN_ID] --out DIR
# (GH_REPO names the repository when the checkout is another one's, as in a reusable workflow.)
# Exit codes: 0 done (runs without artifacts left are said so), 2 bad usage, 3 could not run (no
# gh, or gh could not list the runs): the triage would otherwise compare with nothing.
set -uo pipefail
workflow="" branch=main event=schedule limit=3 exclude="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --workflow) workflow=$2; shift 2 ;;
    --branch) branch=$2; shift 2 ;;
    --event) event=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --exclude) exclude=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "fetch-runs: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$workflow" ] || [ -z "$out" ]; then echo "fetch-runs: --workflow and --out are required" >&2; exit 2; fi
mkdir -p "$out"
[[ $limit =~ ^[1-9][0-9]*$ ]] || { echo "fetch-runs: --limit must be a positive number (got '$limit')" >&2; exit 2; }
command -v gh >/dev/null || { echo "fetch-runs: gh is not installed: earlier runs cannot be fetched, so the triage would compare with nothing" >&2; exit 3; }
events=(--event "$event")
[ "$event" = any ] && events=()
if ! listed=$(gh run list --workflow "$workflow" --branch "$branch" "${events[@]}" --status completed \
        --limit $((limit + 1)) --json databaseId --jq '.[].databaseId'); then
  echo "fetch-runs: gh run list --workflow $workflow failed (token, repository or workflow name?)" >&2
  exit 3
fi
ids=$(grep -vx "${exclude:-none}" <<<"$listed" | head -n "$limit")
for id in $ids; do
  if gh run download "$id" --dir "$out/$id" --pattern '*-attempt*'; then
    echo "fetch-runs: run $id -> $out/$id"
  else
    echo "fetch-runs: run $id has no artifacts left (expired?)"
    rm -rf "${out:?}/$id"
  fi
done
echo "fetch-runs: $(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l) earlier runs in $out"
