"""candidate_blocks: SGLang's level-one block selection of the two-level indexer mapped onto the
family's case (blocks [B, nb], keys [B, K]). The sglang sweep's cases are level one alone (K=0:
no in.K, blocks the only output), what SGLang's ops publish; on the others the mapping runs level
two in torch over the op's blocks."""

import torch

from ..ops import Op, register

_STANDIN = "dsv4ci.standins.candidate_blocks:"
_CUDA = "python/sglang/kernels/ops/attention/dsv4/candidate_blocks.py"
_HIP = "python/sglang/kernels/ops/attention/dsv4/candidate_blocks_hip.py"


def logits_of(live):
    """SGLang's [rows, width] fp32 logits: the case's score rows up to in.width (a strided view)."""
    scores = live.inp["scores"]
    width = int(live.case.inputs["width"]) if "width" in live.case.inputs else scores.shape[1]
    return scores[:, :width]


def keys_within(logits, lens, blocks, block_size, K):
    """Level two as SGLang's callers run it after level one: the top K of the logits at positions
    < len inside the kept blocks (blocks -1 padded), NaN and -inf dropped after the top-k,
    ascending, -1 padded to K. (SGLang's own level two is a top-k op of the indexer_topk family.)"""
    rows, width = logits.shape
    pos = torch.arange(width, device=logits.device)
    kept = torch.zeros((rows, -(-width // block_size) + 1), dtype=torch.bool, device=logits.device)
    b = blocks.to(torch.int64)
    kept.scatter_(1, torch.where(b >= 0, b, torch.full_like(b, kept.shape[1] - 1)), True)
    kept[:, -1] = False
    visible = kept.gather(1, (pos // block_size).expand(rows, width)) & (pos < lens.to(torch.int64).unsqueeze(1))
    x = torch.where(visible, logits.float(), torch.full_like(logits, float("-inf"), dtype=torch.float32))
    top = x.topk(min(K, width), dim=-1)
    idx = torch.where(top.values > float("-inf"), top.indices, torch.full_like(top.indices, width))
    idx = idx.sort(dim=-1).values
    idx = torch.where(idx < width, idx, torch.full_like(idx, -1)).to(torch.int32)
    pad = torch.full((rows, K - idx.shape[1]), -1, dtype=torch.int32, device=idx.device)
    return torch.cat([idx, pad], dim=1)


def _sizes(live):
    """(bs, nb, K); K None for a case of level one alone (no in.K)."""
    c = live.case.inputs
    return int(c["bs"]), int(c["nb"]), int(c["K"]) if "K" in c else None


def _outputs(live, logits, lens, blocks, bs, K):
    """blocks, and level two's keys where the case has them."""
    if K is None:
        return {"blocks": blocks}
    return {"blocks": blocks, "keys": keys_within(logits, lens, blocks, bs, K)}


def _call_cuda(fn, live):
    bs, nb, K = _sizes(live)
    logits, lens = logits_of(live), live.inp["lens"]
    indices, valid = fn(logits, lens.reshape(-1).contiguous(), topk_blocks=nb, block_size=bs)
    # SGLang publishes the top-k in score order; an invalid one (score -inf or NaN) as -1.
    ids = torch.where(valid, indices, torch.full_like(indices, -1)).to(torch.int32)
    blocks = torch.cat([ids, torch.full((ids.shape[0], nb - ids.shape[1]), -1, dtype=torch.int32,
                                        device=ids.device)], dim=1)
    return _outputs(live, logits, lens, blocks, bs, K)


def _call_hip(fn, live):
    bs, nb, K = _sizes(live)
    logits, lens = logits_of(live), live.inp["lens"]
    blocks = fn(logits, lens, topk_blocks=nb, block_size=bs).ids
    return _outputs(live, logits, lens, blocks, bs, K)


def _hip_applies(live):
    if live.ivar("bs") is not None and live.ivar("bs") & (live.ivar("bs") - 1):
        return f"bs={live.ivar('bs')}: candidate_blocks_hip asserts a power-of-two block size"
    return None


def _cuda_applies(live):
    bs = live.ivar("bs")
    return None if bs is None or 0 < bs <= 1024 else f"bs={bs}: SGLang takes its torch path past 1024"


register(Op(
    family="candidate_blocks", name="candidate_blocks.candidate_block_indices",
    module="sglang.kernels.ops.attention.dsv4.candidate_blocks", attr="candidate_block_indices",
    platforms=("cuda",), backend="triton", sweeps=("gpu", "sglang"), applies=_cuda_applies,
    call=_call_cuda,
    standin=_STANDIN + "candidate_block_indices", files=(_CUDA,),
    notes="Level one of block_math.select_candidate_block_indices on CUDA: Triton block maxima "
          "(NaN propagating), the newest block +inf, torch.topk (ties in torch's order), valid = "
          "score > -inf (a NaN block takes a place and is dropped). keys: level two run by the "
          "mapping in torch over the op's blocks (none on the sglang sweep: level one alone)."))

register(Op(
    family="candidate_blocks", name="candidate_blocks_hip.select_candidate_blocks_hip",
    module="sglang.kernels.ops.attention.dsv4.candidate_blocks_hip",
    attr="select_candidate_blocks_hip",
    platforms=("hip",), backend="triton", sweeps=("gpu", "sglang"), applies=_hip_applies,
    call=_call_hip,
    standin=_STANDIN + "select_candidate_blocks_hip", files=(_HIP,),
    notes="Its docstring: 'as a set per row the ids equal the reference's select_candidate_blocks'. "
          "Its _candidate_block_scores_kernel takes tl.max, which skips NaN, where the reference "
          "(torch amax) makes a block holding a NaN score NaN and drops it; and its torch.topk branch "
          "masks only scores == -inf, so a NaN block would stay: a block with a NaN key is then "
          "chosen by its finite maximum (MISMATCH on hostile cases). nb = 2048 takes the sgl-kernel "
          "top-k v2 instead of torch.topk. keys: level two run by the mapping in torch (SGLang's is "
          "topk_within_candidate_blocks_hip on the sgl-kernel top-k; none on the sglang sweep: "
          "level one alone)."))
