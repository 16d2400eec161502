"""indexer_topk's peer: torch.topk over SGLang's radix order key of the scores (-NaN < -inf < ...
< +inf < +NaN, as int32), the page transform as a gather and shifts, sorted with torch.sort."""

import torch

from . import Peer, Unmodelled, scalar

NEG_INF_KEY = -2139095041  # order_key(-inf): 0xff800000 ^ 0x7fffffff as int32
POS_NAN_KEY = 0x7FC00000  # order_key of the canonical +NaN
NOT_ELIGIBLE = -(2**40)  # below every int32 key


def order_key(x):
    """SGLang's radix key of fp32 bits as a signed int32 total order: u ^ 0x7fffffff for a set sign bit."""
    b = x.contiguous().view(torch.int32)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


def top_keys(key, eligible, k):
    """Per row the k largest keys among the eligible ones: (indices [rows, k], chosen mask); the
    row is padded to k columns when narrower. Ties at the cut-off go to any index (torch.topk)."""
    rows, n = key.shape
    key = key.long()  # an ineligible key ranks below every eligible one, -NaN's included
    masked = torch.where(eligible, key, torch.full_like(key, NOT_ELIGIBLE))
    ok = eligible
    if n < k:
        masked = torch.cat([masked, masked.new_full((rows, k - n), NOT_ELIGIBLE)], dim=1)
        ok = torch.cat([ok, ok.new_zeros(rows, k - n)], dim=1)
    top = masked.topk(k, dim=-1)
    return top.indices, ok.gather(1, top.indices)


def ascending(idx, keep):
    """The kept indices ascending, -1 last (int32)."""
    big = torch.iinfo(torch.int32).max
    s = torch.where(keep, idx, torch.full_like(idx, big)).sort(dim=-1).values
    return torch.where(s == big, torch.full_like(s, -1), s).to(torch.int32)


def build(case):
    width = int(scalar(case, "width", case.inputs["scores"].shape[1]))
    K, is_sorted = int(scalar(case, "K")), bool(scalar(case, "sorted", 0))
    select, raw_out = int(scalar(case, "select", 0)), bool(scalar(case, "raw_out", 1))
    paged = "page_table" in case.inputs
    if select not in (0, 1, 2):
        raise Unmodelled(f"in.select={select}: the peer models 0 (dsv4), 1 (sglang), 2 (sglang_masked)")
    bits = int(scalar(case, "page_bits", 0))

    def fn(inp, start):
        s = inp["scores"][:, :width]
        lens = inp["lens"].long().clamp(0, width)[:, None]
        key = order_key(s)
        col = torch.arange(width, device=s.device)
        eligible = col < lens
        if select == 0:  # only keys above -inf, unless the row has at most K keys (all listed)
            eligible &= (key > NEG_INF_KEY) | (lens <= K)
        idx, chosen = top_keys(key, eligible, K)
        if select == 2:  # mask_topk_scores: a selected entry not > -inf becomes -1, in place
            sp = torch.cat([s, s.new_full((s.shape[0], max(K - width, 0)), float("-inf"))], dim=1)
            chosen &= sp.gather(1, idx) > float("-inf")
        if is_sorted:
            raw = ascending(idx, chosen)
        else:
            raw = minus_one_last(torch.where(chosen, idx, torch.full_like(idx, -1)).to(torch.int32))
        if not paged:
            return {"out": raw}
        pt = inp["page_table"]
        r = raw.long()
        page = pt.gather(1, (r >> bits).clamp(0, pt.shape[1] - 1)).long()
        out = torch.where(r >= 0, ((page << bits) | (r & ((1 << bits) - 1))), torch.full_like(r, -1))
        out = ((out + 2**31) % 2**32 - 2**31).to(torch.int32)  # 32-bit two's complement
        if not raw_out and is_sorted:  # no raw output: the paged row sorted by slot
            out = ascending(out, out >= 0)
        res = {"out": out}
        if raw_out:
            res["raw"] = raw
        return res

    name = ("topk(order key)" + ("+sort" if is_sorted else "") + ("+page gather" if paged else "")
            + {0: "", 1: " sglang", 2: " sglang masked"}[select])
    return Peer(name, fn)


def minus_one_last(raw):
    """An unsorted selection with its -1 entries moved last (a stable sort on "is -1")."""
    return raw.gather(1, (raw < 0).to(torch.int8).argsort(dim=-1, stable=True))
