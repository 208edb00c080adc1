"""Child program of ``tests/integration/test_memory.py``: pyACL memory, device and context
scenarios (``aclrtMalloc``/``aclrtFree``, ``aclrtMemcpy``/``aclrtMemset``, host memory,
``aclrtGetMemInfo``, ``aclrtPointerGetAttributes``, devices, contexts, init/finalize).

``python memory.py SCENARIO`` runs one scenario and prints ``R`` (see ``childlib``); the
assertions are the test's.
"""

import ctypes
import os
import threading
import time

import numpy as np
from childlib import R, acl, d2h, h2d, main, malloc, ok, scenario

from npuemu.shared import address

ZEROS = bytes(64)  # a host source that stays alive (a temporary's address would dangle)
ZP = acl.util.bytes_to_ptr(ZEROS)
M = 1024 * 1024
NORMAL_ONLY = 2  # ACL_MEM_MALLOC_NORMAL_ONLY


def hbm_free(attr=1):
    """The free bytes ``aclrtGetMemInfo(attr)`` reports."""
    free, _total, ret = acl.rt.get_mem_info(attr)
    ok(ret, "get_mem_info")
    return free


def node_dev(dev):
    """Card ``dev`` of this child's node as ``npuemu status`` reads it."""
    from npuemu.host.core import runtime
    from npuemu.tools import status

    return status.read_node(runtime.get().node.name)["devices"][dev]


def still_works(dev=0):
    """A normal malloc + round trip on ``dev`` after the bad inputs."""
    ok(acl.rt.set_device(dev), "set_device")
    p = malloc(4096)
    data = bytes(range(256)) * 16
    h2d(p, data)
    good = d2h(p, 4096) == data
    ok(acl.rt.free(p), "free")
    return good


def run_thread(target):
    """Run ``target`` in a new thread and wait for it."""
    t = threading.Thread(target=target)
    t.start()
    t.join()


# ------------------------------------------------------------------ copies and data integrity
def round_trip_on(dev, rng):
    """Bytes and a numpy array through card ``dev``; returns (what it saw, (ptr, data))."""
    ok(acl.rt.set_device(dev))
    n = 3 * 1024 * 1024 + 13  # odd size, spans several 2 MiB chunks
    data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    p = malloc(n)
    h2d(p, data)
    arr = np.arange(65536, dtype=np.float32) * (dev + 1) + 0.5
    q = malloc(arr.nbytes)
    ok(acl.rt.memcpy(q, arr.nbytes, acl.util.bytes_to_ptr(arr), arr.nbytes, 1))
    back = np.empty_like(arr)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(back), back.nbytes, q, arr.nbytes, 2))
    attrs, _ret = acl.rt.pointer_get_attributes(p)
    seen = {
        "bytes_ok": d2h(p, n) == data,
        "numpy_ok": bool(np.array_equal(back, arr)),
        "ptr_dev": address.decode(p)[0], "q_dev": address.decode(q)[0],
        "attr_id": attrs["location"]["id"], "attr_type": int(attrs["location"]["type"]),
        "current": acl.rt.get_device()[0],
    }
    return seen, (p, data)


@scenario
def round_trips():
    """H2D/D2H of bytes and numpy on every card; each card keeps its own bytes."""
    rng = np.random.default_rng(7)
    R["count"] = acl.rt.get_device_count()
    kept = {}
    for dev in range(4):
        R[str(dev)], kept[dev] = round_trip_on(dev, rng)
    # every card kept its own bytes while the others were written
    R["still"] = {str(d): d2h(p, len(data)) == data for d, (p, data) in kept.items()}


@scenario
def d2d():
    """Device-to-device copies, whole and a sub-range at offsets (INNER_DEVICE_TO_DEVICE)."""
    ok(acl.rt.set_device(1))
    n = 2 * 1024 * 1024
    data = os.urandom(n)
    a, b, c = malloc(n), malloc(n), malloc(n)
    h2d(a, data)
    ok(acl.rt.memset(b, n, 0, n))
    R["d2d"] = acl.rt.memcpy(b, n, a, n, 3)
    R["b_ok"] = d2h(b, n) == data
    # sub-range at offsets, kind INNER_DEVICE_TO_DEVICE
    ok(acl.rt.memset(c, n, 0x11, n))
    R["inner"] = acl.rt.memcpy(c + 4096, n - 4096, a + 64, 1000, 6)
    got = d2h(c, n)
    R["c_ok"] = (got[:4096] == b"\x11" * 4096 and got[4096:5096] == data[64:1064]
                 and got[5096:] == b"\x11" * (n - 5096))
    R["a_untouched"] = d2h(a, n) == data


@scenario
def aliased_d2d():
    """D2D copies the worker makes past its non-temporal threshold (1 MiB, the node's
    setting) between two neighbouring blocks of normal pages, whose starts lie 64 bytes
    apart modulo 4 KiB (aliased: ``shared/memcopy.py``'s bounce): whole, a sub-range at odd
    offsets, and whole again on a stream."""
    ok(acl.rt.set_device(0))
    n = 3 * M + 5  # its block (+32 bytes, in 64-byte steps) ends 64 bytes into a page
    data = os.urandom(n)
    a, b = malloc(n, NORMAL_ONLY), malloc(n, NORMAL_ONLY)
    R["apart"] = (b - a) % 4096
    h2d(a, data)
    ok(acl.rt.memset(b, n, 0, n))
    R["whole"] = acl.rt.memcpy(b, n, a, n, 3)
    R["whole_ok"] = d2h(b, n) == data
    ok(acl.rt.memset(b, n, 0x22, n))
    count = 2 * M + 333
    R["part"] = acl.rt.memcpy(b + 5, n - 5, a + 3, count, 3)
    got = d2h(b, n)
    R["part_ok"] = (got[:5] == b"\x22" * 5 and got[5:5 + count] == data[3:3 + count]
                    and got[5 + count:] == b"\x22" * (n - 5 - count))
    ok(acl.rt.memset(b, n, 0, n))
    stream, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    R["async"] = acl.rt.memcpy_async(b, n, a, n, 3, stream)  # by the card's DMA engine
    ok(acl.rt.synchronize_stream(stream), "synchronize")
    R["async_ok"] = d2h(b, n) == data
    ok(acl.rt.destroy_stream(stream), "destroy_stream")


@scenario
def default_kind():
    """``ACL_MEMCPY_DEFAULT`` between every pair of host and device buffers."""
    ok(acl.rt.set_device(0))
    n = 10000
    src = os.urandom(n)
    a, b = malloc(n), malloc(n)
    out, out2 = bytearray(n), bytearray(n)
    R["h2d"] = acl.rt.memcpy(a, n, acl.util.bytes_to_ptr(src), n, 4)
    R["d2d"] = acl.rt.memcpy(b, n, a, n, 4)
    R["d2h"] = acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, b, n, 4)
    R["h2h"] = acl.rt.memcpy(acl.util.bytes_to_ptr(out2), n, acl.util.bytes_to_ptr(out), n, 4)
    R["data_ok"] = bytes(out) == src and bytes(out2) == src


@scenario
def memsets():
    """``aclrtMemset`` of device, pageable host and pinned host memory; bad counts."""
    ok(acl.rt.set_device(2))
    n = 8192
    p = malloc(n)
    ok(acl.rt.memset(p, n, 0, n))
    R["dev"] = acl.rt.memset(p + 100, n - 100, 0xAB, 1000)
    got = d2h(p, n)
    R["dev_ok"] = (got[:100] == bytes(100) and got[100:1100] == b"\xab" * 1000
                   and got[1100:] == bytes(n - 1100))
    R["dev_wrap"] = acl.rt.memset(p, n, 0x1FF, 16)  # value & 0xFF
    R["dev_wrap_ok"] = d2h(p, 16) == b"\xff" * 16
    host = bytearray(b"z" * 64)
    R["host"] = acl.rt.memset(acl.util.bytes_to_ptr(host), 64, 0x41, 10)
    R["host_ok"] = bytes(host) == b"A" * 10 + b"z" * 54
    hp, ret = acl.rt.malloc_host(4096)
    ok(ret)
    R["pinned"] = acl.rt.memset(hp, 4096, 7, 4096)
    R["pinned_ok"] = acl.util.ptr_to_bytes(hp, 4096) == b"\x07" * 4096
    R["over_max"] = acl.rt.memset(p, 10, 1, 11)
    R["past_alloc"] = acl.rt.memset(p, 1 << 20, 1, 1 << 20)
    R["unmapped"] = acl.rt.memset(0x10, 16, 1, 16)
    ok(acl.rt.free_host(hp))
    R["works"] = still_works(2)


@scenario
def malloc_host():
    """``aclrtMallocHost`` blocks as copy source and destination; their frees."""
    ok(acl.rt.set_device(0))
    n = 1 << 20
    src, ret1 = acl.rt.malloc_host(n)
    dst, ret2 = acl.rt.malloc_host(n)
    R["rets"] = [ret1, ret2]
    R["aligned"] = src % 64 == 0 and dst % 64 == 0 and src != dst
    data = os.urandom(n)
    ctypes.memmove(src, data, n)
    p = malloc(n)
    R["h2d"] = acl.rt.memcpy(p, n, src, n, 1)
    R["d2h"] = acl.rt.memcpy(dst, n, p, n, 2)
    R["data_ok"] = acl.util.ptr_to_bytes(dst, n) == data
    R["h2h"] = acl.rt.memcpy(dst, n, src + 10, 100, 0)
    R["h2h_ok"] = acl.util.ptr_to_bytes(dst, 100) == data[10:110]
    R["attr"] = int(acl.rt.pointer_get_attributes(src)[0]["location"]["type"])
    R["free_host"] = [acl.rt.free_host(src), acl.rt.free_host(dst)]
    R["free_host_again"] = acl.rt.free_host(src)
    R["free_host_dev_ptr"] = acl.rt.free_host(p)


# ----------------------------------------------------------------------- queries and policies
@scenario
def mem_info():
    """``aclrtGetMemInfo`` around a malloc and a free; an unknown attribute; no context."""
    ok(acl.rt.set_device(3))
    free0, total, ret = acl.rt.get_mem_info(1)
    R["total"], R["ret"] = total, ret
    R["free0"] = free0
    p = malloc(64 * 1024 * 1024)
    R["after_malloc"] = hbm_free()
    ok(acl.rt.free(p))
    R["after_free"] = hbm_free()
    R["ddr_total"] = acl.rt.get_mem_info(0)[1]
    R["unknown_attr"] = list(acl.rt.get_mem_info(999))
    R["no_ctx_thread"] = []
    run_thread(lambda: R["no_ctx_thread"].extend(acl.rt.get_mem_info(1)))


def attributes(v):
    """A ``pointer_get_attributes`` result (or a bare code) as JSON-friendly values."""
    if isinstance(v, int):
        return v
    return [{"type": int(v[0]["location"]["type"]), "id": v[0]["location"]["id"],
             "page": v[0]["pageSize"]}, v[1]]


@scenario
def pointer_attributes():
    """``aclrtPointerGetAttributes`` of small, inner, huge, pinned, pageable, freed."""
    ok(acl.rt.set_device(2))
    small, huge = malloc(100), malloc(4 * 1024 * 1024)
    seen = {"small": acl.rt.pointer_get_attributes(small),
            "inner": acl.rt.pointer_get_attributes(small + 50),
            "huge": acl.rt.pointer_get_attributes(huge)}
    hp = acl.rt.malloc_host(100)[0]
    seen["pinned"] = acl.rt.pointer_get_attributes(hp)
    buf = bytearray(100)
    seen["pageable"] = acl.rt.pointer_get_attributes(acl.util.bytes_to_ptr(buf))
    ok(acl.rt.free(small))
    seen["freed"] = acl.rt.pointer_get_attributes(small)[1]
    ok(acl.rt.free_host(hp))
    R.update({k: attributes(v) for k, v in seen.items()})


def probe(size, policy):
    """A malloc of ``size`` with ``policy``: its page, alignment, HBM used, arena, data."""
    before = hbm_free()
    ptr, ret = acl.rt.malloc(size, policy)
    if ret:
        return {"ret": ret}
    out = {"ret": 0, "page": acl.rt.pointer_get_attributes(ptr)[0]["pageSize"],
           "align2m": ptr % (2 << 20) == 0, "used": before - hbm_free(),
           "arena": address.decode(ptr)[1]}
    data = os.urandom(min(size, 4096))
    h2d(ptr, data)
    out["data_ok"] = d2h(ptr, len(data)) == data
    ok(acl.rt.free(ptr))
    return out


@scenario
def policies():
    """Each malloc policy at sizes around the page-class limits."""
    ok(acl.rt.set_device(0))
    for name, size, policy in [
        ("huge_first_small", 4096, 0), ("huge_first_1m", M, 0), ("huge_first_3m", 3 * M, 0),
        ("huge_only_small", 4096, 1), ("normal_only_3m", 3 * M, 2),
        ("huge_first_p2p_small", 4096, 3), ("huge_first_p2p_3m", 3 * M, 3),
        ("huge_only_p2p", 4096, 4), ("normal_only_p2p", 3 * M, 5),
        ("out_of_range_small", 4096, 9), ("out_of_range_4m", 4 * M, 9),
        ("high_band_width", 3 * M, 0x1000),
    ]:
        R[name] = probe(size, policy)
    R["back_to_full"] = hbm_free()


def huge1g(key, policy):
    """A 1 GiB-page malloc on a free arena, then one on a partly used arena."""
    size = (512 << 20) + 1
    ptr, ret = acl.rt.malloc(size, policy)  # the whole 1 GiB arena is free
    R[key + "_free"] = ret
    if ret == 0:
        R[key + "_page"] = acl.rt.pointer_get_attributes(ptr)[0]["pageSize"]
        R[key + "_aligned"] = address.decode(ptr)[2] % (1 << 30) == 0
        R[key + "_hbm_left"] = hbm_free()  # one 1 GiB page: the whole arena
        h2d(ptr + size - 8, b"12345678")  # the last requested bytes
        R[key + "_tail_ok"] = d2h(ptr + size - 8, 8) == b"12345678"
        ok(acl.rt.free(ptr))
    small = malloc(4096)  # now the arena is partly used: no aligned 1 GiB left
    ptr, ret = acl.rt.malloc(100, policy)
    R[key + "_partly_used"] = [ptr, ret]
    ok(acl.rt.free(small))


@scenario
def huge1g_pages():
    """HUGE1G_ONLY and HUGE1G_ONLY_P2P mallocs."""
    ok(acl.rt.set_device(1))
    for policy in (6, 7):  # HUGE1G_ONLY, HUGE1G_ONLY_P2P
        huge1g(str(policy), policy)
    R["works"] = still_works(1)


@scenario
def low_band_width():
    """Mallocs with the LOW_BAND_WIDTH modifier (device DDR), and one too big for DDR."""
    ok(acl.rt.set_device(2))
    ddr0, hbm0 = hbm_free(0), hbm_free(1)
    ptr = malloc(5 * 1024 * 1024, 0x100)  # HUGE_FIRST | ACL_MEM_TYPE_LOW_BAND_WIDTH
    R["ddr_used"] = ddr0 - hbm_free(0)
    R["hbm_used"] = hbm0 - hbm_free(1)
    R["arena"] = address.decode(ptr)[1]
    data = os.urandom(5 * 1024 * 1024)
    h2d(ptr, data)
    R["data_ok"] = d2h(ptr, len(data)) == data
    R["ddr_status"] = node_dev(2)["ddr_used"]
    ok(acl.rt.free(ptr))
    R["ddr_back"] = hbm_free(0) == ddr0
    nptr = malloc(4096, 0x102)  # NORMAL_ONLY | LOW_BAND_WIDTH
    R["normal_ddr"] = [address.decode(nptr)[1], ddr0 - hbm_free(0)]
    too_big, ret = acl.rt.malloc(300 * 1024 * 1024, 0x100)  # DDR is 256 MiB
    R["ddr_oom"] = [too_big, ret]


@scenario
def out_of_memory():
    """Mallocs past the HBM; the same worker serves afterwards."""
    ok(acl.rt.set_device(0))
    R["too_big"] = list(acl.rt.malloc(2 * 1024 ** 3, 0))
    R["exact_plus_one"] = list(acl.rt.malloc(1024 ** 3 + 1, 2))
    big = malloc(768 * 1024 * 1024)
    R["rest_too_small"] = list(acl.rt.malloc(512 * 1024 * 1024, 0))
    pid = node_dev(0)["pid"]
    ok(acl.rt.free(big))
    R["works"] = still_works(0)
    R["full_again"] = hbm_free() == 1024 ** 3
    R["same_worker"] = node_dev(0)["pid"] == pid and node_dev(0)["starts"] == 1


# ------------------------------------------------------------------------------- bad inputs
@scenario
def bad_malloc_free():
    """Mallocs of 0 and negative sizes; frees of pointers that are not blocks."""
    ok(acl.rt.set_device(0))
    R["malloc_0"] = list(acl.rt.malloc(0, 0))
    R["malloc_neg"] = list(acl.rt.malloc(-5, 0))
    p = malloc(4096)
    R["free_unknown"] = acl.rt.free(p + (1 << 20))
    R["free_interior"] = acl.rt.free(p + 64)
    R["free_host_addr"] = acl.rt.free(acl.util.bytes_to_ptr(b"abc"))
    R["free_other_device_ptr"] = acl.rt.free(address.encode(2, 0, 0))
    R["free_0"] = acl.rt.free(0)
    R["free"] = acl.rt.free(p)
    R["double_free"] = acl.rt.free(p)
    R["use_after_free"] = acl.rt.memcpy(p, 64, ZP, 64, 1)
    R["works"] = still_works(0)
    R["hbm_full"] = hbm_free() == 1024 ** 3


def readonly_address():
    """An address of this process's code: readable, not writable."""
    with open("/proc/self/maps") as maps:
        return next(int(ln.split("-")[0], 16) for ln in maps if ln.split()[1] == "r-xp")


@scenario
def bad_memcpy():
    """``aclrtMemcpy`` with bad counts, kinds, ranges, cards and host addresses."""
    ok(acl.rt.set_device(1))
    pid = node_dev(1)["pid"]
    n = 4096
    a, b = malloc(n), malloc(n)
    host = bytearray(n)
    hp = acl.util.bytes_to_ptr(host)
    mc = acl.rt.memcpy
    R["count_gt_max"] = mc(a, 100, hp, 101, 1)
    R["count_gt_max_d2h"] = mc(hp, 10, a, 4096, 2)
    R["h2d_kind_dev_src"] = mc(a, n, b, n, 1)
    R["d2h_kind_host_src"] = mc(hp, n, hp, n, 2)
    R["d2d_kind_host_dst"] = mc(hp, n, a, n, 3)
    R["h2h_kind_dev"] = mc(a, n, b, n, 0)
    R["bad_kind"] = mc(a, n, hp, n, 99)
    R["null_dst"] = mc(0, n, hp, n, 1)
    R["h2d_past_end"] = mc(a, 2 * n, hp, 2 * n, 1)
    R["h2d_offset_past_end"] = mc(a + n, n, hp, n, 1)
    big_host = bytearray(2 * n)
    R["d2h_past_end"] = mc(acl.util.bytes_to_ptr(big_host), 2 * n, a, 2 * n, 2)
    R["d2d_past_end"] = mc(b, 2 * n, a, 2 * n, 3)
    R["d2d_beyond_arena"] = mc(address.encode(1, 0, (1 << 30) + 4096), n, a, n, 3)
    R["h2d_unknown_dev"] = mc(address.encode(1, 0, 512 * 1024 * 1024), n, hp, n, 1)
    R["h2d_other_card"] = mc(address.encode(3, 0, 0), n, hp, n, 1)
    R["h2d_unmapped_src"] = mc(a, n, 0x10, 16, 1)
    R["d2h_unmapped_dst"] = mc(0x10, 16, a, 16, 2)
    R["h2h_unmapped"] = mc(hp, 16, 0x10, 16, 0)
    R["default_unmapped"] = mc(a, n, 0x10, 16, 4)
    ro = readonly_address()
    R["d2h_into_readonly"] = mc(ro, 64, a, 64, 2)
    R["memset_readonly"] = acl.rt.memset(ro, 64, 0, 64)
    R["h2d_from_readonly"] = mc(a, 64, ro, 64, 1)
    R["count_0"] = mc(a, n, hp, 0, 1)
    R["works"] = still_works(1)
    R["same_worker"] = node_dev(1)["pid"] == pid


@scenario
def freed_pinned():
    """Copies and a memset into a pinned block after ``aclrtFreeHost``."""
    ok(acl.rt.set_device(0))
    p = malloc(1 << 20)
    hp, ret = acl.rt.malloc_host(1 << 20)
    ok(ret)
    ok(acl.rt.memcpy(hp, 1 << 20, p, 1 << 20, 2), "D2H into pinned")
    ok(acl.rt.free_host(hp))
    R["d2h_into_freed"] = acl.rt.memcpy(hp, 1 << 20, p, 1 << 20, 2)
    R["h2d_from_freed"] = acl.rt.memcpy(p, 1 << 20, hp, 1 << 20, 1)
    R["memset_freed"] = acl.rt.memset(hp, 16, 0, 16)
    R["works"] = still_works(0)


@scenario
def freed_in_thread():
    """A block freed by another thread, then used by the main thread."""
    ok(acl.rt.set_device(0))
    p = malloc(4096)
    h2d(p, b"q" * 4096)

    def other():
        R["thread_set"] = acl.rt.set_device(0)
        R["thread_free"] = acl.rt.free(p)
        R["thread_free_again"] = acl.rt.free(p)

    run_thread(other)
    R["main_h2d"] = acl.rt.memcpy(p, 64, ZP, 64, 1)
    out = bytearray(64)
    R["main_d2h"] = acl.rt.memcpy(acl.util.bytes_to_ptr(out), 64, p, 64, 2)
    R["main_free"] = acl.rt.free(p)
    R["works"] = still_works(0)
    R["hbm_full"] = hbm_free() == 1024 ** 3


# --------------------------------------------------------------------- devices and contexts
@scenario
def per_thread_device():
    """A thread without a context, then with its own device, then the main context."""
    ok(acl.rt.set_device(0))
    main_ctx = acl.rt.get_context()[0]
    seen = {}

    def worker():
        seen["get_device"] = list(acl.rt.get_device())
        seen["malloc"] = list(acl.rt.malloc(64, 0))
        seen["get_mem_info"] = list(acl.rt.get_mem_info(1))
        seen["set"] = acl.rt.set_device(1)
        seen["after_set"] = list(acl.rt.get_device())
        p, ret = acl.rt.malloc(64, 0)
        seen["malloc_card"] = [address.decode(p)[0], ret]
        seen["share_ctx"] = acl.rt.set_context(main_ctx)
        seen["shared_dev"] = list(acl.rt.get_device())
        ok(acl.rt.free(p))

    run_thread(worker)
    R["thread"] = dict(seen)
    R["main_after"] = list(acl.rt.get_device())
    # a brand-new thread starts without a context again
    run_thread(lambda: seen.update(fresh=list(acl.rt.get_device())))
    R["fresh"] = seen["fresh"]


@scenario
def reset_counting():
    """``aclrtSetDevice`` twice, ``aclrtResetDevice`` three times; the card reclaimed."""
    ok(acl.rt.set_device(2))
    ok(acl.rt.set_device(2))
    p = malloc(32 * 1024 * 1024)
    R["used"] = node_dev(2)["hbm_used"]
    R["reset1"] = acl.rt.reset_device(2)  # count 2 -> 1: still usable
    R["after_reset1"] = [list(acl.rt.get_device()), acl.rt.memcpy(p, 64, ZP, 64, 1)]
    R["reset2"] = acl.rt.reset_device(2)  # count 1 -> 0: released
    R["after_reset2"] = [list(acl.rt.get_device()), acl.rt.memcpy(p, 64, ZP, 64, 1)]
    R["reset3"] = acl.rt.reset_device(2)
    ok(acl.rt.set_device(0))  # a context again, so only the pointer can be the problem
    R["stale_ptr"] = [acl.rt.memcpy(p, 64, ZP, 64, 1), acl.rt.free(p)]
    deadline = time.monotonic() + 5
    while node_dev(2)["hbm_used"] and time.monotonic() < deadline:
        time.sleep(0.01)
    R["reclaimed"] = node_dev(2)["hbm_used"]
    ok(acl.rt.set_device(2))
    R["fresh_free"] = hbm_free() == 1024 ** 3
    R["works"] = still_works(2)


@scenario
def reset_force():
    """``aclrtResetDeviceForce`` of a card set three times and with a context of its own."""
    for _ in range(3):
        ok(acl.rt.set_device(3))
    ctx, _ = acl.rt.create_context(3)
    ok(acl.rt.set_device(3))
    p = malloc(8 * 1024 * 1024)
    R["force"] = acl.rt.reset_device_force(3)
    R["get_device"] = list(acl.rt.get_device())
    ok(acl.rt.set_device(0))
    R["memcpy"] = acl.rt.memcpy(p, 64, ZP, 64, 1)
    R["ctx_gone"] = acl.rt.set_context(ctx)
    R["again"] = acl.rt.reset_device(3)
    ok(acl.rt.set_device(3))
    R["fresh_free"] = hbm_free() == 1024 ** 3
    R["works"] = still_works(3)


@scenario
def visible_devices():
    """Logical cards 0 and 1 under ``ASCEND_RT_VISIBLE_DEVICES`` (set by the test)."""
    R["count"] = list(acl.rt.get_device_count())
    ok(acl.rt.set_device(0))
    p = malloc(8 * 1024 * 1024)
    R["card_of_p"] = address.decode(p)[0]
    R["attr_id"] = acl.rt.pointer_get_attributes(p)[0]["location"]["id"]
    R["logical"] = list(acl.rt.get_device())
    R["node1_used"] = node_dev(1)["hbm_used"]
    R["node0_state"] = node_dev(0)["state"]
    ok(acl.rt.set_device(1))
    q = malloc(4096)
    R["card_of_q"] = address.decode(q)[0]
    R["node3_used"] = node_dev(3)["hbm_used"]
    R["set_2"] = acl.rt.set_device(2)


@scenario
def init_finalize():
    """``aclInit``/``aclFinalize`` repeated; run mode, SoC name, version, device count."""
    R["init"] = acl.init()
    R["init2"] = acl.init()
    R["run_mode"] = list(acl.rt.get_run_mode())
    R["soc"] = acl.get_soc_name()
    R["rt_soc"] = acl.rt.get_soc_name()
    R["version"] = list(acl.get_version())
    R["count"] = list(acl.rt.get_device_count())
    ok(acl.rt.set_device(0))
    R["soc_after_set"] = acl.get_soc_name()
    R["fin"] = acl.finalize()
    R["fin2"] = acl.finalize()
    R["reinit"] = acl.init()
    R["fin3"] = acl.finalize()


if __name__ == "__main__":
    main()
