"""An importable `sglang` package from a folder of SGLang's source files, for a machine without SGLang.

The folder holds files at their repository paths (`python/sglang/...`) and, in `_shims/`, small
stand-ins for modules that would pull in the whole server (`_shims/sglang.srt.utils.py`). The tree
is built in a fresh directory: every package folder gets an empty `__init__.py` unless the folder
holds one, shims are written at their dotted paths, and the directory goes first on sys.path.
"""

import os
import shutil
import sys
import tempfile


def build(src, dest=None):
    """Builds the tree from `src`; returns the directory put on sys.path."""
    root = os.path.join(src, "python")
    if not os.path.isdir(os.path.join(root, "sglang")):
        raise FileNotFoundError(f"{src}: no python/sglang folder (SGLang's files at their repository paths)")
    dest = dest or tempfile.mkdtemp(prefix="dsv4-sglang-")
    shutil.copytree(os.path.join(root, "sglang"), os.path.join(dest, "sglang"), dirs_exist_ok=True)
    shims = os.path.join(src, "_shims")
    if os.path.isdir(shims):
        for f in sorted(os.listdir(shims)):
            if not f.endswith(".py"):
                continue
            parts = f[:-3].split(".")
            target = os.path.join(dest, *parts[:-1])
            os.makedirs(target, exist_ok=True)
            leaf = os.path.join(target, parts[-1])
            if os.path.isdir(leaf):  # a shim of a package replaces its __init__
                shutil.copyfile(os.path.join(shims, f), os.path.join(leaf, "__init__.py"))
            else:
                shutil.copyfile(os.path.join(shims, f), leaf + ".py")
    for d, _, files in os.walk(os.path.join(dest, "sglang")):
        if "__init__.py" not in files and "__pycache__" not in d:
            open(os.path.join(d, "__init__.py"), "w").close()
    if dest not in sys.path:
        sys.path.insert(0, dest)
    return dest
