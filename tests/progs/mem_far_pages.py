"""Child program of ``tests/integration/test_mem_far_pages.py``: huge-page blocks assembled
from scattered pages on a card whose free memory is all 2 MiB holes, used everywhere a
device pointer goes (copies, fills, kernels, P2P, a physical handle mapped into a reserved
range, a collective, an IPC export and import), and random blocks near and far.

``python mem_far_pages.py SCENARIO`` runs one scenario (no ``aclInit``; each sets its
device) and prints ``R`` (see ``childlib``); the assertions are the test's. The IPC pair
meets through files in ``$SYNC`` (``childlib.put``/``get``).
"""

import os
import random

import numpy as np
from childlib import R, acl, emit, get, main, malloc, ok, put, scenario

from npuemu.host.api import DeviceArray, Stream, hccl
from npuemu.host.core import vmm
from npuemu.host.core.kernel import LIBRARY
from npuemu.shared import address

G = 2 * 1024 * 1024
HUGE_ONLY = 1
PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}


def fragment():
    """Fill the card with 2 MiB huge pages, then free every other one: the free memory is
    only 2 MiB holes. Returns the pages kept."""
    pages = []
    while True:
        p, ret = acl.rt.malloc(G - 64, HUGE_ONLY)   # one page with aclrtMalloc's padding
        if ret:
            break
        pages.append(p)
    for p in pages[::2]:
        ok(acl.rt.free(p))
    return pages[1::2]


def far(ptr):
    """Whether ``ptr`` lies past the card's first 64 MiB (an assembled block)."""
    return address.decode(ptr)[2] >= 64 * 1024 * 1024


@scenario
def scattered_block():
    ok(acl.rt.set_device(0))
    s, ret = acl.rt.create_stream()
    ok(ret)
    kept = fragment()
    free0, _total, ret = acl.rt.get_mem_info(1)  # ACL_HBM_MEM_HUGE
    ok(ret)
    n = (3 * G - 64) // 4
    size = 3 * G - 64                 # with aclrtMalloc's 32-byte padding: 3 pages
    a = malloc(size, HUGE_ONLY)       # three holes, far apart: one block
    R["a_far"] = far(a)
    R["aligned"] = a % G == 0
    free1, _total, ret = acl.rt.get_mem_info(1)
    ok(ret)
    R["info_drop"] = free0 - free1
    x = np.arange(n, dtype=np.float32)
    ok(acl.rt.memcpy(a, 4 * n, x.ctypes.data, 4 * n, 1))
    back = np.zeros(n, dtype=np.float32)
    ok(acl.rt.memcpy(back.ctypes.data, 4 * n, a, 4 * n, 2))
    R["copy_ok"] = bool((back == x).all())
    # a kernel over the whole block, in place: a tensor across three scattered pages
    b, ret = acl.rt.binary_load_from_file(LIBRARY)
    ok(ret)
    add, ret = acl.rt.binary_get_function(b, "add")
    ok(ret)
    ok(acl.rt.launch_kernel(add, 2, [a, a, a, n, "float32"], s))
    ok(acl.rt.synchronize_stream(s))
    ok(acl.rt.memcpy(back.ctypes.data, 4 * n, a, 4 * n, 2))
    R["kernel_ok"] = bool((back == 2 * x).all())
    ok(acl.rt.memset(a + G - 8, 16, 0, 16))           # a fill across a page boundary
    ok(acl.rt.memcpy(back.ctypes.data, 4 * n, a, 4 * n, 2))
    R["fill_ok"] = bool((back[G // 4 - 2 : G // 4 + 2] == 0).all()
                        and back[G // 4 + 2] == 2 * x[G // 4 + 2])
    # P2P: card 1 pulls the block into its own memory, then pushes it back, doubled
    ok(acl.rt.set_device(1))
    s1, ret = acl.rt.create_stream()
    ok(ret)
    _can, ret = acl.rt.device_can_access_peer(1, 0)
    ok(ret)
    ok(acl.rt.device_enable_peer_access(0, 0))
    c = malloc(size, HUGE_ONLY)
    ok(acl.rt.memcpy_async(c, size, a, size, 3, s1))
    ok(acl.rt.synchronize_stream(s1))
    got = np.zeros(n, dtype=np.float32)
    ok(acl.rt.memcpy(got.ctypes.data, 4 * n, c, 4 * n, 2))
    R["p2p_ok"] = bool((got == back).all())
    ok(acl.rt.set_device(0))
    # a physical handle of scattered pages, mapped into a reserved range: a kernel
    # through the card's window of it (the window maps the handle's runs of pages)
    prop = {"handleType": 0, "allocationType": 0, "memAttr": 13,
            "location": {"type": 1, "id": 0}}
    h, ret = acl.rt.malloc_physical(2 * G, prop, 0)
    ok(ret)
    R["handle_far"] = far(vmm.lookup_physical(h).alloc.ptr)
    va, ret = acl.rt.reserve_mem_address(2 * G, 0, 0, 0)
    ok(ret)
    ok(acl.rt.map_mem(va, 2 * G, 0, h, 0))
    m = 2 * G // 4
    ones = np.ones(m, dtype=np.float32)
    ok(acl.rt.memcpy(va, 4 * m, ones.ctypes.data, 4 * m, 1))
    ok(acl.rt.launch_kernel(add, 2, [va, va, va, m, "float32"], s))
    ok(acl.rt.synchronize_stream(s))
    out = np.zeros(m, dtype=np.float32)
    ok(acl.rt.memcpy(out.ctypes.data, 4 * m, va, 4 * m, 2))
    R["window_ok"] = bool((out == 2).all())
    ok(acl.rt.unmap_mem(va))
    ok(acl.rt.release_mem_address(va))
    ok(acl.rt.free_physical(h))
    # freed, its pages are holes again: the same request is assembled again
    ok(acl.rt.free(a))
    free2, _total, ret = acl.rt.get_mem_info(1)
    ok(ret)
    R["info_back"] = free2 == free0
    a2 = malloc(size, HUGE_ONLY)
    R["again_far"] = far(a2)
    # more than all the holes together: refused (207001 / ACL_ERROR_RT_MEMORY_ALLOCATION)
    R["too_big"] = acl.rt.malloc(free2 + G, HUGE_ONLY)[1]
    ok(acl.rt.free(a2))
    for p in kept:
        ok(acl.rt.free(p))
    R["whole_again"] = not far(malloc(size, HUGE_ONLY))


@scenario
def collective():
    kept = []
    for d in (0, 1):
        ok(acl.rt.set_device(d))
        kept += fragment()
    comms = hccl.init_all([0, 1])
    n = 3 * G // 4 - 64
    xs = [DeviceArray.from_numpy(np.full(n, d + 1.0, np.float32), d) for d in (0, 1)]
    R["far"] = [far(x.ptr) for x in xs]
    streams = [Stream(d) for d in (0, 1)]
    for d in (0, 1):
        comms[d].all_reduce(xs[d], xs[d], stream=streams[d])  # in place
    for s in streams:
        s.synchronize()
    R["sums"] = [sorted(set(x.to_numpy().tolist())) for x in xs]
    for c in comms:
        c.destroy()


@scenario
def ipc_export():
    """Export a physical handle of scattered pages to the pid the importer puts."""
    sync = os.environ["SYNC"]
    ok(acl.rt.set_device(0))
    _kept = fragment()
    h, ret = acl.rt.malloc_physical(3 * G, PROP, 0)
    ok(ret, "malloc_physical")
    va, ret = acl.rt.reserve_mem_address(3 * G, 0, 0, 0)
    ok(ret)
    ok(acl.rt.map_mem(va, 3 * G, 0, h, 0))
    data = np.arange(3 * G // 4, dtype=np.uint32)
    ok(acl.rt.memcpy(va, 3 * G, data.ctypes.data, 3 * G, 1))
    key, ret = acl.rt.mem_export_to_shareable_handle(h, 1, 0)
    ok(ret)
    ok(acl.rt.mem_set_pid_to_shareable_handle(key, [get(sync, "pid")["pid"]]))
    put(sync, "key", {"key": key, "far": far(vmm.lookup_physical(h).alloc.ptr)})
    get(sync, "read")


@scenario
def ipc_import():
    """Import the exporter's handle, map it and read it back (``RESULT`` printed then)."""
    sync = os.environ["SYNC"]
    ok(acl.rt.set_device(0))
    put(sync, "pid", {"pid": os.getpid()})
    exported = get(sync, "key")
    h, ret = acl.rt.mem_import_from_shareable_handle(exported["key"], 0)
    ok(ret, "import")
    va, ret = acl.rt.reserve_mem_address(3 * G, 0, 0, 0)
    ok(ret)
    ok(acl.rt.map_mem(va, 3 * G, 0, h, 0))
    out = np.zeros(3 * G // 4, dtype=np.uint32)
    ok(acl.rt.memcpy(out.ctypes.data, 3 * G, va, 3 * G, 2), "D2H")
    R.update({"far": exported["far"], "read_ok": bool((out == np.arange(out.size)).all())})
    emit()
    ok(acl.rt.unmap_mem(va))
    ok(acl.rt.free_physical(h))
    put(sync, "read", {})


@scenario
def random_blocks():
    ok(acl.rt.set_device(0))
    s, ret = acl.rt.create_stream()
    ok(ret)
    rng = random.Random(2)
    live, far_seen, steps = {}, 0, 0
    out = np.empty(5 * G, np.uint8)  # one host buffer, cleared before each read
    for step in range(120):
        size = rng.choice([1, 1, 1, 2, 3, 5]) * G - 64
        ptr, ret = acl.rt.malloc(size, HUGE_ONLY)
        if ret:
            for _ in range(2):
                p = rng.choice(list(live))
                ok(acl.rt.free(p))
                del live[p]
            continue
        byte = step % 251 + 1
        ok(acl.rt.memset_async(ptr, size, byte, size, s))     # through the card's mapping
        ok(acl.rt.synchronize_stream(s))
        live[ptr] = (size, byte)
        far_seen += far(ptr)
        steps += 1
        for p, (n, b) in live.items():                        # the host's mapping
            out[:n] = 0
            ok(acl.rt.memcpy(out.ctypes.data, n, p, n, 2))
            # every byte is b: every 8-byte word is b eight times (n is a multiple of 8)
            if not (out[:n].view(np.uint64) == np.uint64(b * 0x0101010101010101)).all():
                raise SystemExit(f"block 0x{p:x} lost its byte at step {step}")
    R["far"], R["steps"] = far_seen, steps


if __name__ == "__main__":
    main()
