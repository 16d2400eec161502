#!/usr/bin/env bats
# ci/fetch-runs.sh with a fake gh: earlier runs downloaded, this run left out, and a missing or
# failing gh is could-not-run (the triage would compare with nothing).

load helpers

setup() {
  setup_fakes
  export FAKE_RUNS="13 12 11 10"
  fake gh <<'EOS'
case "$1 $2" in
  "run list") [ -n "$FAKE_LIST_FAILS" ] && { echo "HTTP 401: Bad credentials" >&2; exit 1; }
              printf '%s\n' $FAKE_RUNS ;;
  "run download") mkdir -p "$5/dsv4-x-attempt1" && touch "$5/dsv4-x-attempt1/suite.json" ;;
esac
EOS
  only_tools env bash mkdir rm grep head find wc touch
}

teardown() { teardown_fakes; }

@test "fetch-runs: the last runs but this one are downloaded" {
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/fetch-runs.sh" --workflow nightly --branch main --event schedule --limit 2 --exclude 13 --out "$TMP/prev"
  show
  [ "$status" -eq 0 ]
  [ -f "$TMP/prev/12/dsv4-x-attempt1/suite.json" ] && [ -f "$TMP/prev/11/dsv4-x-attempt1/suite.json" ]
  [ ! -e "$TMP/prev/13" ] && [ ! -e "$TMP/prev/10" ]
  [[ $output == *"2 earlier runs"* ]]
}

@test "fetch-runs: without gh it is could-not-run, never an empty comparison" {
  rm "$BIN/gh"
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/fetch-runs.sh" --workflow nightly --out "$TMP/prev"
  show
  [ "$status" -eq 3 ]
  [[ $output == *"gh is not installed"* ]]
}

@test "fetch-runs: a gh that cannot list the runs is could-not-run" {
  export FAKE_LIST_FAILS=1
  run env PATH="$ONLY_PATH" bash "$ROOT/ci/fetch-runs.sh" --workflow nightly --out "$TMP/prev"
  show
  [ "$status" -eq 3 ]
  [[ $output == *"gh run list --workflow nightly failed"* ]]
}
