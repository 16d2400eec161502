"""PyTorch peers of the kernel families: the expression a PyTorch user writes for each operation,
built from a case file and run on the case's own tensors (bench/torch_peers.py times them).

`build(case)` returns a `Peer` whose `fn(inputs, start)` is functional (torch.compile can take it):
`inputs` are the case's in.* tensors on the device in use, `start` its outputs' start states, and
it returns a dict named like the case's outputs (want.* without the prefix). A peer does not count
errors (the project's launchers' counter): `errors` is never among its outputs. A case the peer
cannot model raises `Unmodelled` with the reason.
"""

import importlib
from dataclasses import dataclass
from typing import Callable

FAMILIES = ("kv_store", "ring_layout", "compact_pages", "indexer_topk", "candidate_blocks",
            "sampling_renorm", "split_combine", "sparse_decode")


class Unmodelled(Exception):
    """The family's peer does not model this case (the message says why)."""


@dataclass
class Peer:
    name: str  # a short name of the expression (the table's peer column)
    fn: Callable  # fn(inputs, start) -> {output name: tensor}


def scalar(case, name, default=None):
    """A scalar input of the case (in.NAME) as a Python int or float, or `default` when absent."""
    t = case.inputs.get(name)
    if t is None:
        if default is None:
            raise Unmodelled(f"the case has no in.{name}")
        return default
    return t.reshape(-1)[0].item()


def build(case):
    """The family's peer of `case` (a dsv4ci.case.Case); Unmodelled when the family has none or
    the peer cannot model the case."""
    if case.family not in FAMILIES:
        raise Unmodelled(f"family {case.family!r} has no PyTorch peer (peers: {', '.join(FAMILIES)})")
    return importlib.import_module(f"{__name__}.{case.family}").build(case)


def start_states(case, device):
    """{output name: its start state on `device`} for every declared output of the case."""
    return {s.name: case.start_state(s.name).to(device) for s in case.outputs}
