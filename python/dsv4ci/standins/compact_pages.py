"""Plain-torch stand-ins of SGLang's DSV4 paged KV writer and readers (CPU-capable, no fp8 dtypes).

Each function has the signature of the SGLang function it stands for and follows its convention
as its code states it; fp8 bytes are uint8 tensors (torch 1.13 has no float8 dtypes), so a fp8
view of SGLang's becomes a byte tensor here.

  quant_to_nope_fp8_rope_bf16_pack_triton   kernels/ops/attention/dsv4/quant_k_cache.py
  SetKAndS.execute                          kernels/ops/attention/dsv4/index_buf_accessor.py
  dequantize_k_cache_paged                  kernels/ops/attention/dsv4/dequant_k_cache.py
"""

from dataclasses import dataclass

import torch

DIM_NOPE, DIM_ROPE, TILE = 448, 64, 64
NOPE_ROPE_BYTES = DIM_NOPE + 2 * DIM_ROPE  # 576
PADDED_SCALE_PER_TOKEN = DIM_NOPE // TILE + 1  # 7 scales + 1 pad byte

# The fp8 flavour SGLang's module picks: e4m3fn, or e4m3fnuz where is_fp8_fnuz() (gfx942).
FP8_FLAVOUR = "e4m3fn"
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def fp8_values(flavour):
    """fp32 value of each of the 256 codes of e4m3fn (bias 7, 0x7f/0xff NaN) or e4m3fnuz (bias 8,
    0x80 the only NaN, no -0)."""
    bias = 8 if flavour == "e4m3fnuz" else 7
    out = []
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 0xF, c & 7
        if flavour == "e4m3fnuz" and c == 0x80 or flavour == "e4m3fn" and (c & 0x7F) == 0x7F:
            out.append(float("nan"))
            continue
        v = m / 8 * 2.0 ** (1 - bias) if e == 0 else (1 + m / 8) * 2.0 ** (e - bias)
        out.append(-v if s else v)
    return torch.tensor(out, dtype=torch.float32)


def fp8_max(flavour):
    return 240.0 if flavour == "e4m3fnuz" else 448.0


def encode_fp8(x, flavour):
    """fp32 -> fp8 code bytes, round to nearest even; |x| <= the flavour's maximum or NaN (the
    values SGLang clamps before its cast). NaN -> the NaN code."""
    top = 0x80 if flavour == "e4m3fnuz" else 0x7F  # the finite positive codes: 0 .. top-1
    # The boundaries as a tensor of their own, not a slice of the table: Inductor cannot lower
    # bucketize over a sliced view (NotImplementedError: SliceView, torch 2.11).
    pos = fp8_values(flavour)[:top].clone().to(x.device)
    a = x.abs()
    hi = torch.bucketize(a, pos).clamp(max=top - 1)  # first code with value >= |x|
    lo = (hi - 1).clamp(min=0)
    dl, dh = a - pos[lo], pos[hi] - a
    pick = torch.where((dh < dl) | ((dh == dl) & (hi % 2 == 0)), hi, lo)
    pick = torch.where(a >= pos[top - 1], torch.full_like(pick, top - 1), pick)
    neg = torch.signbit(x)
    if flavour == "e4m3fnuz":
        code = torch.where(neg & (pick != 0), pick | 0x80, pick)
        code = torch.where(torch.isnan(x), torch.full_like(code, 0x80), code)
    else:
        code = torch.where(neg, pick | 0x80, pick)
        code = torch.where(torch.isnan(x), torch.full_like(code, 0x7F), code)
    return code.to(torch.uint8)


def ceil_log2(q):
    """ceil(log2(q)) of positive normal fp32 q from its bits (exact at powers of two); +inf gives
    a large value that overflows as Triton's saturating int32 conversion does."""
    b = q.contiguous().view(torch.int32)
    e = ((b >> 23) & 0xFF) - 127 + ((b & 0x7FFFFF) != 0).to(torch.int32)
    return torch.where(torch.isinf(q), torch.full_like(e, 2**31 - 1), e)


@dataclass
class NopeFp8RopeBf16Pack:
    k_nope_fp8: torch.Tensor  # uint8 codes [T, 448]
    k_rope_bf16: torch.Tensor  # [T, 64]
    scale_k_nope_ue8m0: torch.Tensor  # uint8 [T, 7]


def quant_to_nope_fp8_rope_bf16_pack_triton(k_bf16, flavour=FP8_FLAVOUR):
    """_quant_k_cache_fused_kernel per 64-value tile: amax = tl.max(|x|) (NaN not propagated),
    scale = 2^ceil(log2(max(amax, 1e-8) / M)), codes = fp8(clamp(x / scale, -M, M)) where a NaN
    clamps to -M, the scale byte (exponent + 127) as uint8 (int32 wrap-around for +inf: 0x7e)."""
    assert k_bf16.dtype == torch.bfloat16 and k_bf16.shape[-1] == 512
    T = k_bf16.shape[0]
    M = fp8_max(flavour)
    x = k_bf16[:, :DIM_NOPE].float().reshape(T, DIM_NOPE // TILE, TILE)
    a = x.abs()
    amax = torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(dim=-1)
    scale = torch.clamp(amax, min=1e-8) / M
    e = ceil_log2(scale)
    inv = torch.where(torch.isinf(scale), torch.zeros_like(scale), 1.0 / torch.ldexp(torch.ones_like(scale), e.float()))
    y = x * inv.unsqueeze(-1)
    y = torch.where(torch.isnan(y), torch.full_like(y, -M), y.clamp(-M, M))
    codes = encode_fp8(y, flavour).reshape(T, DIM_NOPE)
    sbyte = ((e.to(torch.int64) + 127) & 0xFF).to(torch.uint8)
    return NopeFp8RopeBf16Pack(codes, k_bf16[:, DIM_NOPE:].clone(), sbyte)


class SetKAndS:
    """index_buf_accessor.SetKAndS: token t's 448 codes and 64 bf16 values at row loc % P of page
    loc // P (576 bytes a row), its 7 scale bytes after the page's P rows (8 bytes a row; the pad
    byte untouched). Rows with write_mask False are skipped; loc is not bounds-checked."""

    @classmethod
    def execute(cls, pool, buf, loc, nope_fp8_rope_bf16_pack, dcp_world_size=1, dcp_rank=0,
                write_mask=None):
        assert dcp_world_size == 1 and buf.dtype == torch.uint8
        P = pool.page_size
        p = nope_fp8_rope_bf16_pack
        rope = p.k_rope_bf16.contiguous().view(torch.int16).view(torch.uint8).reshape(-1, 128)
        flat = buf.view(-1)
        for t in range(loc.shape[0]):
            if write_mask is not None and not bool(write_mask[t]):
                continue
            s = int(loc[t])
            base = s // P * buf.shape[1]
            row = base + s % P * NOPE_ROPE_BYTES
            flat[row:row + DIM_NOPE] = p.k_nope_fp8[t]
            flat[row + DIM_NOPE:row + NOPE_ROPE_BYTES] = rope[t]
            sc = base + P * NOPE_ROPE_BYTES + s % P * PADDED_SCALE_PER_TOKEN
            flat[sc:sc + 7] = p.scale_k_nope_ue8m0[t]


def _e2m1(codes):
    mag = torch.tensor(E2M1, dtype=torch.float32)[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -mag, mag)


def _ue8m0(s):
    """2^(s - 127) exactly; 0 -> 2^-127, 255 -> NaN (dequantize_k_cache_paged_v41's reader)."""
    v = torch.ldexp(torch.ones(s.shape), s.float() - 127)
    return torch.where(s == 255, torch.full_like(v, float("nan")), v)


def _bf16_from_f32(v):
    """Triton's fp32 -> bf16 cast (.to(tl.bfloat16), round to nearest even): every NaN becomes
    0x7fff, whatever its sign and payload (PTX cvt.rn.bf16.f32's canonical NaN; Triton's AMD
    lowering before CDNA4 selects 0x7FFF0000 for a NaN). torch's CPU cast gives 0xffff instead."""
    b = v.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    r = torch.where(torch.isnan(v), torch.full_like(r, 0x7FFF), r)
    return r.to(torch.int32).to(torch.int16).view(torch.bfloat16)


def dequantize_k_cache_paged(quant_k_cache, page_table_1_flattened, page_size, out=None,
                             layout="v4", flavour=FP8_FLAVOUR):
    """Rows page_table_1_flattened[i] of the paged cache -> out [n, 1, 512] bf16: v4 codes times
    exp2(scale - 127) (255: inf), the rope part's stored bf16; v41 codes times the ue8m0 scale;
    v41_fp4 e2m1 codes times the e4m3fn scale; each product rounded once to bf16."""
    buf = quant_k_cache.view(torch.uint8)
    n = page_table_1_flattened.shape[0]
    if out is None:
        out = torch.empty((n, 1, 512), dtype=torch.bfloat16)
    P, pb = page_size, buf.shape[-1]
    flat = buf.reshape(-1)
    for i in range(n):
        s = int(page_table_1_flattened[i])
        base = s // P * pb
        if layout in ("v4", "v4_fnuz"):
            row = flat[base + s % P * NOPE_ROPE_BYTES:][:NOPE_ROPE_BYTES]
            sc = flat[base + P * NOPE_ROPE_BYTES + s % P * PADDED_SCALE_PER_TOKEN:][:7]
            vals = fp8_values(flavour)[row[:DIM_NOPE].long()].reshape(7, TILE)
            scale = torch.ldexp(torch.ones(7), sc.float() - 127)
            scale = torch.where(sc == 255, torch.full_like(scale, float("inf")), scale)
            out[i, 0, :DIM_NOPE] = _bf16_from_f32((vals * scale[:, None]).reshape(-1))
            out[i, 0, DIM_NOPE:] = row[DIM_NOPE:].clone().view(torch.bfloat16)
        elif layout == "v41":
            row = flat[base + s % P * 512:][:512]
            sc = flat[base + P * 512 + s % P * 16:][:16]
            vals = fp8_values("e4m3fn")[row.long()].reshape(16, 32)
            out[i, 0] = _bf16_from_f32((vals * _ue8m0(sc)[:, None]).reshape(-1))
        elif layout == "v41_fp4":
            row = flat[base + s % P * 256:][:256]
            sc = flat[base + P * 256 + s % P * 32:][:32]
            codes = torch.stack([row & 0xF, row >> 4], dim=-1).reshape(-1)
            scale = fp8_values("e4m3fn")[sc.long()].repeat_interleave(16)
            out[i, 0] = _bf16_from_f32(_e2m1(codes) * scale)
        else:
            raise ValueError("dequantize_k_cache_paged: layout %r is not v4, v41 or v41_fp4" % layout)
    return out


def quant_to_nope_fp8_rope_bf16_pack_triton_fnuz(k_bf16):
    """The writer as SGLang's module runs it where is_fp8_fnuz() (gfx942: e4m3fnuz, M = 240)."""
    return quant_to_nope_fp8_rope_bf16_pack_triton(k_bf16, "e4m3fnuz")


def dequantize_k_cache_paged_fnuz(quant_k_cache, page_table_1_flattened, page_size, out=None,
                                  layout="v4"):
    """The reader as SGLang's module runs it where is_fp8_fnuz() (gfx942)."""
    return dequantize_k_cache_paged(quant_k_cache, page_table_1_flattened, page_size, out, layout,
                                    "e4m3fnuz")
