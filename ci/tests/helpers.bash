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

# only_tools NAME...: ONLY_PATH holds the fakes and links to these real tools alone, for a script
# run as `run env PATH="$ONLY_PATH" bash SCRIPT ...`: a tool left out (objdump, gh) is missing
# there whatever the machine has installed.
only_tools() {
  local t
  mkdir -p "$TMP/tools"
  for t in "$@"; do ln -sf "$(command -v "$t")" "$TMP/tools/$t"; done
  ONLY_PATH=$BIN:$TMP/tools
}
