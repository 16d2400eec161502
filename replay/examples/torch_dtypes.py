#!/usr/bin/env python3
"""Checks the C++ safetensors reader/writer against PyTorch's, dtype by dtype.

  torch_dtypes.py write FILE   saves one tensor of every dtype this torch has with
                               safetensors.torch.save_file, plus FILE.json: each tensor's dtype name,
                               shape and bytes (hex), which fixtures_test_safetensors compares with
                               what it reads (DSV4_TORCH_DTYPES=FILE).
  torch_dtypes.py check FILE   loads FILE (written by fixtures_test_safetensors with
                               DSV4_TORCH_DTYPES_OUT=FILE) with safetensors.torch.load_file and
                               compares every tensor with FILE.json; exits 1 on any difference.
"""

import json
import sys

import torch
from safetensors.torch import load_file, save_file

# safetensors dtype name -> torch dtype, for the ones this torch build has.
NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16",
    "BF16": "bfloat16", "F32": "float32", "F64": "float64", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn_x2",
}
TORCH = {n: getattr(torch, t) for n, t in NAMES.items() if hasattr(torch, t)}


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def logical_shape(name, t):
    shape = list(t.shape)
    if name == "F4" and shape:  # two 4-bit values per stored element
        shape[-1] *= 2
    return shape


def write(path):
    gen = torch.Generator().manual_seed(7)
    tensors, expect = {}, {}
    for name, dt in TORCH.items():
        size = dt.itemsize if hasattr(dt, "itemsize") else torch.empty(0, dtype=dt).element_size()
        bytes_ = torch.randint(0, 256, (3 * 4 * size,), generator=gen, dtype=torch.uint8)
        if name == "BOOL":
            bytes_ = bytes_ % 2
        t = bytes_.view(dt).reshape(3, 4)
        tensors["t." + name] = t
        expect["t." + name] = {"dtype": name, "shape": logical_shape(name, t), "hex": raw(t).hex()}
    tensors["scalar.F32"] = torch.tensor(-2.5)
    expect["scalar.F32"] = {"dtype": "F32", "shape": [], "hex": raw(tensors["scalar.F32"]).hex()}
    tensors["empty.I64"] = torch.zeros(2, 0, dtype=torch.int64)
    expect["empty.I64"] = {"dtype": "I64", "shape": [2, 0], "hex": ""}
    save_file(tensors, path, metadata={"writer": "torch " + torch.__version__})
    with open(path + ".json", "w") as f:
        json.dump({"tensors": expect, "metadata": {"writer": "torch " + torch.__version__}}, f)
    print(f"wrote {len(tensors)} tensors ({', '.join(sorted(TORCH))}) to {path}")


def check(path):
    with open(path + ".json") as f:
        expect = json.load(f)
    got = load_file(path)
    bad = 0
    for name, e in sorted(expect["tensors"].items()):
        if e["dtype"] not in TORCH:
            print(f"skip {name}: this torch has no {e['dtype']}")
            continue
        t = got.get(name)
        why = None
        if t is None:
            why = "missing"
        elif t.dtype != TORCH[e["dtype"]]:
            why = f"dtype {t.dtype}, want {TORCH[e['dtype']]}"
        elif logical_shape(e["dtype"], t) != e["shape"]:
            why = f"shape {logical_shape(e['dtype'], t)}, want {e['shape']}"
        elif raw(t).hex() != e["hex"]:
            why = "bytes differ"
        print(f"{'ok  ' if why is None else 'BAD '} {name} {e['dtype']} {e['shape']}"
              + ("" if why is None else ": " + why))
        bad += why is not None
    print(f"{len(expect['tensors']) - bad} of {len(expect['tensors'])} tensors as written")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    sys.exit(write(sys.argv[2]) if sys.argv[1] == "write" else check(sys.argv[2]))
