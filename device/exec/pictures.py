"""Pictures of DVPP tasks as the card sees them: a picture record read when its task starts,
its bytes' local address, and writable numpy views of its planes (never copies). Shared by
the DVPP engine's image tasks (``dvpp.py``) and VDEC (``vdec.py``).

Threading model: records and views are read in the worker's loop thread (``read``,
``resolve``) and written by the DVPP engine thread, which alone runs the task's job.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from npuemu.device import contracts
from npuemu.device.contracts import Card
from npuemu.shared import media as m

_P = m.PIC_DESC
_RECORD = ctypes.c_uint64 * _P.words


class DvppFailure(Exception):
    """A picture or file the DVPP engine refuses; the task fails with ``FAILED``."""


@dataclass
class Picture:
    """One picture record, read when the task started, and its bytes' local address."""

    record: Any  # the record's words (ctypes array over pinned host memory)
    fmt: int
    width: int
    height: int
    stride_w: int
    stride_h: int
    size: int
    addr: int = 0  # local address of its data (0 until resolved)

    def fail(self) -> None:
        self.record[_P.RET_CODE] = m.JPEGD_DEC_RET_FAILED


def read(worker: Card, client: contracts.Client, ptr: int) -> Picture:
    record = _RECORD.from_address(worker.resolve(client, ptr, _P.size))
    return Picture(record, record[_P.FORMAT], record[_P.WIDTH], record[_P.HEIGHT],
                   record[_P.WIDTH_STRIDE], record[_P.HEIGHT_STRIDE], record[_P.SIZE])


def resolve(worker: Card, client: contracts.Client, pic: Picture, count: int) -> None:
    pic.addr = worker.resolve(client, pic.record[_P.DATA], count)


def _buffer(addr: int, count: int) -> Any:
    """The ``count`` bytes at ``addr`` as a writable buffer (a ctypes array over them)."""
    return (ctypes.c_ubyte * count).from_address(addr)


def as_bytes(addr: int, count: int) -> np.ndarray:
    return np.frombuffer(_buffer(addr, count), np.uint8)


def yuv420_views(addr: int, sw: int, sh: int, w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Writable views (never copies) of a YUV420SP picture: luma (h, w) and chroma
    (h/2, w/2, 2)."""
    return semiplanar_views(addr, m.NV12, sw, sh, w, h)


def semiplanar_views(addr: int, fmt: int, sw: int, sh: int, w: int,
                     h: int) -> tuple[np.ndarray, np.ndarray]:
    """Writable views (never copies) of a semi-planar picture of ``fmt`` (YUV420SP,
    YUV422SP, YUV440SP, YUV444SP): luma (h, w) and chroma (rows, columns, 2) in the
    picture's byte order, its rows ``sw`` bytes apart per two chroma samples of width
    subsampling (``2 * sw`` for 4:4:4 and 4:4:0). Built straight over the bytes (numpy's
    ndarray constructor checks the views against the buffer: a fifth of the cost of
    slicing and ``as_strided``)."""
    hs, vs = m.SUBSAMPLING[fmt]
    frame = _buffer(addr, m.picture_bytes(fmt, sw, sh))
    luma = np.ndarray((h, w), np.uint8, frame, 0, (sw, 1))
    chroma = np.ndarray((h // vs, w // hs, 2), np.uint8, frame, sw * sh, (2 * sw // hs, 2, 1))
    return luma, chroma


def packed(addr: int, sw: int, sh: int, w: int, h: int, channels: int) -> np.ndarray:
    """Writable view (never a copy) of a packed picture: (h, w, channels)."""
    return np.ndarray((h, w, channels), np.uint8, _buffer(addr, sw * sh), 0,
                      (sw, channels, 1))
