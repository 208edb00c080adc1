"""Child program of ``tests/integration/test_memcpy2d.py``: 2-D copies
(``aclrtMemcpy2d``/``aclrtMemcpy2dAsync``) and the malloc variants (``aclrtMallocCached``,
``aclrtMallocAlign32``, ``aclrtFreeWithDevSync``).

``python memcpy2d.py SCENARIO`` runs one scenario (no ``aclInit``; each sets device 0) and
prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import numpy as np
from childlib import R, acl, d2h, main, malloc, ok, scenario, stream

from npuemu.host.core import stream as streams

H2H, H2D, D2H, D2D = 0, 1, 2, 3


def ptr_of(a):
    """The address of the numpy array ``a``'s data."""
    return a.ctypes.data


def streams_submitted(handle):
    """The tasks submitted so far to the stream ``handle``."""
    return streams.resolve(handle).submitted


@scenario
def pitched():
    ok(acl.rt.set_device(0))
    s = stream()
    h, w, sp, dp = 5, 6, 10, 16               # 5 rows of 6 bytes; pitches 10 and 16
    src = np.arange(h * sp, dtype=np.uint8)
    dev = malloc(h * dp)
    ok(acl.rt.memset(dev, h * dp, 0xEE, h * dp))
    ok(acl.rt.memcpy2d(dev, dp, ptr_of(src), sp, w, h, H2D))
    got = np.frombuffer(d2h(dev, h * dp), np.uint8).reshape(h, dp)
    want = np.full((h, dp), 0xEE, np.uint8)
    want[:, :w] = src.reshape(h, sp)[:, :w]
    R["h2d"] = bool((got == want).all())       # the gaps between rows are untouched
    back = np.zeros((h, 8), np.uint8)           # D2H into a pitch of 8
    ok(acl.rt.memcpy2d(ptr_of(back), 8, dev, dp, w, h, D2H))
    R["d2h"] = bool((back[:, :w] == src.reshape(h, sp)[:, :w]).all() and
                    (back[:, w:] == 0).all())
    # async: pageable H2D, device to device with other pitches, pinned D2H
    dev2 = malloc(h * 16)
    ok(acl.rt.memset(dev2, h * 12, 0, h * 12))
    ok(acl.rt.memcpy2d_async(dev2, 12, dev, dp, w, h, D2D, s))
    pinned, ret = acl.rt.malloc_host(h * w)
    ok(ret)
    ok(acl.rt.memcpy2d_async(pinned, w, dev2, 12, w, h, D2H, s))
    ok(acl.rt.synchronize_stream(s))
    out = np.frombuffer(acl.util.ptr_to_bytes(pinned, h * w), np.uint8).reshape(h, w)
    R["async"] = bool((out == src.reshape(h, sp)[:, :w]).all())
    contiguous = np.arange(64, dtype=np.uint8)  # both pitches equal width: one copy
    ok(acl.rt.memcpy2d_async(dev2, 16, ptr_of(contiguous), 16, 16, 4, H2D, s))
    ok(acl.rt.synchronize_stream(s))
    R["contiguous"] = d2h(dev2, 64) == contiguous.tobytes()
    # many rows are one task (no per-row staging): 200k rows of 4 bytes, pageable
    rows = 200000
    tall = np.arange(rows * 8, dtype=np.uint8)
    deep = malloc(rows * 4)
    before = streams_submitted(s)
    ok(acl.rt.memcpy2d_async(deep, 4, ptr_of(tall), 8, 4, rows, H2D, s))
    R["tasks"] = streams_submitted(s) - before
    ok(acl.rt.synchronize_stream(s))
    R["tall"] = d2h(deep, rows * 4) == tall.reshape(rows, 8)[:, :4].tobytes()
    # refusals
    R["bad"] = [
        acl.rt.memcpy2d(dev, dp, ptr_of(src), sp, sp + 1, h, H2D),   # width > spitch
        acl.rt.memcpy2d(dev, dp, dev2, 12, w, h, D2D),               # sync D2D
        acl.rt.memcpy2d_async(ptr_of(back), 8, ptr_of(src), sp, w, h, H2H, s),
        acl.rt.memcpy2d(dev, dp, ptr_of(src), sp, w, 5 * 1024 * 1024 + 1, H2D),
        acl.rt.memcpy2d(dev, dp, ptr_of(src), sp, w, h + 1, H2D),    # past the block
        acl.rt.memcpy2d(ptr_of(src), dp, dev, sp, w, h, H2D),        # addresses swapped
    ]
    R["nothing"] = acl.rt.memcpy2d(dev, dp, ptr_of(src), sp, 0, h, H2D)
    ok(acl.rt.free_host(pinned))


@scenario
def malloc_variants():
    ok(acl.rt.set_device(0))
    s = stream()
    a, ret = acl.rt.malloc_align32(100, 0)
    ok(ret)
    data = bytes(range(128))
    R["align32_128"] = acl.rt.memcpy(a, 128, acl.util.bytes_to_ptr(data), 128, H2D)
    R["align32_129"] = acl.rt.memcpy(a, 129, acl.util.bytes_to_ptr(data + b"x"), 129, H2D)
    c, ret = acl.rt.malloc_cached(4096, 0)
    ok(ret)
    ok(acl.rt.memset_async(c, 4096, 7, 4096, s))
    R["free_sync"] = acl.rt.free_with_dev_sync(c)   # waits for the memset first
    R["free_align"] = acl.rt.free(a)
    R["bad"] = [acl.rt.malloc_align32(0, 0)[1], acl.rt.free_with_dev_sync(c)]


if __name__ == "__main__":
    main()
