"""ring_layout's peer: each launcher whose inputs the case holds, as index arithmetic on tensors."""

import torch

from . import Peer, scalar


def token_locs(slot, pos, final_pos, ring, win, n_slots):
    """slot * ring + pos % ring; -1 for padding, a bad slot or position, or a token before the
    window of its chunk's final position."""
    ok = (slot >= 0) & (slot < n_slots) & (pos >= 0)
    if final_pos is not None:
        ok &= ~((final_pos >= 0) & (pos <= final_pos - win))
    return torch.where(ok, slot * ring + torch.remainder(pos, ring), torch.full_like(pos, -1))


def verify_locs(slot, vpos, commit, ring, n_slots):
    """[B, V]: the committed tokens' ring rows (col < commit_len), -1 elsewhere."""
    col = torch.arange(vpos.shape[1], device=vpos.device)
    ok = (col < commit.long()[:, None]) & ((slot >= 0) & (slot < n_slots))[:, None] & (vpos >= 0)
    rows = slot[:, None] * ring + torch.remainder(vpos, ring)
    return torch.where(ok, rows, torch.full_like(vpos, -1))


def window_rows(bid, pos, slot, rows_start, ring, win, n_slots):
    """min(pos + 1, win) rows a token, oldest first, packed by a cumulative sum; scattered into
    the start buffer (one spare element takes the unused lanes)."""
    B, D = slot.shape[0], bid.shape[0]
    b = bid.long()
    s = slot[b.clamp(0, max(B - 1, 0))] if B else torch.full_like(pos, -1)
    ok = (b >= 0) & (b < B) & (s >= 0) & (s < n_slots) & (pos >= 0)
    n = torch.where(ok, torch.clamp(pos + 1, max=win), torch.zeros_like(pos))
    indptr = torch.cat([n.new_zeros(1), torch.cumsum(n, 0)])
    i = torch.arange(win, device=pos.device)
    dense = s[:, None] * ring + torch.remainder(pos[:, None] - n[:, None] + 1 + i, ring)
    at = torch.where(i < n[:, None], indptr[:-1, None] + i, torch.full_like(dense, D * win))
    spare = torch.cat([rows_start, rows_start.new_zeros(1)])
    rows = spare.scatter(0, at.reshape(-1), dense.reshape(-1).to(rows_start.dtype))[:-1]
    return indptr.to(torch.int32), rows


def prefill_slots(req_slot, indptr, pos):
    """Token t of request b (the last b with indptr[b] <= t) gets req_slot[b] and the position of
    the request's last token; tokens of no request, or of one ending past T, get -1."""
    B, T = req_slot.shape[0], pos.shape[0]
    t = torch.arange(T, device=pos.device)
    b = torch.searchsorted(indptr.long(), t, right=True) - 1
    bc = b.clamp(0, max(B - 1, 0))
    end = indptr.long()[(bc + 1).clamp(max=B)]
    ok = (b >= 0) & (b < B) & (end <= T)
    minus = torch.full_like(pos, -1)
    slot = torch.where(ok, req_slot[bc] if B else minus, minus)
    last = pos[(end - 1).clamp(0, max(T - 1, 0))] if T else minus
    return slot, torch.where(ok, last, minus)


def build(case):
    ring, win, n_slots = (int(scalar(case, k)) for k in ("ring", "win", "n_slots"))
    have = set(case.inputs)
    ops = [op for op, need in (("token_locs", {"slot", "pos"}),
                               ("verify_locs", {"batch_slot", "verify_pos", "commit_len"}),
                               ("window_rows", {"batch_id", "pos", "batch_slot"}),
                               ("prefill_slots", {"req_slot", "prefill_indptr", "pos"})) if need <= have]

    def fn(inp, start):
        out = {}
        if "token_locs" in ops:
            out["loc"] = token_locs(inp["slot"], inp["pos"], inp.get("final_pos"), ring, win, n_slots)
        if "verify_locs" in ops:
            out["verify_loc"] = verify_locs(inp["batch_slot"], inp["verify_pos"], inp["commit_len"],
                                            ring, n_slots)
        if "window_rows" in ops:
            out["indptr"], out["rows"] = window_rows(inp["batch_id"], inp["pos"], inp["batch_slot"],
                                                     start["rows"], ring, win, n_slots)
        if "prefill_slots" in ops:
            out["token_slot"], out["token_final_pos"] = prefill_slots(
                inp["req_slot"], inp["prefill_indptr"], inp["pos"])
        return out

    return Peer("ring rows " + "+".join(ops), fn)
