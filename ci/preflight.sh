#!/usr/bin/env bash
# What the nightly checks on a hosted runner before any GPU job starts, so a typo or an
# unresolvable ref never costs a GPU node's hour.
#
#   ci/preflight.sh suites REGISTRY SCHEDULE SUITES
#       SUITES (all, or names separated by commas) names only suites of REGISTRY, each of SCHEDULE;
#       an unknown name fails at once, listing the known ones
#   ci/preflight.sh pin SHA256
#       the checked-out dsv4-ci (nightly/suites.json and nightly/templates/*.yml) is the one the
#       running workflow was rendered from: the caller's `uses: ...@REF` and its `dsv4_ref` input
#       name the same revision
#   ci/preflight.sh sglang-ref REPOSITORY REF DIR
#       REF of https://github.com/REPOSITORY fetched into DIR at depth 1 (its commit printed), with
#       the names of the repository's v*.*.* tags (for the image's {sglang_tag}; names only)
#
# Exit codes: 0 done, 2 bad usage or input (unknown suite, inconsistent pin), 3 could not run
# (the ref or the repository cannot be reached). Test hook: DSV4_GITHUB_URL (https://github.com).
set -uo pipefail

die() { echo "preflight: $*" >&2; exit 2; }
cannot() { echo "preflight: $*" >&2; exit 3; }

# The fingerprint the renderer writes into the reusable workflow (dsv4-nightly render).
fingerprint() {
  local templates
  mapfile -t templates < <(printf '%s\n' nightly/templates/*.yml | LC_ALL=C sort)
  cat nightly/suites.json "${templates[@]}" | sha256sum | cut -d' ' -f1
}

suites() {
  [ $# -eq 3 ] || die "usage: ci/preflight.sh suites REGISTRY SCHEDULE SUITES"
  python3 - "$@" <<'PY'
import json, sys
path, schedule, wanted = sys.argv[1:4]
suites = json.load(open(path))["suites"]
known = {s["name"]: s.get("schedule", "nightly") for s in suites}
names = [n for n in wanted.split(",") if n]
if names == ["all"]:
    print(f"preflight: every {schedule} suite: " + " ".join(n for n, s in known.items() if s == schedule))
    sys.exit(0)
bad = []
for n in names:
    if n not in known:
        bad.append(f"'{n}' is not a registered suite")
    elif known[n] != schedule:
        bad.append(f"'{n}' is a {known[n]} suite, not a {schedule} one (dispatch the {known[n]} workflow)")
if not names:
    bad.append("no suite named")
if bad:
    ours = " ".join(n for n, s in known.items() if s == schedule)
    print(f"preflight: suites '{wanted}': " + "; ".join(bad) + f". The {schedule} suites: all, {ours}",
          file=sys.stderr)
    sys.exit(2)
print("preflight: suites " + " ".join(names))
PY
}

pin() {
  [ $# -eq 1 ] || die "usage: ci/preflight.sh pin SHA256"
  local have
  have=$(fingerprint) || cannot "nightly/suites.json or nightly/templates cannot be read"
  if [ "$have" != "$1" ]; then
    die "the workflow was rendered from another dsv4-ci revision than the one checked out (dsv4_ref): its registry and templates have sha256 $1, the checkout's $have; pin the caller's 'uses: ...@REF' and 'dsv4_ref' to the same ref"
  fi
  echo "preflight: the checkout is the revision the workflow was rendered from ($have)"
}

sglang_ref() {
  [ $# -eq 3 ] || die "usage: ci/preflight.sh sglang-ref REPOSITORY REF DIR"
  local repo=$1 ref=$2 dir=$3 url commit
  [ -n "$ref" ] || die "sglang-ref: the ref is empty"
  url=${DSV4_GITHUB_URL:-https://github.com}/$repo
  rm -rf "$dir"
  git init -q "$dir" || cannot "cannot create $dir"
  git -C "$dir" remote add origin "$url"
  git -C "$dir" fetch -q --depth 1 origin "$ref" >&2 ||
    cannot "sglang-ref: '$ref' cannot be fetched from $url (no such branch, tag or commit, or the repository cannot be reached)"
  git -C "$dir" -c advice.detachedHead=false checkout -q FETCH_HEAD || cannot "cannot check out $ref"
  commit=$(git -C "$dir" rev-parse HEAD)
  # The tag names alone, on the fetched commit: {sglang_tag} ranks names (get_version_tag.py).
  git -C "$dir" ls-remote --tags --refs origin 'v*.*.*' | sed 's|.*refs/tags/||' |
    while read -r t; do git -C "$dir" tag "$t" 2>/dev/null; done
  echo "preflight: $repo $ref is $commit ($(git -C "$dir" tag | wc -l) version tags)" >&2
  echo "$commit"
}

cd "$(dirname "$0")/.." || exit 3
cmd=${1:-}; shift || true
case "$cmd" in
  suites) suites "$@" ;;
  pin) pin "$@" ;;
  sglang-ref) sglang_ref "$@" ;;
  -h|--help) sed -n '2,17p' "$0" ;;
  *) die "unknown command '$cmd' (suites, pin, sglang-ref)" ;;
esac
