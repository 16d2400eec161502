"""The registry of implementations under test: each a SGLang function mapped onto a family's case."""

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Optional

_OPS = {}


class Unavailable(Exception):
    """The op's function cannot be imported here; the message says why (the test skips with it)."""


@dataclass(frozen=True)
class Op:
    family: str
    name: str                # unique; shown in reports, e.g. "renorm_triton.top_k_renorm_probs_triton"
    module: str              # SGLang's import path of the function
    attr: str                # the function's name in that module
    call: Callable           # call(fn, live) -> dict of outputs, or None after writing live.out
    platforms: tuple = ("cuda", "hip")  # where SGLang dispatches to it
    backend: str = "triton"  # triton | aiter | sgl-kernel | torch
    sweeps: tuple = ("gpu",)  # dsv4-replay --draw sweeps it runs on
    shape: dict = field(default_factory=dict)  # vars set on every drawn case: SGLang's convention
    applies: Optional[Callable] = None  # applies(live) -> None, or why the case is not for this op
    standin: str = ""        # "module:function", the project's re-implementation (CPU CI)
    files: tuple = ()        # SGLang files (repository paths) the module needs
    notes: str = ""          # SGLang behaviour a reader of a MISMATCH should know
    max_cases: int = 0       # at most this many cases per sweep (0: all)
    native_only: bool = False  # its convention is the platform's (e4m3fnuz on gfx942): never run
                               # off its platforms, --dsv4-any-platform or not
    not_capturable: str = ""   # why SGLang's op itself cannot be captured into a graph (it reads
                               # the device back, e.g. a .item()); "" when it can

    def function(self, standin=False):
        """SGLang's function (or the stand-in); Unavailable naming why it cannot be imported."""
        if standin:
            if not self.standin:
                raise Unavailable(f"{self.name} has no stand-in")
            mod, _, attr = self.standin.partition(":")
        else:
            mod, attr = self.module, self.attr
        try:
            m = importlib.import_module(mod)
        except Exception as e:  # an ImportError, or a module that fails while importing
            raise Unavailable(f"{mod} is not importable here: {type(e).__name__}: {e}") from None
        try:
            return getattr(m, attr)
        except AttributeError:
            raise Unavailable(f"{mod} has no {attr}") from None

    def platform_reason(self, device):
        """Why SGLang would not dispatch to this op on `device` (None when it would)."""
        import torch

        if device.type != "cuda":
            return None  # CPU runs are of stand-ins; the platform is a GPU property
        here = "hip" if getattr(torch.version, "hip", None) else "cuda"
        return None if here in self.platforms else f"SGLang dispatches to {self.name} on {'/'.join(self.platforms)}, not {here}"


def register(op):
    if op.name in _OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    if not op.sweeps:
        raise ValueError(f"op {op.name!r} names no sweep")
    _OPS[op.name] = op
    return op


def load_all():
    """Imports every family module (they register their ops)."""
    from . import families

    for info in pkgutil.iter_modules(families.__path__):
        importlib.import_module(f"{families.__name__}.{info.name}")


def all_ops(families=None, names=None):
    load_all()
    ops = [o for o in _OPS.values() if (not families or o.family in families) and (not names or o.name in names)]
    return sorted(ops, key=lambda o: (o.family, o.name))
