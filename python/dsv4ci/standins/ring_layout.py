"""Plain-torch stand-ins of SGLang's DSV4 sliding-window ring layouts (CPU-capable).

  write_v4_paged_decode_indices      srt/layers/attention/dsv4/unified_kv_kernels/paged_decode_indices.py
  build_commit_inject_layout_triton  srt/speculative/dspark_components/kernels/commit_inject_layout.py
"""

from types import SimpleNamespace

import torch


def write_v4_paged_decode_indices(*, state_slot_per_seq, batch_id_per_token, positions, swa_indptr,
                                  csa_indptr, hca_indptr, swa_indices, csa_indices, hca_indices, T,
                                  win, ring_stride):
    """_v4_paged_decode_indices_kernel per token t: bid < 0 leaves the outputs untouched; else
    n = min(pos + 1, win) rows slot * ring_stride + (pos - n + 1 + i) % ring_stride at each
    buffer's indptr[t] (Triton's % keeps the dividend's sign)."""
    for t in range(T):
        bid = int(batch_id_per_token[t])
        if bid < 0:
            continue
        slot, pos = int(state_slot_per_seq[bid]), int(positions[t])
        n = min(pos + 1, win)
        for i in range(max(n, 0)):
            a = pos - n + 1 + i
            row = slot * ring_stride + int(torch.fmod(torch.tensor(a), ring_stride))
            for idx, ptr in ((swa_indices, swa_indptr), (csa_indices, csa_indptr),
                             (hca_indices, hca_indptr)):
                idx[int(ptr[t]) + i] = row


def build_commit_inject_layout_triton(*, req_pool_indices, req_to_token, prefix_lens,
                                      block_pos_offsets, full_to_swa_mapping, commit_lens, stride):
    """_commit_inject_layout_kernel: token (r, c) at position prefix_lens[r] + offsets[c] gets
    swa_loc = full_to_swa_mapping[req_to_token[req_pool_indices[r], position]] (int32), -1 where
    c >= commit_lens[r]."""
    prefix = prefix_lens.long()[:, None] + block_pos_offsets.long()[None, :stride]
    rp = req_pool_indices.long()[:, None].expand_as(prefix)
    full = req_to_token.long()[rp, prefix]
    swa = full_to_swa_mapping[full].to(torch.int32)
    col = torch.arange(stride)[None, :]
    swa = torch.where(col < commit_lens.long()[:, None], swa, torch.full_like(swa, -1))
    return SimpleNamespace(swa_loc=swa.reshape(-1), positions=prefix.reshape(-1))
