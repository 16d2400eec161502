"""A dsv4-ci case file in memory: inputs, expected and start states of the outputs, metadata."""

import functools
import json
import os
from dataclasses import dataclass

import torch

from . import safetensors_io as st

ROLES = ("in", "want", "start", "got")
POISON_FLOAT = 0xFF  # a NaN in every float format the project uses
POISON_INT = 0xA5


@dataclass
class OutputSpec:
    name: str
    dtype: torch.dtype
    shape: tuple
    start: str  # "poison", "zero" or "input"
    poison: int = None  # the poison byte (start == "poison")

    def start_tensor(self, inputs):
        """The output's declared start state as a CPU tensor."""
        if self.start == "input":
            if self.name not in inputs:
                raise st.FormatError(f"output {self.name!r} starts from in.{self.name}, which is missing")
            return inputs[self.name].clone()
        nbytes = torch.empty(0, dtype=self.dtype).element_size()
        for s in self.shape:
            nbytes *= s
        byte = 0 if self.start == "zero" else self.poison_byte()
        raw = torch.full((nbytes,), byte, dtype=torch.uint8)
        return raw.view(self.dtype).reshape(self.shape) if nbytes else torch.empty(self.shape, dtype=self.dtype)

    def poison_byte(self):
        if self.poison is not None:
            return self.poison
        return POISON_FLOAT if self.dtype.is_floating_point else POISON_INT


class Case:
    """A case file: `inputs`, `want`, `start`, `got` map names (role prefix stripped) to CPU tensors."""

    def __init__(self, family, inputs, want=None, start=None, got=None, metadata=None, path=None):
        self.family = family
        self.inputs = dict(inputs)
        self.want = dict(want or {})
        self.start = dict(start or {})
        self.got = dict(got or {})
        self.metadata = dict(metadata or {})
        self.metadata.setdefault("dsv4.family", family)
        self.path = path
        self.outputs = self._output_specs()

    # ---- reading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path):
        tensors, meta = st.load(path)
        roles = {r: {} for r in ROLES}
        for name, t in tensors.items():
            role, dot, rest = name.partition(".")
            if not dot or role not in roles or not rest:
                raise st.FormatError(f"{path}: tensor {name!r} has no role prefix ({', '.join(ROLES)})")
            roles[role][rest] = t
        family = meta.get("dsv4.family")
        if not family:
            raise st.FormatError(f"{path}: __metadata__ has no dsv4.family")
        return cls(family, roles["in"], roles["want"], roles["start"], roles["got"], meta, str(path))

    def _output_specs(self):
        raw = self.metadata.get("dsv4.outputs")
        if raw is None:  # a file without the declaration: its want.* (else got.*) tensors, poisoned
            src = self.want or self.got
            return [OutputSpec(n, t.dtype, tuple(t.shape), "poison") for n, t in sorted(src.items())]
        try:
            decl = json.loads(raw)
            specs = []
            for d in decl:
                dtype = st.torch_dtype(d["dtype"])
                start = d.get("start", "poison")
                if start not in ("poison", "zero", "input"):
                    raise st.FormatError(f"dsv4.outputs: output {d['name']!r}: start {start!r} is not "
                                         "poison, zero or input")
                specs.append(OutputSpec(d["name"], dtype, tuple(int(s) for s in d["shape"]), start,
                                        d.get("poison")))
            return specs
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise st.FormatError(f"__metadata__ dsv4.outputs is not an array of "
                                 f"{{name, dtype, shape, start}} objects: {e}") from None

    # ---- identity -----------------------------------------------------------------------------
    @functools.cached_property
    def vars(self):  # parsed once: a case's metadata is fixed once loaded (with_got makes a new Case)
        raw = self.metadata.get("dsv4.vars")
        if not raw:
            return {}
        try:
            v = json.loads(raw)
        except json.JSONDecodeError as e:
            raise st.FormatError(f"__metadata__ dsv4.vars is not JSON: {e}") from None
        return {str(k): str(x) for k, x in v.items()}

    @property
    def name(self):
        return self.metadata.get("dsv4.case", os.path.basename(self.path or "case"))

    @property
    def seed(self):
        s = self.metadata.get("dsv4.seed")
        return int(s) if s not in (None, "") else None

    def start_state(self, name):
        """Output `name` as it starts before a launch (the file's start.*, else its declaration)."""
        if name in self.start:
            return self.start[name].clone()
        for spec in self.outputs:
            if spec.name == name:
                return spec.start_tensor(self.inputs)
        raise KeyError(f"case {self.name!r} has no output {name!r}")

    # ---- writing ------------------------------------------------------------------------------
    def save(self, path):
        tensors = {}
        for role in ROLES:
            for n, t in getattr(self, "inputs" if role == "in" else role).items():
                tensors[f"{role}.{n}"] = t
        st.save(path, tensors, self.metadata)
        self.path = str(path)
        return self.path

    def with_got(self, got, **metadata):
        """A copy holding `got` (name -> tensor, moved to the CPU; None: an output not produced, left
        out) and extra metadata."""
        c = Case(self.family, self.inputs, self.want, self.start,
                 {n: t.detach().to("cpu") for n, t in got.items() if t is not None}, self.metadata, None)
        for n in c.got:  # a packed output keeps its layout's name (e.g. want.pages.format)
            fmt = self.metadata.get(f"want.{n}.format") or self.metadata.get(f"start.{n}.format")
            if fmt:
                c.metadata[f"got.{n}.format"] = fmt
        c.metadata.update({k: str(v) for k, v in metadata.items()})
        return c
