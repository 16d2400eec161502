"""dsv4ci: run any implementation of a dsv4-ci kernel family (SGLang's Triton, aiter or sgl-kernel
ops, your own) on the project's drawn cases and let the project's CPU reference judge it."""

__version__ = "1"
