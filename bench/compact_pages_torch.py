#!/usr/bin/env python3
"""PyTorch peers of bench/compact_pages.cpp: the same quantise and dequantise, written as a user
would in PyTorch (SGLang's torch references' expressions), timed eager and under torch.compile on
the same card, at 65536 tokens in pages of 64 with distinct random slots in a pool of 2T slots.

    python3 bench/compact_pages_torch.py --out /tmp/torch.tsv
    build/cuda/bench/bench_compact_pages /tmp/torch.tsv

Writes one line per operation, tab-separated: the name ("quantize v41", "dequantize v41 bf16",
...), eager microseconds, torch.compile microseconds ("nan" where torch.compile failed, the
reason printed and kept in FILE.json beside it).
"""

import argparse
import json
import os
import time

import torch

T, P = 65536, 64
LAYOUTS = {
    "v41": dict(data=512, scale=16, scales=16, align=512),
    "v41_fp4": dict(data=256, scale=32, scales=32, align=256),
    "v4": dict(data=576, scale=8, scales=7, align=576, fmax=448.0, fp8=torch.float8_e4m3fn),
    "v4_fnuz": dict(data=576, scale=8, scales=7, align=576, fmax=240.0, fp8=torch.float8_e4m3fnuz),
}
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def page_bytes(name):
    L = LAYOUTS[name]
    raw = P * (L["data"] + L["scale"])
    return -(-raw // L["align"]) * L["align"]


def pow2(e):
    return ((e + 127) << 23).view(torch.float32)


def ceil_log2_bits(x):
    b = x.view(torch.int32)
    return ((b >> 23) & 0xFF) - 127 + ((b & 0x7FFFFF) != 0).to(torch.int32)


def views(name, pool):
    """The data rows [pages, P, data] and scale rows [pages, P, scale] of a pool."""
    L = LAYOUTS[name]
    n = pool.shape[0]
    db, sb = L["data"], L["scale"]
    return (pool[:, : P * db].view(n, P, db), pool[:, P * db : P * (db + sb)].view(n, P, sb))


def quantize(name, x, slots, pool):
    L = LAYOUTS[name]
    t = x.shape[0]
    if name == "v41":
        xf = x.float().view(t, 16, 32)
        q = xf.abs().amax(-1) / 448.0
        e = ceil_log2_bits(q.clamp_min(1e-4))
        data = (xf / pow2(e).unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8).view(t, 512)
        sc = (e + 127).to(torch.uint8)
    elif name == "v41_fp4":
        xf = x.float().view(t, 32, 16)
        amax = xf.abs().amax(-1)
        s = torch.clamp(amax / 6.0, 2.0**-9, 448.0).to(torch.float8_e4m3fn)
        a = (xf / s.float().unsqueeze(-1)).abs()
        code = ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int()
                + (a > 2.5).int() + (a >= 3.5).int() + (a > 5.0).int()).to(torch.uint8)
        code = (code | (torch.signbit(xf).to(torch.uint8) << 3)).view(t, 512)
        data = code[:, 0::2] | (code[:, 1::2] << 4)
        sc = s.view(torch.uint8)
    else:
        fmax = L["fmax"]
        xf = x.float()[:, :448].view(t, 7, 64)
        amax = xf.abs().amax(-1).clamp_min(1e-8)
        e = torch.ceil(torch.log2(amax / fmax)).to(torch.int32)
        y = (xf * pow2(-e).unsqueeze(-1)).clamp(-fmax, fmax)
        codes = y.to(L["fp8"]).view(torch.uint8).view(t, 448)
        data = torch.cat([codes, x[:, 448:].contiguous().view(torch.uint8)], dim=-1)
        sc = (e + 127).to(torch.uint8)
    d, s_rows = views(name, pool)
    page, row = slots // P, slots % P
    d[page, row] = data
    s_rows[page, row, : L["scales"]] = sc
    return pool


def dequantize(name, pool, slots, out_dtype):
    L = LAYOUTS[name]
    d, s_rows = views(name, pool)
    page, row = slots // P, slots % P
    data, sc = d[page, row], s_rows[page, row]
    t = data.shape[0]
    if name == "v41":
        v = data.view(torch.float8_e4m3fn).float().view(t, 16, 32)
        s = (sc.to(torch.int32) << 23).view(torch.float32)
        return (v * s.unsqueeze(-1)).view(t, 512).to(out_dtype)
    if name == "v41_fp4":
        table = torch.tensor(E2M1, dtype=torch.float32, device=pool.device)
        codes = torch.stack([data & 0xF, data >> 4], dim=-1).view(t, 512)
        v = table[(codes & 7).long()]
        v = torch.where((codes & 8) != 0, -v, v).view(t, 32, 16)
        s = sc.view(torch.float8_e4m3fn).float()
        return (v * s.unsqueeze(-1)).view(t, 512).to(out_dtype)
    v = data[:, :448].contiguous().view(L["fp8"]).float().view(t, 7, 64)
    s = (sc[:, :7].to(torch.int32) << 23).view(torch.float32)
    nope = (v * s.unsqueeze(-1)).view(t, 448)
    rope = data[:, 448:].contiguous().view(torch.bfloat16).float()
    return torch.cat([nope, rope], dim=-1).to(out_dtype)


def time_us(fn, sets, reps=30, batch=10):
    for i in range(5):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples, k = [], 0
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            fn(*sets[k % len(sets)])
            k += 1
        stop.record()
        stop.synchronize()
        samples.append(1000.0 * start.elapsed_time(stop) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--wait", metavar="FILE",
                    help="compile every expression first, then wait until FILE exists before "
                         "timing (lets a concurrent GPU job finish first)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    n_pages = 2 * T // P
    sets_n = 4
    x = [(torch.randn(T, 512, device=dev) * 2.0 ** torch.randint(-6, 7, (T, 1), device=dev))
         .to(torch.bfloat16) for _ in range(sets_n)]
    slots = [torch.randperm(n_pages * P, device=dev)[:T] for _ in range(sets_n)]
    ops = {}
    for name in LAYOUTS:
        pool = torch.zeros(n_pages, page_bytes(name), dtype=torch.uint8, device=dev)
        filled = [quantize(name, torch.cat([x[i], x[i]]), torch.arange(2 * T, device=dev),
                           torch.zeros_like(pool)) for i in range(sets_n)]
        ops[f"quantize {name}"] = (lambda a, s, name=name, pool=pool: quantize(name, a, s, pool),
                                   [(x[i], slots[i]) for i in range(sets_n)])
        ops[f"dequantize {name} bf16"] = (
            lambda p, s, name=name: dequantize(name, p, s, torch.bfloat16),
            [(filled[i], slots[i]) for i in range(sets_n)])
        ops[f"dequantize {name} fp32"] = (
            lambda p, s, name=name: dequantize(name, p, s, torch.float32),
            [(filled[i], slots[i]) for i in range(sets_n)])
    # Compile first (one graph per operation), time after.
    compiled, errors = {}, {}
    for key, (fn, sets) in ops.items():
        try:
            c = torch.compile(fn, dynamic=False)
            c(*sets[0])
            compiled[key] = c
        except Exception as e:  # e.g. a dtype Inductor cannot generate on this card
            errors[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    torch.cuda.synchronize()
    if args.wait:
        while not os.path.exists(args.wait):
            time.sleep(0.2)
    result = {}
    for key, (fn, sets) in ops.items():
        eager = time_us(fn, sets)
        entry = {"eager_us": round(eager, 2)}
        comp = float("nan")
        if key in compiled:
            comp = time_us(compiled[key], sets)
            entry["compile_us"] = round(comp, 2)
        else:
            entry["compile_error"] = errors[key]
        result[key] = entry
        print(f"{key:28s} eager {eager:9.1f} us   torch.compile {comp:9.1f} us "
              f"{entry.get('compile_error', '')}", flush=True)
    with open(args.out, "w") as f:
        for key, e in result.items():
            f.write(f"{key}\t{e['eager_us']}\t{e.get('compile_us', 'nan')}\n")
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
