"""split_combine: SGLang's split-KV reducers mapped onto the family's case (SGLang's unnormalised
partials acc, m, l). Both also draw the sglang sweep: D = 512 without the inverse RoPE, the merge
SGLang's SM100 caller runs (swapab_attention rotates after _combine)."""

import math

import torch

from ..ops import Op, register

_STANDIN = "dsv4ci.standins.split_combine:"
_AITER = "python/sglang/kernels/ops/attention/aiter_sparse_decode_reduce.py"
_SM100 = ("python/sglang/kernels/ops/attention/dsv4/decode_attention_sm100.py",
          "python/sglang/kernels/ops/attention/dsv4/kv_layout.py")
LOG2E = 1.4426950408889634


def partials_of(live):
    """(acc, m, l) as SGLang's split kernels leave them: every split written, an empty one (no key:
    a split past the row's count, never read by the case, or one the case marks empty with l = 0
    or m = -inf, whose acc the case may fill with anything) as m = -inf, l = 0, acc = 0, what
    compact_attention_hip's split kernel stores for a split with no key (its m, den and acc start
    at -inf, 0 and 0). The reference never reads an empty split's acc; SGLang's reducers multiply
    it by a weight of 0, so a NaN there would reach their output."""
    acc, m, l = live.inp["acc"], live.inp["m"], live.inp["l"]
    B, S = m.shape[0], m.shape[1]
    n = live.inp["n_splits"].to(torch.int64).clamp(0, S)
    past = torch.arange(S, device=m.device).unsqueeze(0) >= n.unsqueeze(1)  # [B, S]
    empty = past.unsqueeze(-1) | ~(l != 0) | (m == -math.inf)  # [B, S, H]
    m = torch.where(empty, torch.full_like(m, -math.inf), m)
    l = torch.where(empty, torch.zeros_like(l), l)
    acc = torch.where(empty.unsqueeze(-1), torch.zeros_like(acc), acc)
    return acc.contiguous(), m.contiguous(), l.contiguous()


def _positions_outside(live):
    if "cos_sin" not in live.case.inputs:
        return None
    n_pos = live.case.inputs["cos_sin"].shape[0]
    p = live.case.inputs["positions"]
    bad = int(((p < 0) | (p >= n_pos)).sum())
    return f"{bad} positions outside the RoPE table (SGLang reads it unchecked)" if bad else None


def _layout_reason(live):
    if "acc" not in live.case.inputs:
        return "the normalised layout (o, lse): SGLang's reducers take (acc, m, l)"
    return None


def hip_nan_rows(live):
    """(rows with no key and no finite sink, rows with a +inf sink) of the case: where
    aiter_sparse_split_reduce's kernel computes exp2(-inf - -inf) or exp2(inf - inf) and writes
    NaN (the reference, SGLang's SM100 _combine and DESIGN.md give such a row 0)."""
    _, m, _ = partials_of(live)
    no_key = (m == -math.inf).all(dim=1)  # [B, H]
    if "sink" not in live.inp:
        return int(no_key.sum()), 0
    sk = (live.inp["sink"].float() * LOG2E).unsqueeze(0).expand_as(no_key)
    return int((no_key & (sk == -math.inf)).sum()), int((sk == math.inf).sum())


def _standin_nan_rows(live):
    """In the stand-in suite, the case's rows the faithful stand-in writes NaN for (a finding on
    SGLang's HIP reducer, judged MISMATCH where SGLang's own op runs)."""
    if live.source != "dsv4-standin":
        return None
    no_key, inf_sink = hip_nan_rows(live)
    if not (no_key or inf_sink):
        return None
    return (f"{no_key} rows with no key and no finite sink, {inf_sink} with a +inf sink: "
            "aiter_sparse_split_reduce writes NaN there (exp2(-inf - -inf), exp2(inf - inf)), the "
            "reference 0 (a finding on SGLang, see the op's notes)")


def _aiter_applies(live):
    D = live.case.inputs["acc"].shape[3] if "acc" in live.case.inputs else 0
    if D & (D - 1):  # aiter_sparse_split_reduce asserts triton.next_power_of_2(D) == D
        return f"D={D}: aiter_sparse_split_reduce takes a power-of-two head dimension"
    return _layout_reason(live) or _positions_outside(live) or _standin_nan_rows(live)


def _sm100_applies(live):
    why = _layout_reason(live)
    if why:
        return why
    if live.case.inputs["acc"].shape[3] != 512:
        return f"D={live.case.inputs['acc'].shape[3]}: _combine is written for 512"
    if "cos_sin" in live.case.inputs:
        return "an inverse RoPE: SGLang's SM100 caller rotates after _combine, which has none"
    return None


def _call_aiter(fn, live):
    acc, m, l = partials_of(live)
    rope = (live.inp["cos_sin"], live.inp["positions"]) if "cos_sin" in live.inp else None
    out = fn(acc, m, l, live.inp.get("sink"), torch.bfloat16, inv_rope=rope)
    return {"out": out, "out_lse": None}  # SGLang's reducers return no lse: not judged


def _call_sm100(fn, live):
    acc, m, l = partials_of(live)
    B, S, H = m.shape
    sink = live.inp["sink"] if "sink" in live.inp else torch.full((H,), -math.inf, device=m.device)
    out = torch.empty((B, H, 512), dtype=torch.bfloat16, device=m.device)
    fn[(B, H, 1)](acc, m, l, sink.float().contiguous(), out, NT=S, ST=1 << max(S - 1, 0).bit_length(),
                  H=H, BD=512, num_warps=4)
    return {"out": out, "out_lse": None}


_LSE_NOTE = " SGLang's reducers return no lse: out_lse is not judged, only out."

register(Op(
    family="split_combine", name="aiter_sparse_decode_reduce.aiter_sparse_split_reduce",
    module="sglang.kernels.ops.attention.aiter_sparse_decode_reduce",
    attr="aiter_sparse_split_reduce",
    platforms=("hip",), backend="triton", sweeps=("gpu", "sglang"),
    shape={"sglang-m2": "", "rotate-empty": ""},
    applies=_aiter_applies, call=_call_aiter, standin=_STANDIN + "aiter_sparse_split_reduce",
    files=(_AITER,),
    notes="The ROCm reducer of compact_attention_hip's split path: m in the base-2 domain "
          "(in.m_base2 = 1), the sink as exp2(sink log2e - M), the inverse RoPE of the bf16 output, "
          "an empty row's zeros included (in.rotate_empty = 1); an empty split handed over as "
          "compact_attention_hip stores it (m -inf, l 0, acc 0). A finding: "
          "aiter_sparse_decode_reduce.py's _aiter_sparse_decode_reduce_kernel takes m_final = "
          "max(m_s, sink log2e) and w = exp2(m_s - m_final) unguarded, so a row with no key and no "
          "finite sink (m_final = -inf) and a +inf sink (l_final + exp2(inf - inf)) write NaN; its "
          "stated intent is aiter's _pa_decode_sparse_reduce bit for bit (its tests compare only "
          "rows with keys and finite sinks), while SGLang's SM100 _combine masks both rows to 0, "
          "the reference's rule (DESIGN.md, split_combine): MISMATCH. The stand-in keeps the NaN "
          "and the stand-in suite leaves such cases out." + _LSE_NOTE))

register(Op(
    family="split_combine", name="decode_attention_sm100._combine",
    module="sglang.kernels.ops.attention.dsv4.decode_attention_sm100", attr="_combine",
    platforms=("cuda",), backend="triton", sweeps=("gpu", "sglang"), shape={"sglang-natural": ""},
    applies=_sm100_applies,
    call=_call_sm100, standin=_STANDIN + "_combine", files=_SM100,
    notes="swapab_attention's merge on SM100: natural m (in.m_base2 = 0), a split counted when its "
          "sum is > 0, 0 for a row with no key or a +inf sink; launched as swapab_attention "
          "launches it (grid (B, H, 1), BD 512); no sink is passed as -inf; an empty split handed over "
          "as m -inf, l 0, acc 0 (the state compact_attention_hip's split kernel stores; SM100's "
          "partial_gluon is not among the files read)." + _LSE_NOTE))
