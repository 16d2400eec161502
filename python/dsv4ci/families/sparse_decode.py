"""sparse_decode: SGLang's DSV4 sparse decode attention ops mapped onto the family's case (q, a
main and an optional extra paged cache, sink, inverse RoPE). Both ops also draw the sglang sweep:
finite sinks only (finite-sinks), the cases their conventions are stated for, where the gpu
sweep's +-inf sinks show SGLang's NaN findings."""

import math

import torch

from ..ops import Op, register
from ..standins import sparse_decode as sd

_STANDIN = "dsv4ci.standins.sparse_decode:"
_FLASHMLA = "python/sglang/srt/layers/attention/dsv4/triton_flashmla.py"
_HIP = "python/sglang/kernels/ops/attention/dsv4/compact_attention_hip.py"
_TOKEN_BYTES = {sd.V41: 528, sd.V41_FP4: 288, sd.V4: 584}


def cache_of(live, prefix=""):
    """The pool as SGLang's caches are shaped, [pages, page_size, 1, bytes_per_token], with the
    case's page stride (scale rows after the page's data rows, padding after them)."""
    if prefix + "pool" not in live.inp:
        return None
    pool = live.inp[prefix + "pool"]
    layout = int(live.case.inputs[prefix + "layout"])
    P = int(live.case.inputs[prefix + "page_size"])
    bpt = _TOKEN_BYTES[layout]
    return pool.as_strided((pool.shape[0], P, 1, bpt), (pool.stride(0), bpt, bpt, 1))


def _read_columns(live):
    """Per cache of the case (main, extra): its indices [B, K], its slot count, and the mask of the
    columns each query reads (j < its length)."""
    for p in ("", "extra_"):
        if p + "indices" not in live.case.inputs:
            continue
        idx = live.case.inputs[p + "indices"].to(torch.int64)
        cap = live.case.inputs[p + "pool"].shape[0] * int(live.case.inputs[p + "page_size"])
        lens = live.case.inputs[p + "lengths"].to(torch.int64).unsqueeze(1)
        yield idx, cap, torch.arange(idx.shape[1]).unsqueeze(0) < lens


def error_columns(live):
    """The case's `errors` (this project's extension; SGLang counts none): read columns whose index
    is neither -1 nor inside the cache."""
    n = sum(int((read & (idx != -1) & ((idx < 0) | (idx >= cap))).sum())
            for idx, cap, read in _read_columns(live))
    return torch.tensor(n, dtype=torch.int64)


def _layouts(live):
    c = live.case.inputs
    return [int(c["layout"])] + ([int(c["extra_layout"])] if "extra_layout" in c else [])


def keys_per_row(live):
    """[B]: the columns each query reads (j < length, index neither -1 nor outside the cache)."""
    n = 0
    for idx, cap, read in _read_columns(live):
        n = n + (read & (idx >= 0) & (idx < cap)).sum(dim=1)
    return n


def nan_rows(live, no_key_too):
    """(rows with no key and no finite sink, rows with a key and a +inf sink) of the case [B, H]:
    where SGLang's op computes 0 / 0 (no_key_too: compact_attention_hip) or exp(inf - inf)."""
    H = live.case.inputs["q"].shape[1]
    no_key = (keys_per_row(live) == 0).unsqueeze(1).expand(-1, H)
    sink = live.case.inputs.get("sink")
    if sink is None:
        return int(no_key.sum()) if no_key_too else 0, 0
    sink = sink.float().unsqueeze(0).expand_as(no_key)
    unsunk = int((no_key & (sink == -math.inf)).sum()) if no_key_too else 0
    return unsunk, int((~no_key & (sink == math.inf)).sum())


def _standin_nan_rows(live, no_key_too):
    """In the stand-in suite, the case's rows the faithful stand-in writes NaN for (a finding on
    SGLang's op, judged MISMATCH where SGLang's own op runs)."""
    if live.source != "dsv4-standin":
        return None
    unsunk, inf_sink = nan_rows(live, no_key_too)
    if not (unsunk or inf_sink):
        return None
    return (f"{unsunk} rows with no key and no finite sink, {inf_sink} with a key and a +inf sink: "
            "SGLang's op writes NaN there, the reference 0 (a finding on SGLang, see the op's notes)")


def _flashmla_applies(live):
    if any(x != sd.V4 for x in _layouts(live)):
        return f"layouts {_layouts(live)}: triton_flashmla reads v4 pages (2) only"
    if "cos_sin" in live.case.inputs:
        return "an inverse RoPE: SGLang's caller rotates after flash_mla_with_kvcache_triton"
    if live.source == "dsv4-standin":
        return _standin_nan_rows(live, False) or (
            "its QK einsum of bf16 operands rounds the scores to bf16, outside the reference's "
            "tolerance of fp32 scores (a finding on SGLang, see the op's notes)")
    return None


def _hip_applies(live):
    if any(x not in (sd.V41, sd.V41_FP4) for x in _layouts(live)):
        return f"layouts {_layouts(live)}: compact_attention_hip reads v41 (0) and v41_fp4 (1)"
    if "cos_sin" in live.case.inputs:
        n_pos, p = live.case.inputs["cos_sin"].shape[0], live.case.inputs["positions"]
        if bool(((p < 0) | (p >= n_pos)).any()):
            return "positions outside the RoPE table (SGLang reads it unchecked)"
    return _standin_nan_rows(live, True)


# A case of the split-KV path (in.splits) also declares the split partials; SGLang's ops return
# the merged output only, so the partials are not judged (the output is).
def _partials(live):
    return {n: None for n in ("part_o", "part_lse") if n in live.out}


def _extra(live):
    return cache_of(live, "extra_"), live.inp.get("extra_indices"), live.inp.get("extra_lengths")


def _call_flashmla(fn, live):
    q = live.inp["q"].unsqueeze(1)
    B = q.shape[0]
    ecache, eidx, elens = _extra(live)
    out, lse = fn(q, cache_of(live), 512, softmax_scale=float(live.case.inputs["sm_scale"]),
                  indices=live.inp["indices"].reshape(B, 1, -1), topk_length=live.inp["lengths"],
                  attn_sink=live.inp.get("sink"), extra_k_cache=ecache,
                  extra_indices_in_kvcache=None if eidx is None else eidx.reshape(B, 1, -1),
                  extra_topk_length=elens)
    return dict(_partials(live), out=out[:, 0], out_lse=lse[:, :, 0].float(), errors=None)


def _call_hip(fn, live):
    q = live.inp["q"]
    ecache, eidx, elens = _extra(live)
    rope = (live.inp["cos_sin"], live.inp["positions"]) if "cos_sin" in live.inp else None
    scale = float(live.case.inputs["sm_scale"])
    splits = int(live.case.inputs["splits"]) if "splits" in live.case.inputs else None
    out = fn(q, cache_of(live), live.inp["indices"], live.inp["lengths"], live.inp.get("sink"),
             extra_cache=ecache, extra_indices=eidx, extra_lengths=elens, softmax_scale=scale,
             splits=splits, inv_rope=rope)
    # SGLang returns no lse and counts nothing
    return dict(_partials(live), out=out, out_lse=None, errors=None)


_EXT = " SGLang counts no bad index columns: errors is not judged."

register(Op(
    family="sparse_decode", name="triton_flashmla.flash_mla_with_kvcache_triton",
    module="sglang.srt.layers.attention.dsv4.triton_flashmla", attr="flash_mla_with_kvcache_triton",
    platforms=("cuda", "hip"), backend="triton", sweeps=("gpu", "sglang"),
    applies=_flashmla_applies, call=_call_flashmla,
    standin=_STANDIN + "flash_mla_with_kvcache_triton", files=(_FLASHMLA,),
    notes="A Triton gather of v4 pages and torch einsums in place of FlashMLA's "
          "flash_mla_with_kvcache: scores of a bf16 GEMM, bf16 softmax weights, lse without the "
          "sink. Findings: (1) the comment at _triton_softmax_epilogue's call says the fused "
          "epilogue replaces 'lse_for_out[lonely]=inf', yet _softmax_epilogue_kernel stores "
          "lse_raw = -inf for a query with no key (FlashMLA, and the reference: +inf): MISMATCH on "
          "out_lse; the stand-in follows the comment. (2) its sink merge guards only -inf: a +inf "
          "sink gives b = exp(inf - inf) = NaN and NaN weights for a query with a key, where the "
          "reference (and SGLang's SM100 _combine) write 0: MISMATCH on out; the stand-in keeps the "
          "NaN and the stand-in suite leaves such cases out. (3) 'QK: bf16 GEMM, upcast to fp32 "
          "for softmax math': torch.einsum of the bf16 q and kv tiles returns bf16 scores, rounded "
          "before the softmax (a logit error up to 2^-9 |q.k| sm_scale), where FlashMLA, which it "
          "stands in for, keeps fp32 scores and the reference's tolerance assumes them: MISMATCH "
          "(cosine distance 8.4e-6 > 5e-6 at B=4 H=16 K=576 v4 P=64). The stand-in rounds as SGLang "
          "does, so the stand-in suite leaves every case out; test_sparse_decode checks the mapping "
          "with fp32 scores. A split case's partials (part_o, "
          "part_lse) are not judged: SGLang's op returns the merged output." + _EXT))

register(Op(
    family="sparse_decode", name="compact_attention_hip.compact_attention_hip",
    module="sglang.kernels.ops.attention.dsv4.compact_attention_hip", attr="compact_attention_hip",
    platforms=("hip",), backend="aiter", sweeps=("gpu", "sglang"), applies=_hip_applies,
    call=_call_hip,
    standin=_STANDIN + "compact_attention_hip", files=(_HIP,),
    notes="V4.1 pages (v41, v41_fp4, any pairing) read by a gluon kernel built on aiter's _qkpv_fp8 "
          "(gfx950), in.splits passed as its splits; with more than one split SGLang merges in "
          "aiter_sparse_split_reduce. A finding: _compact_attention_kernel (splits = 1: den "
          "exp2(sink log2e - final_max) unguarded, then acc / den) and aiter_sparse_split_reduce "
          "(see split_combine) write NaN for a query with no key and no finite sink (0 / 0) and "
          "for a +inf sink (exp2(inf - inf)); its test states 0 only for a query with no key and a "
          "finite sink; the reference, DESIGN.md and SGLang's SM100 _combine write 0: MISMATCH. The "
          "stand-in keeps the NaN and the stand-in suite leaves such cases out. It returns no lse "
          "and no split partials: out_lse, part_o and part_lse are not judged, only out." + _EXT))
