"""Plain-torch stand-ins of SGLang's DSV4 sparse decode ops (triton_flashmla.py's
flash_mla_with_kvcache_triton, compact_attention_hip.py), each with its function's signature and
convention, and the page readers they share."""

import math

import torch

# Bytes of one token's data and scale rows, values per scale, per layout (page_layout.hpp).
V41, V41_FP4, V4 = 0, 1, 2
_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _e4m3fn_table():
    t = []
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 7
        t.append(math.nan if (e == 15 and m == 7) else s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)))
    return torch.tensor(t, dtype=torch.float32)


E4M3FN = _e4m3fn_table()
E2M1 = torch.tensor(_E2M1 + [-v for v in _E2M1], dtype=torch.float32)


def _ue8m0(byte):
    x = torch.exp2(byte.float() - 127.0)
    return torch.where(byte == 255, torch.full_like(x, math.nan), x)


def dequantize(flat, layout, page_bytes, page_size, slots):
    """[n, 512] fp32 (bf16 values) of the tokens at `slots` of a pool (flat uint8, pages of
    page_bytes), read as SGLang's readers read them: code * scale in fp32, rounded once to bf16."""
    slots = slots.to(torch.int64)
    page, row = slots // page_size, slots % page_size
    base = page * page_bytes
    if layout == V4:
        data = base.unsqueeze(1) + row.unsqueeze(1) * 576
        codes = flat[data + torch.arange(448, device=flat.device)].to(torch.int64)
        sc = flat[(base + page_size * 576 + row * 8).unsqueeze(1) + torch.arange(448, device=flat.device) // 64]
        nope = (E4M3FN.to(flat.device)[codes] * _ue8m0(sc)).to(torch.bfloat16).float()
        raw = flat[data + 448 + torch.arange(128, device=flat.device)].reshape(-1, 64, 2).to(torch.int32)
        bits = (raw[..., 0] | (raw[..., 1] << 8)) << 16
        rope = bits.view(torch.float32).to(torch.bfloat16).float()
        return torch.cat([nope, rope], dim=1)
    if layout == V41:
        data = base.unsqueeze(1) + row.unsqueeze(1) * 512 + torch.arange(512, device=flat.device)
        codes = flat[data].to(torch.int64)
        sc = flat[(base + page_size * 512 + row * 16).unsqueeze(1) + torch.arange(512, device=flat.device) // 32]
        return (E4M3FN.to(flat.device)[codes] * _ue8m0(sc)).to(torch.bfloat16).float()
    if layout == V41_FP4:
        data = base.unsqueeze(1) + row.unsqueeze(1) * 256 + torch.arange(256, device=flat.device)
        b = flat[data].to(torch.int64)
        nib = torch.stack([b & 15, b >> 4], dim=-1).reshape(-1, 512)
        sc = flat[(base + page_size * 256 + row * 32).unsqueeze(1) + torch.arange(512, device=flat.device) // 16]
        return (E2M1.to(flat.device)[nib] * E4M3FN.to(flat.device)[sc.to(torch.int64)]).to(torch.bfloat16).float()
    raise ValueError(f"layout {layout}: the stand-ins read v41 (0), v41_fp4 (1) and v4 (2)")


def _layout_of(cache):
    return {576 + 8: V4, 512 + 16: V41, 256 + 32: V41_FP4}[cache.shape[-1]]


def _flat(cache):
    return cache.view(torch.uint8).as_strided((cache.shape[0] * cache.stride(0),), (1,))


def gather(cache, indices, lengths):
    """Per query row: the keys [rows, K, 512] of the valid columns (j < length, index in range),
    zeros in the others (SGLang's readers load them masked, other=0), and the validity mask
    [rows, K]."""
    rows, K = indices.shape
    capacity = cache.shape[0] * cache.shape[1]
    col = torch.arange(K, device=indices.device).unsqueeze(0)
    valid = (indices >= 0) & (indices < capacity) & (col < lengths.to(torch.int64).reshape(rows, 1))
    slots = torch.where(valid, indices.to(torch.int64), torch.zeros_like(indices, dtype=torch.int64))
    kv = dequantize(_flat(cache), _layout_of(cache), cache.stride(0), cache.shape[1], slots.reshape(-1))
    kv = torch.where(valid.reshape(-1, 1), kv, torch.zeros_like(kv))
    return kv.reshape(rows, K, 512), valid


def keys_of(q3, cache, indices, lengths, extra_cache, extra_indices, extra_lengths):
    kv, valid = gather(cache, indices.reshape(q3.shape[0], -1), lengths)
    if extra_cache is not None:
        ekv, evalid = gather(extra_cache, extra_indices.reshape(q3.shape[0], -1), extra_lengths)
        kv, valid = torch.cat([kv, ekv], dim=1), torch.cat([valid, evalid], dim=1)
    return kv, valid


def attend(q3, kv, valid, scale, sink, bf16_weights):
    """Scores x = scale q.k over the valid keys; out = sum e^x k / (sum e^x + e^sink); lse = log sum
    e^x (sink excluded, -inf without a key); weights rounded to bf16 when bf16_weights. No guard:
    a row with no key and no finite sink divides 0 by 0 and a +inf sink gives exp(inf - inf), NaN
    either way, as compact_attention_hip computes it."""
    x = torch.einsum("nhd,ntd->nht", q3.float(), kv) * scale
    x = torch.where(valid.unsqueeze(1), x, torch.full_like(x, -math.inf))
    lse = torch.logsumexp(x, dim=-1)
    m = x.amax(dim=-1) if sink is None else torch.maximum(x.amax(dim=-1), sink.float().unsqueeze(0))
    e = torch.exp(x - m.unsqueeze(-1))
    den = e.sum(dim=-1) + (0 if sink is None else torch.exp(sink.float().unsqueeze(0) - m))
    w = e / den.unsqueeze(-1)
    if bf16_weights:
        w = w.to(torch.bfloat16).float()
    return torch.einsum("nht,ntv->nhv", w, kv).to(torch.bfloat16), lse


def _flashmla_epilogue(x, valid, sink):
    """triton_flashmla.py's _softmax_epilogue_kernel on fp32 scores: lse_raw = log sum e^x (-inf
    for a row with no key), the sink merged as m_out + log(a + b) with its -inf guards, weights
    exp(x - lse) in bf16 (0 for a row with no key). A +inf sink gives b = exp(inf - inf) = NaN
    weights, as the kernel computes them."""
    x = torch.where(valid.unsqueeze(1), x, torch.full_like(x, -math.inf))
    lse_raw = torch.logsumexp(x, dim=-1)
    lonely = lse_raw == -math.inf
    lse_out = lse_raw
    if sink is not None:
        sk = sink.float().unsqueeze(0).expand_as(lse_raw)
        m_out = torch.maximum(lse_raw, sk)
        a = torch.where(lse_raw == -math.inf, torch.zeros_like(m_out), torch.exp(lse_raw - m_out))
        b = torch.where(m_out == -math.inf, torch.zeros_like(m_out), torch.exp(sk - m_out))
        lse_out = m_out + torch.log(a + b)
    lse_safe = torch.where(lonely, torch.zeros_like(lse_out), lse_out)
    return torch.exp(x - lse_safe.unsqueeze(-1)).to(torch.bfloat16), lse_raw


def flash_mla_with_kvcache_triton(q, k_cache, head_dim_v, block_table=None, cache_seqlens=None,
                                  tile_scheduler_metadata=None, num_splits=None, softmax_scale=None,
                                  causal=False, descale_q=None, descale_k=None, is_fp8_kvcache=False,
                                  indices=None, topk_length=None, attn_sink=None, extra_k_cache=None,
                                  extra_indices_in_kvcache=None, extra_topk_length=None,
                                  bf16_scores=True):
    """triton_flashmla.py: v4 pages gathered to bf16, scores from a bf16 GEMM (rounded to bf16),
    the fused softmax epilogue (bf16 weights, out 0 for a query with no key, NaN for a +inf sink),
    a bf16 PV product; the lse (sink excluded) +inf for a query with no key, as the comment at the
    epilogue's call states. Returns (out [B, s_q, H, D], lse [B, H, s_q]). bf16_scores=False
    (not SGLang's) keeps the scores in fp32, as FlashMLA does."""
    B, s_q, H, D = q.shape
    scale = softmax_scale if softmax_scale is not None else D ** -0.5
    rows = B * s_q
    q3 = q.reshape(rows, H, D)
    big = torch.full((rows,), indices.shape[-1], dtype=torch.int64, device=q.device)
    lens = topk_length if topk_length is not None else big
    elens = extra_topk_length
    if extra_k_cache is not None and elens is None:
        elens = torch.full((rows,), extra_indices_in_kvcache.shape[-1], dtype=torch.int64, device=q.device)
    kv, valid = keys_of(q3, k_cache, indices, lens, extra_k_cache, extra_indices_in_kvcache, elens)
    kvb = kv.to(torch.bfloat16)  # the gather's bf16 tile (the values are bf16 already)
    scores = torch.einsum("nhd,ntd->nht", q3.to(torch.bfloat16).float(), kvb.float())
    if bf16_scores:  # torch.einsum of bf16 operands returns bf16
        scores = scores.to(torch.bfloat16).float()
    scores = scores * scale
    w, lse = _flashmla_epilogue(scores, valid, attn_sink)
    out = torch.einsum("nht,ntv->nhv", w.float(), kvb.float()).to(torch.bfloat16)
    # The comment at the epilogue's call says it replaces "lse_for_out[lonely]=inf": the lse of a
    # row with no key is +inf (the kernel itself stores -inf; see the op's notes).
    lse = torch.where(lse == -math.inf, torch.full_like(lse, math.inf), lse)
    return out[..., :head_dim_v].reshape(B, s_q, H, head_dim_v), lse.reshape(B, s_q, H).permute(0, 2, 1)


def compact_attention_hip(q, cache, indices, lengths, sink, *, extra_cache=None, extra_indices=None,
                          extra_lengths=None, softmax_scale=512 ** -0.5, splits=None, inv_rope=None):
    """compact_attention_hip.py: v41 / v41_fp4 pages, fp32 probabilities, the sink in the
    denominator, the inverse RoPE of the bf16 output; 0 for a query with no key and a finite sink
    (as its test states), NaN for one with no key and no finite sink or a +inf sink (its kernel
    and aiter_sparse_split_reduce compute 0 / 0 and exp2(inf - inf) there). Any `splits` merges
    to the same output."""
    from .split_combine import inverse_rope_bf16

    kv, valid = keys_of(q, cache, indices, lengths, extra_cache, extra_indices, extra_lengths)
    out, _ = attend(q, kv, valid, softmax_scale, sink, False)
    if inv_rope is not None:
        out = inverse_rope_bf16(out, inv_rope[0].float(), inv_rope[1])
    return out
