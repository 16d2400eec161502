"""sampling_renorm's peer: the sort-based pivot (the k-th largest weight, or the weight where the
descending cumulative mass reaches p) and the kept weights over their sum, per the case's rules.
A weight is the probability where 0 < x < inf, else 0 (NaN, negatives, -0 and +inf add nothing)."""

import torch

from ..standins.sampling_renorm import _divide, _k_pivots
from . import Peer, scalar


def top_p_pivots(w, p, at_most):
    """The n-th largest weight, n the count of sorted positions whose mass before them is below p
    (FlashInfer: the kept mass first reaches p) or at most p (renorm.py); p >= 1 keeps all."""
    desc = w.sort(dim=-1, descending=True).values
    before = desc.cumsum(dim=-1) - desc
    n = ((before <= p[:, None]) if at_most else (before < p[:, None])).sum(dim=-1).clamp(min=1)
    pivots = desc.gather(1, (n - 1)[:, None]).squeeze(1)
    return torch.where(p >= 1, torch.zeros_like(pivots), pivots)


def build(case):
    top_k = "k" in case.inputs
    k_clamp, rule = int(scalar(case, "k_clamp", 0)), int(scalar(case, "top_p_rule", 0))

    def fn(inp, start):
        probs = inp["probs"]
        V = probs.shape[1]
        w = torch.where((probs > 0) & (probs < float("inf")), probs, torch.zeros_like(probs))
        if top_k:
            k = inp["k"].long()
            # k <= 0 keeps the whole row (the project's rule) unless SGLang's clamp to [1, V] is asked for
            k = k.clamp(1, V) if k_clamp else torch.where(k <= 0, torch.full_like(k, V), k.clamp(max=V))
            return {"out": _divide(w, _k_pivots(w, k))}
        return {"out": _divide(w, top_p_pivots(w, inp["p"].float(), bool(rule)))}

    if top_k:
        return Peer("sort top-k renorm" + (" k-clamp" if k_clamp else ""), fn)
    return Peer("sort+cumsum top-p renorm" + (" renorm.py" if rule else ""), fn)
