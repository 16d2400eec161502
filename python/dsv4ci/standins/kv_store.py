"""Plain-torch stand-ins of SGLang's DSV4 KV row store and fused RMSNorm + RoPE (CPU-capable).

  _scatter_rows                    srt/layers/attention/dsv4/unified_kv_kernels/runtime.py
  fused_norm_rope_inplace_triton   kernels/ops/attention/deepseek_v4_rope.py
"""

import torch


def _scatter_rows(src, loc, dst, *, dst_base=0, valid=None):
    """_scatter_rows_kernel: row r of src goes to dst row dst_base + loc[r]; rows with valid 0 or
    loc < 0 are skipped; loc is not bounds-checked."""
    assert src.is_contiguous() and loc.is_contiguous()
    keep = loc >= 0
    if valid is not None:
        keep &= valid != 0
    rows = keep.nonzero().flatten()
    dst[dst_base + loc[rows]] = src[rows].to(dst.dtype)


def fused_norm_rope_inplace_triton(kv, weight, eps, freqs_cis, positions=None):
    """_fused_norm_rope_kernel per row, in fp32: ss = sum(x*x), inv = rsqrt(ss/head_dim + eps),
    y = x*inv*w, interleaved RoPE (r*c - m*s, r*s + m*c) on the last rope_dim values from
    freqs_cis[position], one cast back to kv's dtype, in place."""
    assert kv.dim() == 2 and kv.stride(-1) == 1
    M, D = kv.shape
    table = torch.view_as_real(freqs_cis).flatten(-2)
    rd = table.shape[-1]
    if M == 0:
        return
    x = kv.float()
    inv = torch.rsqrt((x * x).sum(dim=1, keepdim=True) / D + eps)
    w = weight.float() if weight is not None else torch.ones(D)
    y = x * inv * w
    pos = positions.long() if positions is not None else torch.arange(M)
    f = table[pos].float()
    r, m = y[:, D - rd::2], y[:, D - rd + 1::2]
    c, s = f[:, 0::2], f[:, 1::2]
    y[:, D - rd::2], y[:, D - rd + 1::2] = r * c - m * s, r * s + m * c
    kv.copy_(y.to(kv.dtype))
