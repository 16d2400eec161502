"""Plain-torch stand-ins of SGLang's top-k / top-p renormalisation ops (renorm.py, renorm_triton.py,
sgl_kernel's FlashInfer-derived kernels), each with its function's signature and convention."""

import torch


def _per_row(value, probs, dtype):
    """A scalar or per-row threshold as one value per row (SGLang broadcasts either)."""
    if isinstance(value, torch.Tensor):
        v = value.to(device=probs.device, dtype=dtype).reshape(-1)
        return v.expand(probs.shape[0]) if v.numel() == 1 else v
    return torch.full((probs.shape[0],), value, dtype=dtype, device=probs.device)


def _k_pivots(probs, k):
    """The k-th largest value of each row (k already in [1, V]); repeats count."""
    desc = torch.sort(probs, dim=-1, descending=True).values
    return desc.gather(1, (k - 1).unsqueeze(1)).squeeze(1)


def _p_pivots_discarded_mass(probs, p):
    """renorm.py's rule: an entry is kept while the mass strictly before it in descending order is
    at most the budget sum(row) - (1 - p); the pivot is the last such entry (at least the first)."""
    desc = torch.sort(probs, dim=-1, descending=True).values
    before = desc.cumsum(dim=-1) - desc
    budget = probs.sum(dim=-1) - (1.0 - p)
    n = (before <= budget.unsqueeze(1)).sum(dim=-1)
    return desc.gather(1, (n - 1).clamp(min=0).unsqueeze(1)).squeeze(1)


def _p_pivots_first_reach(probs, p):
    """FlashInfer's rule: the pivot is the largest value whose kept mass (every entry >= it) reaches
    p; a row whose mass never reaches p keeps everything."""
    desc = torch.sort(probs, dim=-1, descending=True).values
    reached = desc.cumsum(dim=-1) >= p.unsqueeze(1)
    first = torch.where(reached.any(dim=-1), reached.int().argmax(dim=-1),
                        torch.full_like(p, probs.shape[1] - 1, dtype=torch.long))
    return desc.gather(1, first.unsqueeze(1)).squeeze(1)


def _divide(probs, pivots):
    """Keep probs >= pivot, divide by the kept sum; a row with nothing kept is zeros."""
    kept = torch.where(probs >= pivots.unsqueeze(1), probs, torch.zeros_like(probs))
    total = kept.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, kept / total, torch.zeros_like(kept))


def _scale(probs, pivots):
    """renorm_triton.py's apply step: kept sum, then the kept values times its reciprocal."""
    kept = torch.where(probs >= pivots.unsqueeze(1), probs, torch.zeros_like(probs))
    total = kept.sum(dim=-1, keepdim=True)
    scale = torch.where(total > 0, 1.0 / total, torch.zeros_like(total))
    return kept * scale


def _k(probs, top_k):
    probs = probs.float().contiguous()
    return probs, _per_row(top_k, probs, torch.int64).clamp(1, probs.shape[1])


def _p(probs, top_p):
    probs = probs.float().contiguous()
    return probs, _per_row(top_p, probs, torch.float32).clamp(0.0, 1.0)


def top_k_renorm_probs_torch(probs, top_k):
    """renorm.py: k clamped to [1, V], every entry >= the k-th largest kept (ties together)."""
    probs, k = _k(probs, top_k)
    return _divide(probs, _k_pivots(probs, k))


def top_p_renorm_probs_torch(probs, top_p):
    """renorm.py: p clamped to [0, 1], the discarded-mass pivot."""
    probs, p = _p(probs, top_p)
    return _divide(probs, _p_pivots_discarded_mass(probs, p))


def top_k_renorm_probs_triton(probs, top_k):
    """renorm_triton.py: renorm.py's pivot, the reciprocal-scaled apply step."""
    probs, k = _k(probs, top_k)
    return _scale(probs, _k_pivots(probs, k))


def top_p_renorm_probs_triton(probs, top_p):
    """renorm_triton.py: renorm.py's top-p pivot, the reciprocal-scaled apply step."""
    probs, p = _p(probs, top_p)
    return _scale(probs, _p_pivots_discarded_mass(probs, p))


def top_k_renorm_prob(probs, top_k):
    """sgl_kernel / FlashInfer top-k: the caller clamps k to [1, V]; ties at the pivot kept."""
    probs, k = _k(probs, top_k)
    return _divide(probs, _k_pivots(probs, k))


def top_p_renorm_prob(probs, top_p):
    """sgl_kernel / FlashInfer top-p: the pivot where the kept mass first reaches p."""
    probs = probs.float().contiguous()
    p = _per_row(top_p, probs, torch.float32)
    keep_all = p >= 1
    pivots = torch.where(keep_all, torch.zeros_like(p), _p_pivots_first_reach(probs, p))
    return _divide(probs, pivots)
