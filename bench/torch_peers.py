#!/usr/bin/env python3
"""PyTorch peers of the kernel families, timed eager and under torch.compile on the cases' own tensors.

    python3 bench/torch_peers.py DIR_OR_FILES... [--out FILE.jsonl] [--device cuda|cpu]
                                 [--family F] [--no-compile] [--reps N]

Reads case files (what `dsv4-replay --draw FAMILY --shape ... --out DIR` writes; a directory
stands for its *.safetensors files) and runs, for each, its family's peer (python/dsv4ci/peers:
the expression a PyTorch user writes for the operation, on the case's inputs and its outputs'
start states): the median microseconds per call over CUDA-event timed batches (wall clock on the
CPU), eagerly and compiled (torch.compile with dynamic shapes, else one static compile).

Writes JSON Lines (to --out, else stdout), one object per case, flushed as the case finishes:
{"file", "family", "shape", "peer", "device", "torch", "eager_us", "compile_us", "eager_error",
"compile_error"} (null where absent; an error's message where a run failed, or why the peer
cannot model the case). On a GPU the first line is the math ceiling the tables judge FLOP rates
against: {"ceiling": "bf16_matmul", "tflops", "shape"} (torch.matmul of two 8192 x 8192 bf16
matrices). --family F keeps the cases of family F; --no-compile leaves compile_us
null; --reps N timed batches per median (default 30).

Exit status: 0 every case timed; 1 some peer failed (or cannot model its case); 2 bad usage (a
flag, or a file that is not a case file); 3 could not run (no torch, no such device, no case files).
"""

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

EXIT_OK, EXIT_PEER_FAILED, EXIT_USAGE, EXIT_CANNOT_RUN = 0, 1, 2, 3


class Usage(Exception):
    """Bad usage: exit 2 with the message."""


def median_us(fn, device="cuda", reps=30, batch=20, warmup=5):
    """Median microseconds per call of fn() over `reps` timed batches of `batch` calls."""
    import torch

    for _ in range(warmup):
        fn()
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        if cuda:
            a.record()
        else:
            t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        if cuda:
            b.record()
            b.synchronize()
            samples.append(1000.0 * a.elapsed_time(b) / batch)
        else:
            samples.append(1e6 * (time.perf_counter() - t0) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def _message(e):
    return f"{type(e).__name__}: {e}".strip().splitlines()[0][:500]


def compiled_peer(fn):
    """torch.compile(fn) with dynamic shapes, falling back to one static compile per shape when
    Inductor refuses the dynamic graph. pick(*args) -> (the compiled callable, None) or (None,
    both failures' messages)."""
    import torch

    def pick(*args):
        errors = []
        for kind, dynamic in (("dynamic", True), ("static", False)):
            try:
                f = torch.compile(fn, dynamic=dynamic)  # torch < 2.0 has none: the row says so
                f(*args)
                return f, None
            except Exception as e:  # noqa: BLE001 - reported, then the next compile is tried
                errors.append(f"{kind} compile: {_message(e)}")
        return None, "; ".join(errors)

    return pick


def case_files(paths):
    """The case files named by the arguments, in order (a directory: its *.safetensors, sorted)."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "**", "*.safetensors"), recursive=True))
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise Usage(f"{p}: no such file or directory")
    return files


def parse(argv):
    ap = argparse.ArgumentParser(prog="torch_peers.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", metavar="DIR_OR_FILES")
    ap.add_argument("--out", metavar="FILE.jsonl")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--family")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--reps", default="30")
    args = ap.parse_args(argv)  # exits 2 on an unknown flag, naming it
    if args.device not in ("cuda", "cpu"):
        raise Usage(f"--device {args.device!r}: must be cuda or cpu")
    try:
        args.reps = int(args.reps)
    except ValueError:
        raise Usage(f"--reps {args.reps!r}: not an integer") from None
    if args.reps < 1:
        raise Usage(f"--reps {args.reps}: must be at least 1")
    return args


def time_case(path, args, torch, peers, Case, FormatError):
    """The JSON object of one case file (None when --family leaves it out)."""
    try:
        case = Case.load(path)
    except (FormatError, OSError, ValueError) as e:
        raise Usage(f"{path}: not a case file: {e}") from None
    if args.family and case.family != args.family:
        return None
    row = {"file": path, "family": case.family, "shape": case.metadata.get("dsv4.shape"), "peer": None,
           "device": args.device, "torch": torch.__version__, "eager_us": None, "compile_us": None,
           "eager_error": None, "compile_error": None}
    try:
        peer = peers.build(case)
    except peers.Unmodelled as e:
        row["eager_error"] = row["compile_error"] = f"the peer cannot model this case: {e}"
        return row
    row["peer"] = peer.name
    inp = {n: t.to(args.device) for n, t in case.inputs.items()}
    start = peers.start_states(case, args.device)
    batch = 20 if args.device == "cuda" else 1
    try:
        row["eager_us"] = median_us(lambda: peer.fn(inp, start), args.device, args.reps, batch)
    except Exception as e:  # noqa: BLE001 - the row says why
        row["eager_error"] = _message(e)
    if not args.no_compile:
        f, err = compiled_peer(peer.fn)(inp, start)
        if f is None:
            row["compile_error"] = err
        else:
            try:
                row["compile_us"] = median_us(lambda: f(inp, start), args.device, args.reps, batch)
            except Exception as e:  # noqa: BLE001
                row["compile_error"] = _message(e)
    return row


def matmul_ceiling(torch, args, n=8192):
    """The dense bf16 matrix rate torch reaches on the card: the math ceiling of the tables."""
    a = torch.randn(n, n, device=args.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=args.device, dtype=torch.bfloat16)
    us = median_us(lambda: torch.matmul(a, b), args.device, 10, 5)
    return {"ceiling": "bf16_matmul", "tflops": 2.0 * n ** 3 / (us * 1e6), "shape": f"{n}x{n}x{n}"}


def run(argv):
    args = parse(argv)
    files = case_files(args.paths)
    try:
        import torch

        from dsv4ci import peers
        from dsv4ci.case import Case
        from dsv4ci.safetensors_io import FormatError
    except ImportError as e:
        print(f"torch_peers.py: could not run: {e} (the peers need torch)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_peers.py: could not run: --device cuda: no such device (torch sees no CUDA or "
              "ROCm GPU; --device cpu runs on the CPU)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if not files:
        print(f"torch_peers.py: could not run: no case files in {' '.join(args.paths)}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    sink = open(args.out, "w") if args.out else sys.stdout
    timed = failed = 0
    try:
        if args.device == "cuda":
            sink.write(json.dumps(matmul_ceiling(torch, args)) + "\n")
            sink.flush()
        for path in files:
            row = time_case(path, args, torch, peers, Case, FormatError)
            if row is None:
                continue
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            ok = row["eager_error"] is None and (args.no_compile or row["compile_error"] is None)
            timed, failed = timed + ok, failed + (not ok)
            if args.out:
                print(f"{row['family']} {row['shape']}: {row['peer']} eager {row['eager_us']} us, "
                      f"compile {row['compile_us']} us"
                      + "".join(f"; {k}: {row[k]}" for k in ("eager_error", "compile_error") if row[k]),
                      flush=True)
    finally:
        if args.out:
            sink.close()
    if not timed and not failed:
        print(f"torch_peers.py: could not run: no {args.family} case in {' '.join(args.paths)}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return EXIT_PEER_FAILED if failed else EXIT_OK


def main(argv=None):
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except Usage as e:
        print(f"torch_peers.py: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
