"""A drawn case on the device, and one run of an implementation on it, judged by the reference."""

import os
import re

import torch

from . import replay
from .case import Case
from .guards import Guarded


class RunFailure(AssertionError):
    """The implementation's run failed a check (canaries, inputs, determinism, the verdict)."""


def _first_byte_difference(a, b):
    """Index of the first differing byte of two equal-size tensors, or None."""
    x = a.detach().contiguous().reshape(-1).view(torch.uint8) if a.numel() else a.new_empty(0, dtype=torch.uint8)
    y = b.detach().contiguous().reshape(-1).view(torch.uint8) if b.numel() else b.new_empty(0, dtype=torch.uint8)
    d = (x != y).nonzero().flatten()
    return int(d[0]) if d.numel() else None


def _safe(s):
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", s)[:120]


class _Starts(dict):
    """Output start states computed on first access (a probe's `out`)."""

    def __init__(self, case):
        super().__init__()
        self._case = case
        self._names = [s.name for s in case.outputs]

    def __missing__(self, name):
        if name not in self._names:
            raise KeyError(name)
        t = self._case.start_state(name)
        self[name] = t
        return t

    def __contains__(self, name):
        return name in self._names

    def __iter__(self):
        return iter(self._names)

    def get(self, name, default=None):
        return self[name] if name in self._names else default


class _VarsAccess:
    """The case's vars, as a LiveCase and a CaseProbe both offer them (needs `self.case`)."""

    def var(self, key, default=None):
        return self.case.vars.get(key, default)

    def ivar(self, key, default=None):
        v = self.case.vars.get(key)
        return default if v in (None, "") else int(v)

    def flag(self, word):
        return self.case.vars.get(word) == ""

    def scalar(self, name):
        """A 0-d input's value, read from the case on the host: no device read, so a mapping may
        ask for it while a graph is being captured (a graph's rounds share their scalars)."""
        t = self.case.inputs[name]
        if t.dim() != 0:
            raise ValueError(f"in.{name} is not a scalar (shape {list(t.shape)})")
        return t.item()


class CaseProbe(_VarsAccess):
    """A case's inputs on the CPU with LiveCase's accessors, to ask an op whether it applies before
    any device buffer is made (a large case skipped costs no allocation)."""

    def __init__(self, case, source="sglang"):
        self.case = case
        self.source = source
        self.device = torch.device("cpu")
        self.inp = case.inputs
        self.out = _Starts(case)



class LiveCase(_VarsAccess):
    """`inp` and `out` on `device`, guarded; `run(fn)` calls `fn(self)` and judges its outputs.

    `rounds` are further cases of the same layout (other seeds): a graph run replays the captured
    graph on each of them through the same buffers, so a replay that ignores its inputs fails.
    """

    def __init__(self, case, device, tool, keep_dir, label="", source="sglang", rule=None,
                 rounds=(), keep_all=False):
        self.case = case
        self.device = torch.device(device)
        self.tool = tool
        self.keep_dir = os.path.abspath(keep_dir)
        self.label = label
        self.source = source
        self.rule = rule
        self.rounds = list(rounds)
        for r in self.rounds:  # a captured graph holds the capture case's scalars
            for n, t in case.inputs.items():
                if t.dim() == 0 and not torch.equal(r.inputs.get(n, t), t):
                    raise ValueError(f"{label}: graph round {r.name} (seed {r.seed}) has in.{n} = "
                                     f"{r.inputs[n].item()}, the captured case {t.item()}: a graph "
                                     f"replays its capture's scalars")
        self.keep_all = keep_all
        self.runs = 0
        self.verdicts = []
        self._in_guards = {n: Guarded(f"in.{n}", t.dtype, t.shape, self.device) for n, t in case.inputs.items()}
        self._out_guards = {s.name: Guarded(f"out.{s.name}", s.dtype, s.shape, self.device) for s in case.outputs}
        self.inp = {n: g.tensor for n, g in self._in_guards.items()}
        self.out = {n: g.tensor for n, g in self._out_guards.items()}
        self.omitted = set()  # outputs the op does not produce (its call returned None for them)
        self.reset()  # inputs readable before the first run (an op's applies() looks at them)


    # ---- state ------------------------------------------------------------------------------
    def reset(self, case=None):
        """Inputs := the case's inputs, outputs := their start state (in the same buffers)."""
        case = case or self.case
        for n, t in case.inputs.items():
            self.inp[n].copy_(t)
        for s in case.outputs:
            self.out[s.name].copy_(case.start_state(s.name))

    def _store(self, res):
        if res is None:
            return
        if not isinstance(res, dict):
            raise RunFailure(f"{self.label}: the op returned {type(res).__name__}; expected a dict of "
                             f"outputs ({', '.join(self.out)}) or None")
        for n, t in res.items():
            if t is None and n in self.out:  # an output this op does not produce: not judged
                self.omitted.add(n)
                continue
            if n not in self.out:
                raise RunFailure(f"{self.label}: the op returned output {n!r}; the case's outputs are "
                                 f"{', '.join(self.out)}")
            o = self.out[n]
            if tuple(t.shape) != tuple(o.shape) or t.dtype != o.dtype:
                raise RunFailure(f"{self.label}: output {n!r}: the op gave {t.dtype} {list(t.shape)}, "
                                 f"the case declares {o.dtype} {list(o.shape)}")
            o.copy_(t)

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _checks(self, case):
        """Canary damage and inputs the op wrote (an op may write only its outputs)."""
        self._sync()
        msgs = []
        for g in list(self._in_guards.values()) + list(self._out_guards.values()):
            msgs += g.damage()
        for n, t in case.inputs.items():
            i = _first_byte_difference(self.inp[n].cpu(), t)
            if i is not None:
                msgs.append(f"in.{n}: the op wrote its input (first changed byte {i})")
        return msgs

    def _outputs_cpu(self):
        self._sync()
        got = {n: t.detach().cpu().clone() for n, t in self.out.items() if n not in self.omitted}
        if not got:
            raise RunFailure(f"{self.label}: the op produced none of the case's outputs "
                             f"({', '.join(self.out)}): nothing to judge")
        return got

    # ---- a run ------------------------------------------------------------------------------
    def run(self, fn, graph=False, repeat=1):
        """Runs `fn(self)` on the case (eager; or captured and replayed; `repeat` times) and judges."""
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        self.runs += 1
        self.omitted = set()
        if graph:
            return self._run_graph(fn)
        first = None
        for r in range(repeat):
            self.reset()
            self._store(fn(self))
            got = self._outputs_cpu()
            if first is None:
                first = got
                continue
            for n in got:
                i = _first_byte_difference(got[n], first[n])
                if i is not None:
                    raise RunFailure(f"{self.label}: not deterministic: output {n!r} of repeat {r + 1} differs "
                                     f"from the first run's at byte {i} (case {self.case.name}, seed "
                                     f"{self.case.seed})")
        return self._judge(self.case, first, self._checks(self.case))

    def _run_graph(self, fn):
        if self.device.type != "cuda":
            raise RunFailure(f"{self.label}: graph capture needs a CUDA or ROCm device, not {self.device}")
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up outside the capture (compilation, autotuning)
            self.reset()
            self._store(fn(self))
        torch.cuda.current_stream(self.device).wait_stream(side)
        self._sync()
        g = torch.cuda.CUDAGraph()
        self.reset()
        with torch.cuda.graph(g):
            self._store(fn(self))
        verdict = None
        for case in [self.case] + self.rounds:
            self.reset(case)
            g.replay()
            v = self._judge(case, self._outputs_cpu(), self._checks(case), graph=True)
            verdict = verdict or v
        return verdict

    def _judge(self, case, got, failures, graph=False):
        os.makedirs(self.keep_dir, exist_ok=True)
        stem = os.path.splitext(os.path.basename(case.path or "case"))[0]
        path = os.path.join(self.keep_dir, f"{stem}--{_safe(self.label)}{'-graph' if graph else ''}.safetensors")
        meta = {"dsv4.source": self.source}
        if self.label:
            meta["dsv4.op"] = self.label
        case.with_got(got, **meta).save(path)
        v = replay.judge(self.tool, path, rule=self.rule)
        self.verdicts.append((case, v, path))
        if v.exit_code in (replay.EXIT_BAD_CASE, replay.EXIT_CANNOT_RUN) and v.verdict not in ("match", "mismatch"):
            raise replay.ToolError(f"{self.label}: {v.command()} could not judge the case: "
                                   f"{v.report.get('error', v.verdict)}")
        if failures or not v.ok:
            lines = [f"{self.label}: case {case.name} (seed {case.seed}) {'graph replay ' if graph else ''}"
                     f"is {'MISMATCH' if not v.ok else 'damaged'}"]
            lines += [f"  {m}" for m in failures]
            if self.omitted:
                lines.append(f"  not produced by the op (not judged): {', '.join(sorted(self.omitted))}")
            lines.append(v.summary())
            lines.append(f"  case file kept: {path}")
            lines.append(f"  reproduce: {v.command()}")
            if case.metadata.get("dsv4.repro"):
                lines.append(f"  redraw: {case.metadata['dsv4.repro']}")
            raise RunFailure("\n".join(lines))
        if not self.keep_all:
            os.remove(path)
        return v
