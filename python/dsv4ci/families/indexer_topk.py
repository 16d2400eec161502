"""indexer_topk: SGLang's sorted top-k publication of the DSV4 indexer (selection by torch.topk,
then sm90_fp4_topk.sort_map_topk) on the family's cases.

Case layout (replay/include/dsv4/cases/indexer_topk.hpp): in.scores F32 [B, stride], in.lens,
in.K, in.sorted, in.width, optional in.page_table with in.page_bits, in.raw_out -> out [B, K]
(paged with a table), raw [B, K]. SGLang's convention: exactly K keys by value among the row's
keys (select=sglang: -inf keys fill places), published ascending, -1 last.
"""

import torch

from dsv4ci.ops import Op, register


def applies(live):
    K = int(live.scalar("K"))
    if K > 1024:
        return "K=%d: sort_map_topk publishes at most 1024 keys a row (the caller sorts in torch)" % K
    if int(live.scalar("sorted")) != 1:
        return "an unsorted case (SGLang publishes sorted rows)"
    if "page_table" in live.inp and "raw_out" in live.inp and int(live.scalar("raw_out")) == 0:
        return "no raw output: this caller publishes raw indices beside the paged ones"
    rows = negative_nan_rows(live, K)
    if rows:
        return ("%d row(s) longer than K=%d (first: row %d) hold a NaN with the sign bit set: "
                "SGLang's caller selects with torch.topk, which ranks every NaN above +inf, where "
                "select=sglang (SGLang's radix top-k) ranks it below -inf; a disagreement between "
                "SGLang's selection paths, not a convention (see the op's notes)" % (len(rows), K, rows[0]))
    return None


def negative_nan_rows(live, K):
    """Rows with more than K keys (the selecting path) holding a NaN with the sign bit set among
    their first len keys."""
    W = int(live.scalar("width")) if "width" in live.inp else live.inp["scores"].shape[1]
    scores = live.inp["scores"][:, :W]
    lens = live.inp["lens"].long().clamp(0, W)
    inside = torch.arange(W, device=scores.device)[None, :] < lens[:, None]
    neg_nan = torch.isnan(scores) & torch.signbit(scores) & inside
    return (neg_nan.any(dim=1) & (lens > K)).nonzero().flatten().tolist()


def token_table(live, B, W):
    """The caller's req_to_token rows: token t of row b -> its slot (the page transform of
    ref/indexer_topk.hpp applied to every t < width), or t itself without a page table."""
    dev = live.inp["scores"].device
    t = torch.arange(W, device=dev, dtype=torch.int64)
    if "page_table" not in live.inp:
        return t[None, :].expand(B, W).to(torch.int32).contiguous()
    bits = int(live.scalar("page_bits"))
    pt = live.inp["page_table"].long()
    slot = (pt[:, t >> bits] << bits) | (t & ((1 << bits) - 1))
    return slot.to(torch.int32).contiguous()


def publish(fn, live):
    """The SM90 fp4 indexer's caller: scores past each row's length are -inf (the logits kernel
    writes none there), idx = scores.topk(k, sorted=False), outputs pre-filled with -1, then
    sort_map_topk(idx, lens, req, req_to_token, pages, raw, ratio=1)."""
    W = int(live.scalar("width")) if "width" in live.inp else live.inp["scores"].shape[1]
    scores = live.inp["scores"][:, :W].float()
    B, K = scores.shape[0], int(live.scalar("K"))
    lens = live.inp["lens"].long().clamp(0, W)
    col = torch.arange(W, device=scores.device)[None, :]
    scores = torch.where(col < lens[:, None], scores, torch.full_like(scores, float("-inf")))
    k = min(K, W)
    idx = scores.topk(k, dim=-1, sorted=False).indices.contiguous()
    pages = live.out["out"]
    pages.fill_(-1)
    raw = live.out.get("raw")
    if raw is not None:
        raw.fill_(-1)
    req = torch.arange(B, device=scores.device, dtype=torch.int64)
    fn(idx, lens.contiguous(), req, token_table(live, B, W), pages, raw, 1)


register(Op(
    family="indexer_topk",
    name="sm90_fp4_topk.sort_map_topk",
    module="sglang.kernels.ops.attention.dsv4.sm90_fp4_topk",
    attr="sort_map_topk",
    platforms=("cuda",),
    backend="triton",
    sweeps=("gpu",),
    shape={"sorted": "", "select": "sglang"},
    applies=applies,
    call=publish,
    standin="dsv4ci.standins.indexer_topk:sort_map_topk",
    files=("python/sglang/kernels/ops/attention/dsv4/sm90_fp4_topk.py",),
    notes="Selection is torch.topk over the row, as SGLang's SM90 static-verification decode "
          "selection calls it (try_sm90_decode: idx = scores.topk(k, dim=-1, sorted=False)."
          "indices, then sort_map_topk; sort_map_topk's docstring: selection and tie-breaking "
          "stay in PyTorch). Its tie order is any (the foreign verdict accepts any tied index at "
          "the cut-off). torch.topk ranks every NaN above +inf, where SGLang's radix top-k "
          "(jit_kernel topk_v1.cuh / topk_v2.cuh, the reference's select=sglang) ranks a NaN "
          "with the sign bit set below -inf: SGLang's two paths disagree on such a row, so the "
          "op skips a case with one in a row longer than K (the trivial path is unaffected). "
          "With len <= K and a -inf score inside the row, "
          "topk may take a -inf key past the length instead, published as -1, where the trivial "
          "path lists 0..len-1.",
))
