"""The emulated device address space: device pointers are plain ints that name their card.

A device pointer is ``DEVICE_VA_BASE + dev * DEVICE_STRIDE + arena * ARENA_STRIDE + offset``:

| bits    | meaning                                   |
|---------|-------------------------------------------|
| 44      | always set: marks a device address        |
| 38..43  | device id (0..63)                         |
| 37      | arena: 0 = HBM, 1 = DDR                   |
| 0..36   | byte offset inside the arena (< 128 GiB)  |

Virtual ranges (``aclrtReserveMemAddress``, ``host/core/vmm.py``) have their own window,
``[VIRT_BASE, VIRT_END)`` = ``[2**45, 2**45 + 2**44)``: bit 45 set marks a virtual address,
which the host translates to a card's physical pointer before any byte moves.

Real Ascend device addresses also sit near 2**44 (e.g. ``0x12c040000000``). Host addresses
of a Linux x86-64 process (heap near 0x55..., mmap near 0x7f...) do not fall in this window in
practice, which is what lets ``aclrtMemcpy(..., ACL_MEMCPY_DEFAULT)`` infer a direction from
the addresses alone.
"""

from __future__ import annotations

DEVICE_VA_BASE = 1 << 44
DEVICE_STRIDE = 1 << 38
ARENA_STRIDE = 1 << 37
MAX_DEVICES = 64
DEVICE_VA_END = DEVICE_VA_BASE + MAX_DEVICES * DEVICE_STRIDE

VIRT_BASE = 1 << 45
VIRT_END = VIRT_BASE + (1 << 44)

HBM = 0
DDR = 1
ARENA_NAMES = ("hbm", "ddr")


def encode(dev: int, arena: int, offset: int) -> int:
    """Device pointer for ``offset`` in ``arena`` of device ``dev``."""
    return DEVICE_VA_BASE + dev * DEVICE_STRIDE + arena * ARENA_STRIDE + offset


def is_device_ptr(ptr: int) -> bool:
    """True if ``ptr`` lies in the emulated device address window."""
    return DEVICE_VA_BASE <= ptr < DEVICE_VA_END


def is_virtual(ptr: int) -> bool:
    """True if ``ptr`` lies in the window of reserved virtual ranges."""
    return VIRT_BASE <= ptr < VIRT_END


def decode(ptr: int) -> tuple[int, int, int]:
    """Split a device pointer into ``(dev, arena, offset)``; ValueError if it is not one."""
    if not is_device_ptr(ptr):
        raise ValueError(f"0x{ptr:x} is not a device address")
    rel = ptr - DEVICE_VA_BASE
    dev, rest = divmod(rel, DEVICE_STRIDE)
    arena, offset = divmod(rest, ARENA_STRIDE)
    return dev, arena, offset
