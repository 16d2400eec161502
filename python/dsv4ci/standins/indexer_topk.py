"""Plain-torch stand-in of SGLang's DSV4 top-k epilogue (CPU-capable).

  sort_map_topk   kernels/ops/attention/dsv4/sm90_fp4_topk.py
"""

import torch


def sort_map_topk(selected, lens, req, mapping, pages, raw, ratio):
    """_sort_map_topk per row: the k selected positions ascending; a position below lens[row]
    publishes slot mapping[req[row], pos * ratio] // ratio (and pos as its raw index), the others
    -1; columns past k are left as the caller filled them."""
    rows, k = selected.shape
    assert selected.dtype == torch.int64 and 0 < k <= 1024
    logical = selected.sort(dim=-1).values
    valid = logical < lens.long()[:, None]
    pos = torch.where(valid, logical, torch.zeros_like(logical))
    slot = mapping[req.long()[:, None].expand_as(pos), pos * ratio].long()
    minus = torch.full_like(logical, -1)
    pages[:rows, :k] = torch.where(valid, torch.div(slot, ratio, rounding_mode="floor"), minus).to(pages.dtype)
    if raw is not None:
        raw[:rows, :k] = torch.where(valid, logical, minus).to(raw.dtype)
