#!/usr/bin/env python3
"""PyTorch peers of the attention benchmarks, eager and torch.compile, timed on the same device.

  torch_attention.py split_combine B,S,H,D [...]
  torch_attention.py sparse_decode LAYOUT,B,HQ,K,P [...]   (LAYOUT v41 or v41_fp4)

Prints one line "us <family>/<case>/<eager|compile> <microseconds>" per timing (median of device-
event samples, each over back-to-back calls). The peers are what a user would write: the
split_combine expression over the partials, and gather + dequantise + explicit softmax with the
sink (scaled_dot_product_attention has no sink) for sparse_decode.
"""

import sys

import torch

LOG2E = 1.4426950408889634


def time_us(fn, reps=20, batch=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        samples.append(1000.0 * a.elapsed_time(b) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def split_combine(o, lse, sink):
    """o [B,S,H,D] fp32 normalised partials, lse [B,S,H] base 2, sink [H] natural log."""
    m = lse.amax(dim=1)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    ms = torch.maximum(m, sink * LOG2E)
    w = torch.exp2(lse - ms[:, None])
    den = w.sum(1) + torch.exp2(sink * LOG2E - ms)
    out = (w[..., None] * o).sum(1) / den[..., None]
    lse_out = (torch.log2(torch.exp2(lse - m[:, None]).sum(1)) + m) / LOG2E
    return out.to(torch.bfloat16), lse_out


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def page_geometry(layout, page):
    data, scale, align = {"v41": (512, 16, 512), "v41_fp4": (256, 32, 256)}[layout]
    return data, scale, -(-page * (data + scale) // align) * align


def dequant_rows(pool, slots, layout, page):
    """pool [pages, page_bytes] uint8; slots [N] int64 -> [N, 512] bf16 (SGLang's rules)."""
    data, scale_bytes, page_bytes = page_geometry(layout, page)
    flat = pool.view(-1)
    base = (slots // page) * page_bytes
    row = slots % page
    d = base[:, None] + row[:, None] * data + torch.arange(data, device=pool.device)
    s = base[:, None] + page * data + row[:, None] * scale_bytes
    s = s + torch.arange(scale_bytes, device=pool.device)
    codes, scales = flat[d], flat[s]
    if layout == "v41":
        v = codes.view(torch.float8_e4m3fn).float()
        sc = (scales.int() << 23).view(torch.float32)
        sc = torch.where(scales == 0, torch.full_like(sc, 2.0**-127), sc)
        v = v * sc.repeat_interleave(32, dim=1)
    else:
        table = torch.tensor(E2M1, device=pool.device)
        lo, hi = table[(codes & 15).long()], table[(codes >> 4).long()]
        v = torch.stack((lo, hi), dim=-1).reshape(codes.shape[0], 512)
        v = v * scales.view(torch.float8_e4m3fn).float().repeat_interleave(16, dim=1)
    return v.to(torch.bfloat16)


def sparse_decode(q, pool, idx, lengths, sink, layout, page, sm_scale):
    """q [B,H,512] bf16, idx [B,K] int32 slots (-1 none), lengths [B] -> out bf16, lse."""
    B, H, D = q.shape
    K = idx.shape[1]
    valid = (idx >= 0) & (torch.arange(K, device=q.device)[None] < lengths[:, None])
    slots = torch.where(valid, idx, torch.zeros_like(idx)).long().view(-1)
    kv = dequant_rows(pool, slots, layout, page).view(B, K, D).float()
    s = torch.einsum("bhd,bkd->bhk", q.float(), kv) * sm_scale
    s = s.masked_fill(~valid[:, None], float("-inf"))
    s = torch.cat((s, sink[None, :, None].expand(B, H, 1)), dim=-1)
    p = torch.softmax(s, dim=-1)[..., :K]
    out = torch.einsum("bhk,bkd->bhd", p, kv)
    lse = torch.logsumexp(s[..., :K], dim=-1)
    return out.to(torch.bfloat16), lse


def report(key, fn):
    print(f"us {key}/eager {time_us(fn[0]):.3f}")
    print(f"us {key}/compile {time_us(fn[1]):.3f}")
    sys.stdout.flush()


def main(argv):
    if len(argv) < 2 or argv[0] not in ("split_combine", "sparse_decode"):
        print(__doc__)
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    family, cases = argv[0], argv[1:]
    compiled = torch.compile(split_combine if family == "split_combine" else sparse_decode)
    for case in cases:
        if family == "split_combine":
            B, S, H, D = map(int, case.split(","))
            o = torch.randn(B, S, H, D, device=dev)
            lse = torch.rand(B, S, H, device=dev) * 20 - 10
            sink = torch.randn(H, device=dev)
            args = (o, lse, sink)
            key = f"split_combine/{B}x{S}x{H}x{D}"
            report(key, (lambda: split_combine(*args), lambda: compiled(*args)))
        else:
            layout, B, H, K, P = case.split(",")
            B, H, K, P = int(B), int(H), int(K), int(P)
            data, scale_bytes, page_bytes = page_geometry(layout, P)
            slots_needed = B * K
            pages = -(-2 * slots_needed // P)
            pool = torch.randint(0, 256, (pages, page_bytes), dtype=torch.uint8, device=dev)
            if layout == "v41":  # keep the codes finite: no e4m3 NaN (0x7f/0xff), scales near 2^0
                pool[pool & 0x7F == 0x7F] = 0x10
                for p in range(P):
                    pool[:, P * data + p * scale_bytes:P * data + (p + 1) * scale_bytes] = 120
            else:
                for p in range(P):
                    pool[:, P * data + p * scale_bytes:P * data + (p + 1) * scale_bytes] = 0x30
            idx = torch.randperm(pages * P, device=dev)[:B * K].view(B, K).int()
            lengths = torch.full((B,), K, dtype=torch.int32, device=dev)
            q = torch.randn(B, H, 512, device=dev).to(torch.bfloat16)
            sink = torch.randn(H, device=dev)
            args = (q, pool, idx, lengths, sink, layout, P, 512**-0.5)
            key = f"sparse_decode/{layout}x{B}x{H}x{K}x{P}"
            report(key, (lambda: sparse_decode(*args), lambda: compiled(*args)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
