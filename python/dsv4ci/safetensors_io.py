"""Reads and writes safetensors files (8-byte header length, JSON header, raw little-endian data)."""

import json
import struct

import torch

# safetensors dtype name -> (torch dtype, element bytes). Float8 names read as their torch dtype
# where this torch has it, else as raw bytes (U8), which is how the project writes them anyway.
_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_FLOAT8 = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu"}
for _name, _attr in _FLOAT8.items():
    if hasattr(torch, _attr):
        _DTYPES[_name] = (getattr(torch, _attr), 1)

_NAMES = {dt: name for name, (dt, _) in _DTYPES.items()}


class FormatError(ValueError):
    """A file that is not a safetensors file this reader takes; the message names the field."""


def dtype_name(dtype):
    """The safetensors name of a torch dtype ("F32", ...); ValueError for one it cannot store."""
    try:
        return _NAMES[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} has no safetensors name here") from None


def torch_dtype(name):
    """The torch dtype of a safetensors dtype name; FormatError naming it when unknown."""
    if name in _DTYPES:
        return _DTYPES[name][0]
    if name in _FLOAT8:
        return torch.uint8
    raise FormatError(f"dtype {name!r} is not one of {sorted(_DTYPES)}")


def _element_bytes(name):
    return _DTYPES[name][1] if name in _DTYPES else 1


def load(path):
    """(tensors, metadata): every tensor of the file as a contiguous CPU tensor, and __metadata__."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise FormatError(f"{path}: {len(blob)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise FormatError(f"{path}: header length {n} runs past the file's {len(blob)} bytes")
    try:
        header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError(f"{path}: __metadata__ must map strings to strings")
    data = memoryview(blob)[8 + n :]
    tensors = {}
    for name, info in header.items():
        try:
            dt, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"{path}: tensor {name!r}: needs dtype, shape and data_offsets") from None
        count = 1
        for s in shape:
            if not isinstance(s, int) or s < 0:
                raise FormatError(f"{path}: tensor {name!r}: bad shape {shape}")
            count *= s
        if not (0 <= begin <= end <= len(data)):
            raise FormatError(f"{path}: tensor {name!r}: data_offsets {[begin, end]} outside the data")
        if end - begin != count * _element_bytes(dt):
            raise FormatError(
                f"{path}: tensor {name!r}: {end - begin} bytes for {dt} {shape} "
                f"(needs {count * _element_bytes(dt)})")
        if count:
            raw = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.uint8)
            tensors[name] = raw.view(torch_dtype(dt)).reshape(shape)
        else:
            tensors[name] = torch.empty(shape, dtype=torch_dtype(dt))
    return tensors, dict(meta)


def tensor_bytes(t):
    """The raw little-endian bytes of a tensor (any dtype, made contiguous, on the CPU)."""
    t = t.detach().to("cpu").contiguous()
    if t.numel() == 0:
        return b""
    return bytes(t.reshape(-1).view(torch.uint8).numpy().tobytes()) if t.dtype != torch.bfloat16 \
        else bytes(t.reshape(-1).view(torch.int16).numpy().tobytes())


def save(path, tensors, metadata=None):
    """Writes `tensors` (name -> tensor) and `metadata` (str -> str) in name order."""
    header = {}
    chunks = []
    offset = 0
    # Larger elements first, so each tensor starts at a multiple of its element size.
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    for name in order:
        t = tensors[name]
        b = tensor_bytes(t)
        header[name] = {"dtype": dtype_name(t.dtype), "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        chunks.append(b)
        offset += len(b)
    if metadata:
        bad = [k for k, v in metadata.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise ValueError(f"metadata values must be strings: {bad}")
        header["__metadata__"] = dict(metadata)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
