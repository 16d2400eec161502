"""Plain-torch stand-ins of SGLang's level-one candidate-block selection (candidate_blocks.py on
CUDA, candidate_blocks_hip.py on ROCm), each with its function's signature and convention."""

from collections import namedtuple

import torch

NEG_INF = float("-inf")

# The field of candidate_blocks_hip.CandidateBlocks the mapping reads.
CandidateBlocks = namedtuple("CandidateBlocks", ["ids", "compact_lens", "block_size"])


def block_scores(logits, seq_lens, block_size, propagate_nan=True):
    """[rows, ceil(width / block_size)] block maxima over the positions < seq_len (-inf elsewhere);
    the block holding a row's newest position scores +inf. propagate_nan=False is a maximum that
    skips NaN (Triton's tl.max), True one where a NaN makes the block NaN."""
    rows, width = logits.shape
    nb = -(-width // block_size)
    cols = torch.arange(nb * block_size, device=logits.device)
    lens = seq_lens.to(torch.int64).reshape(rows, 1)
    x = torch.full((rows, nb * block_size), NEG_INF, dtype=torch.float32, device=logits.device)
    x[:, :width] = logits.float()
    x = torch.where(cols.unsqueeze(0) < lens, x, torch.full_like(x, NEG_INF)).reshape(rows, nb, block_size)
    if propagate_nan:
        s = x.amax(dim=-1)
        s = torch.where(torch.isnan(x).any(dim=-1), torch.full_like(s, float("nan")), s)
    else:
        s = torch.where(torch.isnan(x), torch.full_like(x, NEG_INF), x).amax(dim=-1)
        s = torch.where(torch.isnan(x).all(dim=-1), torch.full_like(s, float("nan")), s)
    newest = torch.where(lens > 0, (lens - 1) // block_size, torch.full_like(lens, -1))
    return torch.where(torch.arange(nb, device=logits.device).unsqueeze(0) == newest,
                       torch.full_like(s, float("inf")), s)


def candidate_block_indices(logits, seq_lens, *, topk_blocks, block_size):
    """candidate_blocks.py: the top min(topk_blocks, blocks) block scores (NaN propagating, NaN the
    largest), and whether each scores above -inf (a NaN block is not)."""
    s = block_scores(logits, seq_lens, block_size)
    top = s.topk(min(topk_blocks, s.shape[1]), dim=-1)
    return top.indices, top.values > NEG_INF


def select_candidate_blocks_hip(logits, seq_lens, *, topk_blocks, block_size):
    """candidate_blocks_hip.py as its docstring states it: as a set per row the ids equal the
    reference select_candidate_blocks (NaN-propagating block maxima, a block kept when it scores
    above -inf), -1 padded to topk_blocks."""
    s = block_scores(logits, seq_lens, block_size)
    top = s.topk(min(topk_blocks, s.shape[1]), dim=-1)
    ids = torch.where(top.values > NEG_INF, top.indices, torch.full_like(top.indices, -1)).to(torch.int32)
    pad = torch.full((ids.shape[0], topk_blocks - ids.shape[1]), -1, dtype=torch.int32, device=ids.device)
    n = (seq_lens.to(torch.int64) + block_size - 1) // block_size
    return CandidateBlocks(torch.cat([ids, pad], dim=1),
                           (n.clamp(max=topk_blocks) * block_size).to(torch.int32), block_size)
