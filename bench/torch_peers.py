#!/usr/bin/env python3
"""PyTorch peers of the kernel benchmarks, eager and torch.compile, timed on the same GPU.

Usage: python3 bench/torch_peers.py FAMILY > peers.csv, then bench_FAMILY --torch peers.csv.
Prints CSV lines `peer,B,n,us` (median microseconds per call over CUDA-event timed batches).
Families: indexer_topk (B x len scores, K = 512), sampling_renorm (V = 129280, the sort-based
top-k and top-p renormalisation expressions a PyTorch user would write), candidate_blocks (SGLang's
torch path: block maxima, the newest block forced in, top blocks, masked top-K keys, sorted),
split_combine (the merge expression over normalised partials and base-2 lse, with the sink;
peer "<eager|compile> split_combine S<S> H<H>", n = D), sparse_decode (gather + dequantise of
SGLang's V4.1 pages + explicit softmax with the sink, which scaled_dot_product_attention lacks;
peer "<eager|compile> sparse_decode <layout> H<H> P<P>", n = K).
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


LOG2E = 1.4426950408889634


def merge_partials(o, lse, sink):
    """o [B,S,H,D] fp32 partials normalised by their own sums, lse [B,S,H] base 2, sink [H]."""
    m = lse.amax(dim=1)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    ms = torch.maximum(m, sink * LOG2E)
    w = torch.exp2(lse - ms[:, None])
    den = w.sum(1) + torch.exp2(sink * LOG2E - ms)
    out = (w[..., None] * o).sum(1) / den[..., None]
    lse_out = (torch.log2(torch.exp2(lse - m[:, None]).sum(1)) + m) / LOG2E
    return out.to(torch.bfloat16), lse_out


def split_combine():
    compiled = compiled_peer(merge_partials)
    for B, S, H, D in ((1, 16, 128, 512), (8, 8, 128, 512), (64, 8, 128, 512), (64, 16, 64, 512)):
        g = torch.Generator(device="cuda").manual_seed(B * 3 + S)
        o = torch.randn(B, S, H, D, device="cuda", generator=g)
        lse = torch.rand(B, S, H, device="cuda", generator=g) * 20 - 10
        sink = torch.randn(H, device="cuda", generator=g)
        emit(f"eager split_combine S{S} H{H}", B, D, median_us(lambda: merge_partials(o, lse, sink)))
        emit_compiled(f"compile split_combine S{S} H{H}", B, D, compiled, o, lse, sink)


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def page_geometry(layout: str, page: int):
    data, scale, align = {"v41": (512, 16, 512), "v41_fp4": (256, 32, 256)}[layout]
    return data, scale, -(-page * (data + scale) // align) * align


def dequant_rows(pool, slots, fp4: bool, page: int):
    """pool [pages, page_bytes] uint8, slots [N] -> [N, 512] bf16, as SGLang's readers decode."""
    data, scale_bytes, page_bytes = page_geometry("v41_fp4" if fp4 else "v41", page)
    flat = pool.view(-1)
    base, row = (slots // page) * page_bytes, slots % page
    codes = flat[base[:, None] + row[:, None] * data + torch.arange(data, device=pool.device)]
    s_at = base[:, None] + page * data + row[:, None] * scale_bytes
    scales = flat[s_at + torch.arange(scale_bytes, device=pool.device)]
    if not fp4:
        v = codes.view(torch.float8_e4m3fn).float()
        sc = (scales.int() << 23).view(torch.float32)
        sc = torch.where(scales == 0, torch.full_like(sc, 2.0**-127), sc)
        return (v * sc.repeat_interleave(32, dim=1)).to(torch.bfloat16)
    table = torch.tensor(E2M1, device=pool.device)
    v = torch.stack((table[(codes & 15).long()], table[(codes >> 4).long()]), dim=-1)
    v = v.reshape(codes.shape[0], 512)
    return (v * scales.view(torch.float8_e4m3fn).float().repeat_interleave(16, dim=1)).to(torch.bfloat16)


def sparse_attention(q, pool, idx, lengths, sink, fp4: bool, page: int, sm_scale: float):
    """q [B,H,512] bf16, idx [B,K] int32 slots (-1: none), lengths [B] -> out bf16, lse."""
    B, H, D = q.shape
    K = idx.shape[1]
    valid = (idx >= 0) & (torch.arange(K, device=q.device)[None] < lengths[:, None])
    slots = torch.where(valid, idx, torch.zeros_like(idx)).long().view(-1)
    kv = dequant_rows(pool, slots, fp4, page).view(B, K, D).float()
    s = torch.einsum("bhd,bkd->bhk", q.float(), kv) * sm_scale
    s = s.masked_fill(~valid[:, None], float("-inf"))
    s = torch.cat((s, sink[None, :, None].expand(B, H, 1)), dim=-1)
    out = torch.einsum("bhk,bkd->bhd", torch.softmax(s, dim=-1)[..., :K], kv)
    return out.to(torch.bfloat16), torch.logsumexp(s[..., :K], dim=-1)


def sparse_decode():
    H, K, P = 128, 2048, 64
    compiled = compiled_peer(sparse_attention)
    for layout in ("v41", "v41_fp4"):
        fp4 = layout == "v41_fp4"
        data, scale_bytes, page_bytes = page_geometry(layout, P)
        for B in (1, 64):
            g = torch.Generator(device="cuda").manual_seed(B + 17 * fp4)
            pages = -(-2 * B * K // P)
            pool = torch.randint(0, 256, (pages, page_bytes), dtype=torch.uint8, device="cuda",
                                 generator=g)
            if not fp4:  # finite codes (no e4m3 NaN) and scales near 2^-7
                pool[:, :P * data][(pool[:, :P * data] & 0x7F) == 0x7F] = 0x10
            pool[:, P * data:P * (data + scale_bytes)] = 120 if not fp4 else 0x30
            idx = torch.randperm(pages * P, device="cuda", generator=g)[:B * K].view(B, K).int()
            lengths = torch.full((B,), K, dtype=torch.int32, device="cuda")
            q = torch.randn(B, H, 512, device="cuda", generator=g).to(torch.bfloat16)
            sink = torch.randn(H, device="cuda", generator=g)
            args = (q, pool, idx, lengths, sink, fp4, P, 512**-0.5)
            peer = f"sparse_decode {layout} H{H} P{P}"
            emit(f"eager {peer}", B, K, median_us(lambda: sparse_attention(*args), reps=10, batch=5))
            f = compiled(*args)
            if f is not None:
                emit(f"compile {peer}", B, K, median_us(lambda: f(*args), reps=10, batch=5))


if __name__ == "__main__":
    families = {
        "indexer_topk": indexer_topk,
        "sampling_renorm": sampling_renorm,
        "candidate_blocks": candidate_blocks,
        "split_combine": split_combine,
        "sparse_decode": sparse_decode,
    }
    families[sys.argv[1]]()
