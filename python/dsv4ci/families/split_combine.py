"""split_combine: SGLang's split-KV reducers mapped onto the family's case (SGLang's unnormalised
partials acc, m, l)."""

import math

import torch

from ..ops import Op, register

_STANDIN = "dsv4ci.standins.split_combine:"
_AITER = "python/sglang/kernels/ops/attention/aiter_sparse_decode_reduce.py"
_SM100 = ("python/sglang/kernels/ops/attention/dsv4/decode_attention_sm100.py",
          "python/sglang/kernels/ops/attention/dsv4/kv_layout.py")
LOG2E = 1.4426950408889634


def partials_of(live):
    """(acc, m, l) as SGLang's split kernels leave them: every split written, a split past the
    row's count (never read by the case) as an empty one, m = -inf, l = 0, acc = 0."""
    acc, m, l = live.inp["acc"], live.inp["m"], live.inp["l"]
    B, S = m.shape[0], m.shape[1]
    n = live.inp["n_splits"].to(torch.int64).clamp(0, S)
    past = (torch.arange(S, device=m.device).unsqueeze(0) >= n.unsqueeze(1)).unsqueeze(-1)  # [B, S, 1]
    m = torch.where(past, torch.full_like(m, -math.inf), m)
    l = torch.where(past, torch.zeros_like(l), l)
    acc = torch.where(past.unsqueeze(-1), torch.zeros_like(acc), acc)
    return acc.contiguous(), m.contiguous(), l.contiguous()


def merged_lse(m, l, base2):
    """The case's out_lse (natural log, sink excluded; +inf for a row with no key), which SGLang's
    reducers do not return: log of sum_s l_s base^m_s, computed here from the partials."""
    m2 = m.double() if base2 else m.double() * LOG2E
    live = (l > 0) & (m2 > -math.inf)
    M = torch.where(live, m2, torch.full_like(m2, -math.inf)).amax(dim=1)
    w = torch.where(live, l.double() * torch.exp2(m2 - M.clamp(min=-1e300).unsqueeze(1)), torch.zeros_like(m2))
    s = w.sum(dim=1)
    lse = (torch.log2(s) + M) / LOG2E
    return torch.where(s > 0, lse, torch.full_like(lse, math.inf)).float()


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


def _aiter_applies(live):
    return _layout_reason(live) or _positions_outside(live)


def _sm100_applies(live):
    why = _layout_reason(live)
    if why:
        return why
    if live.case.inputs["acc"].shape[3] != 512:
        return f"D={live.case.inputs['acc'].shape[3]}: _combine is written for 512"
    if "cos_sin" in live.case.inputs:
        return "an inverse RoPE: SGLang's SM100 caller rotates after _combine, which has none"
    return None


def _extensions(live, m, l, base2):
    return {"out_lse": None}  # SGLang's reducers return no lse: not judged


def _call_aiter(fn, live):
    acc, m, l = partials_of(live)
    rope = (live.inp["cos_sin"], live.inp["positions"]) if "cos_sin" in live.inp else None
    out = fn(acc, m, l, live.inp.get("sink"), torch.bfloat16, inv_rope=rope)
    return dict(_extensions(live, m, l, True), out=out)


def _call_sm100(fn, live):
    acc, m, l = partials_of(live)
    B, S, H = m.shape
    sink = live.inp["sink"] if "sink" in live.inp else torch.full((H,), -math.inf, device=m.device)
    out = torch.empty((B, H, 512), dtype=torch.bfloat16, device=m.device)
    fn[(B, H, 1)](acc, m, l, sink.float().contiguous(), out, NT=S, ST=1 << max(S - 1, 0).bit_length(),
                  H=H, BD=512, num_warps=4)
    return dict(_extensions(live, m, l, False), out=out)


_LSE_NOTE = " SGLang's reducers return no lse: out_lse is not judged, only out."

register(Op(
    family="split_combine", name="aiter_sparse_decode_reduce.aiter_sparse_split_reduce",
    module="sglang.kernels.ops.attention.aiter_sparse_decode_reduce",
    attr="aiter_sparse_split_reduce",
    platforms=("hip",), backend="triton", shape={"sglang-m2": ""}, applies=_aiter_applies,
    call=_call_aiter, standin=_STANDIN + "aiter_sparse_split_reduce", files=(_AITER,),
    notes="The ROCm reducer of compact_attention_hip's split path: m in the base-2 domain "
          "(in.m_base2 = 1), the sink as exp2(sink log2e - M), the inverse RoPE of the bf16 output "
          "(in.rotate_empty = 1). A row with no key and no sink computes exp2(-inf - -inf) and a "
          "+inf sink exp2(inf - inf): NaN, where SGLang's SM100 _combine and its tests write 0 "
          "(MISMATCH)." + _LSE_NOTE))

register(Op(
    family="split_combine", name="decode_attention_sm100._combine",
    module="sglang.kernels.ops.attention.dsv4.decode_attention_sm100", attr="_combine",
    platforms=("cuda",), backend="triton", shape={"sglang-natural": ""}, applies=_sm100_applies,
    call=_call_sm100, standin=_STANDIN + "_combine", files=_SM100,
    notes="swapab_attention's merge on SM100: natural m (in.m_base2 = 0), a split counted when its "
          "sum is > 0, 0 for a row with no key or a +inf sink; launched as swapab_attention "
          "launches it (grid (B, H, 1), BD 512); no sink is passed as -inf." + _LSE_NOTE))
