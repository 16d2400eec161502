"""ring_layout: SGLang's DSV4 ring read layout (window rows) and DSpark's verify write layout.

Case layout (replay/include/dsv4/cases/ring_layout.hpp): geometry in.ring, in.win, in.n_slots;
each launcher runs when its inputs are present (the drawn sweeps hold all four). SGLang's ops
each compute one launcher: an op applies to a case holding its launcher's inputs, reads only
those, and returns None for the other launchers' outputs (not produced, so not judged).

SGLang's kernels trust their inputs (no check of slots, batch ids or positions); its callers pass
the graph-padding sentinel (batch id -1) for tokens without a request, and the mappings pass it
for every token the project counts as an error. SGLang counts nothing: `errors` is not
judged (the mappings return None for it).
"""

import torch

from dsv4ci.ops import Op, register

GEOMETRY = {"ring", "win", "n_slots"}
LAUNCHERS = {
    "window_rows": {"batch_id", "pos", "batch_slot"},
    "verify_locs": {"batch_slot", "verify_pos", "commit_len"},
}
OUTPUTS = {"window_rows": {"indptr", "rows"}, "verify_locs": {"verify_loc"}}


def needs(launcher):
    """applies(live): None when the case holds the launcher's inputs, else which are missing."""
    def applies(live):
        missing = LAUNCHERS[launcher] - set(live.inp)
        if missing:
            return "no %s inputs (%s missing): SGLang's op computes %s only" % (
                launcher, ", ".join(sorted(missing)), launcher)
        return None
    return applies


def not_produced(live, launcher):
    """None for every output of the case but the launcher's (errors included: SGLang counts
    nothing), so only what SGLang's op computes is judged."""
    return {n: None for n in live.out if n not in OUTPUTS[launcher]}


def geometry(live):
    return tuple(int(live.scalar(k)) for k in ("ring", "win", "n_slots"))


def window_rows(fn, live):
    """write_v4_paged_decode_indices as build_decode_streams calls it: the caller's ragged indptr
    (min(pos + 1, win) rows a token), one buffer for the SWA, CSA and HCA streams."""
    ring, win, n_slots = geometry(live)
    bid, pos, slot = live.inp["batch_id"], live.inp["pos"], live.inp["batch_slot"]
    B = slot.shape[0]
    inb = (bid >= 0) & (bid < B)
    s = slot[bid.long().clamp(0, max(B - 1, 0))] if B else torch.full_like(pos, -1)
    ok = inb & (s >= 0) & (s < n_slots) & (pos >= 0)
    n = torch.where(ok, torch.minimum(pos + 1, torch.full_like(pos, win)), torch.zeros_like(pos))
    indptr = live.out["indptr"]
    indptr[:1].zero_()  # a device write: a host scalar cannot be copied while a graph is captured
    indptr[1:].copy_(torch.cumsum(n, 0))
    rows = live.out["rows"]
    fn(state_slot_per_seq=slot.clamp(-1, n_slots).to(torch.int32),
       batch_id_per_token=torch.where(ok, bid, torch.full_like(bid, -1)).to(torch.int32),
       positions=pos.contiguous(), swa_indptr=indptr, csa_indptr=indptr, hca_indptr=indptr,
       swa_indices=rows, csa_indices=rows, hca_indices=rows, T=bid.shape[0], win=win,
       ring_stride=ring)
    return not_produced(live, "window_rows")


def verify_locs(fn, live):
    """build_commit_inject_layout_triton with SGLang's allocator tables built from the case: one
    full-pool slot a verify token (req_to_token[b, c] = b*V + c at positions 0..V-1) and
    full_to_swa_mapping sending it to its ring row slot*ring + pos % ring (-1 for a token the
    project counts as an error); the op gathers and applies the commit mask."""
    ring, win, n_slots = geometry(live)
    slot, vpos, commit = live.inp["batch_slot"], live.inp["verify_pos"], live.inp["commit_len"]
    B, V = vpos.shape
    dev = vpos.device
    ok = (slot[:, None] >= 0) & (slot[:, None] < n_slots) & (vpos >= 0)
    swa = torch.where(ok, slot[:, None] * ring + torch.remainder(vpos, ring), torch.full_like(vpos, -1))
    res = fn(req_pool_indices=torch.arange(B, device=dev),
             req_to_token=torch.arange(B * V, device=dev, dtype=torch.int32).reshape(B, V),
             prefix_lens=torch.zeros(B, dtype=torch.int64, device=dev),
             block_pos_offsets=torch.arange(V, device=dev), full_to_swa_mapping=swa.reshape(-1),
             commit_lens=commit, stride=V)
    live.out["verify_loc"].copy_(res.swa_loc.reshape(B, V).to(torch.int64))
    return not_produced(live, "verify_locs")


register(Op(
    family="ring_layout",
    name="paged_decode_indices.write_v4_paged_decode_indices",
    module="sglang.srt.layers.attention.dsv4.unified_kv_kernels.paged_decode_indices",
    attr="write_v4_paged_decode_indices",
    platforms=("cuda", "hip"),
    backend="triton",
    sweeps=("gpu",),
    applies=needs("window_rows"),
    call=window_rows,
    standin="dsv4ci.standins.ring_layout:write_v4_paged_decode_indices",
    files=("python/sglang/srt/layers/attention/dsv4/unified_kv_kernels/paged_decode_indices.py",),
    notes="The window rows of a decode token: min(pos + 1, win) ring rows, oldest first, packed by "
          "the caller's indptr; batch id -1 leaves them untouched. A batch id past the batch, a "
          "slot outside the pool or a negative position is read unchecked "
          "(paged_decode_indices.py _v4_paged_decode_indices_kernel): the mapping sends those "
          "tokens as batch id -1 and counts them.",
))

register(Op(
    family="ring_layout",
    name="commit_inject_layout.build_commit_inject_layout_triton",
    module="sglang.srt.speculative.dspark_components.kernels.commit_inject_layout",
    attr="build_commit_inject_layout_triton",
    platforms=("cuda", "hip"),
    backend="triton",
    sweeps=("gpu",),
    applies=needs("verify_locs"),
    call=verify_locs,
    standin="dsv4ci.standins.ring_layout:build_commit_inject_layout_triton",
    files=("python/sglang/srt/speculative/dspark_components/kernels/commit_inject_layout.py",
           "python/sglang/srt/environ.py"),
    notes="DSpark's commit-inject layout: the verify token's SWA row from the allocator's "
          "full-to-SWA table, -1 where col >= commit_len (a commit length outside [0, V] acts "
          "clamped). The ring rows come from the table the mapping builds (SGLang's allocator "
          "keeps it), so the op is judged on its gather and its commit mask.",
))
