#!/usr/bin/env python3
"""Writes a dsv4-replay case file with PyTorch: inputs, and the output a CUDA computation gave.

The case is what a user dumps from their own kernel: in.* tensors (scalars as 0-d tensors) and
got.* tensors, saved with safetensors.torch.save_file. dsv4-replay then checks got.* against the
project's C++ reference (no GPU needed) or the project's kernel (--device):

    python3 replay/examples/write_case.py --family smoke --out /tmp/smoke.safetensors
    dsv4-replay /tmp/smoke.safetensors --reference

Families:
  smoke     out = x * scale + bias in fp32 (torch computes it as two rounded operations, exactly
            the reference's order, so the check is bitwise).
  kv_store  the bf16 row scatter pool[loc[t]] = kv[t] with hostile slots (-1 skipped, >= R
            rejected and counted); with --fused, RMSNorm + interleaved RoPE + bf16 cast first,
            in torch's own fp32 order (no in.lanes: the replay holds it to the reference's bound).
--plant changes one stored output value, so the replay must report exactly that element and exit 1.
"""

import argparse
import math
import sys

import torch
from safetensors.torch import save_file


def smoke(args, dev, gen):
    x = (torch.rand(args.n, generator=gen, dtype=torch.float32) * 8 - 4).to(dev)
    scale = torch.tensor(1.75, dtype=torch.float32, device=dev)
    bias = torch.tensor(-0.3, dtype=torch.float32, device=dev)
    out = x * scale + bias  # two kernels: one rounded multiply, one rounded add
    if args.plant:
        out[args.n // 2] = torch.nextafter(out[args.n // 2], torch.tensor(math.inf, device=dev))
    return {"in.x": x, "in.scale": scale, "in.bias": bias, "got.out": out}


def rope_table(n_pos, rope_dim, base=10000.0):
    """(cos, sin) pairs per position, [n_pos, rope_dim] fp32, as SGLang's freqs_cis viewed real."""
    i = torch.arange(rope_dim // 2, dtype=torch.float64)
    p = torch.arange(n_pos, dtype=torch.float64)[:, None]
    theta = p * base ** (-2.0 * i / rope_dim)
    return torch.stack([torch.cos(theta), torch.sin(theta)], dim=-1).reshape(n_pos, rope_dim).float()


def kv_store(args, dev, gen):
    T, R, width, n_pos, eps = args.n, 2 * args.n, 512, 4096, 1e-6
    kv = (torch.rand(T, width, generator=gen) * 4 - 2).to(torch.bfloat16).to(dev)
    slots = torch.randperm(R, generator=gen)[:T]
    slots[1] = -1  # padding: skipped
    slots[2] = R  # out of range: rejected, counted
    slots[3] = 2**31 - 1
    loc = slots.to(torch.int64).to(dev)
    pool = torch.full((R, width), float("nan"), dtype=torch.bfloat16, device=dev)  # poison
    case = {"in.kv": kv, "in.loc": loc, "in.pool": pool.clone()}
    rows = kv
    if args.fused:
        weight = (torch.rand(width, generator=gen) + 0.5).to(dev)
        cos_sin = rope_table(n_pos, 64).to(dev)
        positions = torch.randint(0, n_pos, (T,), generator=gen, dtype=torch.int64).to(dev)
        x = kv.float()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
        r, m = y[:, -64::2], y[:, -63::2]
        cos, sin = cos_sin[positions, 0::2], cos_sin[positions, 1::2]
        y[:, -64::2], y[:, -63::2] = r * cos - m * sin, r * sin + m * cos
        rows = y.to(torch.bfloat16)
        case.update({"in.weight": weight, "in.cos_sin": cos_sin, "in.positions": positions,
                     "in.eps": torch.tensor(eps, dtype=torch.float32)})
    ok = (loc >= 0) & (loc < R)
    pool[loc[ok]] = rows[ok]
    if args.plant:
        t = int(torch.nonzero(ok)[0])
        pool[loc[t], 7] = pool[loc[t], 7] + 1.0
    case["got.pool"] = pool
    case["got.errors"] = (loc >= R).sum().to(torch.int64).reshape(())
    return case


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--family", choices=["smoke", "kv_store"], default="smoke")
    ap.add_argument("--out", required=True, help="the case file to write (.safetensors)")
    ap.add_argument("--n", type=int, default=1000, help="elements (smoke) or tokens (kv_store)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--fused", action="store_true", help="kv_store: the RMSNorm + RoPE store")
    ap.add_argument("--plant", action="store_true", help="change one stored output value")
    ap.add_argument("--device", default="cuda", help="torch device computing got.* (default cuda)")
    args = ap.parse_args()
    if args.n < 4:
        sys.exit("--n must be at least 4")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("no CUDA device visible to torch; pass --device cpu to compute on the CPU")
    gen = torch.Generator().manual_seed(args.seed)
    case = (smoke if args.family == "smoke" else kv_store)(args, torch.device(args.device), gen)
    tensors = {k: v.detach().contiguous().cpu() for k, v in case.items()}
    meta = {"dsv4.case_version": "1", "dsv4.family": args.family,
            "dsv4.case": f"torch {args.family} n={args.n} seed={args.seed}"
                         + (" fused" if args.fused else "") + (" planted" if args.plant else "")}
    save_file(tensors, args.out, metadata=meta)
    for k, v in sorted(tensors.items()):
        print(f"{k:14s} {str(v.dtype):15s} {list(v.shape)}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
