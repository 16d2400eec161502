#!/usr/bin/env python3
"""PyTorch peers of bench_ring_layout: the four ring_layout launchers written as a user would
write them in PyTorch, timed eager and under torch.compile on the same card with CUDA events.

usage: python3 bench/ring_layout_torch.py OUT.json [--deadline SECONDS]
Writes {"<launcher>/<tokens>": {"eager_us": float, "compile_us": float | null}}; a compile that
fails or does not fit in the deadline is null (bench_ring_layout prints n/a).
"""
import json
import sys
import time

import torch

RING, WIN, V, N_SLOTS, MAX_POS = 128, 125, 4, 4096, 1 << 20


def token_locs(slot, pos, fin):
    ok = (slot >= 0) & (slot < N_SLOTS) & (pos >= 0) & ~((fin >= 0) & (pos <= fin - WIN))
    return torch.where(ok, slot * RING + pos % RING, torch.full_like(pos, -1))


def verify_locs(slot, pos, commit):
    col = torch.arange(pos.shape[1], device=pos.device)
    ok = (col[None, :] < commit.clamp(0, pos.shape[1])[:, None]) & (pos >= 0)
    ok &= ((slot >= 0) & (slot < N_SLOTS))[:, None]
    return torch.where(ok, slot[:, None] * RING + pos % RING, torch.full_like(pos, -1))


def window_rows(batch, pos, slot):
    B = slot.shape[0]
    valid = (batch >= 0) & (batch < B)
    s = slot[batch.clamp(0, B - 1)]
    valid &= (s >= 0) & (s < N_SLOTS) & (pos >= 0)
    n = torch.where(valid, torch.clamp(pos + 1, max=WIN), torch.zeros_like(pos))
    indptr = torch.cat([n.new_zeros(1), torch.cumsum(n, 0)]).to(torch.int32)
    i = torch.arange(WIN, device=pos.device)[None, :]
    dense = s[:, None] * RING + (pos[:, None] - n[:, None] + 1 + i) % RING
    rows = dense[i < n[:, None]].to(torch.int32)
    return indptr, rows


def prefill_slots(req_slot, indptr, pos):
    B, T = req_slot.shape[0], pos.shape[0]
    t = torch.arange(T, device=pos.device, dtype=torch.int32)
    b = torch.searchsorted(indptr[1:].contiguous(), t, right=True)
    inreq = (t >= indptr[0]) & (b < B)
    bc = b.clamp(max=B - 1)
    last = (indptr[bc + 1] - 1).clamp(0, T - 1).long()
    slot = torch.where(inreq, req_slot[bc], torch.full_like(req_slot[bc], -1))
    fin = torch.where(inreq, pos[last], torch.full_like(pos, -1))
    return slot, fin


def inputs(n, g):
    B = max(1, n // V)
    dev = "cuda"
    r = lambda lo, hi, shape, dt=torch.int64: torch.randint(lo, hi, shape, generator=g, device=dev, dtype=dt)
    pos = r(0, MAX_POS, (n,))
    lens = r(0, 9, (B,), torch.int32)
    indptr = torch.cat([lens.new_zeros(1), torch.cumsum(lens, 0).clamp(max=n).to(torch.int32)])
    return {
        "token_locs": (r(0, N_SLOTS, (n,)), pos, pos + r(0, 2 * RING, (n,))),
        "verify_locs": (r(0, N_SLOTS, (B,)), r(0, MAX_POS, (B, V)), r(0, V + 1, (B,), torch.int32)),
        "window_rows": (r(0, B, (n,), torch.int32), pos, r(0, N_SLOTS, (B,))),
        "prefill_slots": (r(0, N_SLOTS, (B,)), indptr, pos),
    }


def median_us(fn, args, reps=30, batch=20):
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        a.record()
        for _ in range(batch):
            fn(*args)
        b.record()
        b.synchronize()
        samples.append(1000.0 * a.elapsed_time(b) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def main():
    out = sys.argv[1]
    deadline = time.time() + (float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--deadline" else 120)
    fns = {"token_locs": token_locs, "verify_locs": verify_locs, "window_rows": window_rows,
           "prefill_slots": prefill_slots}
    compiled = {k: torch.compile(f, dynamic=True) for k, f in fns.items()}
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    res = {}
    for n in (64, 4096, 65536, 262144):
        ins = inputs(n, g)
        for op, f in fns.items():
            e = median_us(f, ins[op])
            c = None
            if time.time() < deadline:
                try:
                    c = median_us(compiled[op], ins[op])
                except Exception as ex:  # a compile failure is reported as n/a
                    print(f"torch.compile {op} n={n}: {type(ex).__name__}: {ex}", file=sys.stderr)
            res[f"{op}/{n}"] = {"eager_us": e, "compile_us": c}
            print(f"{op:14s} n={n:7d} eager {e:8.2f} us  compile {c if c is None else round(c, 2)} us")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
