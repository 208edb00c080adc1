"""Huge-page blocks assembled from scattered pages (``shared/pages.py``): on a card
whose free memory is all 2 MiB holes, a malloc larger than every hole still succeeds, as on
hardware (the MMU joins the pages), and the block works everywhere a device pointer goes:
host copies and fills, kernels, a P2P copy read by the other card, an IPC import in another
process, a collective; freeing it gives the pages back."""

from __future__ import annotations

import pytest
from childprog import CHILD_HELPERS, FILE_RENDEZVOUS, run_scenario

pytestmark = pytest.mark.integration

MiB = 1 << 20
ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "16M"}
PRELUDE = CHILD_HELPERS + """
from npuemu.host.core.kernel import LIBRARY
from npuemu.shared import address
G = 2 * 1024 * 1024
HUGE_ONLY = 1

def fragment():
    '''Fill the card with 2 MiB huge pages, then free every other one: the free memory is
    only 2 MiB holes. Returns the pages kept.'''
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
    return address.decode(ptr)[2] >= 64 * 1024 * 1024
"""


def test_a_block_of_scattered_pages_works_like_any_block(run_py):
    r = run_scenario(run_py, PRELUDE, """
        ok(acl.rt.set_device(0))
        s, ret = acl.rt.create_stream(); ok(ret)
        kept = fragment()
        free0, _total, ret = acl.rt.get_mem_info(1); ok(ret)   # ACL_HBM_MEM_HUGE
        n = (3 * G - 64) // 4
        size = 3 * G - 64                 # with aclrtMalloc's 32-byte padding: 3 pages
        a = malloc(size, HUGE_ONLY)       # three holes, far apart: one block
        R["a_far"] = far(a)
        R["aligned"] = a % G == 0
        free1, _total, ret = acl.rt.get_mem_info(1); ok(ret)
        R["info_drop"] = free0 - free1
        x = np.arange(n, dtype=np.float32)
        ok(acl.rt.memcpy(a, 4 * n, x.ctypes.data, 4 * n, 1))
        back = np.zeros(n, dtype=np.float32)
        ok(acl.rt.memcpy(back.ctypes.data, 4 * n, a, 4 * n, 2))
        R["copy_ok"] = bool((back == x).all())
        # a kernel over the whole block, in place: a tensor across three scattered pages
        b, ret = acl.rt.binary_load_from_file(LIBRARY); ok(ret)
        add, ret = acl.rt.binary_get_function(b, "add"); ok(ret)
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
        s1, ret = acl.rt.create_stream(); ok(ret)
        can, ret = acl.rt.device_can_access_peer(1, 0); ok(ret)
        ok(acl.rt.device_enable_peer_access(0, 0))
        c = malloc(size, HUGE_ONLY)
        ok(acl.rt.memcpy_async(c, size, a, size, 3, s1)); ok(acl.rt.synchronize_stream(s1))
        got = np.zeros(n, dtype=np.float32)
        ok(acl.rt.memcpy(got.ctypes.data, 4 * n, c, 4 * n, 2))
        R["p2p_ok"] = bool((got == back).all())
        ok(acl.rt.set_device(0))
        # a physical handle of scattered pages, mapped into a reserved range: a kernel
        # through the card's window of it (the window maps the handle's runs of pages)
        prop = {"handleType": 0, "allocationType": 0, "memAttr": 13,
                "location": {"type": 1, "id": 0}}
        h, ret = acl.rt.malloc_physical(2 * G, prop, 0); ok(ret)
        from npuemu.host.core import vmm
        R["handle_far"] = far(vmm.lookup_physical(h).alloc.ptr)
        va, ret = acl.rt.reserve_mem_address(2 * G, 0, 0, 0); ok(ret)
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
        free2, _total, ret = acl.rt.get_mem_info(1); ok(ret)
        R["info_back"] = free2 == free0
        a2 = malloc(size, HUGE_ONLY)
        R["again_far"] = far(a2)
        # more than all the holes together: refused (207001 / ACL_ERROR_RT_MEMORY_ALLOCATION)
        R["too_big"] = acl.rt.malloc(free2 + G, HUGE_ONLY)[1]
        ok(acl.rt.free(a2))
        for p in kept:
            ok(acl.rt.free(p))
        R["whole_again"] = not far(malloc(size, HUGE_ONLY))
    """, ENV, timeout=120)
    assert r["a_far"] and r["aligned"] and r["again_far"]
    assert r["info_drop"] == 3 * MiB * 2
    assert r["copy_ok"] and r["kernel_ok"] and r["fill_ok"]
    assert r["p2p_ok"]
    assert (r["handle_far"], r["window_ok"]) == (True, True)
    assert r["info_back"]
    assert r["too_big"] == 207001
    assert r["whole_again"]


def test_collective_over_blocks_of_scattered_pages(run_py):
    r = run_scenario(run_py, PRELUDE, """
        from npuemu.host.api import Device, DeviceArray, Stream, hccl
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
    """, {**ENV, "HCCL_BUFFSIZE": "1"}, timeout=120)
    assert r["far"] == [True, True]
    assert r["sums"] == [[3.0], [3.0]]


IPC_COMMON = FILE_RENDEZVOUS + PRELUDE.replace(CHILD_HELPERS, """
import json, os, time
from npuemu.tools.cli import install_acl
install_acl()
import acl
import numpy as np

def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")

def malloc(size, policy=0):
    ptr, ret = acl.rt.malloc(size, policy)
    ok(ret, "malloc")
    return ptr
""") + """
PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}
SYNC = os.environ["SYNC"]
ok(acl.rt.set_device(0))
"""
EXPORTER = IPC_COMMON + """
kept = fragment()
h, ret = acl.rt.malloc_physical(3 * G, PROP, 0); ok(ret, "malloc_physical")
va, ret = acl.rt.reserve_mem_address(3 * G, 0, 0, 0); ok(ret)
ok(acl.rt.map_mem(va, 3 * G, 0, h, 0))
data = np.arange(3 * G // 4, dtype=np.uint32)
ok(acl.rt.memcpy(va, 3 * G, data.ctypes.data, 3 * G, 1))
key, ret = acl.rt.mem_export_to_shareable_handle(h, 1, 0); ok(ret)
ok(acl.rt.mem_set_pid_to_shareable_handle(key, [get("pid")["pid"]]))
from npuemu.host.core import vmm
put("key", {"key": key, "far": far(vmm.lookup_physical(h).alloc.ptr)})
get("read")
"""
IMPORTER = IPC_COMMON + """
put("pid", {"pid": os.getpid()})
exported = get("key")
h, ret = acl.rt.mem_import_from_shareable_handle(exported["key"], 0); ok(ret, "import")
va, ret = acl.rt.reserve_mem_address(3 * G, 0, 0, 0); ok(ret)
ok(acl.rt.map_mem(va, 3 * G, 0, h, 0))
out = np.zeros(3 * G // 4, dtype=np.uint32)
ok(acl.rt.memcpy(out.ctypes.data, 3 * G, va, 3 * G, 2), "D2H")
R = {"far": exported["far"], "read_ok": bool((out == np.arange(out.size)).all())}
print("RESULT " + json.dumps(R), flush=True)
ok(acl.rt.unmap_mem(va))
ok(acl.rt.free_physical(h))
put("read", {})
"""


def test_ipc_import_of_a_block_of_scattered_pages(shared_node, spawn_py, tmp_path):
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    a = spawn_py(EXPORTER, env=env)
    b = spawn_py(IMPORTER, env=env)
    out, err = b.communicate(timeout=90)
    assert b.returncode == 0, f"{out}\n{err}"
    a_out, a_err = a.communicate(timeout=30)
    assert a.returncode == 0, f"{a_out}\n{a_err}"
    assert 'RESULT {"far": true, "read_ok": true}' in out


def test_random_blocks_near_and_far_never_share_a_byte(run_py):
    """A card kept full by random huge-page mallocs (when one fails, two random blocks are
    freed), many of them assembled, each block filled with its own byte by the card's
    worker; after every malloc every live block still reads back its byte everywhere
    through the host's mapping: no physical page serves two blocks."""
    r = run_scenario(run_py, PRELUDE + """
import random
""", """
        ok(acl.rt.set_device(0))
        s, ret = acl.rt.create_stream(); ok(ret)
        rng = random.Random(2)
        live, far_seen, steps = {}, 0, 0
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
                out = bytearray(n)
                ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, p, n, 2))
                if out.count(b) != n:
                    raise SystemExit(f"block 0x{p:x} lost its byte at step {step}")
        R["far"], R["steps"] = far_seen, steps
    """, ENV, timeout=180)
    assert r["far"] >= 8 and r["steps"] >= 60
