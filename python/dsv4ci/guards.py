"""Canary-guarded device tensors: a tensor viewed inside [front guard | payload | back guard]."""

import torch

GUARD_BYTES = 256  # as the C++ harness (fixtures/device_buffer.hpp)
CANARY = 0xCB


class Guarded:
    """A tensor of `dtype` and `shape` on `device` between two canary-filled guards."""

    def __init__(self, name, dtype, shape, device):
        self.name = name
        esize = torch.empty(0, dtype=dtype).element_size()
        n = 1
        for s in shape:
            n *= int(s)
        self.nbytes = n * esize
        self._raw = torch.full((GUARD_BYTES + self.nbytes + GUARD_BYTES,), CANARY, dtype=torch.uint8,
                               device=device)
        payload = self._raw[GUARD_BYTES : GUARD_BYTES + self.nbytes]
        self.tensor = payload.view(dtype).view(tuple(shape)) if n else \
            torch.empty(tuple(shape), dtype=dtype, device=device)

    def damage(self):
        """A message per damaged guard ('' when both guards hold their canary)."""
        msgs = []
        for label, g in (("front", self._raw[:GUARD_BYTES]), ("back", self._raw[GUARD_BYTES + self.nbytes :])):
            bad = (g != CANARY).nonzero().flatten()
            if bad.numel():
                i = int(bad[0])
                msgs.append(f"{self.name}: {label} guard damaged: {bad.numel()} of {GUARD_BYTES} bytes, "
                            f"first at guard byte {i} = 0x{int(g[i]):02x} (canary 0x{CANARY:02x})")
        return msgs
