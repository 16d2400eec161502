"""Plain-torch stand-ins of SGLang's split-KV reducers (aiter_sparse_decode_reduce.py on ROCm,
decode_attention_sm100.py's _combine on SM100), each with its function's signature and convention."""

import math

import torch

LOG2E = 1.4426950408889634


def _f32(x):
    return x.to(torch.float32)


def _fma(a, b, c):
    """fp32 fused multiply-add: the product exact in fp64, one rounding of the sum."""
    return _f32(a.double() * b.double() + c.double())


def inverse_rope_bf16(out, freqs, positions):
    """The inverse RoPE of bf16 rows [T, H, D] as SGLang rotates them: for each pair (x0, x1) of the
    last rope_dim values, fma(x0, c, x1 s) and fma(x1, c, -(x0 s)), rounded to bf16 again."""
    rd = freqs.shape[1]
    D = out.shape[-1]
    x = out[..., D - rd:].float().reshape(*out.shape[:-1], rd // 2, 2)
    cs = freqs[positions.to(torch.int64)].reshape(-1, 1, rd // 2, 2)
    c, s = cs[..., 0], cs[..., 1]
    x0, x1 = x[..., 0], x[..., 1]
    r0 = _fma(x0, c, _f32(x1 * s))
    r1 = _fma(x1, c, -_f32(x0 * s))
    rot = torch.stack([r0, r1], dim=-1).reshape(*out.shape[:-1], rd).to(torch.bfloat16)
    return torch.cat([out[..., : D - rd], rot], dim=-1)


def aiter_sparse_split_reduce(part_acc, part_m, part_l, attn_sink, out_dtype=torch.bfloat16,
                              inv_rope=None):
    """The ROCm reducer as aiter_sparse_decode_reduce.py computes it: m in the base-2 domain,
    M = max(max_s m_s, sink log2 e), w_s = exp2(m_s - M), l and acc accumulated by fma in split
    order, the sink adding exp2(sink log2 e - M); out = acc / l in the output dtype; then the
    inverse RoPE of that output. No guard: a row with no key and no sink (M = -inf) or a +inf sink
    (M = +inf) divides through NaN weights and writes NaN, as SGLang's kernel does."""
    T, S, H, D = part_acc.shape
    m = part_m.float()
    M = m.amax(dim=1)  # [T, H]
    sink = None
    if attn_sink is not None:
        sink = _f32(attn_sink.float() * LOG2E).unsqueeze(0).expand(T, H)
        M = torch.maximum(M, sink)
    l_fin = torch.zeros((T, H), dtype=torch.float32, device=part_acc.device)
    acc = torch.zeros((T, H, D), dtype=torch.float32, device=part_acc.device)
    for s in range(S):
        w = torch.exp2(m[:, s] - M)
        l_fin = _fma(w, part_l[:, s].float(), l_fin)
        acc = _fma(w.unsqueeze(-1), part_acc[:, s].float(), acc)
    if sink is not None:
        l_fin = l_fin + torch.exp2(sink - M)
    out = (acc / l_fin.unsqueeze(-1)).to(out_dtype)
    if inv_rope is not None:
        out = inverse_rope_bf16(out, inv_rope[0].float(), inv_rope[1])
    return out


class _Kernel:
    """A stand-in launched like a Triton kernel: kernel[grid](*args, **meta)."""

    def __init__(self, body):
        self.body = body

    def __getitem__(self, grid):
        return lambda *args, **meta: self.body(*args, **meta)


def _combine_body(PART, MAX, SUM, SINK, OUT, NT, ST, H, BD, num_warps=4):
    """SM100's _combine: natural m, a split counts when its sum > 0, m = max(max m_s, sink) (0 when
    infinite), out = sum(acc_s e^(m_s - m)) / (sum(l_s e^(m_s - m)) + e^(sink - m)), 0 where the
    denominator is not > 0 or the sink is +inf; stored to bf16."""
    B = OUT.shape[0]
    den = SUM.reshape(B, NT, H).float()
    mx = torch.where(den > 0, MAX.reshape(B, NT, H).float(), torch.full_like(den, -math.inf))
    sink = SINK[:H].float().unsqueeze(0)
    m = torch.maximum(mx.amax(dim=1), sink)
    m = torch.where(m.abs() == math.inf, torch.zeros_like(m), m)
    factor = torch.exp(mx - m.unsqueeze(1))
    denominator = (den * factor).sum(dim=1) + torch.exp(sink - m)
    vals = PART.reshape(B, NT, H, 512).float()
    out = (vals * factor.unsqueeze(-1)).sum(dim=1) / denominator.unsqueeze(-1)
    ok = (denominator > 0) & (sink != math.inf)
    out = torch.where(ok.unsqueeze(-1), out, torch.zeros_like(out))
    OUT.copy_(out.reshape(OUT.shape).to(OUT.dtype))


_combine = _Kernel(_combine_body)
