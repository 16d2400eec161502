"""sparse_decode: SGLang's DSV4 sparse decode attention ops mapped onto the family's case (q, a
main and an optional extra paged cache, sink, inverse RoPE)."""

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


def error_columns(live):
    """The case's `errors` (this project's extension; SGLang counts none): read columns whose index
    is neither -1 nor inside the cache."""
    n = 0
    for p in ("", "extra_"):
        if p + "indices" not in live.case.inputs:
            continue
        idx = live.case.inputs[p + "indices"].to(torch.int64)
        cap = live.case.inputs[p + "pool"].shape[0] * int(live.case.inputs[p + "page_size"])
        lens = live.case.inputs[p + "lengths"].to(torch.int64).clamp(min=0).unsqueeze(1)
        read = torch.arange(idx.shape[1]).unsqueeze(0) < lens
        n += int((read & (idx != -1) & ((idx < 0) | (idx >= cap))).sum())
    return torch.tensor(n, dtype=torch.int64)


def _layouts(live):
    c = live.case.inputs
    return [int(c["layout"])] + ([int(c["extra_layout"])] if "extra_layout" in c else [])


def _common_reason(live):
    if "splits" in live.case.inputs:
        return "the split partials (part_o, part_lse): SGLang's op returns the merged output only"
    return None


def _flashmla_applies(live):
    if any(x != sd.V4 for x in _layouts(live)):
        return f"layouts {_layouts(live)}: triton_flashmla reads v4 pages (2) only"
    if "cos_sin" in live.case.inputs:
        return "an inverse RoPE: SGLang's caller rotates after flash_mla_with_kvcache_triton"
    return _common_reason(live)


def _hip_applies(live):
    if any(x not in (sd.V41, sd.V41_FP4) for x in _layouts(live)):
        return f"layouts {_layouts(live)}: compact_attention_hip reads v41 (0) and v41_fp4 (1)"
    if "cos_sin" in live.case.inputs:
        n_pos, p = live.case.inputs["cos_sin"].shape[0], live.case.inputs["positions"]
        if bool(((p < 0) | (p >= n_pos)).any()):
            return "positions outside the RoPE table (SGLang reads it unchecked)"
    return _common_reason(live)


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
    return {"out": out[:, 0], "out_lse": lse[:, :, 0].float(), "errors": None}


def _call_hip(fn, live):
    q = live.inp["q"]
    ecache, eidx, elens = _extra(live)
    rope = (live.inp["cos_sin"], live.inp["positions"]) if "cos_sin" in live.inp else None
    scale = float(live.case.inputs["sm_scale"])
    out = fn(q, cache_of(live), live.inp["indices"], live.inp["lengths"], live.inp.get("sink"),
             extra_cache=ecache, extra_indices=eidx, extra_lengths=elens, softmax_scale=scale,
             inv_rope=rope)
    return {"out": out, "out_lse": None, "errors": None}  # SGLang returns no lse and counts nothing


_EXT = " SGLang counts no bad index columns: errors is not judged."

register(Op(
    family="sparse_decode", name="triton_flashmla.flash_mla_with_kvcache_triton",
    module="sglang.srt.layers.attention.dsv4.triton_flashmla", attr="flash_mla_with_kvcache_triton",
    platforms=("cuda", "hip"), backend="triton", applies=_flashmla_applies, call=_call_flashmla,
    standin=_STANDIN + "flash_mla_with_kvcache_triton", files=(_FLASHMLA,),
    notes="A Triton gather of v4 pages and torch einsums in place of FlashMLA's "
          "flash_mla_with_kvcache: bf16 softmax weights, lse without the sink. Its comment says the "
          "fused epilogue replaces 'lse_for_out[lonely]=inf', yet _softmax_epilogue_kernel stores "
          "lse = -inf for a query with no key (FlashMLA, and the reference: +inf): MISMATCH on "
          "out_lse. A +inf sink gives exp(inf - inf) = NaN weights." + _EXT))

register(Op(
    family="sparse_decode", name="compact_attention_hip.compact_attention_hip",
    module="sglang.kernels.ops.attention.dsv4.compact_attention_hip", attr="compact_attention_hip",
    platforms=("hip",), backend="aiter", applies=_hip_applies, call=_call_hip,
    standin=_STANDIN + "compact_attention_hip", files=(_HIP,),
    notes="V4.1 pages (v41, v41_fp4, any pairing) read by a gluon kernel built on aiter's _qkpv_fp8 "
          "(gfx950); with more than one split SGLang merges in aiter_sparse_split_reduce, which "
          "writes NaN for a query with no key or a +inf sink (see split_combine). It returns no "
          "lse: out_lse is not judged, only out." + _EXT))
