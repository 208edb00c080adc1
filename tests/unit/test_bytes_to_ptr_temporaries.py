"""``acl.util.bytes_to_ptr`` keeps a temporary alive for the call it is passed to.

``memcpy(dev, 8, bytes_to_ptr((1).to_bytes(8, "little")), 8, kind)`` works on pyACL (no
Python runs between the temporary's release and the C call's read); here Python runs first,
and without the kept reference the freed block is reused (a bound method has the size of a
small bytes object) before the copy reads it.
"""

import ctypes

from npuemu.host.acl import util


def test_a_temporary_passed_in_survives_the_next_allocations() -> None:
    ptr = util.bytes_to_ptr((0x0102030405060708).to_bytes(8, "little"))
    churn = [object().__init__ for _ in range(1000)]  # bound methods: blocks of that size
    assert ctypes.string_at(ptr, 8) == (0x0102030405060708).to_bytes(8, "little")
    assert churn


def test_only_the_most_recent_objects_are_kept() -> None:
    for _ in range(100):
        util.bytes_to_ptr(bytes(16))
    assert len(util._RECENT) == util._RECENT.maxlen
