"""split_combine's peer: the log-sum-exp merge of the split partials (base 2) with the sink in the
denominator, the bf16 output, then the inverse RoPE of its tail; SGLang's (acc, m, l) partials
taken as o = acc / l, lse = m + log2(l)."""

import math

import torch

from . import Peer, scalar

LOG2E = 1.4426950408889634


def partials(inp, base2):
    """(o [B, S, H, D], lse [B, S, H] base 2) of the case's layout."""
    if "o" in inp:
        return inp["o"], inp["lse"]
    m, l = inp["m"], inp["l"]
    m2 = m if base2 else m * LOG2E
    empty = (l == 0) | (m == -math.inf)
    lse = torch.where(empty, torch.full_like(m, -math.inf), m2 + torch.log2(l))
    return inp["acc"] / l.unsqueeze(-1), lse


def merge(o, lse, n_splits, sink):
    """out [B, H, D] bf16, lse_out [B, H] (natural, the sink excluded): splits past n_splits and
    empty ones weigh nothing; a row with no key or a +inf sink is 0 (lse +inf for no key)."""
    S = lse.shape[1]
    live = torch.arange(S, device=lse.device)[None, :, None] < n_splits.long().clamp(0, S)[:, None, None]
    g = torch.where(live, lse, torch.full_like(lse, -math.inf))
    m = g.amax(dim=1)
    empty = m == -math.inf
    m0 = torch.where(empty, torch.zeros_like(m), m)
    lse_out = torch.where(empty, torch.full_like(m, math.inf),
                          (torch.log2(torch.exp2(g - m0[:, None]).sum(dim=1)) + m0) / LOG2E)
    sk = sink.float()[None, :] * LOG2E if sink is not None else torch.full_like(m, -math.inf)
    ms = torch.where(empty, torch.zeros_like(m), torch.maximum(m0, sk))
    a = torch.exp2(g - ms[:, None])
    den = a.sum(dim=1) + torch.exp2(sk - ms)
    acc = torch.where((a > 0).unsqueeze(-1), a.unsqueeze(-1) * o, torch.zeros_like(o)).sum(dim=1)
    zero = (empty | (sk == math.inf)).unsqueeze(-1)
    out = torch.where(zero, torch.zeros_like(acc), acc / den.unsqueeze(-1))
    return out.to(torch.bfloat16), lse_out


def inverse_rope(out, cos_sin, pos):
    """The tail's pairs (x0, x1) -> (x0 c + x1 s, x1 c - x0 s) at each row's position, rounded to
    bf16 again; a row whose position is outside the table keeps its tail."""
    n_pos, rd = cos_sin.shape
    ok = (pos >= 0) & (pos < n_pos)
    cs = cos_sin[pos.clamp(0, n_pos - 1)].view(-1, 1, rd // 2, 2)
    x = out[..., -rd:].float().view(*out.shape[:-1], rd // 2, 2)
    (c, s), (x0, x1) = cs.unbind(-1), x.unbind(-1)
    rot = torch.stack((x0 * c + x1 * s, x1 * c - x0 * s), dim=-1).reshape(*out.shape[:-1], rd)
    tail = torch.where(ok[:, None, None], rot.to(torch.bfloat16), out[..., -rd:])
    return torch.cat((out[..., :-rd], tail), dim=-1)


def build(case):
    base2 = bool(scalar(case, "m_base2", 1))
    rope = "cos_sin" in case.inputs

    def fn(inp, start):
        o, lse = partials(inp, base2)
        out, lse_out = merge(o, lse, inp["n_splits"], inp.get("sink"))
        if rope:
            out = inverse_rope(out, inp["cos_sin"], inp["positions"])
        return {"out": out, "out_lse": lse_out}

    layout = "" if "o" in case.inputs else (" (acc, m, l)" if base2 else " (acc, m, l) natural")
    return Peer("lse merge" + (" + sink" if "sink" in case.inputs else "") + (" + inverse rope" if rope else "")
                + layout, fn)
