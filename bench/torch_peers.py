#!/usr/bin/env python3
"""PyTorch peers of the kernel benchmarks, eager and torch.compile, timed on the same GPU.

Usage: python3 bench/torch_peers.py FAMILY > peers.csv, then bench_FAMILY --torch peers.csv.
Prints CSV lines `peer,B,n,us` (median microseconds per call over CUDA-event timed batches).
Families: indexer_topk (B x len scores, K = 512), sampling_renorm (V = 129280, the sort-based
top-k and top-p renormalisation expressions a PyTorch user would write), candidate_blocks (SGLang's
torch path: block maxima, the newest block forced in, top blocks, masked top-K keys, sorted).
"""
import sys

import torch


def median_us(fn, reps=30, batch=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        samples.append(1000.0 * a.elapsed_time(b) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def emit(peer, B, n, us):
    print(f"{peer},{B},{n},{us:.3f}", flush=True)


def compiled_peer(fn):
    """torch.compile(fn) with dynamic shapes, falling back to one static compile per shape when
    Inductor refuses the dynamic graph; None (a missing cell) when both fail."""
    dyn, static = torch.compile(fn, dynamic=True), torch.compile(fn, dynamic=False)

    def run(*args):
        try:
            dyn(*args)
            return dyn
        except Exception as e:  # noqa: BLE001 - report and try the static compile
            print(f"dynamic compile of {fn.__name__} failed: {e!r}"[:300], file=sys.stderr)
        try:
            static(*args)
            return static
        except Exception as e:  # noqa: BLE001
            print(f"static compile of {fn.__name__} failed: {e!r}"[:300], file=sys.stderr)
            return None

    return run


def emit_compiled(peer, B, n, pick, *args):
    f = pick(*args)
    if f is not None:
        emit(peer, B, n, median_us(lambda: f(*args)))


def indexer_topk():
    K = 512

    def topk_sorted(s):
        return torch.topk(s, K, dim=-1, sorted=False).indices.sort(dim=-1).values

    compiled = compiled_peer(topk_sorted)
    for B in (1, 32, 128):
        for n in (1024, 8192, 32768):
            g = torch.Generator(device="cuda").manual_seed(B * 7 + n)
            s = torch.randn(B, n, device="cuda", generator=g)
            idx = torch.topk(s, K, dim=-1, sorted=False).indices
            emit("torch.topk unsorted", B, n, median_us(lambda: torch.topk(s, K, dim=-1, sorted=False)))
            emit("torch.sort of the K indices", B, n, median_us(lambda: idx.sort(dim=-1)))
            emit("eager topk+sort", B, n, median_us(lambda: topk_sorted(s)))
            emit_compiled("compile topk+sort", B, n, compiled, s)


def topk_renorm(probs, k):
    sorted_p = probs.sort(dim=-1, descending=True).values
    pivot = sorted_p.gather(1, (k.long() - 1).clamp(0, probs.shape[1] - 1).unsqueeze(1))
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def topp_renorm(probs, p):
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    sorted_p = torch.where(before >= p.unsqueeze(1), torch.zeros_like(sorted_p), sorted_p)
    kept = torch.zeros_like(probs).scatter_(1, idx, sorted_p)
    return kept / kept.sum(dim=-1, keepdim=True)


def sampling_renorm():
    V = 129280
    ck, cp = compiled_peer(topk_renorm), compiled_peer(topp_renorm)
    for B in (1, 64, 256):
        g = torch.Generator(device="cuda").manual_seed(B)
        probs = torch.softmax(3 * torch.randn(B, V, device="cuda", generator=g), dim=-1)
        k = torch.full((B,), 50, dtype=torch.int32, device="cuda")
        p = torch.full((B,), 0.9, dtype=torch.float32, device="cuda")
        emit("eager top-k", B, V, median_us(lambda: topk_renorm(probs, k)))
        emit_compiled("compile top-k", B, V, ck, probs, k)
        emit("eager top-p", B, V, median_us(lambda: topp_renorm(probs, p)))
        emit_compiled("compile top-p", B, V, cp, probs, p)


def candidate_keys(scores, lens, nb: int, bs: int, K: int):
    B, W = scores.shape
    cols = torch.arange(W, device=scores.device)
    s = scores.masked_fill(cols >= lens.unsqueeze(1), -torch.inf)
    blocks = s.unflatten(-1, (-1, bs)).amax(dim=-1)
    last = (lens.long() - 1) // bs
    blocks = blocks.masked_fill(torch.arange(blocks.shape[1], device=s.device) == last.unsqueeze(1), torch.inf)
    top = blocks.topk(nb, dim=-1)
    keep = torch.zeros_like(blocks, dtype=torch.bool).scatter_(-1, top.indices, top.values > -torch.inf)
    s = s.masked_fill(~keep.repeat_interleave(bs, dim=-1), -torch.inf)
    return s.topk(K, dim=-1, sorted=False).indices.sort(dim=-1).values


def candidate_blocks():
    nb, bs, K = 16, 64, 512
    compiled = compiled_peer(candidate_keys)
    for B in (1, 32, 128):
        for n in (8192, 32768):
            g = torch.Generator(device="cuda").manual_seed(B * 5 + n)
            s = torch.randn(B, n, device="cuda", generator=g)
            lens = torch.full((B,), n, dtype=torch.int32, device="cuda")
            emit("eager candidate_blocks", B, n, median_us(lambda: candidate_keys(s, lens, nb, bs, K)))
            emit_compiled("compile candidate_blocks", B, n, compiled, s, lens, nb, bs, K)


if __name__ == "__main__":
    families = {
        "indexer_topk": indexer_topk,
        "sampling_renorm": sampling_renorm,
        "candidate_blocks": candidate_blocks,
    }
    families[sys.argv[1]]()
