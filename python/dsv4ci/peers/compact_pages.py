"""compact_pages' peer: SGLang's paged KV layouts read and written with byte index arithmetic on
the pool: dequantise as table lookups times the scales (every layout, slot and page forms), and
quantise as SGLang's torch references write (v41's ue8m0 tiles, v41_fp4's e4m3fn-scaled e2m1 tiles;
v4's through the stand-in writer)."""

import torch

from ..standins.compact_pages import ceil_log2, encode_fp8, fp8_values, quant_to_nope_fp8_rope_bf16_pack_triton
from . import Peer, Unmodelled, scalar

NAMES = {0: "v41", 1: "v41_fp4", 2: "v4", 3: "v4_fnuz"}
# Bytes of a token's data row and scale row, and the page alignment, per layout.
GEOMETRY = {0: (512, 16, 512), 1: (256, 32, 256), 2: (576, 8, 576), 3: (576, 8, 576)}
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# The midpoints between consecutive e2m1 magnitudes; a tie goes to the even code (up at odd i).
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _ue8m0(s, nan_at_255):
    v = torch.exp2(s.float() - 127)
    return torch.where(s == 255, torch.full_like(v, float("nan" if nan_at_255 else "inf")), v)


def rows_of(flat, slots, layout, P, page_bytes):
    """(data [T, data_bytes], scales [T, scale_bytes]) uint8 of the slots (all in range)."""
    data_b, scale_b, _ = GEOMETRY[layout]
    base = (slots // P) * page_bytes
    row = slots % P
    d = flat[(base + row * data_b)[:, None] + torch.arange(data_b, device=flat.device)]
    s = flat[(base + P * data_b + row * scale_b)[:, None] + torch.arange(scale_b, device=flat.device)]
    return d, s


def dequantize(data, sc, layout, tables, dtype):
    """[T, 512] in dtype: code times scale, exactly, then one rounding; every NaN of a product the
    quiet +NaN (0x7fc00000, bf16 0x7fc0); v4's values 448..511 the stored bf16 bits."""
    v = _products(data, sc, layout, tables)
    v = torch.where(torch.isnan(v), torch.full_like(v, float("nan")).abs(), v).to(dtype)
    if dtype == torch.bfloat16:  # torch's CPU cast writes 0xffff for a NaN
        nan = torch.tensor([0x7FC0], dtype=torch.int16, device=v.device).view(torch.bfloat16)
        v = torch.where(torch.isnan(v), nan, v)
    if layout < 2:
        return v
    return torch.cat((v, data[:, 448:].contiguous().view(torch.bfloat16).to(dtype)), dim=1)


def _products(data, sc, layout, tables):
    """fp32 code * scale products (v4: the 448 quantised values)."""
    if layout == 0:
        return (tables["e4m3fn"][data.long()] * _ue8m0(sc, True).repeat_interleave(32, dim=1))
    if layout == 1:
        nib = torch.stack((data & 15, data >> 4), dim=-1).reshape(data.shape[0], 512)
        return tables["e2m1"][nib.long()] * tables["e4m3fn"][sc.long()].repeat_interleave(16, dim=1)
    fp8 = tables["e4m3fnuz" if layout == 3 else "e4m3fn"]
    return fp8[data[:, :448].long()] * _ue8m0(sc[:, :7], False).repeat_interleave(64, dim=1)


def quantize_v41(x):
    """bf16 [T, 512] -> (codes [T, 512], scale bytes [T, 16]): ue8m0 scale 2^max(-13, ceil(log2(amax /
    448))) per 32 values; a NaN or inf tile gets scale 0xff, a NaN tile all 0x7f, an inf tile +-0 for
    its finite values and 0x7f for its infinities."""
    xf = x.float().view(-1, 16, 32)
    amax = xf.abs().amax(dim=-1)
    e = torch.clamp(ceil_log2(amax / 448.0), min=-13)
    bad = ~torch.isfinite(amax)
    e = torch.where(bad, torch.zeros_like(e), e)
    codes = encode_fp8(xf / torch.exp2(e.float())[..., None], "e4m3fn")
    nan_tile = torch.isnan(amax)[..., None]
    inf_tile = (bad[..., None] & ~nan_tile)
    zeros = torch.where(torch.signbit(xf), torch.full_like(codes, 0x80), torch.zeros_like(codes))
    codes = torch.where(inf_tile, torch.where(torch.isinf(xf), torch.full_like(codes, 0x7F), zeros), codes)
    codes = torch.where(nan_tile, torch.full_like(codes, 0x7F), codes)
    sc = torch.where(bad, torch.full_like(e, 255), e + 127).to(torch.uint8)
    return codes.view(-1, 512), sc


def quantize_v41_fp4(x):
    """bf16 [T, 512] -> (nibbles [T, 256], scale bytes [T, 32]): per 16 values the e4m3fn scale of
    clamp(amax / 6, 2^-9, 448), nearest even, amax over |x| with +-inf counted as the largest finite
    value; a tile holding a NaN gets the NaN scale 0x7f and codes 0. Codes e2m1(x / scale), nearest
    even, saturating at 6 (+-inf gives +-6), the sign kept on zero; value 2i in the low nibble of
    byte i."""
    xf = x.float().view(-1, 32, 16)
    a = xf.abs()
    nan_tile = torch.isnan(a).any(dim=-1)
    finite = torch.where(torch.isinf(a), torch.full_like(a, torch.finfo(torch.float32).max), a)
    amax = torch.nan_to_num(finite, nan=0.0).amax(dim=-1)
    sc = encode_fp8((amax * (1.0 / 6.0)).clamp(2.0 ** -9, 448.0), "e4m3fn")
    sc = torch.where(sc == 0, torch.ones_like(sc), sc)
    sc = torch.where(nan_tile, torch.full_like(sc, 0x7F), sc)
    # |x / scale| against each midpoint m as |x| against m * scale: exact products (m has at most
    # 3 significant bits, the scale 4), no division (Triton's fp32 division is not correctly
    # rounded, so under torch.compile x / scale crossed midpoints the exact quotient does not).
    s = fp8_values("e4m3fn").to(x.device)[sc.long()][..., None]
    n = torch.zeros(a.shape, dtype=torch.int64, device=x.device)
    for i, m in enumerate(E2M1_MIDPOINTS):
        t = s * m
        n += ((a >= t) if i % 2 else (a > t)).long()
    code = torch.where(nan_tile[..., None], torch.zeros_like(n), n | (torch.signbit(xf).long() << 3))
    # value 2i in the low nibble of byte i, as a product and sum (Inductor cannot lower the
    # strided slices code[:, 0::2] | code[:, 1::2] << 4: NotImplementedError SliceView)
    pairs = code.reshape(-1, 256, 2) * torch.tensor([1, 16], dtype=torch.int64, device=x.device)
    return pairs.sum(dim=-1).to(torch.uint8), sc.to(torch.uint8)


def quantize(x, layout):
    """(data [T, data_bytes], the written scale bytes [T, n]) of bf16 rows [T, 512]."""
    if layout == 0:
        return quantize_v41(x)
    if layout == 1:
        return quantize_v41_fp4(x)
    p = quant_to_nope_fp8_rope_bf16_pack_triton(x.contiguous(), "e4m3fnuz" if layout == 3 else "e4m3fn")
    rope = p.k_rope_bf16.contiguous().view(torch.int16).to(torch.int32)
    rope_bytes = torch.stack((rope & 0xFF, (rope >> 8) & 0xFF), dim=-1).reshape(-1, 128).to(torch.uint8)
    return torch.cat((p.k_nope_fp8, rope_bytes), dim=1), p.scale_k_nope_ue8m0


def build(case):
    layout = int(scalar(case, "layout", -1))
    if layout not in NAMES:
        raise Unmodelled(f"in.layout={layout}: the peer reads the layouts 0..3 (v41, v41_fp4, v4, v4_fnuz)")
    P = int(scalar(case, "page_size"))
    data_b, scale_b, align = GEOMETRY[layout]
    page_bytes = -(-P * (data_b + scale_b) // align) * align
    inp = case.inputs
    op = ("quantize" if "src" in inp or "k" in inp else "dequantize") + (" pages" if "k" in inp or "pages" in inp else "")

    def fn(inp, start):
        tables = {"e4m3fn": fp8_values("e4m3fn"), "e4m3fnuz": fp8_values("e4m3fnuz"),
                  "e2m1": torch.tensor(E2M1)}
        tables = {k: v.to(next(iter(inp.values())).device) for k, v in tables.items()}
        if op == "dequantize pages":
            pages = inp["pages"]
            slots = torch.arange(pages.shape[0] * P, device=pages.device)
            d, s = rows_of(pages.reshape(-1), slots, layout, P, page_bytes)
            return {"k": dequantize(d, s, layout, tables, torch.bfloat16).view(-1, P, 512)}
        if op == "dequantize":
            out, slots, pool = start["out"], inp["slots"], inp["pool"]
            ok = (slots >= 0) & (slots < pool.shape[0] * P)
            d, s = rows_of(pool.reshape(-1), torch.where(ok, slots, torch.zeros_like(slots)), layout, P, page_bytes)
            vals = dequantize(d, s, layout, tables, out.dtype)
            return {"out": torch.cat((torch.where(ok[:, None], vals, out[:, :512]), out[:, 512:]), dim=1)}
        if op == "quantize pages":
            k = inp["k"]
            pool, x = torch.zeros(k.shape[0], page_bytes, dtype=torch.uint8, device=k.device), k.reshape(-1, 512)
            slots, ok = torch.arange(x.shape[0], device=k.device), None
        else:
            pool, slots, x = start["pool"], inp["slots"], inp["src"][:, :512]
            ok = (slots >= 0) & (slots < pool.shape[0] * P)
        data, sc = quantize(x, layout)
        s = slots if ok is None else torch.where(ok, slots, torch.zeros_like(slots))
        base, row = (s // P) * page_bytes, s % P
        at_d = (base + row * data_b)[:, None] + torch.arange(data_b, device=x.device)
        at_s = (base + P * data_b + row * scale_b)[:, None] + torch.arange(sc.shape[1], device=x.device)
        at, vals = torch.cat((at_d, at_s), dim=1), torch.cat((data, sc), dim=1)
        spare = pool.numel()  # rows without a slot write one spare byte past the pool
        if ok is not None:
            at = torch.where(ok[:, None], at, torch.full_like(at, spare))
        flat = torch.cat((pool.reshape(-1), pool.new_zeros(1)))
        flat = flat.scatter(0, at.reshape(-1), vals.reshape(-1))[:-1].view(pool.shape)
        return {"pages": flat} if op == "quantize pages" else {"pool": flat}

    return Peer(f"{op} {NAMES[layout]}", fn)
