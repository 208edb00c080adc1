"""pyACL memory, device and context scenarios against real device workers.

Each test runs its scenario in a fresh interpreter (``run_py``), so the embedded node belongs
to that child and is torn down when it exits (the autouse leak check verifies it). The child
records what it saw in a dict ``R`` that it prints as JSON; the assertions are made here, so a
failure shows every value at once.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from childprog import CHILD_HELPERS, EPILOGUE, run_scenario

pytestmark = pytest.mark.integration

MiB, GiB = 1 << 20, 1 << 30
ENV = {"NPUEMU_DEVICES": "4", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

# error codes (shared/errors.py)
INVALID_PARAM = 100000
REPEAT_INITIALIZE = 100002
REPEAT_FINALIZE = 100037
RT_PARAM_INVALID = 107000
INVALID_DEVICEID = 107001
CONTEXT_NULL = 107002
MEMORY_ALLOCATION = 207001
# ``count > dst_max`` (memcpy) and ``count > max_count`` (memset): 107000 since commit 191d197
# ("as in the rt layer"); earlier code said 100000.
COUNT_OVER_MAX = RT_PARAM_INVALID

PRELUDE = CHILD_HELPERS + """
from npuemu.shared import address
ZEROS = bytes(64)  # a host source that stays alive (a temporary's address would dangle)
ZP = acl.util.bytes_to_ptr(ZEROS)

def hbm_free(attr=1):
    free, total, ret = acl.rt.get_mem_info(attr)
    ok(ret, "get_mem_info")
    return free

def node_dev(dev):
    from npuemu.host.core import runtime
    from npuemu.tools import status
    return status.read_node(runtime.get().node.name)["devices"][dev]

def still_works(dev=0):
    \"\"\"A normal malloc + round trip on ``dev`` after the bad inputs.\"\"\"
    ok(acl.rt.set_device(dev), "set_device")
    p = malloc(4096)
    data = bytes(range(256)) * 16
    h2d(p, data)
    good = d2h(p, 4096) == data
    ok(acl.rt.free(p), "free")
    return good
"""

def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 60) -> dict:
    """Run ``body`` after PRELUDE in a child with ENV (+ ``env``); returns its ``R``."""
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


# ------------------------------------------------------------------ copies and data integrity
def test_h2d_d2h_round_trip_bytes_and_numpy_on_every_device(run_py):
    r = scenario(run_py, """
        rng = np.random.default_rng(7)
        R["count"] = acl.rt.get_device_count()
        kept = {}
        for dev in range(4):
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
            attrs, ret = acl.rt.pointer_get_attributes(p)
            R[str(dev)] = {
                "bytes_ok": d2h(p, n) == data,
                "numpy_ok": bool(np.array_equal(back, arr)),
                "ptr_dev": address.decode(p)[0], "q_dev": address.decode(q)[0],
                "attr_id": attrs["location"]["id"], "attr_type": int(attrs["location"]["type"]),
                "current": acl.rt.get_device()[0],
            }
            kept[dev] = (p, data)
        # every card kept its own bytes while the others were written
        R["still"] = {str(d): d2h(p, len(data)) == data for d, (p, data) in kept.items()}
    """)
    assert r["count"] == [4, 0]
    for dev in range(4):
        assert r[str(dev)] == {"bytes_ok": True, "numpy_ok": True, "ptr_dev": dev, "q_dev": dev,
                               "attr_id": dev, "attr_type": 1, "current": dev}, dev
    assert r["still"] == {"0": True, "1": True, "2": True, "3": True}


def test_d2d_within_a_device(run_py):
    r = scenario(run_py, """
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
        R["c_ok"] = (got[:4096] == b"\\x11" * 4096 and got[4096:5096] == data[64:1064]
                     and got[5096:] == b"\\x11" * (n - 5096))
        R["a_untouched"] = d2h(a, n) == data
    """)
    assert r == {"d2d": 0, "b_ok": True, "inner": 0, "c_ok": True, "a_untouched": True}


def test_memcpy_default_infers_the_direction(run_py):
    r = scenario(run_py, """
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
    """)
    assert r == {"h2d": 0, "d2d": 0, "d2h": 0, "h2h": 0, "data_ok": True}


def test_memset_device_and_host_memory(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(2))
        n = 8192
        p = malloc(n)
        ok(acl.rt.memset(p, n, 0, n))
        R["dev"] = acl.rt.memset(p + 100, n - 100, 0xAB, 1000)
        got = d2h(p, n)
        R["dev_ok"] = got[:100] == bytes(100) and got[100:1100] == b"\\xab" * 1000 \\
            and got[1100:] == bytes(n - 1100)
        R["dev_wrap"] = acl.rt.memset(p, n, 0x1FF, 16)  # value & 0xFF
        R["dev_wrap_ok"] = d2h(p, 16) == b"\\xff" * 16
        host = bytearray(b"z" * 64)
        R["host"] = acl.rt.memset(acl.util.bytes_to_ptr(host), 64, 0x41, 10)
        R["host_ok"] = bytes(host) == b"A" * 10 + b"z" * 54
        hp, ret = acl.rt.malloc_host(4096)
        ok(ret)
        R["pinned"] = acl.rt.memset(hp, 4096, 7, 4096)
        R["pinned_ok"] = acl.util.ptr_to_bytes(hp, 4096) == b"\\x07" * 4096
        R["over_max"] = acl.rt.memset(p, 10, 1, 11)
        R["past_alloc"] = acl.rt.memset(p, 1 << 20, 1, 1 << 20)
        R["unmapped"] = acl.rt.memset(0x10, 16, 1, 16)
        ok(acl.rt.free_host(hp))
        R["works"] = still_works(2)
    """)
    assert r == {"dev": 0, "dev_ok": True, "dev_wrap": 0, "dev_wrap_ok": True, "host": 0,
                 "host_ok": True, "pinned": 0, "pinned_ok": True, "over_max": COUNT_OVER_MAX,
                 "past_alloc": RT_PARAM_INVALID, "unmapped": RT_PARAM_INVALID, "works": True}


def test_malloc_host_as_copy_source_and_destination(run_py):
    r = scenario(run_py, """
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
    """)
    assert r == {"rets": [0, 0], "aligned": True, "h2d": 0, "d2h": 0, "data_ok": True,
                 "h2h": 0, "h2h_ok": True, "attr": 0, "free_host": [0, 0],
                 "free_host_again": RT_PARAM_INVALID, "free_host_dev_ptr": RT_PARAM_INVALID}


# ----------------------------------------------------------------------- queries and policies
def test_get_mem_info_follows_malloc_and_free(run_py):
    r = scenario(run_py, """
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
        t = threading.Thread(target=lambda: R["no_ctx_thread"].extend(acl.rt.get_mem_info(1)))
        t.start(); t.join()
    """)
    assert r["ret"] == 0
    assert r["total"] == GiB
    assert r["free0"] == GiB  # nothing allocated yet on a fresh card
    assert r["after_malloc"] <= r["free0"] - 64 * MiB
    assert r["after_free"] == r["free0"]
    assert r["ddr_total"] == 256 * MiB
    assert r["unknown_attr"] == [0, 0, 0]
    assert r["no_ctx_thread"] == [0, 0, CONTEXT_NULL]


def test_pointer_get_attributes(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(2))
        small, huge = malloc(100), malloc(4 * 1024 * 1024)
        R["small"] = acl.rt.pointer_get_attributes(small)
        R["inner"] = acl.rt.pointer_get_attributes(small + 50)
        R["huge"] = acl.rt.pointer_get_attributes(huge)
        hp = acl.rt.malloc_host(100)[0]
        R["pinned"] = acl.rt.pointer_get_attributes(hp)
        buf = bytearray(100)
        R["pageable"] = acl.rt.pointer_get_attributes(acl.util.bytes_to_ptr(buf))
        ok(acl.rt.free(small))
        R["freed"] = acl.rt.pointer_get_attributes(small)[1]
        ok(acl.rt.free_host(hp))
        R = {k: (v if isinstance(v, int) else
                 [{"type": int(v[0]["location"]["type"]), "id": v[0]["location"]["id"],
                   "page": v[0]["pageSize"]}, v[1]])
             for k, v in R.items()}
    """)
    assert r["small"] == [{"type": 1, "id": 2, "page": 64 * 1024}, 0]
    assert r["inner"] == [{"type": 1, "id": 2, "page": 64 * 1024}, 0]
    assert r["huge"] == [{"type": 1, "id": 2, "page": 2 * MiB}, 0]
    assert r["pinned"][0]["type"] == 0 and r["pinned"][1] == 0
    assert r["pageable"][0]["type"] == 2 and r["pageable"][1] == 0
    assert r["freed"] == RT_PARAM_INVALID


def test_malloc_policies_page_classes(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        def probe(size, policy):
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
        M = 1024 * 1024
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
    """)
    K64, M = 64 * 1024, MiB
    normal = {"page": K64, "arena": 0, "ret": 0, "data_ok": True}
    huge = {"page": 2 * M, "arena": 0, "ret": 0, "data_ok": True, "align2m": True}

    def check(name: str, expect: dict, used_min: int, used_max: int) -> None:
        got = r[name]
        assert {k: got[k] for k in expect} == expect, (name, got)
        assert used_min <= got["used"] <= used_max, (name, got)

    check("huge_first_small", normal, 4096, 4096 + 128)
    check("huge_first_1m", normal, M, M + 128)  # <= 1 MiB: normal pages
    check("huge_first_3m", huge, 4 * M, 4 * M)  # > 1 MiB: 2 MiB pages
    check("huge_only_small", huge, 2 * M, 2 * M)
    check("normal_only_3m", normal, 3 * M, 3 * M + 128)
    check("huge_first_p2p_small", normal, 4096, 4096 + 128)
    check("huge_first_p2p_3m", huge, 4 * M, 4 * M)
    check("huge_only_p2p", huge, 2 * M, 2 * M)
    check("normal_only_p2p", normal, 3 * M, 3 * M + 128)
    check("out_of_range_small", normal, 4096, 4096 + 128)
    check("out_of_range_4m", huge, 4 * M + 2 * M, 4 * M + 2 * M)  # 4 MiB + padding
    check("high_band_width", huge, 4 * M, 4 * M)  # HBM modifier: still HBM, HUGE_FIRST
    assert r["back_to_full"] == GiB


def test_huge1g_needs_a_free_gigabyte(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(1))
        for policy in (6, 7):  # HUGE1G_ONLY, HUGE1G_ONLY_P2P
            key = str(policy)
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
        R["works"] = still_works(1)
    """)
    for key in ("6", "7"):
        assert r[key + "_free"] == 0, r
        assert r[key + "_page"] == GiB
        assert r[key + "_aligned"] is True
        assert r[key + "_hbm_left"] == 0
        assert r[key + "_tail_ok"] is True
        assert r[key + "_partly_used"] == [0, MEMORY_ALLOCATION]
    assert r["works"] is True


def test_low_band_width_modifier_allocates_from_ddr(run_py):
    r = scenario(run_py, """
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
    """)
    assert r["arena"] == 1
    assert r["ddr_used"] >= 5 * MiB
    assert r["hbm_used"] == 0
    assert r["data_ok"] is True
    assert r["ddr_status"] == r["ddr_used"]
    assert r["ddr_back"] is True
    assert r["normal_ddr"][0] == 1 and 4096 <= r["normal_ddr"][1] <= 4096 + 128
    assert r["ddr_oom"] == [0, MEMORY_ALLOCATION]


def test_out_of_memory_and_worker_keeps_serving(run_py):
    r = scenario(run_py, """
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
    """)
    assert r["too_big"] == [0, MEMORY_ALLOCATION]
    assert r["exact_plus_one"] == [0, MEMORY_ALLOCATION]
    assert r["rest_too_small"] == [0, MEMORY_ALLOCATION]
    assert r["works"] is True
    assert r["full_again"] is True
    assert r["same_worker"] is True


# ------------------------------------------------------------------------------- bad inputs
def test_bad_malloc_and_free(run_py):
    r = scenario(run_py, """
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
    """)
    assert r == {
        "malloc_0": [0, INVALID_PARAM], "malloc_neg": [0, INVALID_PARAM],
        "free_unknown": RT_PARAM_INVALID, "free_interior": RT_PARAM_INVALID,
        "free_host_addr": RT_PARAM_INVALID, "free_other_device_ptr": RT_PARAM_INVALID,
        "free_0": RT_PARAM_INVALID, "free": 0, "double_free": RT_PARAM_INVALID,
        "use_after_free": RT_PARAM_INVALID, "works": True, "hbm_full": True,
    }


def test_bad_memcpy_arguments(run_py):
    r = scenario(run_py, """
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
        ro = next(int(ln.split("-")[0], 16) for ln in open("/proc/self/maps")
                  if ln.split()[1] == "r-xp")  # code: readable, not writable
        R["d2h_into_readonly"] = mc(ro, 64, a, 64, 2)
        R["memset_readonly"] = acl.rt.memset(ro, 64, 0, 64)
        R["h2d_from_readonly"] = mc(a, 64, ro, 64, 1)
        R["count_0"] = mc(a, n, hp, 0, 1)
        R["works"] = still_works(1)
        R["same_worker"] = node_dev(1)["pid"] == pid
    """)
    P = RT_PARAM_INVALID
    assert r == {
        "count_gt_max": COUNT_OVER_MAX, "count_gt_max_d2h": COUNT_OVER_MAX,
        # the synchronous memcpy takes its direction from the addresses, as the real
        # driver does: a kind that does not match them is not an error
        "h2d_kind_dev_src": 0, "d2h_kind_host_src": 0, "d2d_kind_host_dst": 0,
        "h2h_kind_dev": 0, "bad_kind": P, "null_dst": INVALID_PARAM,
        "h2d_past_end": P, "h2d_offset_past_end": P, "d2h_past_end": P, "d2d_past_end": P,
        "d2d_beyond_arena": P, "h2d_unknown_dev": P, "h2d_other_card": P,
        "h2d_unmapped_src": P, "d2h_unmapped_dst": P, "h2h_unmapped": P,
        "default_unmapped": P, "d2h_into_readonly": P, "memset_readonly": P,
        "h2d_from_readonly": 0, "count_0": 0, "works": True, "same_worker": True,
    }


def test_copy_into_freed_pinned_memory_is_an_error_not_a_crash(run_py):
    res = run_py(PRELUDE + textwrap.dedent("""
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
    """) + EPILOGUE, env=ENV, timeout=60)
    assert res.returncode == 0, f"child died ({res.returncode}):\n{res.stderr[-2000:]}"
    r = json.loads(res.stdout.split("RESULT ", 1)[1])
    assert r == {"d2h_into_freed": RT_PARAM_INVALID, "h2d_from_freed": RT_PARAM_INVALID,
                 "memset_freed": RT_PARAM_INVALID, "works": True}


def test_pointer_freed_in_another_thread(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        p = malloc(4096)
        h2d(p, b"q" * 4096)
        def other():
            R["thread_set"] = acl.rt.set_device(0)
            R["thread_free"] = acl.rt.free(p)
            R["thread_free_again"] = acl.rt.free(p)
        t = threading.Thread(target=other)
        t.start(); t.join()
        R["main_h2d"] = acl.rt.memcpy(p, 64, ZP, 64, 1)
        out = bytearray(64)
        R["main_d2h"] = acl.rt.memcpy(acl.util.bytes_to_ptr(out), 64, p, 64, 2)
        R["main_free"] = acl.rt.free(p)
        R["works"] = still_works(0)
        R["hbm_full"] = hbm_free() == 1024 ** 3
    """)
    assert r == {"thread_set": 0, "thread_free": 0, "thread_free_again": RT_PARAM_INVALID,
                 "main_h2d": RT_PARAM_INVALID, "main_d2h": RT_PARAM_INVALID,
                 "main_free": RT_PARAM_INVALID, "works": True, "hbm_full": True}


# --------------------------------------------------------------------- devices and contexts
def test_current_device_is_per_thread(run_py):
    r = scenario(run_py, """
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
        t = threading.Thread(target=worker)
        t.start(); t.join()
        R["thread"] = dict(seen)
        R["main_after"] = list(acl.rt.get_device())
        # a brand-new thread starts without a context again
        t2 = threading.Thread(target=lambda: seen.update(fresh=list(acl.rt.get_device())))
        t2.start(); t2.join()
        R["fresh"] = seen["fresh"]
    """)
    assert r["thread"] == {
        "get_device": [-1, CONTEXT_NULL], "malloc": [0, CONTEXT_NULL],
        "get_mem_info": [0, 0, CONTEXT_NULL], "set": 0, "after_set": [1, 0],
        "malloc_card": [1, 0], "share_ctx": 0, "shared_dev": [0, 0],
    }
    assert r["main_after"] == [0, 0]
    assert r["fresh"] == [-1, CONTEXT_NULL]


def test_set_device_reference_counting_and_reset(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(2)); ok(acl.rt.set_device(2))
        p = malloc(32 * 1024 * 1024)
        R["used"] = node_dev(2)["hbm_used"]
        R["reset1"] = acl.rt.reset_device(2)  # count 2 -> 1: still usable
        R["after_reset1"] = [list(acl.rt.get_device()),
                             acl.rt.memcpy(p, 64, ZP, 64, 1)]
        R["reset2"] = acl.rt.reset_device(2)  # count 1 -> 0: released
        R["after_reset2"] = [list(acl.rt.get_device()),
                             acl.rt.memcpy(p, 64, ZP, 64, 1)]
        R["reset3"] = acl.rt.reset_device(2)
        ok(acl.rt.set_device(0))  # a context again, so only the pointer can be the problem
        R["stale_ptr"] = [acl.rt.memcpy(p, 64, ZP, 64, 1),
                          acl.rt.free(p)]
        deadline = time.monotonic() + 5
        while node_dev(2)["hbm_used"] and time.monotonic() < deadline:
            time.sleep(0.01)
        R["reclaimed"] = node_dev(2)["hbm_used"]
        ok(acl.rt.set_device(2))
        R["fresh_free"] = hbm_free() == 1024 ** 3
        R["works"] = still_works(2)
    """)
    assert r["used"] >= 32 * MiB
    assert r["reset1"] == 0
    assert r["after_reset1"] == [[2, 0], 0]
    assert r["reset2"] == 0
    assert r["after_reset2"] == [[-1, CONTEXT_NULL], CONTEXT_NULL]
    assert r["reset3"] == RT_PARAM_INVALID
    assert r["stale_ptr"] == [RT_PARAM_INVALID, RT_PARAM_INVALID]
    assert r["reclaimed"] == 0
    assert r["fresh_free"] is True
    assert r["works"] is True


def test_reset_device_force_ignores_the_count(run_py):
    r = scenario(run_py, """
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
    """)
    assert r == {"force": 0, "get_device": [-1, CONTEXT_NULL], "memcpy": RT_PARAM_INVALID,
                 "ctx_gone": RT_PARAM_INVALID, "again": RT_PARAM_INVALID,
                 "fresh_free": True, "works": True}


def test_ascend_rt_visible_devices_reindexes_cards(run_py):
    r = scenario(run_py, """
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
    """, env={"ASCEND_RT_VISIBLE_DEVICES": "1,3"})
    assert r["count"] == [2, 0]
    assert r["card_of_p"] == 1
    assert r["attr_id"] == 0
    assert r["logical"] == [0, 0]
    assert r["node1_used"] >= 8 * MiB
    assert r["node0_state"] == "ABSENT"  # node card 0 was never touched
    assert r["card_of_q"] == 3
    assert r["node3_used"] >= 4096
    assert r["set_2"] == INVALID_DEVICEID


def test_init_finalize_run_mode_soc_name(run_py):
    r = scenario(run_py, """
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
    """)
    assert r == {"init": 0, "init2": REPEAT_INITIALIZE, "run_mode": [1, 0],
                 "soc": "Ascend910B1", "rt_soc": "Ascend910B1", "version": [1, 17, 0, 0],
                 "count": [4, 0], "soc_after_set": "Ascend910B1", "fin": 0,
                 "fin2": REPEAT_FINALIZE, "reinit": 0, "fin3": 0}
