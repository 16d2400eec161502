# Shared set-up of the bats tests of ci/: a temporary folder, and a bin/ with fakes first on PATH.
# Each fake logs its arguments to $FAKE_LOG ("name arg arg ...", one line per call).

setup_fakes() {
  ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/dsv4-ci-test.XXXXXX")
  BIN=$TMP/bin
  mkdir -p "$BIN"
  export FAKE_LOG=$TMP/calls.log
  : >"$FAKE_LOG"
  export PATH="$BIN:$PATH"
}

teardown_fakes() {
  [ -n "${TMP:-}" ] && rm -rf "$TMP"
}

# fake NAME <<'EOF' ... EOF : an executable bin/NAME whose body is read from stdin, after a line
# that logs the call.
fake() {
  {
    echo '#!/usr/bin/env bash'
    echo "echo \"$1 \$*\" >>\"\$FAKE_LOG\""
    cat
  } >"$BIN/$1"
  chmod +x "$BIN/$1"
}

# Prints what the test saw when it fails.
show() {
  echo "--- output (status $status) ---"
  echo "$output"
  echo "--- calls ---"
  cat "$FAKE_LOG"
}
