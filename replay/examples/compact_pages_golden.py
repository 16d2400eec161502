#!/usr/bin/env python3
"""Writes golden compact_pages case files with PyTorch: SGLang's paged KV layouts for hostile tiles.

Each layout's writer and reader rules are written here in PyTorch, from the rules (see
reference/include/dsv4/ref/formats/kv_tiles.hpp), and run on the GPU's torch: its divisions, its
fp8 casts and its bf16 products. Quantise cases hold in.k bf16 [num_pages, P, 512] and got.pages
u8 [num_pages, page_bytes]; dequantise cases hold in.pages and got.k; both carry the layout and the
page size in __metadata__ (dsv4.layout, dsv4.page_size). Replay one against the C++ reference:

    python3 replay/examples/compact_pages_golden.py --out /tmp/golden
    dsv4-replay /tmp/golden/torch_v41_quant_P7.safetensors --family compact_pages --reference

Layouts: v41 (512 e4m3fn + 16 ue8m0, tiles of 32), v41_fp4 (256 bytes of e2m1 pairs + 32 e4m3fn,
tiles of 16), v4 (448 e4m3fn + 64 raw bf16, 7 ue8m0 + 1 pad, tiles of 64) and v4_fnuz (v4 with
e4m3fnuz, SGLang's V4 writer on gfx942). --plant changes one stored byte, so the replay must name
it and exit 1.
"""

import argparse
import os

import torch
from safetensors.torch import save_file

LAYOUTS = {
    "v41": dict(data=512, scale=16, scales=16, tile=32, align=512),
    "v41_fp4": dict(data=256, scale=32, scales=32, tile=16, align=256),
    "v4": dict(data=576, scale=8, scales=7, tile=64, align=576, fmax=448.0,
               fp8=torch.float8_e4m3fn),
    "v4_fnuz": dict(data=576, scale=8, scales=7, tile=64, align=576, fmax=240.0,
                    fp8=torch.float8_e4m3fnuz),
}
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def page_bytes(name, P):
    L = LAYOUTS[name]
    raw = P * (L["data"] + L["scale"])
    return -(-raw // L["align"]) * L["align"]


def f32_from_bits(bits):
    return bits.to(torch.int32).view(torch.float32)


def pow2(e):
    """2^e for integer tensors e in [-126, 127], built from the exponent bits (exact)."""
    return f32_from_bits((e + 127) << 23)


def ceil_log2_bits(x):
    """ceil(log2(x)) of positive normal fp32 x, from its bits: exact at powers of two."""
    b = x.contiguous().view(torch.int32)
    return ((b >> 23) & 0xFF) - 127 + ((b & 0x7FFFFF) != 0).to(torch.int32)


def canonical_nan_bf16(t):
    """NaN values written as the quiet NaN 0x7fc0 (the reference's reader rule)."""
    bits = t.view(torch.int16)
    return torch.where(torch.isnan(t), torch.full_like(bits, 0x7FC0), bits).view(torch.bfloat16)


# ---- writers ---------------------------------------------------------------------------------

def quant_v41(k):
    n, P, _ = k.shape
    x = k.float().view(n, P, 16, 32)
    q = x.abs().amax(dim=-1) / 448.0  # torch.amax propagates NaN
    finite = torch.isfinite(q)
    e = ceil_log2_bits(q.clamp_min(1e-4).nan_to_num(1.0, 1.0))  # never below 2^-13
    scale = torch.where(finite, pow2(e), q)  # NaN or inf passes through
    data = (x / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8)
    sbyte = torch.where(finite, e + 127, torch.full_like(e, 255)).to(torch.uint8)
    return data.reshape(n, P, 512), sbyte.reshape(n, P, 16)


def e2m1_codes(q):
    """Round to nearest even onto the e2m1 grid, saturating at 6; sign kept on zero; NaN -> 0."""
    sign = torch.signbit(q).to(torch.uint8) << 3
    a = torch.nan_to_num(q.abs(), nan=0.0, posinf=6.0)
    code = ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int()
            + (a > 2.5).int() + (a >= 3.5).int() + (a > 5.0).int())
    return torch.where(torch.isnan(q), torch.zeros_like(sign), sign | code.to(torch.uint8))


def quant_v41_fp4(k):
    n, P, _ = k.shape
    x = k.float().view(n, P, 32, 16)
    # NaN counts as inf; torch.nan_to_num's posinf default turns +inf into the fp32 maximum.
    fmax32 = torch.finfo(torch.float32).max
    amax = torch.nan_to_num(x.abs(), nan=float("inf"), posinf=fmax32).amax(dim=-1)
    s = torch.clamp(amax / 6.0, 2.0**-9, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    s = torch.where(torch.isinf(amax), torch.full_like(s, 0x7F), s)  # e4m3fn NaN
    sf = s.view(torch.float8_e4m3fn).float()
    codes = e2m1_codes(x / sf.unsqueeze(-1)).reshape(n, P, 512)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed, s.reshape(n, P, 32)


def quant_v4(k, fmax, fp8):
    n, P, _ = k.shape
    x = k.float()[..., :448].reshape(n, P, 7, 64)
    a = x.abs()
    amax = torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(dim=-1)  # tl.max skips NaN
    inf = torch.isinf(amax)
    floor = torch.tensor(1e-8, dtype=torch.float32, device=k.device)
    ratio = torch.maximum(amax, floor).double() / fmax
    m, ex = torch.frexp(torch.where(inf, torch.ones_like(ratio), ratio))  # ratio = m * 2^ex
    e = torch.where(m == 0.5, ex - 1, ex).to(torch.int32)  # ceil(log2(ratio)), exact
    inv = torch.where(inf, torch.zeros_like(amax), pow2(-e))  # 1 / inf = 0 on an inf tile
    y = (x * inv.unsqueeze(-1)).clamp(-fmax, fmax)
    y = torch.where(torch.isnan(y), torch.full_like(y, -fmax), y)  # maxnum/minnum clamp of NaN
    codes = y.to(fp8).view(torch.uint8)
    if fp8 == torch.float8_e4m3fnuz:
        codes = torch.where(codes == 0x80, torch.zeros_like(codes), codes)  # no -0 in fnuz
    sbyte = torch.where(inf, torch.full_like(e, 0x7E), e + 127).to(torch.uint8)
    rope = k[..., 448:].contiguous().view(torch.uint8)  # 64 raw bf16
    data = torch.cat([codes.reshape(n, P, 448), rope], dim=-1)
    return data, sbyte.reshape(n, P, 7)


def quantize(name, k):
    L = LAYOUTS[name]
    n, P, _ = k.shape
    if name == "v41":
        data, sc = quant_v41(k)
    elif name == "v41_fp4":
        data, sc = quant_v41_fp4(k)
    else:
        data, sc = quant_v4(k, L["fmax"], L["fp8"])
    pages = torch.zeros(n, page_bytes(name, P), dtype=torch.uint8, device=k.device)
    db, sb, ns = L["data"], L["scale"], L["scales"]
    pages[:, : P * db] = data.reshape(n, P * db)
    scale_rows = torch.zeros(n, P, sb, dtype=torch.uint8, device=k.device)
    scale_rows[..., :ns] = sc  # v4's pad byte stays zero
    pages[:, P * db : P * (db + sb)] = scale_rows.reshape(n, P * sb)
    return pages


# ---- readers ---------------------------------------------------------------------------------

def dequantize(name, pages, P):
    L = LAYOUTS[name]
    n = pages.shape[0]
    db, sb = L["data"], L["scale"]
    data = pages[:, : P * db].reshape(n, P, db)
    sc = pages[:, P * db : P * (db + sb)].reshape(n, P, sb)
    if name == "v41":
        values = data.contiguous().view(torch.float8_e4m3fn).to(torch.bfloat16)
        scale = sc.contiguous().view(torch.float8_e8m0fnu).to(torch.bfloat16)
        out = (values.view(n, P, 16, 32) * scale.unsqueeze(-1)).view(n, P, 512)
        return canonical_nan_bf16(out)
    if name == "v41_fp4":
        table = torch.tensor(E2M1, dtype=torch.float32, device=pages.device)
        codes = torch.stack([data & 0xF, data >> 4], dim=-1).reshape(n, P, 512)
        v = table[(codes & 7).long()]
        v = torch.where((codes & 8) != 0, -v, v)
        s = sc.contiguous().view(torch.float8_e4m3fn).float()
        out = (v.view(n, P, 32, 16) * s.unsqueeze(-1)).view(n, P, 512).to(torch.bfloat16)
        return canonical_nan_bf16(out)
    b = sc[..., :7].to(torch.int32)
    scale = torch.where(b == 0, f32_from_bits(torch.full_like(b, 0x00400000)), f32_from_bits(b << 23))
    scale = torch.where(b == 255, torch.full_like(scale, float("inf")), scale)  # exp2(128)
    v = data[..., :448].contiguous().view(L["fp8"]).float().view(n, P, 7, 64)
    out = canonical_nan_bf16((v * scale.unsqueeze(-1)).view(n, P, 448).to(torch.bfloat16))
    rope = data[..., 448:].contiguous().view(torch.bfloat16)
    return torch.cat([out, rope], dim=-1)


# ---- hostile inputs --------------------------------------------------------------------------

def hostile_k(name, n, P, gen):
    """Tokens whose tiles each follow one hostile rule, in turn, then random tiles."""
    L = LAYOUTS[name]
    t = L["tile"]
    fmax = 6.0 if name == "v41_fp4" else L.get("fmax", 448.0)
    tiles = n * P * 512 // t
    x = torch.randn(tiles, t, generator=gen) * torch.exp2(torch.randint(-30, 30, (tiles, 1), generator=gen).float())
    bits = lambda v: torch.tensor(v, dtype=torch.int16).view(torch.bfloat16).float()
    rules = []
    rules.append(lambda r: r.zero_().index_fill_(0, torch.tensor([1, 3]), -0.0))   # zeros, -0
    rules.append(lambda r: r.uniform_(-1e-9, 1e-9, generator=gen))                 # below floors
    rules.append(lambda r: r.uniform_(-1e-30, 1e-30, generator=gen))
    rules.append(lambda r: r.index_fill_(0, torch.tensor([5]), float("nan")))      # NaN
    rules.append(lambda r: r.index_fill_(0, torch.tensor([0]), -float("nan")))
    rules.append(lambda r: r.index_fill_(0, torch.tensor([2]), float("inf")))      # +inf
    rules.append(lambda r: r.index_fill_(0, torch.tensor([7]), -float("inf")))     # -inf
    rules.append(lambda r: r.index_fill_(0, torch.tensor([4, 9]), float("inf")).index_fill_(
        0, torch.tensor([6]), float("nan")))                                         # both
    for k in (-20, -13, -9, 0, 3, 17):                                              # amax fmax*2^k
        rules.append(lambda r, k=k: r.uniform_(-fmax * 2.0**k, fmax * 2.0**k, generator=gen)
                     .index_fill_(0, torch.tensor([3]), fmax * 2.0**k))
    rules.append(lambda r: r.uniform_(-fmax, fmax, generator=gen)                   # one step up
                 .index_fill_(0, torch.tensor([1]), float(bits(int(torch.tensor(fmax).to(
                     torch.bfloat16).view(torch.int16)) + 1))))
    rules.append(lambda r: r.fill_(float(bits(0x7F7F))).index_fill_(             # near fp32 max
        0, torch.tensor([2]), -float(bits(0x7F7F))))
    rules.append(lambda r: r.uniform_(3e38, 3.39e38, generator=gen))
    rules.append(lambda r: r.copy_(bits(list(range(1, t + 1)))))                  # bf16 subnormals
    rules.append(lambda r: r.uniform_(-6.0, 6.0, generator=gen).mul_(2.0**-9))     # fp4 floor
    for i, rule in enumerate(rules):
        if i < tiles:
            rule(x[i])
    k = x.reshape(n, P, 512).to(torch.bfloat16)
    if name in ("v4", "v4_fnuz"):  # raw tail: every kind of bf16, NaN payloads included
        k.view(torch.int16)[..., 448:] = torch.randint(-32768, 32767, (n, P, 64), generator=gen,
                                                      dtype=torch.int16)
    return k


def random_pages(name, n, P, gen):
    """Every byte pattern: random data and scale rows, zero padding."""
    L = LAYOUTS[name]
    pages = torch.zeros(n, page_bytes(name, P), dtype=torch.uint8)
    used = P * (L["data"] + L["scale"])
    pages[:, :used] = torch.randint(0, 256, (n, used), generator=gen, dtype=torch.uint8)
    return pages


def write(path, tensors, name, P, what):
    meta = {"dsv4.case_version": "1", "dsv4.family": "compact_pages", "dsv4.layout": name,
            "dsv4.page_size": str(P), "dsv4.case": f"torch {what} {name} P={P}"}
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, path, metadata=meta)
    size = os.path.getsize(path)
    print(f"wrote {path} ({size} bytes)")
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the case files")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--plant", action="store_true", help="change one stored byte of each case")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device(args.device)
    total = 0
    for name in LAYOUTS:
        for P, n in ((7, 2), (2, 3), (1, 2)):
            gen = torch.Generator().manual_seed(args.seed * 1000 + P)
            k = hostile_k(name, n, P, gen)
            pages = quantize(name, k.to(dev)).cpu()
            if args.plant:
                pages[n - 1, P * LAYOUTS[name]["data"] + 1] ^= 0x01
            total += write(os.path.join(args.out, f"torch_{name}_quant_P{P}.safetensors"),
                           {"in.k": k, "got.pages": pages}, name, P, "quantise")
        for P, n in ((7, 2), (1, 3)):
            gen = torch.Generator().manual_seed(args.seed * 2000 + P)
            pages = random_pages(name, n, P, gen)
            k = dequantize(name, pages.to(dev), P).cpu()
            total += write(os.path.join(args.out, f"torch_{name}_dequant_P{P}.safetensors"),
                           {"in.pages": pages, "got.k": k}, name, P, "dequantise")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
