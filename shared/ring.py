"""Single-producer single-consumer byte ring over a shared-memory region.

Region = RING_HEADER (``layout.RING_HEADER``: head, tail, capacity words on separate cache
lines) followed by ``capacity`` data bytes, ``capacity`` a power of two.

Framing (every frame starts 8-byte aligned):

| bytes        | content                                                  |
|--------------|----------------------------------------------------------|
| 0..3         | payload length n (little-endian u32)                     |
| 4..4+n       | payload (a msgpack array, see ``protocol.py``)           |
| ..next 8     | padding                                                  |
| wrap marker  | length 0xFFFFFFFF: the rest of the data area is skipped  |

``head`` and ``tail`` are byte counters that only grow; position = counter mod capacity.
A frame never straddles the end: if it does not fit before the end, the producer writes a
wrap marker (when at least 4 bytes remain) and starts the frame at position 0.

The producer keeps the consumer's ``tail`` as it last read it (a lower bound, since the tail
only grows) and reads the shared word again only when a frame does not fit behind that
value, so a push usually touches no cache line the consumer writes; likewise the consumer
reads ``head`` again only once it has taken every frame it saw published.

Ordering: the producer stores the frame bytes, then the new ``head`` (one aligned 8-byte
store through a ``"Q"`` memoryview). On x86-64 (TSO) stores become visible in program order,
so a consumer that reads ``head`` and then the bytes sees a complete frame; likewise for
``tail``. Python has no fences, so this ring is correct on x86-64 only (npuemu's target).

Nothing here blocks or sleeps: wake-ups (doorbells) are the caller's business.
"""

from __future__ import annotations

import struct

from npuemu.shared.layout import RING_HEADER

_LEN = struct.Struct("<I")
_pack_len = _LEN.pack_into
WRAP = 0xFFFFFFFF
HEADER_BYTES = RING_HEADER.size
_HEAD, _TAIL, _CAP = RING_HEADER.HEAD, RING_HEADER.TAIL, RING_HEADER.CAPACITY


class RingFull(Exception):
    """The frame does not fit now; the consumer has not caught up."""


class RingCorrupt(ValueError):
    """The ring's header or a frame length cannot be right (the producer broke the ring):
    the consumer must stop reading this ring."""


def region_size(capacity: int) -> int:
    """Bytes a ring of ``capacity`` data bytes occupies (header included)."""
    return HEADER_BYTES + capacity


class Ring:
    """One end of a ring living in ``buf`` (a memoryview of the whole region).

    ``init=True`` writes a fresh header (the creator does this once); otherwise the
    capacity is read from the header and checked against the region.
    """

    def __init__(self, buf: memoryview, capacity: int = 0, *, init: bool = False) -> None:
        self._ctl = buf[:HEADER_BYTES].cast("Q")
        if init:
            if capacity <= 0 or capacity & (capacity - 1) or capacity % 8:
                raise ValueError(f"ring capacity {capacity} is not a power of two >= 8")
            self._ctl[_HEAD] = self._ctl[_TAIL] = 0
            self._ctl[_CAP] = capacity
        capacity = self._ctl[_CAP]
        if capacity <= 0 or HEADER_BYTES + capacity > len(buf) or capacity & (capacity - 1):
            raise ValueError(f"corrupt ring header: capacity {capacity}, region {len(buf)}")
        self.capacity = capacity
        self._mask = capacity - 1
        self._data = buf[HEADER_BYTES : HEADER_BYTES + capacity]
        self.max_frame = capacity // 2 - 8
        self._tail_seen = self._ctl[_TAIL]  # producer only: a lower bound of the tail
        self._head_seen = self._ctl[_HEAD]  # consumer only: a lower bound of the head

    # producer ------------------------------------------------------------------------------
    def push(self, payload: bytes) -> None:
        """Publish one frame; raises RingFull if there is no room now."""
        n = len(payload)
        if n > self.max_frame:
            raise ValueError(f"frame of {n} bytes exceeds the ring's limit {self.max_frame}")
        ctl = self._ctl
        head = ctl[_HEAD]
        need = (n + 11) & ~7  # 4-byte length + payload, rounded up to 8
        pos = head & self._mask
        capacity = self.capacity
        skip = capacity - pos if pos + need > capacity else 0  # start over at 0 after a wrap
        # the consumer's tail as last read: re-read (a cache line the consumer writes) only
        # when the frame does not fit behind the old value
        if head + skip + need - self._tail_seen > capacity:
            self._tail_seen = ctl[_TAIL]
            if head + skip + need - self._tail_seen > capacity:
                raise RingFull
        if skip:
            if skip >= 4:
                _pack_len(self._data, pos, WRAP)
            head += skip
            pos = 0
        data = self._data
        _pack_len(data, pos, n)
        data[pos + 4 : pos + 4 + n] = payload
        ctl[_HEAD] = head + need

    def free_bytes(self) -> int:
        return self.capacity - (self._ctl[_HEAD] - self._ctl[_TAIL])

    # consumer ------------------------------------------------------------------------------
    def pop(self) -> bytes | None:
        """Take the oldest frame's payload (a copy), or None if the ring is empty. Raises
        RingCorrupt if the header says more than ``capacity`` bytes are queued (head behind
        tail, or a lost write) or a length field is beyond ``max_frame``."""
        ctl = self._ctl
        tail = ctl[_TAIL]
        used = self._head_seen - tail
        if not used:  # nothing left of what was seen: read the producer's word again
            self._head_seen = ctl[_HEAD]
            used = self._head_seen - tail
            if not used:
                return None
        if not 0 < used <= self.capacity:
            raise RingCorrupt(f"corrupt ring header: head {ctl[_HEAD]}, tail {tail}")
        pos = tail & self._mask
        if self.capacity - pos < 4:
            tail += self.capacity - pos
            pos = 0
        data = self._data
        n = _LEN.unpack_from(data, pos)[0]
        if n == WRAP:
            tail += self.capacity - pos
            pos = 0
            n = _LEN.unpack_from(data, 0)[0]
        if n > self.max_frame or (n + 11) & ~7 > used:
            raise RingCorrupt(f"corrupt frame length {n} at ring position {pos}")
        payload = bytes(data[pos + 4 : pos + 4 + n])
        ctl[_TAIL] = tail + ((n + 11) & ~7)
        return payload

    def empty(self) -> bool:
        return self._ctl[_TAIL] == self._ctl[_HEAD]

    def release(self) -> None:
        """Drop the views so the underlying mapping can be closed."""
        self._ctl.release()
        self._data.release()
