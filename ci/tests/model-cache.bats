#!/usr/bin/env bats
# ci/model-cache.sh on a stand-in Hugging Face cache: a snapshot counts as complete only with
# every weight file of its index and the tokenizer, not with config.json alone.

load helpers

setup() {
  setup_fakes
  HF=$TMP/hf
  SNAP=$HF/hub/models--org--big/snapshots/abc123
  mkdir -p "$SNAP" "$HF/hub/models--org--big/blobs"
  mkdir -p "$HF/hub/models--org--big/refs" && echo abc123 >"$HF/hub/models--org--big/refs/main"
  for f in config.json tokenizer_config.json tokenizer.json model-00001.safetensors model-00002.safetensors; do
    echo data >"$HF/hub/models--org--big/blobs/$f"
    ln -s "../../blobs/$f" "$SNAP/$f"
  done
  echo '{"weight_map": {"a": "model-00001.safetensors", "b": "model-00002.safetensors", "c": "model-00002.safetensors"}}' >"$SNAP/model.safetensors.index.json"
}

teardown() { teardown_fakes; }

@test "model-cache: a snapshot with every indexed weight file and the tokenizer is complete" {
  run bash "$ROOT/ci/model-cache.sh" "$HF" org/big
  show
  [ "$status" -eq 0 ]
  [[ $output == *"org/big: complete (6 files)"* ]]
}

@test "model-cache: config.json alone is not a snapshot: a missing shard is could-not-run, named" {
  rm "$HF/hub/models--org--big/blobs/model-00002.safetensors"   # the link dangles, as after an interrupted download
  run bash "$ROOT/ci/model-cache.sh" "$HF" org/big
  show
  [ "$status" -eq 3 ]
  [[ $output == *"1 of 6 files missing or empty"*"model-00002.safetensors"* ]]
}

@test "model-cache: a missing tokenizer, a missing model and a missing cache are could-not-run" {
  rm "$SNAP/tokenizer.json"
  run bash "$ROOT/ci/model-cache.sh" "$HF" org/big
  [ "$status" -eq 3 ]
  [[ $output == *"tokenizer.json"* ]]
  run bash "$ROOT/ci/model-cache.sh" "$HF" org/absent
  show
  [ "$status" -eq 3 ]
  [[ $output == *"org/absent: no snapshot"* ]]
  run bash "$ROOT/ci/model-cache.sh" "$TMP/no-cache" org/big
  [ "$status" -eq 3 ]
  [[ $output == *"is not mounted"* ]]
}
