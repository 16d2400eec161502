"""candidate_blocks' peer: block maxima (amax, NaN propagating), the newest block forced in, the
top blocks by torch.topk, then the top keys of the kept blocks, both sorted (SGLang's torch path)."""

import torch

from . import Peer, scalar
from .indexer_topk import NEG_INF_KEY, POS_NAN_KEY, ascending, order_key, top_keys

POS_INF_KEY = 0x7F800000


def build(case):
    width = int(scalar(case, "width", case.inputs["scores"].shape[1]))
    bs, nb, K = (int(scalar(case, k)) for k in ("bs", "nb", "K"))

    def fn(inp, start):
        s = inp["scores"][:, :width]
        rows = s.shape[0]
        lens = inp["lens"].long().clamp(0, width)[:, None]
        n_blocks = -(-width // bs)
        col = torch.arange(n_blocks * bs, device=s.device)
        padded = torch.cat([s, s.new_full((rows, n_blocks * bs - width), float("-inf"))], dim=1)
        live = torch.where(col < lens, padded, torch.full_like(padded, float("-inf")))
        score = live.view(rows, n_blocks, bs).amax(dim=-1)
        key = order_key(score)  # a NaN block (either sign) ranks as +NaN
        key = torch.where(torch.isnan(score), torch.full_like(key, POS_NAN_KEY), key)
        j = torch.arange(n_blocks, device=s.device)
        key = torch.where(j == (lens - 1) // bs, torch.full_like(key, POS_INF_KEY), key)
        in_row = (j < -(-lens // bs)) & (key > NEG_INF_KEY)
        bidx, bsel = top_keys(key, in_row, nb)
        bsel &= key.gather(1, bidx.clamp(max=n_blocks - 1)) != POS_NAN_KEY  # a NaN block yields nothing
        kept = torch.zeros(rows, n_blocks + 1, dtype=torch.bool, device=s.device)
        kept = kept.scatter(1, torch.where(bsel, bidx, torch.full_like(bidx, n_blocks)), True)[:, :n_blocks]
        k = order_key(s)
        cand = kept.repeat_interleave(bs, dim=1)[:, :width] & (col[:width] < lens) & (k > NEG_INF_KEY)
        kidx, ksel = top_keys(k, cand, K)
        ksel &= ~torch.isnan(torch.cat([s, s.new_zeros(rows, max(K - width, 0))], dim=1).gather(1, kidx))
        return {"blocks": ascending(bidx, bsel), "keys": ascending(kidx, ksel)}

    return Peer("block amax+topk, key topk+sort", fn)
