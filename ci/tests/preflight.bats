#!/usr/bin/env bats
# ci/preflight.sh: the suites input against the registry, and the SGLang ref fetched at depth 1
# from a stand-in remote (DSV4_GITHUB_URL) with its version tag names.

load helpers

setup() {
  setup_fakes
  cat >"$TMP/suites.json" <<'J'
{"suites": [{"name": "kernels-a"}, {"name": "e2e-x", "job": "e2e-j"}, {"name": "asan", "schedule": "weekly"}]}
J
  # A remote SGLang: two commits on main, release tags.
  REMOTE=$TMP/gh/org/sglang
  git init -q -b main "$REMOTE"
  git -C "$REMOTE" -c user.name=t -c user.email=t@t commit -q --allow-empty -m one
  git -C "$REMOTE" tag v0.5.9
  git -C "$REMOTE" -c user.name=t -c user.email=t@t commit -q --allow-empty -m two
  git -C "$REMOTE" tag v0.5.10
  export DSV4_GITHUB_URL=file://$TMP/gh
  WORK=$TMP/work
  mkdir -p "$WORK"
}

teardown() { teardown_fakes; }

@test "suites: all, and known names of this schedule, pass" {
  run bash "$ROOT/ci/preflight.sh" suites "$TMP/suites.json" nightly all
  show
  [ "$status" -eq 0 ]
  [[ $output == *"every nightly suite: kernels-a e2e-x"* ]]
  run bash "$ROOT/ci/preflight.sh" suites "$TMP/suites.json" nightly kernels-a,e2e-x
  [ "$status" -eq 0 ]
}

@test "suites: a typo, a job name or another schedule's suite fails at once, listing the known ones" {
  run bash "$ROOT/ci/preflight.sh" suites "$TMP/suites.json" nightly kernel-a,e2e-j
  show
  [ "$status" -eq 2 ]
  [[ $output == *"'kernel-a' is not a registered suite; 'e2e-j' is not a registered suite"* ]]
  [[ $output == *"The nightly suites: all, kernels-a e2e-x"* ]]
  run bash "$ROOT/ci/preflight.sh" suites "$TMP/suites.json" nightly asan
  [ "$status" -eq 2 ]
  [[ $output == *"'asan' is a weekly suite, not a nightly one"* ]]
  run bash "$ROOT/ci/preflight.sh" suites "$TMP/suites.json" nightly ","
  [ "$status" -eq 2 ]
  [[ $output == *"no suite named"* ]]
}

@test "sglang-ref: the ref is fetched at depth 1, its commit printed, the version tags named" {
  cd "$WORK"
  run bash "$ROOT/ci/preflight.sh" sglang-ref org/sglang main "$WORK/sglang"
  show
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "$(git -C "$REMOTE" rev-parse main)" ]
  [ "$(git -C "$WORK/sglang" rev-list --count HEAD)" -eq 1 ]
  [ "$(git -C "$WORK/sglang" tag | sort | tr '\n' ' ')" = "v0.5.10 v0.5.9 " ]
  run bash "$ROOT/ci/preflight.sh" sglang-ref org/sglang "$(git -C "$REMOTE" rev-parse main~1)" "$WORK/sglang"
  [ "$status" -eq 0 ]
}

@test "sglang-ref: a ref that does not exist is could-not-run, naming it" {
  run bash "$ROOT/ci/preflight.sh" sglang-ref org/sglang no-such-branch "$WORK/sglang"
  show
  [ "$status" -eq 3 ]
  [[ $output == *"'no-such-branch' cannot be fetched from file://$TMP/gh/org/sglang"* ]]
}
