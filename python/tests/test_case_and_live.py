"""Case files in memory and a LiveCase run on the CPU: reset, guards, outputs, the verdict."""

import json
import os

import pytest
import torch

from dsv4ci import replay
from dsv4ci.case import Case, OutputSpec
from dsv4ci.live import LiveCase, RunFailure


def smoke_case(tool, tmp_path, n=37, seed=None):
    paths = replay.draw(tool, "smoke", tmp_path / "drawn", shape=f"n={n}", seed=seed)
    assert len(paths) == 1
    return Case.load(paths[0])


def affine(live):
    return {"out": live.inp["x"] * live.inp["scale"] + live.inp["bias"]}


def test_a_drawn_case_holds_inputs_want_start_and_its_declaration(tool, tmp_path):
    c = smoke_case(tool, tmp_path)
    assert c.family == "smoke"
    assert set(c.inputs) >= {"x", "scale", "bias"}
    assert c.vars.get("n") == "37"
    assert [s.name for s in c.outputs] == ["out"]
    spec = c.outputs[0]
    assert spec.dtype == torch.float32 and spec.shape == (37,) and spec.start == "poison"
    start = c.start_state("out")
    assert torch.isnan(start).all(), "a poisoned float output starts as NaN (0xFF bytes)"
    assert c.metadata.get("dsv4.repro", "").find("--draw smoke") >= 0


def test_start_state_from_the_declaration_when_the_file_has_no_start_tensor():
    pool = torch.arange(6, dtype=torch.int32)
    c = Case("x", {"pool": pool}, metadata={"dsv4.outputs": json.dumps([
        {"name": "pool", "dtype": "I32", "shape": [6], "start": "input"},
        {"name": "err", "dtype": "I32", "shape": [1], "start": "zero"},
        {"name": "idx", "dtype": "I32", "shape": [2], "start": "poison"},
        {"name": "v", "dtype": "BF16", "shape": [2], "start": "poison", "poison": 0}])})
    assert torch.equal(c.start_state("pool"), pool)
    assert c.start_state("err").tolist() == [0]
    assert c.start_state("idx").view(torch.uint8).tolist() == [0xA5] * 8
    assert c.start_state("v").view(torch.int16).tolist() == [0, 0]


def test_a_bad_output_declaration_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="start 'random'"):
        Case("x", {}, metadata={"dsv4.outputs": json.dumps([{"name": "o", "dtype": "F32", "shape": [1],
                                                             "start": "random"}])})


def test_a_correct_implementation_matches(tool, tmp_path):
    c = smoke_case(tool, tmp_path)
    live = LiveCase(c, "cpu", tool, str(tmp_path / "keep"), label="affine")
    v = live.run(affine)
    assert v.ok and v.verdict == "match"
    assert not os.listdir(tmp_path / "keep"), "a matching case file is not kept by default"


def test_a_wrong_value_is_a_mismatch_with_the_case_kept_and_the_replay_line(tool, tmp_path):
    c = smoke_case(tool, tmp_path)

    def wrong(live):
        out = live.inp["x"] * live.inp["scale"] + live.inp["bias"]
        out[5] += 1.0
        return {"out": out}

    live = LiveCase(c, "cpu", tool, str(tmp_path / "keep"), label="wrong")
    with pytest.raises(RunFailure) as e:
        live.run(wrong)
    msg = str(e.value)
    assert "MISMATCH" in msg and "[5]" in msg
    kept = [l for l in msg.splitlines() if "case file kept:" in l][0].split(": ", 1)[1]
    assert os.path.exists(kept)
    again = replay.judge(tool, kept)
    assert again.exit_code == 1 and again.verdict == "mismatch"
    assert "reproduce: " in msg and kept in msg


def test_an_output_left_unwritten_stays_poisoned_and_fails(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="lazy")
    with pytest.raises(RunFailure, match="MISMATCH"):
        live.run(lambda live: None)


def test_a_write_past_the_output_damages_its_guard(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="overrun")

    def overrun(live):
        live.out["out"].copy_(live.inp["x"] * live.inp["scale"] + live.inp["bias"])
        g = live._out_guards["out"]
        g._raw[g._raw.numel() - 1] = 0  # the last byte of the back guard
        return None

    with pytest.raises(RunFailure, match="out.out: back guard damaged"):
        live.run(overrun)


def test_an_op_that_writes_its_input_fails_naming_it(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="clobber")

    def clobber(live):
        res = affine(live)
        live.inp["x"].zero_()
        return res

    with pytest.raises(RunFailure, match="in.x: the op wrote its input"):
        live.run(clobber)


def test_a_non_deterministic_op_fails_the_repeat(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="flaky")
    calls = []

    def flaky(live):
        calls.append(1)
        out = affine(live)["out"]
        if len(calls) == 3:
            out[0] = out[0] + 1
        return {"out": out}

    with pytest.raises(RunFailure, match="not deterministic: output 'out' of repeat 3"):
        live.run(flaky, repeat=4)


def test_a_wrong_output_dtype_is_refused_by_name(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="f64")
    with pytest.raises(RunFailure, match="output 'out': the op gave torch.float64"):
        live.run(lambda live: {"out": affine(live)["out"].double()})


def test_graph_mode_needs_a_gpu(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="g")
    with pytest.raises(RunFailure, match="graph capture needs a CUDA or ROCm device"):
        live.run(affine, graph=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device")
def test_graph_replay_on_a_second_input_set(tool, tmp_path):
    c = smoke_case(tool, tmp_path)
    again = smoke_case(tool, tmp_path / "r2", seed=(c.seed or 0) + 1)
    live = LiveCase(c, "cuda", tool, str(tmp_path / "keep"), label="g", rounds=[again])
    assert live.run(affine, graph=True).ok
    assert len(live.verdicts) == 2


def test_an_op_that_produces_no_output_has_nothing_judged_and_fails(tool, tmp_path):
    live = LiveCase(smoke_case(tool, tmp_path), "cpu", tool, str(tmp_path / "keep"), label="none")
    with pytest.raises(RunFailure, match="produced none of the case's outputs"):
        live.run(lambda live: {"out": None})


def test_the_fixtures_draw_and_wrap_cases(dsv4_draw, dsv4_live):
    cases = dsv4_draw("smoke", shape="n=9")
    assert len(cases) == 1 and cases[0].vars["n"] == "9"
    live = dsv4_live(cases[0], device="cpu")
    assert live.run(affine).ok


def test_a_scalar_is_read_from_the_host_case(tool, tmp_path):
    c = smoke_case(tool, tmp_path)
    live = LiveCase(c, "cpu", tool, str(tmp_path / "keep"), label="s")
    assert live.scalar("scale") == c.inputs["scale"].item()
    with pytest.raises(ValueError, match=r"in.x is not a scalar"):
        live.scalar("x")


def test_a_graph_round_with_other_scalars_is_refused_naming_them(tool, tmp_path):
    c = smoke_case(tool, tmp_path)
    other = smoke_case(tool, tmp_path / "r2", seed=(c.seed or 0) + 1)
    other.inputs["scale"] = other.inputs["scale"] + 1
    with pytest.raises(ValueError, match=r"graph round .* has in.scale = .* a graph replays its "
                                         r"capture's scalars"):
        LiveCase(c, "cpu", tool, str(tmp_path / "keep"), label="g", rounds=[other])
