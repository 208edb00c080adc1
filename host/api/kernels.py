"""Kernels of a loaded binary on the Pythonic face: ``Kernel`` and ``load_kernels``
(``aclrtBinaryLoadFromFile`` + ``aclrtBinaryGetFunction``; ``Stream.launch`` queues one).
No threads of its own.
"""

from __future__ import annotations

from npuemu.host.api.devices import Device, device_or_current
from npuemu.host.core import kernel as _kernel

__all__ = ["Kernel", "load_kernels"]


class Kernel:
    """A kernel of a loaded binary (``aclrtBinaryGetFunction``)."""

    def __init__(self, handle: int, name: str, engine: str) -> None:
        self.handle, self.name, self.engine = handle, name, engine

    def __repr__(self) -> str:
        return f"<npuemu.Kernel {self.name} on {self.engine}>"


def load_kernels(path: str | None = None, device: Device | int | None = None) -> dict[str, Kernel]:
    """``aclrtBinaryLoadFromFile`` + ``aclrtBinaryGetFunction`` for every kernel of the file
    (default: the ready library: add, mul, matmul, relu, softmax, cast, fill, reduce_sum)."""
    dev = device_or_current(device)
    with dev._current():
        binary = _kernel.binary_load_from_file(path or _kernel.LIBRARY)
        return {name: Kernel(_kernel.binary_get_function(binary.handle, name).handle, name,
                             engine) for name, engine in binary.kernels.items()}
