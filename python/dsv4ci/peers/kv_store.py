"""kv_store's peer: the row scatter as an index_put, and the fused RMSNorm + interleaved RoPE +
bf16 cast in front of it, on the rows with a slot in the pool (and, fused, a position in the table)."""

import torch

from . import Peer, scalar


def rms_norm_rope(x, weight, cos_sin, pos, eps):
    """fp32 RMSNorm times the weight, then RoPE on the last rope_dim values (pairs (2i, 2i+1),
    cos_sin[p] holding (cos, sin) pairs); bf16 rows."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight
    rd = cos_sin.shape[1]
    cs = cos_sin[pos].view(-1, rd // 2, 2)
    r, m = y[:, -rd:].reshape(-1, rd // 2, 2).unbind(-1)
    c, s = cs.unbind(-1)
    rot = torch.stack((r * c - m * s, r * s + m * c), dim=-1).reshape(-1, rd)
    return torch.cat((y[:, :-rd], rot), dim=-1).to(torch.bfloat16)


def build(case):
    width = int(scalar(case, "width", case.inputs["kv"].shape[1]))
    fused = "weight" in case.inputs
    eps = float(scalar(case, "eps", 1e-6)) if fused else 0.0

    def fn(inp, start):
        pool, loc, kv = start["pool"], inp["loc"], inp["kv"][:, :width]
        ok = (loc >= 0) & (loc < pool.shape[0])
        if fused:
            pos = inp["positions"]
            ok &= (pos >= 0) & (pos < inp["cos_sin"].shape[0])
            kv = rms_norm_rope(kv, inp["weight"], inp["cos_sin"], pos.clamp(0, inp["cos_sin"].shape[0] - 1), eps)
        # Rows without a slot go to a spare row past the pool, dropped after the store.
        at = torch.where(ok, loc, torch.full_like(loc, pool.shape[0]))
        spare = torch.cat([pool, pool.new_zeros(1, pool.shape[1])])
        return {"pool": spare.index_put((at[:, None], torch.arange(width, device=loc.device)), kv)[:-1]}

    return Peer("fused rms_norm+rope+index_put" if fused else "index_put", fn)
