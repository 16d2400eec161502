"""CPU tests of the split_combine family module: SGLang's reducers' mappings and stand-ins judged by
the project's reference (dsv4-replay), and the HIP reducer's NaN rows (kept by its stand-in, as SGLang's
kernel writes them) judged a mismatch."""

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


def test_hip_reducer_writes_nan_where_sglangs_kernel_does(tmp_path):
    """aiter_sparse_split_reduce computes exp2(-inf - -inf) for a row with no key and no sink and
    exp2(inf - inf) for a +inf sink: the stand-in keeps SGLang's NaN, the reference judges it a
    mismatch, and the rest of the case matches."""
    for sink, nan_rows in [(None, [(2, 0), (2, 1)]), ((0.5, math.inf), [(0, 1), (1, 1), (2, 1)])]:
        inputs = inputs_of(True, sink=sink or (0.0, 0.0))
        if sink is None:
            del inputs["sink"]
        got = run(AITER, inputs)
        nan = got["out"].isnan().all(dim=-1)
        assert sorted(map(tuple, nan.nonzero().tolist())) == nan_rows
        assert not got["out"][~nan].isnan().any()
        assert verdict(tmp_path, inputs, got) == replay.EXIT_MISMATCH
        zeroed = torch.where(nan.unsqueeze(-1), torch.zeros_like(got["out"]), got["out"])
        assert verdict(tmp_path, inputs, dict(got, out=zeroed)) == replay.EXIT_MATCH


def test_the_standin_suite_leaves_out_cases_with_nan_rows():
    inputs = inputs_of(True)
    del inputs["sink"]
    case = Case("split_combine", inputs)
    why = AITER.applies(LiveCase(case, "cpu", "x", "x", source="dsv4-standin"))
    assert why.startswith("2 rows with no key and no finite sink, 0 with a +inf sink")
    assert AITER.applies(LiveCase(case, "cpu", "x", "x", source="sglang")) is None  # SGLang's op is judged
    finite = LiveCase(Case("split_combine", inputs_of(True)), "cpu", "x", "x", source="dsv4-standin")
    assert AITER.applies(finite) is None  # a row with no key and a finite sink is 0 in SGLang too


def test_splits_past_the_count_are_handed_over_empty():
    live = LiveCase(Case("split_combine", inputs_of(True)), "cpu", "unused", "unused")
    live.reset()
    acc, m, l = fam.partials_of(live)
    assert m[2].eq(-math.inf).all() and l[2].eq(0).all() and acc[2].eq(0).all()
    assert not torch.isnan(acc).any()


@pytest.mark.parametrize("op", [AITER, SM100], ids=["aiter", "sm100"])
def test_an_empty_splits_acc_is_handed_over_as_zeros(op, tmp_path):
    """The case may fill an empty split's acc with anything (the reference never reads it);
    SGLang's split kernels store zeros there, and its reducers multiply it by a weight of 0."""
    inputs = inputs_of(op is AITER)
    inputs["acc"][0, 1] = math.nan  # batch row 0's empty split
    live = LiveCase(Case("split_combine", inputs), "cpu", "unused", "unused")
    acc, m, l = fam.partials_of(live)
    assert acc[0, 1].eq(0).all() and m[0, 1].eq(-math.inf).all() and l[0, 1].eq(0).all()
    got = run(op, inputs)
    assert not got["out"].isnan().any()
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH


def test_ops_skip_what_sglang_does_not_take():
    plain = inputs_of(False, rope=True)
    assert "RoPE" in SM100.applies(LiveCase(Case("split_combine", plain), "cpu", "x", "x"))
    normalised = {"o": torch.zeros(1, 1, 1, 512), "lse": torch.zeros(1, 1, 1),
                  "n_splits": torch.tensor([1], dtype=torch.int32)}
    assert "normalised" in AITER.applies(LiveCase(Case("split_combine", normalised), "cpu", "x", "x"))
