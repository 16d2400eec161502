"""CPU tests of the sampling_renorm family module: its ops' mappings and stand-ins judged by the
project's reference (dsv4-replay), and the conventions each stand-in encodes."""

import os
import subprocess

import pytest
import torch

from dsv4ci import ops, replay
from dsv4ci.case import Case
from dsv4ci.families import sampling_renorm as fam
from dsv4ci.live import LiveCase
from dsv4ci.standins import sampling_renorm as si

OPS = [o for o in ops.all_ops(["sampling_renorm"])]


def verdict(tmp_path, inputs, got):
    """dsv4-replay's exit code for a SGLang-source case file of these inputs and outputs."""
    path = os.path.join(tmp_path, "case.safetensors")
    Case("sampling_renorm", inputs, metadata={"dsv4.source": "sglang"}).with_got(got).save(path)
    return subprocess.run([replay.find_tool(), path, "--reference"], capture_output=True).returncode


def boundary_rows():
    """Dyadic rows whose kept masses hit p exactly, a zero row, ties and a one-hot row."""
    rows = [[0.5, 0.25, 0.125] + [1 / 64] * 8 + [0.0] * 5,
            [0.0] * 16,
            [0.125] * 8 + [0.0] * 8,
            [0.0] * 7 + [1.0] + [0.0] * 8]
    g = torch.Generator().manual_seed(3)
    return torch.tensor(rows)[:, torch.randperm(16, generator=g)].contiguous()


def live_of(inputs):
    live = LiveCase(Case("sampling_renorm", inputs), "cpu", "unused", "unused")
    live.reset()  # inputs into the guarded buffers
    return live


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_standin_matches_the_reference(op, tmp_path):
    probs = boundary_rows()
    inputs = {"probs": probs}
    if op.applies(live_of({"probs": probs, "k": torch.ones(4, dtype=torch.int32)})) is None:
        inputs["k"] = torch.tensor([0, 3, 8, 20], dtype=torch.int32)  # k <= 0, inside, ties, > V
        inputs["k_clamp"] = torch.tensor(1, dtype=torch.int32)
    else:
        inputs["p"] = torch.tensor([0.875, 0.5, 0.3, 1.5])  # rows 0: exact masses
        if "renorm-py" in op.shape:
            inputs["top_p_rule"] = torch.tensor(1, dtype=torch.int32)
    got = op.call(op.function(standin=True), live_of(inputs))
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH
    planted = got["out"].clone()
    i = int((planted[0] > 0).nonzero()[0])
    planted[0, i] *= 1 + 2.0 ** -10
    assert verdict(tmp_path, inputs, {"out": planted}) == replay.EXIT_MISMATCH


def test_k_clamp_keeps_the_maximum_for_k_below_one():
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    out = si.top_k_renorm_probs_triton(probs, torch.tensor([0, -2]))
    assert out.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def test_top_k_keeps_ties_at_the_pivot():
    out = si.top_k_renorm_probs_torch(torch.tensor([[0.25, 0.25, 0.25, 0.25]]), torch.tensor([2]))
    assert out.tolist() == [[0.25, 0.25, 0.25, 0.25]]


def test_top_p_rules_differ_where_a_kept_mass_equals_p():
    probs = torch.tensor([[0.5, 0.25, 0.25]])
    p = torch.tensor([0.5])
    assert si.top_p_renorm_probs_torch(probs, p).tolist() == [[0.5, 0.25, 0.25]]  # renorm.py: one more
    assert si.top_p_renorm_prob(probs, p).tolist() == [[1.0, 0.0, 0.0]]  # FlashInfer: first reach


def test_a_zero_row_stays_zero():
    for fn in (si.top_k_renorm_probs_triton, si.top_k_renorm_probs_torch):
        assert fn(torch.zeros(1, 4), torch.tensor([2])).tolist() == [[0.0] * 4]


def test_planted_flashinfer_rule_on_the_renorm_py_case_is_a_mismatch(tmp_path):
    """FlashInfer's top-p rule (one value fewer at exact equality) judged under renorm.py's case:
    the foreign verdict accepts either rule at exact equality, so the planted change is a value."""
    probs = torch.tensor([[0.5, 0.25, 0.125, 0.125]])
    inputs = {"probs": probs, "p": torch.tensor([0.75]), "top_p_rule": torch.tensor(1, dtype=torch.int32)}
    wrong = si.top_p_renorm_prob(probs, inputs["p"]) * 1.01
    assert verdict(tmp_path, inputs, {"out": wrong}) == replay.EXIT_MISMATCH


def test_rows_that_are_no_probabilities_are_not_judged():
    live = live_of({"probs": torch.tensor([[0.5, float("nan"), 0.5]]), "k": torch.tensor([1], dtype=torch.int32)})
    assert "NaN, infinite or negative" in fam.not_probabilities(live)
    assert fam.not_probabilities(live_of({"probs": boundary_rows()})) is None


def test_every_op_names_its_platform_and_sglang_files():
    names = {o.name: o for o in OPS}
    assert names["renorm_triton.top_k_renorm_probs_triton"].platforms == ("hip",)
    assert "python/sglang/kernels/ops/sampling/renorm.py" in names["renorm_triton.top_p_renorm_probs_triton"].files
    assert len(OPS) == 6
