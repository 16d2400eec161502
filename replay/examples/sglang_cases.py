#!/usr/bin/env python3
"""Writes dsv4-replay case files the way SGLang's kernels hand their outputs over.

For each family, SGLang's convention as SGLang's code states it, on small hostile inputs (ties at a
cut-off, -inf scores, a kept mass exactly equal to p, empty rows, sinks, a v41_fp4 main cache next
to a v41 extra cache, the inverse RoPE):

  indexer_topk      exactly K indices by the radix key (topk_v1.cuh / topk_v2.cuh): -inf keys
                    eligible, ties broken towards the larger index (the reference takes the
                    smaller: only the tie-tolerant verdict accepts both), unsorted; in.select = 1
  candidate_blocks  the published block list in score order, padded with the row's block count
                    (num_blocks), and the keys of those blocks (candidate_blocks.py)
  sampling_renorm   top-p by renorm.py's pivot (ascending sort, cumsum, searchsorted(1 - p)),
                    which keeps one more value where a kept mass equals p exactly, with
                    top-k's k clamped to [1, V] (in.top_p_rule = 1, in.k_clamp = 1)
  split_combine     unnormalised partials (acc, m, l) with natural m and SM100's _combine (0 for an
                    empty row or a +inf sink), then the inverse RoPE of the bf16 output
  sparse_decode     compact_attention_hip.py: a v41_fp4 main cache, a v41 extra cache, the sink
                    and the inverse RoPE (freqs, positions)

Each family gives DIR/<family>.safetensors, which dsv4-replay judges `match`, and
DIR/<family>-mismatch.safetensors, the same case with one stored output value changed, which it
judges `MISMATCH` naming that value. __metadata__ has dsv4.source = sglang, so the replay uses the
verdict SGLang's own tests would accept (tie-tolerant, derived tolerances).

    python3 replay/examples/sglang_cases.py --family all --out /tmp/sglang_cases
    build/cpu/replay/dsv4-replay /tmp/sglang_cases/indexer_topk.safetensors            # match
    build/cpu/replay/dsv4-replay /tmp/sglang_cases/indexer_topk-mismatch.safetensors   # MISMATCH

With PyTorch importable the arithmetic SGLang writes in torch runs in torch (torch.topk, the
renorm.py pivot, the SM100 combine, the attention's products); without it (--backend python) the
same formulas run on Python floats. The inputs come from one seeded random.Random either way, and
the files are written by the small safetensors writer below, so the bytes of every in.* tensor do
not depend on the backend.
"""

import argparse
import json
import math
import os
import random
import struct
import sys

try:
    import torch
except ImportError:  # the plain-Python backend
    torch = None

INF = float("inf")


# ---- number formats ----------------------------------------------------------------------------

def f32(x):
    """x rounded to fp32 (round to nearest even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_bits(x):
    """The bf16 bits of x (fp32 first, then round to nearest even; NaN -> 0x7fc0)."""
    if x != x:
        return 0x7FC0
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bf16(x):
    return struct.unpack("<f", struct.pack("<I", bf16_bits(x) << 16))[0]


def e4m3fn(byte):
    s = -1.0 if byte & 0x80 else 1.0
    e, m = (byte >> 3) & 0xF, byte & 7
    if e == 0xF and m == 7:
        return float("nan")
    return s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1(nibble):
    return (-1.0 if nibble & 8 else 1.0) * E2M1[nibble & 7]


# ---- a safetensors writer (the format safetensors.torch.save_file writes) ----------------------

FMT = {"F32": "f", "I32": "i", "I64": "q", "U8": "B", "BF16": "H"}


class T:
    """A tensor: safetensors dtype, shape, flat values (BF16 given as floats)."""

    def __init__(self, dtype, shape, values):
        n = 1
        for d in shape:
            n *= d
        assert len(values) == n, (dtype, shape, len(values))
        self.dtype, self.shape, self.values = dtype, list(shape), list(values)

    def bytes(self):
        vals = [bf16_bits(v) for v in self.values] if self.dtype == "BF16" else self.values
        return struct.pack("<%d%s" % (len(vals), FMT[self.dtype]), *vals)


def save(path, tensors, metadata):
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        b = tensors[name].bytes()
        header[name] = {"dtype": tensors[name].dtype, "shape": tensors[name].shape,
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def scalar(dtype, v):
    return T(dtype, [], [v])


# ---- indexer_topk ------------------------------------------------------------------------------

def radix_key(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return (~b & 0xFFFFFFFF) if b & 0x80000000 else (b | 0x80000000)


def indexer_topk(rng, use_torch):
    B, W, K = 3, 64, 16
    lens = [64, 40, 12]  # row 2 takes the trivial path: 0..11, then -1
    scores = []
    for b in range(B):
        row = [float(rng.randint(-3, 3)) for _ in range(W)]
        for i in rng.sample(range(W), 20):
            row[i] = -INF  # more -inf than the finite keys leave room for in row 1
        scores += row
    out = []
    for b in range(B):
        row, n = scores[b * W:(b + 1) * W], lens[b]
        if n <= K:
            sel = list(range(n)) + [-1] * (K - n)
        elif use_torch:
            # SGLang's radix select returns the K largest keys; torch.topk over the reversed row
            # breaks ties towards the larger index, as an atomics-ordered kernel may.
            t = torch.tensor(row[:n], dtype=torch.float32).flip(0)
            idx = torch.topk(t, K).indices
            sel = [n - 1 - int(i) for i in idx]
        else:
            order = sorted(range(n), key=lambda i: (radix_key(row[i]), i), reverse=True)
            sel = order[:K]
        out += sel
    inputs = {"scores": T("F32", [B, W], scores), "lens": T("I32", [B], lens),
              "K": scalar("I64", K), "sorted": scalar("I32", 0), "select": scalar("I32", 1)}
    got = {"out": T("I32", [B, K], out)}

    def plant(g):
        # Row 0: a selected key swapped for an unselected one of a lower score.
        row, chosen = scores[:W], set(g["out"].values[:K])
        low = min(chosen, key=lambda i: radix_key(row[i]))
        worse = next(i for i in range(W) if i not in chosen and radix_key(row[i]) < radix_key(row[low]))
        g["out"].values[g["out"].values.index(low)] = worse
        return "out row 0: index %d" % worse
    return inputs, got, plant


# ---- candidate_blocks --------------------------------------------------------------------------

def candidate_blocks(rng, use_torch):
    B, W, bs, nb, K = 2, 64, 8, 4, 12
    lens = [64, 20]
    scores = [float(rng.randint(-4, 4)) for _ in range(B * W)]
    for b in range(B):
        for i in range(lens[b], W):
            scores[b * W + i] = float("nan")  # past the length: never read
    blocks, keys = [], []
    for b in range(B):
        row, n_keys = scores[b * W:(b + 1) * W], lens[b]
        n = (n_keys + bs - 1) // bs
        bscore = [INF if j == n - 1 else max(row[j * bs:min(n_keys, (j + 1) * bs)])
                  for j in range(n)]
        # Score order, ties to the larger block (SGLang's sort leaves the order free), padded
        # with num_blocks: the list as SGLang publishes it.
        order = sorted(range(n), key=lambda j: (bscore[j], j), reverse=True)[:nb]
        blocks += order + [n] * (nb - len(order))
        cand = [i for j in order for i in range(j * bs, min(n_keys, (j + 1) * bs))]
        top = sorted(cand, key=lambda i: (row[i], i), reverse=True)[:K]
        keys += sorted(top) + [-1] * (K - len(top))
    inputs = {"scores": T("F32", [B, W], scores), "lens": T("I32", [B], lens),
              "bs": scalar("I64", bs), "nb": scalar("I64", nb), "K": scalar("I64", K)}
    got = {"blocks": T("I32", [B, nb], blocks), "keys": T("I32", [B, K], keys)}

    def plant(g):
        # Row 0: its last published block swapped for one scoring below every published block.
        row = scores[:W]
        n = W // bs
        score = [INF if j == n - 1 else max(row[j * bs:(j + 1) * bs]) for j in range(n)]
        chosen = g["blocks"].values[:nb]
        lower = [j for j in range(n) if score[j] < min(score[c] for c in chosen)]
        if not lower:
            sys.exit("sglang_cases.py: candidate_blocks row 0 has no block below the cut-off")
        g["blocks"].values[nb - 1] = lower[0]
        return "blocks row 0: block %d" % lower[0]
    return inputs, got, plant


# ---- sampling_renorm ---------------------------------------------------------------------------

def renorm_py_pivot(row, p):
    """renorm.py's _top_p_pivots_sorted: ascending sort, cumsum, searchsorted(1 - p, left)."""
    asc = sorted(row)
    acc, cut = 0.0, len(asc) - 1
    for i, x in enumerate(asc):
        acc = f32(acc + x)
        if acc >= f32(1.0 - p):
            cut = i
            break
    return asc[cut]


def sampling_renorm(rng, use_torch):
    B, V = 3, 16
    probs, ps = [], []
    for b in range(B):
        # Dyadic rows: 1/2, 1/4, 1/8 and eight 1/64 (sum 1): every mass exact in fp32.
        row = [0.5, 0.25, 0.125] + [1 / 64] * 8 + [0.0] * 5
        rng.shuffle(row)
        probs += row
        ps.append([0.75, 0.875, 0.3][b])  # rows 0 and 1 sit exactly on a kept mass
    out = []
    for b in range(B):
        row, p = probs[b * V:(b + 1) * V], ps[b]
        if use_torch:
            x = torch.tensor([row], dtype=torch.float32)
            asc = torch.sort(x, dim=-1).values
            cut = torch.searchsorted(asc.cumsum(dim=-1).contiguous(),
                                     torch.tensor([[1.0 - p]], dtype=torch.float32),
                                     right=False).clamp(max=V - 1)
            pivot = asc.gather(1, cut)
            kept = torch.where(x >= pivot, x, torch.zeros_like(x))
            out += (kept / kept.sum(dim=-1, keepdim=True))[0].tolist()
        else:
            pivot = renorm_py_pivot(row, p)
            kept = [x if x >= pivot else 0.0 for x in row]
            s = f32(sum(kept))
            out += [f32(x / s) for x in kept]
    inputs = {"probs": T("F32", [B, V], probs), "p": T("F32", [B], ps),
              "top_p_rule": scalar("I32", 1)}
    got = {"out": T("F32", [B, V], out)}

    def plant(g):
        i = next(i for i, v in enumerate(g["out"].values) if v > 0)
        g["out"].values[i] = f32(g["out"].values[i] * (1 + 2.0 ** -10))
        return "entry %d" % i
    return inputs, got, plant


# ---- split_combine -----------------------------------------------------------------------------

def rope_table(n_pos, rope_dim):
    """(cos, sin) pairs per position, SGLang's freqs_cis viewed as fp32."""
    t = []
    for p in range(n_pos):
        for i in range(rope_dim // 2):
            th = p * 10000.0 ** (-2.0 * i / rope_dim)
            t += [f32(math.cos(th)), f32(math.sin(th))]
    return t


def inverse_rope_bf16(out, D, rd, cs, pos):
    """SGLang's inverse RoPE of a bf16 row: fma(x, cos, swapped * sin), swapped = (x1, -x0)."""
    r = list(out)
    for i in range(0, rd, 2):
        x0, x1 = out[D - rd + i], out[D - rd + i + 1]
        c, s = cs[pos * rd + i], cs[pos * rd + i + 1]
        r[D - rd + i] = bf16(f32(x0 * c + f32(x1 * s)))
        r[D - rd + i + 1] = bf16(f32(x1 * c + f32(-x0 * s)))
    return r


def split_combine(rng, use_torch):
    B, S, H, D, rd, n_pos = 3, 3, 2, 64, 64, 32
    n_splits = [3, 2, 0]  # batch row 2 is empty: 0 (rotated: -0 where SGLang writes -0)
    sink = [0.5, INF]      # head 1's +inf sink: 0 as SM100 writes it (SGLang's HIP reducer: NaN)
    acc, m, l = [], [], []
    for b in range(B):
        for s in range(S):
            for h in range(H):
                if s >= n_splits[b]:
                    m.append(float("nan")), l.append(float("nan"))
                    acc += [float("nan")] * D
                    continue
                lv = f32(rng.uniform(1, 16))
                m.append(f32(rng.uniform(-3, 3)))  # natural, the SM100 partials' domain
                l.append(lv)
                acc += [f32(rng.gauss(0, 1) * lv) for _ in range(D)]
    cs, positions = rope_table(n_pos, rd), [rng.randrange(n_pos) for _ in range(B)]
    out = []
    for b in range(B):
        for h in range(H):
            n = n_splits[b]
            at = [(b * S + s) * H + h for s in range(n)]
            if use_torch:
                mx = torch.tensor([m[i] for i in at], dtype=torch.float32)
                den = torch.tensor([l[i] for i in at], dtype=torch.float32)
                vals = torch.tensor([acc[i * D:(i + 1) * D] for i in at],
                                    dtype=torch.float32).reshape(n, D)
                sk = torch.tensor(sink[h], dtype=torch.float32)
                mm = torch.maximum(mx.max() if n else torch.tensor(-INF), sk)
                mm = torch.where(mm.abs() == INF, torch.tensor(0.0), mm)
                f = torch.exp(mx - mm)
                d = (den * f).sum() + torch.exp(sk - mm)
                o = (vals * f[:, None]).sum(0) / d
                ok = bool(d > 0) and sink[h] != INF
                row = [bf16(v) for v in o.tolist()] if ok else [0.0] * D
            else:
                mm = max([m[i] for i in at] + [sink[h]])
                mm = 0.0 if abs(mm) == INF else mm
                f = [math.exp(m[i] - mm) for i in at]
                d = sum(l[i] * fi for i, fi in zip(at, f)) + math.exp(sink[h] - mm)
                ok = d > 0 and sink[h] != INF
                row = ([bf16(sum(acc[i * D + k] * fi for i, fi in zip(at, f)) / d)
                        for k in range(D)] if ok else [0.0] * D)
            out += inverse_rope_bf16(row, D, rd, cs, positions[b])
    inputs = {"acc": T("F32", [B, S, H, D], acc), "m": T("F32", [B, S, H], m),
              "l": T("F32", [B, S, H], l), "m_base2": scalar("I32", 0),
              "n_splits": T("I32", [B], n_splits), "sink": T("F32", [H], sink),
              "cos_sin": T("F32", [n_pos, rd], cs), "positions": T("I64", [B], positions)}
    got = {"out": T("BF16", [B, H, D], out)}

    def plant(g):
        g["out"].values[5] = bf16(g["out"].values[5] + 0.25)
        return "[0, 0, 5]"
    return inputs, got, plant


# ---- sparse_decode -----------------------------------------------------------------------------

def v41_pool(rng, pages, P):
    """v41 pages: 512 e4m3fn codes a token, then the page's ue8m0 scale rows (one per 32)."""
    pb = -(-P * 528 // 512) * 512
    pool, rows = [0] * (pages * pb), []
    for slot in range(pages * P):
        base, r = slot // P * pb, slot % P
        codes = [rng.choice([c for c in range(0x28, 0x48)] + [c | 0x80 for c in range(0x28, 0x48)])
                 for _ in range(512)]
        sc = [rng.choice([126, 127, 128]) for _ in range(16)]
        pool[base + r * 512:base + r * 512 + 512] = codes
        pool[base + P * 512 + r * 16:base + P * 512 + r * 16 + 16] = sc
        rows.append([bf16(e4m3fn(codes[d]) * 2.0 ** (sc[d // 32] - 127)) for d in range(512)])
    return pool, pb, rows


def v41_fp4_pool(rng, pages, P):
    """v41_fp4 pages: 256 bytes of e2m1 pairs a token (value 2i low nibble), then e4m3 scales."""
    pb = -(-P * 288 // 256) * 256
    pool, rows = [0] * (pages * pb), []
    for slot in range(pages * P):
        base, r = slot // P * pb, slot % P
        nib = [rng.randrange(16) for _ in range(512)]
        sc = [rng.choice([0x30, 0x38, 0x40]) for _ in range(32)]  # 0.5, 1, 2
        pool[base + r * 256:base + r * 256 + 256] = [nib[2 * i] | nib[2 * i + 1] << 4
                                                     for i in range(256)]
        pool[base + P * 256 + r * 32:base + P * 256 + r * 32 + 32] = sc
        rows.append([bf16(e2m1(nib[d]) * e4m3fn(sc[d // 16])) for d in range(512)])
    return pool, pb, rows


def sparse_decode(rng, use_torch):
    B, H, K, Ke, P = 2, 16, 8, 4, 16
    main, main_pb, main_rows = v41_fp4_pool(rng, 2, P)
    extra, extra_pb, extra_rows = v41_pool(rng, 1, P)
    idx = [rng.randrange(2 * P) for _ in range(B * K)]
    idx[3] = -1  # no key
    eidx = [rng.randrange(P) for _ in range(B * Ke)]
    lens, elens = [K, 5], [Ke, 0]
    q = [bf16(rng.gauss(0, 1)) for _ in range(B * H * 512)]
    sink = [f32(rng.uniform(-2, 2)) for _ in range(H)]
    scale = f32(512 ** -0.5)
    rd, n_pos = 64, 64
    cs, positions = rope_table(n_pos, rd), [rng.randrange(n_pos) for _ in range(B)]
    out = []
    for b in range(B):
        keys = [main_rows[idx[b * K + j]] for j in range(lens[b]) if idx[b * K + j] >= 0]
        keys += [extra_rows[eidx[b * Ke + j]] for j in range(elens[b]) if eidx[b * Ke + j] >= 0]
        for h in range(H):
            qh = q[(b * H + h) * 512:(b * H + h + 1) * 512]
            if use_torch:
                kt = torch.tensor(keys, dtype=torch.float32)
                x = (kt @ torch.tensor(qh, dtype=torch.float32)) * scale
                mx = torch.maximum(x.max(), torch.tensor(sink[h]))
                p = torch.exp(x - mx)
                o = (p @ kt) / (p.sum() + torch.exp(torch.tensor(sink[h]) - mx))
                row = [bf16(v) for v in o.tolist()]
            else:
                x = [scale * sum(a * c for a, c in zip(qh, k)) for k in keys]
                mx = max(x + [sink[h]])
                p = [math.exp(v - mx) for v in x]
                den = sum(p) + math.exp(sink[h] - mx)
                row = [bf16(sum(pj * k[d] for pj, k in zip(p, keys)) / den) for d in range(512)]
            out += inverse_rope_bf16(row, 512, rd, cs, positions[b])
    inputs = {"q": T("BF16", [B, H, 512], q),
              "pool": T("U8", [2, main_pb], main), "layout": scalar("I32", 1),
              "page_size": scalar("I64", P), "indices": T("I32", [B, K], idx),
              "lengths": T("I32", [B], lens),
              "extra_pool": T("U8", [1, extra_pb], extra), "extra_layout": scalar("I32", 0),
              "extra_page_size": scalar("I64", P), "extra_indices": T("I32", [B, Ke], eidx),
              "extra_lengths": T("I32", [B], elens),
              "sm_scale": scalar("F32", scale), "sink": T("F32", [H], sink),
              "splits": scalar("I64", 2),
              "cos_sin": T("F32", [n_pos, rd], cs), "positions": T("I64", [B], positions)}
    got = {"out": T("BF16", [B, H, 512], out)}

    def plant(g):
        g["out"].values[7] = bf16(g["out"].values[7] + 1.0)
        return "[0, 0, 7]"
    return inputs, got, plant


FAMILIES = {"indexer_topk": indexer_topk, "candidate_blocks": candidate_blocks,
            "sampling_renorm": sampling_renorm, "split_combine": split_combine,
            "sparse_decode": sparse_decode}


def write(family, out_dir, use_torch, seed):
    rng = random.Random("%s/%d" % (family, seed))
    inputs, got, plant = FAMILIES[family](rng, use_torch)
    meta = {"dsv4.family": family, "dsv4.case_version": "1", "dsv4.source": "sglang",
            "dsv4.case": family + " from SGLang's convention",
            "dsv4.writer": ("torch " + torch.__version__) if use_torch else "python"}
    tensors = {"in." + k: v for k, v in inputs.items()}
    tensors.update({"got." + k: v for k, v in got.items()})
    match = os.path.join(out_dir, family + ".safetensors")
    save(match, tensors, meta)
    where = plant(got)
    tensors.update({"got." + k: v for k, v in got.items()})
    mismatch = os.path.join(out_dir, family + "-mismatch.safetensors")
    save(mismatch, tensors, dict(meta, **{"dsv4.planted": where}))
    print("%s: %s (match), %s (MISMATCH at %s)" % (family, match, mismatch, where))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", default="all", choices=["all"] + sorted(FAMILIES))
    ap.add_argument("--out", required=True, help="directory for the case files")
    ap.add_argument("--backend", default="auto", choices=["auto", "torch", "python"])
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.backend == "torch" and torch is None:
        sys.exit("sglang_cases.py: --backend torch, but torch does not import")
    use_torch = torch is not None and a.backend != "python"
    os.makedirs(a.out, exist_ok=True)
    for family in sorted(FAMILIES) if a.family == "all" else [a.family]:
        write(family, a.out, use_torch, a.seed)


if __name__ == "__main__":
    main()
