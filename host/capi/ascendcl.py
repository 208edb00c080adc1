"""The modules whose ``@export`` bodies make up ``libascendcl.so`` (imported by ``boot``)."""

from npuemu.host.capi import (
    base,
    callbacks,
    graph,
    kernels,
    mdl,
    mdl_aipp,
    mem,
    ops,
    prof,
    rt,
    tensor,
    vmm,
)

__all__ = ["base", "bind", "callbacks", "graph", "kernels", "mdl", "mdl_aipp", "mem", "ops",
           "prof", "rt", "tensor", "vmm"]


def bind(ffi: object) -> None:
    """Called by ``boot.attach`` with libascendcl's FFI before its first call runs."""
    mem.bind(ffi)
