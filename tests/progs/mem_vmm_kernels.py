"""Child program of ``tests/integration/test_mem_vmm_kernels.py``: kernels and copies
through virtual memory (``aclrtReserveMemAddress``, ``aclrtMallocPhysical``,
``aclrtMapMem``/``aclrtUnmapMem``, ``aclrtLaunchKernel`` with pointers in mapped ranges) and
raw ``VMM_MAP``/``VMM_UNMAP`` frames with bad arguments.

``python mem_vmm_kernels.py SCENARIO`` runs one scenario (no ``aclInit``; each sets
device 0) and prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import numpy as np
from childlib import R, acl, main, malloc, ok, scenario

from npuemu.host.core import runtime
from npuemu.host.core.kernel import LIBRARY
from npuemu.shared import address
from npuemu.shared.protocol import Op

PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}
H2D, D2H = 1, 2


@scenario
def mapped_range():
    ok(acl.rt.set_device(0))
    s, ret = acl.rt.create_stream()
    ok(ret)
    b, ret = acl.rt.binary_load_from_file(LIBRARY)
    ok(ret)
    add, ret = acl.rt.binary_get_function(b, "add")
    ok(ret)
    g = 2 * 1024 * 1024
    va, ret = acl.rt.reserve_mem_address(4 * g, 0, 0, 0)
    ok(ret)
    handles = []
    for slot in (0, 1, 3):          # three 2 MiB handles; the third slot stays unmapped
        h, ret = acl.rt.malloc_physical(g, PROP, 0)
        ok(ret)
        ok(acl.rt.map_mem(va + slot * g, g, 0, h, 0))
        handles.append(h)
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, dtype=np.float32)
    xa, ya, za = va + 16, va + g + 64, va + 3 * g   # three different mappings
    for dst, arr in ((xa, x), (ya, y)):
        ok(acl.rt.memcpy(dst, 4 * n, arr.ctypes.data, 4 * n, H2D))
    ok(acl.rt.launch_kernel(add, 2, [xa, ya, za, n, "float32"], s))
    ok(acl.rt.synchronize_stream(s))
    z = np.zeros(n, dtype=np.float32)
    ok(acl.rt.memcpy(z.ctypes.data, 4 * n, za, 4 * n, D2H))
    R["z_ok"] = bool((z == x + y).all())
    # a pointer into the unmapped slot is refused at launch
    R["unmapped"] = acl.rt.launch_kernel(add, 1, [xa, ya, va + 2 * g, n, "float32"], s)
    # the kernel wrote the physical block: remapped at another address, it is still there
    ok(acl.rt.unmap_mem(va + 3 * g))
    ok(acl.rt.map_mem(va + 2 * g, g, 0, handles[2], 0))
    z2 = np.zeros(n, dtype=np.float32)
    ok(acl.rt.memcpy(z2.ctypes.data, 4 * n, va + 2 * g, 4 * n, D2H))
    R["remapped_ok"] = bool((z2 == x + y).all())
    # a tensor that runs from one mapping into the next is one tensor, as on a card:
    # slots 1 and 2 are two handles whose blocks are not neighbours in the card's memory
    span = va + 2 * g - 16           # the last 4 floats of slot 1, then slot 2
    ok(acl.rt.memcpy(span, 4 * n, y.ctypes.data, 4 * n, H2D))  # copies split there
    ok(acl.rt.launch_kernel(add, 2, [xa, span, span, n, "float32"], s))  # in place
    ok(acl.rt.synchronize_stream(s))
    w = np.zeros(n, dtype=np.float32)
    ok(acl.rt.memcpy(w.ctypes.data, 4 * n, span, 4 * n, D2H))
    R["spanning_ok"] = bool((w == x + y).all())
    # one that runs on into the unmapped slot 3 fails the kernel, not the stream
    ok(acl.rt.launch_kernel(add, 1, [xa, va + 3 * g - 16, va + 3 * g - 16, n,
                                     "float32"], s))
    R["past_end"] = acl.rt.synchronize_stream(s)
    R["after"] = acl.rt.synchronize_stream(s)
    # unmapped, the range is gone for kernels too (the worker is still fine)
    ok(acl.rt.unmap_mem(va + 2 * g))
    ok(acl.rt.launch_kernel(add, 1, [xa, span, span, n, "float32"], s))
    R["after_unmap"] = acl.rt.synchronize_stream(s)
    ok(acl.rt.map_mem(va + 2 * g, g, 0, handles[2], 0))
    R["ping"] = acl.rt.synchronize_stream(s)
    for slot in (0, 1, 2):
        ok(acl.rt.unmap_mem(va + slot * g))
    for h in handles:
        ok(acl.rt.free_physical(h))
    ok(acl.rt.release_mem_address(va))
    ok(acl.rt.binary_unload(b))
    ok(acl.rt.destroy_stream(s))


@scenario
def bad_windows():
    """Raw window frames with bad arguments, then one good map, an overlap, a bad unmap."""
    ok(acl.rt.set_device(0))
    link = runtime.get().current_link()
    g = 2 * 1024 * 1024
    va = address.VIRT_BASE + 64 * g
    p = malloc(g)
    bad = [(va, 4 * g, 0, p + 4096 * 1024, g),     # past its block
           (va, 4 * g, 0, 12345, g),               # not device memory
           (va + 1, 4 * g, 0, p, 4096),            # misaligned
           (va, 4 * g, 3 * g, p, 2 * g),           # past the reservation
           (7, 4 * g, 0, p, 4096),                 # not a virtual address
           (va, 4 * g, 0, p, -1)]                  # not a u64
    R["codes"] = []
    for args in bad:
        try:
            link.call(Op.VMM_MAP, *args)
            R["codes"].append(0)
        except Exception as err:
            R["codes"].append(getattr(err, "code", type(err).__name__))
    link.call(Op.VMM_MAP, va, 4 * g, 0, p, 4096)
    try:
        link.call(Op.VMM_MAP, va, 4 * g, 0, p, 4096)
        R["overlap"] = 0
    except Exception as err:
        R["overlap"] = err.code
    try:
        link.call(Op.VMM_UNMAP, va, 4096)
        R["unmap_bad"] = 0
    except Exception as err:
        R["unmap_bad"] = err.code
    link.call(Op.VMM_UNMAP, va, 0)
    R["ping"] = acl.rt.synchronize_device()
    ok(acl.rt.free(p))


if __name__ == "__main__":
    main()
