"""Byte sizes as people read them, written once for every tool (status, demo, bench).

``format_size(n, digits=1)``: the largest binary unit ``n`` reaches, with ``digits``
decimals (``"2.0 MiB"``, ``"1.5 GiB"``; how status shows usage), bytes as a whole number
(``"512 B"``); ``digits=0`` gives the bench's labels of exact sizes (``"64 MiB"``). ``None``
is ``"-"`` (an unknown value). Units are binary (KiB = 1024 B), as npu-smi's MB.
"""

from __future__ import annotations

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
_UNITS = (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB))


def format_size(n: int | None, digits: int = 1) -> str:
    """``n`` bytes in the largest binary unit it reaches (see the module docstring)."""
    if n is None:
        return "-"
    for unit, div in _UNITS:
        if abs(n) >= div:
            return f"{n / div:.{digits}f} {unit}"
    return f"{n:.0f} B"
