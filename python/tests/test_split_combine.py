"""CPU tests of the split_combine family module: SGLang's reducers' mappings and stand-ins judged by
the project's reference (dsv4-replay), and the HIP reducer's NaN rows judged a mismatch."""

import math
import os
import subprocess

import pytest
import torch

from dsv4ci import ops, replay
from dsv4ci.case import Case
from dsv4ci.families import split_combine as fam
from dsv4ci.live import LiveCase
from dsv4ci.standins import split_combine as si

OPS = {o.name: o for o in ops.all_ops(["split_combine"])}
AITER = OPS["aiter_sparse_decode_reduce.aiter_sparse_split_reduce"]
SM100 = OPS["decode_attention_sm100._combine"]


def verdict(tmp_path, inputs, got):
    path = os.path.join(tmp_path, "case.safetensors")
    Case("split_combine", inputs, metadata={"dsv4.source": "sglang"}).with_got(got).save(path)
    return subprocess.run([replay.find_tool(), path, "--reference"], capture_output=True).returncode


def inputs_of(base2, sink=(0.5, -1.0), rope=False):
    """Unnormalised partials: batch row 0 three splits (one empty), row 1 two, row 2 none; splits
    past a row's count NaN (never read)."""
    g = torch.Generator().manual_seed(5)
    B, S, H, D = 3, 3, 2, 512
    n = torch.tensor([3, 2, 0], dtype=torch.int32)
    l = torch.rand(B, S, H, generator=g) * 15 + 1
    m = torch.rand(B, S, H, generator=g) * 6 - 3
    acc = torch.randn(B, S, H, D, generator=g) * l.unsqueeze(-1)
    l[0, 1], m[0, 1] = 0.0, -math.inf  # an empty split
    for b in range(B):
        acc[b, int(n[b]):], m[b, int(n[b]):], l[b, int(n[b]):] = math.nan, math.nan, math.nan
    inputs = {"acc": acc, "m": m if base2 else m, "l": l, "n_splits": n,
              "m_base2": torch.tensor(1 if base2 else 0, dtype=torch.int32),
              "sink": torch.tensor(sink)}
    if rope:
        pos = torch.arange(32, dtype=torch.float64).unsqueeze(1)
        th = pos * 10000.0 ** (-2.0 * torch.arange(32, dtype=torch.float64) / 64)
        inputs["cos_sin"] = torch.stack([th.cos(), th.sin()], dim=-1).reshape(32, 64).float()
        inputs["positions"] = torch.tensor([3, 17, 30])
    return inputs


def run(op, inputs, fn=None):
    live = LiveCase(Case("split_combine", inputs), "cpu", "unused", "unused")
    live.reset()  # inputs into the guarded buffers
    assert op.applies(live) is None
    return op.call(fn or op.function(standin=True), live)


def plant(got):
    out = got["out"].clone()
    out[0, 0, 5] = (out[0, 0, 5].float() + 0.25).to(torch.bfloat16)
    return dict(got, out=out)


@pytest.mark.parametrize("rope", [False, True], ids=["plain", "inverse-rope"])
def test_aiter_standin_matches_the_reference(rope, tmp_path):
    inputs = inputs_of(True, rope=rope)
    got = run(AITER, inputs)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH
    assert verdict(tmp_path, inputs, plant(got)) == replay.EXIT_MISMATCH


@pytest.mark.parametrize("sink", [(0.5, -1.0), (0.5, math.inf)], ids=["finite", "inf-sink"])
def test_sm100_standin_matches_the_reference(sink, tmp_path):
    inputs = inputs_of(False, sink=sink)
    got = run(SM100, inputs)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH
    assert verdict(tmp_path, inputs, plant(got)) == replay.EXIT_MISMATCH


def test_hip_reducers_nan_for_an_empty_row_is_a_mismatch(tmp_path):
    """aiter_sparse_split_reduce computes exp2(-inf - -inf) for a row with no key and no sink."""
    def literal(acc, m, l, sink, dtype, inv_rope=None):
        out = si.aiter_sparse_split_reduce(acc, m, l, sink, dtype, inv_rope)
        empty = ~(l > 0).any(dim=1)
        return torch.where(empty.unsqueeze(-1), torch.full_like(out, math.nan), out)

    inputs = inputs_of(True)
    del inputs["sink"]
    assert verdict(tmp_path, inputs, run(AITER, inputs)) == replay.EXIT_MATCH
    assert verdict(tmp_path, inputs, run(AITER, inputs, literal)) == replay.EXIT_MISMATCH


def test_splits_past_the_count_are_handed_over_empty():
    live = LiveCase(Case("split_combine", inputs_of(True)), "cpu", "unused", "unused")
    live.reset()
    acc, m, l = fam.partials_of(live)
    assert m[2].eq(-math.inf).all() and l[2].eq(0).all() and acc[2].eq(0).all()
    assert not torch.isnan(acc).any()


def test_ops_skip_what_sglang_does_not_take():
    plain = inputs_of(False, rope=True)
    assert "RoPE" in SM100.applies(LiveCase(Case("split_combine", plain), "cpu", "x", "x"))
    normalised = {"o": torch.zeros(1, 1, 1, 512), "lse": torch.zeros(1, 1, 1),
                  "n_splits": torch.tensor([1], dtype=torch.int32)}
    assert "normalised" in AITER.applies(LiveCase(Case("split_combine", normalised), "cpu", "x", "x"))
