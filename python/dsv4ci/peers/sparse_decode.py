"""sparse_decode's peer: gather and dequantise the indexed page rows (the stand-ins' vectorised
reader), then softmax attention with the sink as an extra logit; with in.splits = S > 0 also the
split partials (normalised o, base-2 lse) of the columns' S equal chunks."""

import math

import torch

from ..standins.sparse_decode import dequantize
from . import Peer, Unmodelled, scalar
from .split_combine import inverse_rope

LOG2E = 1.4426950408889634
LAYOUTS = {0: "v41", 1: "v41_fp4", 2: "v4"}


def keys(pool, indices, lengths, layout, page_size):
    """[B, K, 512] fp32 rows of the valid columns (zeros elsewhere) and the validity [B, K]."""
    B, K = indices.shape
    col = torch.arange(K, device=indices.device)
    n = lengths.long().clamp(0, K)[:, None]
    valid = (col < n) & (indices >= 0) & (indices < pool.shape[0] * page_size)
    slots = torch.where(valid, indices.long(), torch.zeros_like(indices, dtype=torch.long))
    kv = dequantize(pool.reshape(-1), layout, pool.shape[1], page_size, slots.reshape(-1)).view(B, K, 512)
    return torch.where(valid[..., None], kv, torch.zeros_like(kv)), valid


def attend(q, kv, valid, sm_scale, sink):
    """out [B, H, 512] bf16 and lse [B, H] (natural, sink excluded; +inf and out 0 with no key)."""
    x = torch.einsum("bhd,bkd->bhk", q.float(), kv) * sm_scale
    x = x.masked_fill(~valid[:, None, :], -math.inf)
    lse = torch.logsumexp(x, dim=-1)
    none = lse == -math.inf
    s = sink.float()[None, :, None].expand(x.shape[0], -1, 1) if sink is not None else x.new_full((*x.shape[:2], 1), -math.inf)
    w = torch.softmax(torch.cat((x, s), dim=-1).masked_fill(none[..., None], 0.0), dim=-1)[..., :-1]
    out = torch.einsum("bhk,bkd->bhd", w, kv)
    out = torch.where((none | (s[..., 0] == math.inf))[..., None], torch.zeros_like(out), out)
    return out.to(torch.bfloat16), torch.where(none, torch.full_like(lse, math.inf), lse)


def split_partials(q, kv, valid, sm_scale, S):
    """part_o [B, S, H, 512] and part_lse [B, S, H] (base 2, -inf and o 0 for a split with no key)
    over the column chunks [s C, (s + 1) C), C = ceil(columns / S)."""
    B, N, D = kv.shape
    C = -(-N // S)
    pad = S * C - N
    kv = torch.cat((kv, kv.new_zeros(B, pad, D)), dim=1).view(B, S, C, D)
    valid = torch.cat((valid, valid.new_zeros(B, pad)), dim=1).view(B, S, C)
    x = torch.einsum("bhd,bscd->bshc", q.float(), kv) * sm_scale
    x = x.masked_fill(~valid[:, :, None, :], -math.inf)
    lse = torch.logsumexp(x, dim=-1)
    none = lse == -math.inf
    w = torch.softmax(x.masked_fill(none[..., None], 0.0), dim=-1)
    o = torch.einsum("bshc,bscd->bshd", w, kv)
    return torch.where(none[..., None], torch.zeros_like(o), o), lse * LOG2E


def build(case):
    caches = [("", int(scalar(case, "layout")), int(scalar(case, "page_size")))]
    if "extra_pool" in case.inputs:
        caches.append(("extra_", int(scalar(case, "extra_layout")), int(scalar(case, "extra_page_size"))))
    for prefix, layout, _ in caches:
        if layout not in LAYOUTS:
            raise Unmodelled(f"in.{prefix}layout={layout}: the peer's page reader reads v41, v41_fp4 and v4")
    sm_scale = float(scalar(case, "sm_scale"))
    S = int(scalar(case, "splits", 0))
    rope = "cos_sin" in case.inputs

    def fn(inp, start):
        parts = [keys(inp[p + "pool"], inp[p + "indices"], inp[p + "lengths"], lay, P) for p, lay, P in caches]
        kv, valid = torch.cat([k for k, _ in parts], dim=1), torch.cat([v for _, v in parts], dim=1)
        out, lse = attend(inp["q"], kv, valid, sm_scale, inp.get("sink"))
        if rope:
            out = inverse_rope(out, inp["cos_sin"], inp["positions"])
        res = {"out": out, "out_lse": lse}
        if S > 0:
            res["part_o"], res["part_lse"] = split_partials(inp["q"], kv, valid, sm_scale, S)
        return res

    name = "gather+dequant " + "+".join(LAYOUTS[lay] for _, lay, _ in caches) + " softmax+sink"
    return Peer(name + (f" S{S}" if S > 0 else "") + (" + inverse rope" if rope else ""), fn)
