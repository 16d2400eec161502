"""CPU tests of the sparse_decode family module: SGLang's decode ops' mappings and stand-ins judged
by the project's reference (dsv4-replay), and SGLang's behaviours the reference rejects (triton_flashmla's
bf16 scores and lse of a query with no key, the NaN of a +inf sink or of a query with no key and no
sink) judged a mismatch."""

import math
import os
import subprocess

import pytest
import torch

from dsv4ci import ops, replay
from dsv4ci.case import Case
from dsv4ci.families import sparse_decode as fam
from dsv4ci.live import LiveCase
from dsv4ci.standins import sparse_decode as sd

OPS = {o.name: o for o in ops.all_ops(["sparse_decode"])}
FLASHMLA = OPS["triton_flashmla.flash_mla_with_kvcache_triton"]
HIP = OPS["compact_attention_hip.compact_attention_hip"]
# data bytes, scale bytes, scales per token, page alignment (page_layout.hpp)
GEOMETRY = {sd.V41: (512, 16, 16, 512), sd.V41_FP4: (256, 32, 32, 256), sd.V4: (576, 8, 7, 576)}


def verdict(tmp_path, inputs, got):
    path = os.path.join(tmp_path, "case.safetensors")
    Case("sparse_decode", inputs, metadata={"dsv4.source": "sglang"}).with_got(got).save(path)
    return subprocess.run([replay.find_tool(), path, "--reference"], capture_output=True).returncode


def pool(g, layout, pages, P):
    """Pages of moderate codes and scales near 1 (v4: the RoPE tail raw bf16)."""
    data, sbytes, scales, align = GEOMETRY[layout]
    pb = -(-P * (data + sbytes) // align) * align
    out = torch.zeros(pages, pb, dtype=torch.uint8)
    for p in range(pages):
        if layout == sd.V41_FP4:
            d = torch.randint(0, 256, (P, data), generator=g)
            s = torch.tensor([0x30, 0x38, 0x40])[torch.randint(0, 3, (P, scales), generator=g)]
        else:
            d = torch.randint(0x28, 0x48, (P, data), generator=g) | (torch.randint(0, 2, (P, data), generator=g) << 7)
            s = torch.randint(126, 129, (P, scales), generator=g)
            if layout == sd.V4:
                rope = (torch.randn(P, 64, generator=g).to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF)
                d[:, 448:] = torch.stack([rope & 0xFF, rope >> 8], dim=-1).reshape(P, 128)
        out[p, : P * data] = d.reshape(-1).to(torch.uint8)
        out[p, P * data: P * data + P * sbytes].view(P, sbytes)[:, :scales] = s.to(torch.uint8)
    return out


def inputs_of(layout, extra_layout=None, sink=True, lonely=False):
    g = torch.Generator().manual_seed(11)
    B, H, K, P = 2, 16, 8, 16
    inputs = {"q": torch.randn(B, H, 512, generator=g).to(torch.bfloat16),
              "pool": pool(g, layout, 2, P), "layout": torch.tensor(layout, dtype=torch.int32),
              "page_size": torch.tensor(P), "indices": torch.randint(0, 2 * P, (B, K), generator=g).int(),
              "lengths": torch.tensor([K, 0 if lonely else 5], dtype=torch.int32),
              "sm_scale": torch.tensor(512 ** -0.5)}
    inputs["indices"][0, 3] = -1
    if sink:
        inputs["sink"] = torch.rand(H, generator=g) * 4 - 2
    if extra_layout is not None:
        inputs.update({"extra_pool": pool(g, extra_layout, 1, P),
                       "extra_layout": torch.tensor(extra_layout, dtype=torch.int32),
                       "extra_page_size": torch.tensor(P),
                       "extra_indices": torch.randint(0, P, (B, 4), generator=g).int(),
                       "extra_lengths": torch.tensor([4, 0], dtype=torch.int32)})
    return inputs


def run(op, inputs, fn=None):
    live = LiveCase(Case("sparse_decode", inputs), "cpu", "unused", "unused")
    live.reset()  # inputs into the guarded buffers
    assert op.applies(live) is None, op.applies(live)
    return op.call(fn or op.function(standin=True), live)


def plant(got):
    out = got["out"].clone()
    out[0, 0, 7] = (out[0, 0, 7].float() + 1.0).to(torch.bfloat16)
    return dict(got, out=out)


def fp32_scores(*args, **kw):
    return sd.flash_mla_with_kvcache_triton(*args, bf16_scores=False, **kw)


@pytest.mark.parametrize("extra", [None, sd.V4], ids=["main", "main+extra"])
def test_flashmla_mapping_with_fp32_scores_matches_the_reference(extra, tmp_path):
    inputs = inputs_of(sd.V4, extra, lonely=True)
    got = run(FLASHMLA, inputs, fp32_scores)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH
    assert verdict(tmp_path, inputs, plant(got)) == replay.EXIT_MISMATCH


def test_flashmla_bf16_scores_are_a_mismatch(tmp_path):
    """torch.einsum of bf16 q and kv returns bf16 scores: SGLang's rounding, outside the reference's
    tolerance of fp32 scores."""
    inputs = inputs_of(sd.V4)
    assert verdict(tmp_path, inputs, run(FLASHMLA, inputs)) == replay.EXIT_MISMATCH
    live = LiveCase(Case("sparse_decode", inputs), "cpu", "x", "x", source="dsv4-standin")
    assert "bf16" in FLASHMLA.applies(live)  # left out of the stand-in suite, noted


@pytest.mark.parametrize("op", ["flashmla", "hip"])
def test_a_plus_inf_sink_gives_nan_as_sglang_computes_it(op, tmp_path):
    inputs = inputs_of(sd.V4 if op == "flashmla" else sd.V41)
    inputs["sink"][3] = math.inf
    o = FLASHMLA if op == "flashmla" else HIP
    got = run(o, inputs, fp32_scores if op == "flashmla" else None)
    nan = got["out"].isnan().all(dim=-1)
    assert nan[:, 3].all() and nan.sum() == 2  # head 3 of both queries (each has a key)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MISMATCH
    zeroed = torch.where(nan.unsqueeze(-1), torch.zeros_like(got["out"]), got["out"])
    assert verdict(tmp_path, inputs, dict(got, out=zeroed)) == replay.EXIT_MATCH
    live = LiveCase(Case("sparse_decode", inputs), "cpu", "x", "x", source="dsv4-standin")
    assert "2 with a key and a +inf sink" in str(o.applies(live))


def test_hip_query_with_no_key_and_no_sink_is_nan(tmp_path):
    inputs = inputs_of(sd.V41, sink=False, lonely=True)
    got = run(HIP, inputs)
    assert got["out"][1].isnan().all() and not got["out"][0].isnan().any()
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MISMATCH
    with_sink = inputs_of(sd.V41, lonely=True)  # a finite sink: 0, as SGLang's test states
    got = run(HIP, with_sink)
    assert got["out"][1].eq(0).all()
    assert verdict(tmp_path, with_sink, got) == replay.EXIT_MATCH
    live = LiveCase(Case("sparse_decode", inputs), "cpu", "x", "x", source="dsv4-standin")
    assert HIP.applies(live).startswith("16 rows with no key and no finite sink")


def test_keys_masked_out_read_as_zeros(tmp_path):
    """A column not read (past the length, -1, outside the cache) is a zero key, whatever the pool
    holds where the gather's clamped slot points (SGLang's readers load it masked)."""
    inputs = inputs_of(sd.V41)
    inputs["pool"][0, :512] = 0x7F  # slot 0: e4m3 NaN codes
    inputs["indices"][0, 3] = -1
    got = run(HIP, inputs)
    assert not got["out"].isnan().any()
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH


def test_split_cases_judge_the_merged_output(tmp_path):
    inputs = inputs_of(sd.V41)
    live = LiveCase(Case("sparse_decode", dict(inputs, splits=torch.tensor(2))), "cpu", "x", "x")
    assert HIP.applies(live) is None and FLASHMLA.applies(live) is not None
    seen = {}

    def spy(*args, **kw):
        seen.update(kw)
        return sd.compact_attention_hip(*args, **kw)

    got = HIP.call(spy, live)
    assert seen["splits"] == 2
    assert {n for n, t in got.items() if t is None} >= {"out_lse", "errors"}


@pytest.mark.parametrize("layouts", [(sd.V41, None), (sd.V41_FP4, sd.V41), (sd.V41, sd.V41_FP4)],
                         ids=["v41", "v41_fp4+v41", "v41+v41_fp4"])
def test_compact_attention_standin_matches_the_reference(layouts, tmp_path):
    inputs = inputs_of(*layouts)
    got = run(HIP, inputs)
    assert verdict(tmp_path, inputs, got) == replay.EXIT_MATCH
    assert verdict(tmp_path, inputs, plant(got)) == replay.EXIT_MISMATCH


def test_flashmla_minus_inf_lse_of_a_query_with_no_key_is_a_mismatch(tmp_path):
    """_softmax_epilogue_kernel stores lse = -inf for a lonely row, against its own comment
    (it replaces 'lse_for_out[lonely]=inf') and FlashMLA's +inf."""
    def literal(*args, **kw):
        out, lse = fp32_scores(*args, **kw)
        return out, torch.where(lse == math.inf, torch.full_like(lse, -math.inf), lse)

    inputs = inputs_of(sd.V4, lonely=True)
    assert verdict(tmp_path, inputs, run(FLASHMLA, inputs, fp32_scores)) == replay.EXIT_MATCH
    assert verdict(tmp_path, inputs, run(FLASHMLA, inputs, literal)) == replay.EXIT_MISMATCH


def test_error_columns_count_indices_outside_the_cache():
    inputs = inputs_of(sd.V41)
    inputs["indices"][0, 0] = 999
    inputs["indices"][1, 7] = 999  # past row 1's length 5: not read
    live = LiveCase(Case("sparse_decode", inputs), "cpu", "x", "x")
    assert int(fam.error_columns(live)) == 1


def test_ops_skip_layouts_they_do_not_read():
    live = LiveCase(Case("sparse_decode", inputs_of(sd.V41)), "cpu", "x", "x")
    assert "v4 pages" in FLASHMLA.applies(live)
    live = LiveCase(Case("sparse_decode", inputs_of(sd.V4)), "cpu", "x", "x")
    assert "v41" in HIP.applies(live)
