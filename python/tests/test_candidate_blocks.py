"""CPU tests of the candidate_blocks family module: its ops' mappings and stand-ins judged by the
project's reference (dsv4-replay), and SGLang's HIP NaN handling judged a mismatch."""

import os
import subprocess

import pytest
import torch

from dsv4ci import ops, replay
from dsv4ci.case import Case
from dsv4ci.families import candidate_blocks as fam
from dsv4ci.live import LiveCase
from dsv4ci.standins import candidate_blocks as si

OPS = ops.all_ops(["candidate_blocks"])


def verdict(tmp_path, inputs, got):
    path = os.path.join(tmp_path, "case.safetensors")
    Case("candidate_blocks", inputs, metadata={"dsv4.source": "sglang"}).with_got(got).save(path)
    return subprocess.run([replay.find_tool(), path, "--reference"], capture_output=True).returncode


def inputs_of(hostile=False):
    """Integer-valued scores (ties within and across blocks), ragged lengths (0, inside a block,
    whole), NaN past each length; hostile: a NaN and -inf keys inside a row."""
    g = torch.Generator().manual_seed(7)
    B, W = 4, 64
    scores = torch.randint(-4, 5, (B, W), generator=g).float()
    lens = torch.tensor([64, 21, 0, 9], dtype=torch.int32)
    if hostile:
        scores[0, 3] = float("nan")
        scores[0, 40:44] = float("-inf")
        scores[1, 17] = float("nan")
    for b in range(B):
        scores[b, int(lens[b]):] = float("nan")
    return {"scores": scores, "lens": lens, "bs": torch.tensor(8), "nb": torch.tensor(4),
            "K": torch.tensor(12)}


def run(op, inputs, fn=None):
    live = LiveCase(Case("candidate_blocks", inputs), "cpu", "unused", "unused")
    live.reset()  # inputs into the guarded buffers
    return op.call(fn or op.function(standin=True), live)


@pytest.mark.parametrize("hostile", [False, True], ids=["ties", "hostile"])
@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_standin_matches_the_reference(op, hostile, tmp_path):
    inputs = inputs_of(hostile)
    got = run(op, inputs)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_a_block_below_the_cut_off_is_a_mismatch(op, tmp_path):
    inputs = inputs_of()
    got = run(op, inputs)
    s = si.block_scores(inputs["scores"], inputs["lens"], 8)[0]
    chosen = [int(b) for b in got["blocks"][0] if b >= 0]
    lower = [j for j in range(8) if j not in chosen and s[j] < min(s[c] for c in chosen)]
    assert lower, "row 0 has a block below the cut-off"
    got["blocks"][0, chosen.index(min(chosen, key=lambda c: s[c]))] = lower[0]
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MISMATCH


def test_hip_kernels_nan_skipping_maximum_is_a_mismatch(tmp_path):
    """candidate_blocks_hip.py's tl.max skips NaN, so a block holding a NaN key is chosen by its
    finite maximum, against its docstring's promise of select_candidate_blocks' ids."""
    op = next(o for o in OPS if o.name.startswith("candidate_blocks_hip"))

    def literal(logits, seq_lens, *, topk_blocks, block_size):
        s = si.block_scores(logits, seq_lens, block_size, propagate_nan=False)
        top = s.topk(min(topk_blocks, s.shape[1]), dim=-1)
        ids = top.indices.masked_fill(top.values == float("-inf"), -1).to(torch.int32)
        return si.CandidateBlocks(ids, None, block_size)

    inputs = inputs_of(hostile=True)
    got = run(op, inputs, literal)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MISMATCH


def test_invalid_blocks_are_published_as_minus_one():
    op = next(o for o in OPS if o.name.startswith("candidate_blocks."))
    got = run(op, inputs_of())
    assert got["blocks"][2].tolist() == [-1] * 4  # length 0: no block
    assert got["keys"][2].tolist() == [-1] * 12
    assert sorted(b for b in got["blocks"][3].tolist() if b >= 0) == [0, 1]  # 9 keys: blocks 0, 1


def test_keys_are_ascending_with_minus_one_last():
    k = fam.keys_within(torch.tensor([[3.0, 1.0, 2.0, float("-inf")]]), torch.tensor([4]),
                        torch.tensor([[0, 1]], dtype=torch.int32), 2, 4)
    assert k.tolist() == [[0, 1, 2, -1]]
