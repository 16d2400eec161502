#!/usr/bin/env bats
# ci/nightly-verdict.py on stand-in `needs` and suite artifacts: no green when no GPU job ran, and
# a retry plan that re-runs infrastructure failures only, never a failed gate, test or build.

load helpers

setup() {
  setup_fakes
  cat >"$TMP/suites.json" <<'J'
{"suites": [
  {"name": "kernels-a", "kind": "kernels"},
  {"name": "e2e-x", "job": "e2e-j", "kind": "e2e"},
  {"name": "e2e-y", "job": "e2e-j", "kind": "e2e"},
  {"name": "asan", "kind": "kernels", "schedule": "weekly"}]}
J
  mkdir -p "$TMP/current"
  export SCHEDULE=nightly GITHUB_EVENT_NAME=schedule GITHUB_RUN_ATTEMPT=1 GITHUB_STEP_SUMMARY=$TMP/summary.md
  unset SUITES
}

teardown() { teardown_fakes; }

# suite NAME EXIT: its suite.json in this run's artifacts.
suite() {
  mkdir -p "$TMP/current/dsv4-$1-attempt1"
  echo "{\"suite\": \"$1\", \"run_attempt\": 1, \"exit_code\": $2}" >"$TMP/current/dsv4-$1-attempt1/suite.json"
}

verdict() {
  run python3 "$ROOT/ci/nightly-verdict.py" --registry "$TMP/suites.json" --current "$TMP/current" --plan "$TMP/plan.json"
}

ok='{"result": "success", "outputs": {"setup": "true", "ready": "true"}}'
skipped='{"result": "skipped", "outputs": {}}'

@test "verdict: every job passed is a pass" {
  export NEEDS="{\"preflight\": $ok, \"tools\": $ok, \"kernels-a\": $ok, \"e2e-j\": $ok}"
  verdict
  show
  [ "$status" -eq 0 ]
  [[ $output == *"every job of this schedule ran and passed"* ]]
  [ "$(jq -r .retry "$TMP/plan.json")" = false ]
}

@test "verdict: a dispatch in which no GPU job ran is could-not-run, never 'every job passed'" {
  export GITHUB_EVENT_NAME=workflow_dispatch
  export NEEDS="{\"preflight\": $ok, \"tools\": $ok, \"kernels-a\": $skipped, \"e2e-j\": $skipped}"
  verdict
  show
  [ "$status" -eq 3 ]
  [[ $output == *"could not run: no GPU job of this schedule ran"* ]]
  [[ $output != *"passed"* ]]
}

@test "verdict: a lost runner or a failed pull is infrastructure, and the plan retries it" {
  suite e2e-x 3
  export NEEDS="{\"tools\": $ok, \"kernels-a\": {\"result\": \"failure\", \"outputs\": {}}, \"e2e-j\": {\"result\": \"failure\", \"outputs\": {\"setup\": \"true\", \"ready\": \"true\"}}}"
  verdict
  show
  [ "$status" -eq 3 ]
  [ "$(jq -r .retry "$TMP/plan.json")" = true ]
  [ "$(jq -r '.infrastructure | keys | join(" ")' "$TMP/plan.json")" = "e2e-j kernels-a" ]
  [[ $(jq -r '.infrastructure["kernels-a"]' "$TMP/plan.json") == *"setup did not finish"* ]]
}

@test "verdict: a failed gate is never retried, nor is the infrastructure failure beside it" {
  suite e2e-x 1
  suite e2e-y 0
  export NEEDS="{\"tools\": $ok, \"kernels-a\": {\"result\": \"failure\", \"outputs\": {}}, \"e2e-j\": {\"result\": \"failure\", \"outputs\": {\"setup\": \"true\", \"ready\": \"true\"}}}"
  verdict
  show
  [ "$status" -eq 1 ]
  [ "$(jq -r .retry "$TMP/plan.json")" = false ]
  [[ $(jq -r '.failed["e2e-j"]' "$TMP/plan.json") == *"a gate or test failed: e2e-x"* ]]
  [[ $(jq -r .why_not "$TMP/plan.json") == *"would run those again"* ]]
}

@test "verdict: a dispatch of one suite of a job judges that suite alone" {
  suite e2e-x 0
  export GITHUB_EVENT_NAME=workflow_dispatch SUITES=e2e-x
  export NEEDS="{\"tools\": $ok, \"kernels-a\": $skipped, \"e2e-j\": {\"result\": \"failure\", \"outputs\": {\"setup\": \"true\", \"ready\": \"true\"}}}"
  verdict
  show
  [ "$status" -eq 1 ]
  [[ $(jq -r '.failed["e2e-j"]' "$TMP/plan.json") == *"a step after its passing suites failed"* ]]
}

@test "verdict: a failed build or qualification is a failure, not infrastructure" {
  export NEEDS="{\"tools\": $ok, \"kernels-a\": {\"result\": \"failure\", \"outputs\": {\"setup\": \"true\"}}, \"e2e-j\": $ok}"
  verdict
  show
  [ "$status" -eq 1 ]
  [ "$(jq -r .retry "$TMP/plan.json")" = false ]
  [[ $(jq -r '.failed["kernels-a"]' "$TMP/plan.json") == *"build or qualification"* ]]
}

@test "verdict: the retried attempt says it is a retry" {
  mkdir -p "$TMP/current/dsv4-verdict-attempt1"
  echo '{"retry": true, "infrastructure": {"kernels-a": "x"}}' >"$TMP/current/dsv4-verdict-attempt1/verdict.json"
  export GITHUB_RUN_ATTEMPT=2 NEEDS="{\"tools\": $ok, \"kernels-a\": $ok, \"e2e-j\": $ok}"
  verdict
  show
  [ "$status" -eq 0 ]
  [[ $output == *"**A retry**: attempt 2 re-runs the infrastructure failures of attempt 1 (kernels-a)"* ]]
  grep -q "A retry" "$GITHUB_STEP_SUMMARY"
}

# A registry whose kernels-a and kernels-b ship preset hip, built once by build-hip.
shipped_registry() {
  cat >"$TMP/suites.json" <<'J'
{"suites": [
  {"name": "kernels-a", "kind": "kernels", "build": {"preset": "hip", "ship": true}},
  {"name": "kernels-b", "kind": "kernels", "build": {"preset": "hip", "ship": true}},
  {"name": "e2e-x", "job": "e2e-j", "kind": "e2e"}]}
J
}

@test "verdict: a failed build makes the jobs that need it could-not-run, never passed, and is not retried" {
  shipped_registry
  suite e2e-x 0
  export NEEDS="{\"tools\": $ok, \"build-hip\": {\"result\": \"failure\", \"outputs\": {\"setup\": \"true\"}}, \"kernels-a\": $skipped, \"kernels-b\": $skipped, \"e2e-j\": $ok}"
  verdict
  show
  [ "$status" -eq 1 ]
  [[ $output == *"| build-hip | failure | the build of preset hip failed |"* ]]
  [[ $output == *"| kernels-a | skipped | could not run: the build it needs (build-hip) failed |"* ]]
  [[ $output == *"| kernels-b | skipped | could not run: the build it needs (build-hip) failed |"* ]]
  [[ $output != *"skipped on a scheduled run"* ]]
  [ "$(jq -r .retry "$TMP/plan.json")" = false ]
  [[ $(jq -r '.failed["build-hip"]' "$TMP/plan.json") == *"build of preset hip failed"* ]]
  # A dispatch of the kernels suites alone: nothing ran, and the build's failure is the verdict.
  export GITHUB_EVENT_NAME=workflow_dispatch SUITES=kernels-a,kernels-b
  export NEEDS="{\"tools\": $ok, \"build-hip\": {\"result\": \"failure\", \"outputs\": {\"setup\": \"true\"}}, \"kernels-a\": $skipped, \"kernels-b\": $skipped, \"e2e-j\": $skipped}"
  verdict
  show
  [ "$status" -eq 1 ]
  [[ $output == *"failed: build-hip (no GPU job could run without it)"* ]]
}

@test "verdict: a build job whose setup failed is infrastructure: the retry re-runs it and the jobs it feeds" {
  shipped_registry
  suite e2e-x 0
  export NEEDS="{\"tools\": $ok, \"build-hip\": {\"result\": \"failure\", \"outputs\": {}}, \"kernels-a\": $skipped, \"kernels-b\": $skipped, \"e2e-j\": $ok}"
  verdict
  show
  [ "$status" -eq 3 ]
  [ "$(jq -r .retry "$TMP/plan.json")" = true ]
  [ "$(jq -r '.infrastructure | keys | join(" ")' "$TMP/plan.json")" = "build-hip kernels-a kernels-b" ]
}
