"""A worker no request can kill or wedge: raw frames pushed into a
real worker's ring, hosts that leave while their tasks run, runaway and timed-out tasks, and
the checks that keep a kernel inside its process's memory.

Each scenario is a pyACL program in a fresh interpreter attached as a host would be; raw
frames go through that host's own link (``runtime.get().current_link()``). Results come back
as the child's ``R`` dict; assertions are here. Scenarios that need a second host use a
shared node (``module_node``) so the card outlives the first host.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from childprog import run_scenario

from npuemu.shared import errors
from npuemu.shared.kernel import TIMEOUT_INTERVAL_US

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "32M"}
PARAM_INVALID = errors.ACL_ERROR_RT_PARAM_INVALID
NOT_READY, COMPLETE = 1, 0

PRELUDE = '''
import json, os, sys, threading, time
from npuemu.tools.cli import install_acl
install_acl()
import acl
from npuemu.host.core import runtime
from npuemu.host.core import stream as core_stream
from npuemu.host.core.faults import inject
from npuemu.shared import address, errors, layout, logring, protocol, shm
from npuemu.shared.protocol import Op
R = {}
C = layout.DEVICE_CTL

def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")

def malloc(size):
    ptr, ret = acl.rt.malloc(size, 0)
    ok(ret, f"malloc({size})")
    return ptr

def h2d(dst, data):
    ok(acl.rt.memcpy(dst, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")

def d2h(src, n):
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2), "D2H")
    return bytes(out)

def stream():
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    return s

def link():
    return runtime.get().current_link()

def slot_of(s):
    return core_stream.resolve(s).slot

def call(op, *args):
    """A raw request with a reply: ["ok", results] or ["err", code]."""
    try:
        return ["ok", list(link().call(op, *args))]
    except errors.AclError as err:
        return ["err", err.code]

def post(*frame):
    """A raw frame without a reply, exactly as given."""
    payload = protocol.pack(frame)
    with link().lock:
        link()._push(payload)

def push_bytes(payload):
    with link().lock:
        link()._push(payload)

def serves():
    """The card still answers this host: a round trip, a malloc and a stream task."""
    p = malloc(4096)
    h2d(p, b"ok" * 2048)
    s = stream()
    ok(acl.rt.memset_async(p, 4096, 7, 16, s), "memset_async")
    ret = acl.rt.synchronize_stream_with_timeout(s, 10000)
    data = d2h(p, 32)
    ok(acl.rt.destroy_stream(s))
    ok(acl.rt.free(p))
    return ret == 0 and data == bytes([7]) * 16 + b"ok" * 8

def worker_pid(dev=0):
    return int(link().ctl[C.PID])

KERNELS = """
import time
from npuemu.shared.kernel import kernel

@kernel("aicpu")
def nap(ctx, seconds):
    time.sleep(seconds)

@kernel("aicpu")
def slow_fill(ctx, ptr, n, value, seconds):
    time.sleep(seconds)
    ctx.tensor(ptr, "uint8", n)[:] = value

@kernel("aivector")
def grab(ctx, ptr, count):
    ctx.tensor(ptr, "uint8", count)[:] = 0xEE

@kernel("aivector")
def copy(ctx, src, dst, n):
    lo, hi = ctx.split(n)
    ctx.tensor(dst, "uint8", n)[lo:hi] = ctx.tensor(src, "uint8", n)[lo:hi]

@kernel("aicore")
def spin(ctx, seconds):
    time.sleep(seconds)
"""

def kernels():
    b, ret = acl.rt.binary_load_from_data(KERNELS)
    ok(ret, "binary_load_from_data")
    out = {}
    for name in ("nap", "slow_fill", "grab", "copy", "spin"):
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out

ok(acl.init(), "init")
'''


def scenario(run_py, body: str, env: dict | None = None, timeout: float = 90) -> dict:
    """Run ``body`` after PRELUDE; on an embedded node of ENV, or on the shared node that
    ``env`` names (``NPUEMU_NODE``)."""
    base = {} if env and "NPUEMU_NODE" in env else ENV
    return run_scenario(run_py, PRELUDE, body, {**base, **(env or {})}, timeout)


# 1. exceptions in the dispatcher are classified; the worker keeps serving ---------------------
def test_pin_of_a_block_that_no_longer_exists_is_answered_and_the_worker_lives(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        pid = worker_pid()
        node = runtime.get().node.name
        R["pin_gone"] = call(Op.PIN, 0x7F0000001000, 4096, shm.name(node, "p1", "gone"))
        # a real pinned block freed while a request about it is in flight
        hp, ret = acl.rt.malloc_host(4096)
        ok(ret, "malloc_host")
        ok(acl.rt.free_host(hp))
        R["serves"] = serves()
        R["same_worker"] = worker_pid() == pid
        R["bad_frames"] = int(link().ctl[C.BAD_FRAMES])
    """)
    assert r["pin_gone"] == ["err", PARAM_INVALID]
    assert r["serves"] and r["same_worker"]
    assert r["bad_frames"] == 0  # a request about a vanished block is not a malformed frame


# 8. malformed frames and stream tasks are refused inside the frame's error handling ----------
def test_malformed_frames_and_task_frames_are_refused_not_fatal(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        pid = worker_pid()
        s = stream()
        slot = slot_of(s)
        p = malloc(4096)
        before = int(link().ctl[C.BAD_FRAMES])
        frames = [
            (Op.RECORD, 0, slot, 999, "x", 1.5),               # wrong field types
            (Op.RECORD, 0, slot, 999, 10**9, 1),               # event slot out of range
            (Op.MEMSET_ASYNC, 0, slot, 999, p, 0, -1),         # negative count
            (Op.COPY_ASYNC, 0, slot, 999, p, p, -5),           # negative count
            (Op.COPY_ASYNC, 0, slot, 999, p, p),               # missing argument
            (Op.LAUNCH, 0, slot, 999, 1, "add", 2**50, []),    # runaway num_blocks
            (Op.LAUNCH, 0, slot, 999, 1, 7, 1, "notalist"),
            (Op.WAIT_EVENT, 0, slot, -1, 0, 0, 0),             # negative task seq
            (Op.CALLBACK, 0, "slot", 1, 0, 0),
            (Op.MEMSET_ASYNC, 0, 2**64 - 1, 999, p, 0, 8),     # no such stream
            ("op", 0),
            (99, 0),
            (Op.FREE, 0, -1),
            (Op.STREAM_ABORT, 0, None),
            (Op.UNPIN, 0),
        ]
        for frame in frames:
            post(*frame)
        push_bytes(b"\\xc1\\xc1\\xc1")                             # not msgpack
        push_bytes(protocol.pack([Op.MALLOC, 5, 4096, 0])[:3])    # truncated
        push_bytes(protocol.pack({"op": 1}))                      # not an array
        R["malloc_str"] = call(Op.MALLOC, "4096", 0)
        R["malloc_neg"] = call(Op.MALLOC, -1, 0)
        R["malloc_arity"] = call(Op.MALLOC, 64)
        R["memset_neg"] = call(Op.MEMSET, p, 0, -1)
        R["copy_huge"] = call(Op.COPY, p, p, 2**63)
        R["unknown_op"] = call(77)
        R["inject_bad"] = call(Op.INJECT, "hang", {"count": "x", 1: 2})
        R["bad_frames"] = int(link().ctl[C.BAD_FRAMES]) - before
        R["serves"] = serves()
        R["same_worker"] = worker_pid() == pid
        R["stream_ok"] = acl.rt.synchronize_stream_with_timeout(s, 10000)
    """)
    for key in ("malloc_str", "malloc_neg", "malloc_arity", "memset_neg", "copy_huge",
                "unknown_op", "inject_bad"):
        assert r[key] == ["err", PARAM_INVALID], (key, r[key])
    assert r["bad_frames"] >= 15
    # the refused task frames that named a real stream and task number fail in their turn
    assert r["serves"] and r["same_worker"] and r["stream_ok"] == PARAM_INVALID


def test_a_refused_task_frame_fails_its_task_instead_of_hanging_the_stream(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        s = stream()
        st = core_stream.resolve(s)
        p = malloc(4096)
        with link().lock:  # counted by the host exactly as a real task, then refused
            st.submitted += 1
            link()._push(protocol.pack((Op.LAUNCH, 0, st.slot, st.submitted, 1, "k", 1,
                                        [{"not": "an argument"}])))
        R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 20000)
        ok(acl.rt.memset_async(p, 4096, 1, 16, s), "memset_async")
        R["after"] = acl.rt.synchronize_stream_with_timeout(s, 20000)
        R["serves"] = serves()
    """)
    assert r["sync"] == PARAM_INVALID  # not 507046: the stream did not wait for it
    assert r["after"] == 0 and r["serves"]


def test_corrupt_ring_header_detaches_that_client_only(module_node, run_py):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        pid = worker_pid()
        l = link()
        entry = layout.CTL_CLIENTS + l.slot * layout.CLIENT_ENTRY.words
        ring = l.sub._ctl
        ring[layout.RING_HEADER.TAIL] = ring[layout.RING_HEADER.HEAD] + 4096  # head behind tail
        l.bell.release()
        deadline = time.monotonic() + 10
        while l.ctl[entry + layout.CLIENT_ENTRY.STATE] == layout.ClientState.ACTIVE:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        R["detached"] = int(l.ctl[entry + layout.CLIENT_ENTRY.STATE]) != layout.ClientState.ACTIVE
        R["pid"] = pid
        os._exit(0 if print("RESULT " + json.dumps(R), flush=True) is None else 1)
    """, env={"NPUEMU_NODE": name})
    assert r["detached"]
    r2 = scenario(run_py, """
        ok(acl.rt.set_device(0))
        R["serves"] = serves()
        R["pid"] = worker_pid()
    """, env={"NPUEMU_NODE": name})
    assert r2["serves"] and r2["pid"] == r["pid"]


# 4. hosts that leave while their tasks run never take the card down -------------------------
LEAVER = """
ok(acl.rt.set_device(0))
K = kernels()
s, s2 = stream(), stream()
n = 16 << 20
a, b = malloc(n), malloc(n)
hp, ret = acl.rt.malloc_host(n)
ok(ret, "malloc_host")
ok(acl.rt.launch_kernel(K["nap"], 50, [0.05], s2), "launch")
for _ in range(20):
    ok(acl.rt.memcpy_async(b, n, a, n, 3, s), "D2D")
    ok(acl.rt.memcpy_async(hp, n, b, n, 2, s), "D2H pinned")
    ok(acl.rt.memcpy_async(a, n, hp, n, 1, s), "H2D pinned")
R["pid"] = worker_pid()
"""


@pytest.mark.parametrize("leave", ["exit", "reset_device_force"])
def test_host_leaving_with_tasks_running_does_not_kill_the_card(module_node, run_py, leave):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    tail = {"exit": "", "reset_device_force": "ok(acl.rt.reset_device_force(0))\n"}[leave]
    first = scenario(run_py, LEAVER + tail, env={"NPUEMU_NODE": name})
    second = scenario(run_py, """
        ok(acl.rt.set_device(0))
        R["serves"] = serves()
        R["pid"] = worker_pid()
    """, env={"NPUEMU_NODE": name})
    assert second["serves"] and second["pid"] == first["pid"]


def test_kill_9_of_hosts_doing_large_async_copies_leaves_the_card_serving(
        module_node, spawn_py, run_py, tmp_path):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    pids = set()
    for i in range(4):
        ready = tmp_path / f"ready{i}"
        proc = spawn_py(PRELUDE + LEAVER + f"""
open({str(ready)!r}, "w").close()
while True:
    for _ in range(5):
        ok(acl.rt.memcpy_async(b, n, a, n, 3, s), "D2D")
        ok(acl.rt.memcpy_async(hp, n, b, n, 2, s), "D2H pinned")
    acl.rt.synchronize_stream(s)
""", env={"NPUEMU_NODE": name})
        deadline = 60
        t0 = time.monotonic()
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < deadline, "the host never got going"
            time.sleep(0.05)
        time.sleep(0.1 * i)  # kill at different moments of the copy loop
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        r = scenario(run_py, """
            ok(acl.rt.set_device(0))
            R["serves"] = serves()
            R["pid"] = worker_pid()
        """, env={"NPUEMU_NODE": name})
        assert r["serves"], i
        pids.add(r["pid"])
    assert len(pids) == 1  # the same worker served after every kill


# 5. a kernel's counts and pointers are checked before any view ------------------------------
def test_kernel_tensor_with_negative_or_oversized_count_faults_without_touching_memory(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        K = kernels()
        s = stream()
        mine, other = malloc(4096), malloc(4096)
        h2d(other, b"\\x11" * 4096)
        results = {}
        for label, count in (("minus_one", -1), ("past_end", 5000), ("huge", 2**62)):
            ok(acl.rt.launch_kernel(K["grab"], 1, [mine, count], s), "launch")
            results[label] = acl.rt.synchronize_stream(s)
        ok(acl.rt.launch_kernel(K["grab"], 1, [mine, 4096], s), "launch")
        results["exact"] = acl.rt.synchronize_stream(s)
        R["codes"] = results
        R["other_intact"] = d2h(other, 4096) == b"\\x11" * 4096
        R["mine_written"] = d2h(mine, 4) == b"\\xee" * 4
        R["serves"] = serves()
    """)
    mem_error = errors.ACL_ERROR_RT_DEVICE_MEM_ERROR
    assert r["codes"] == {"minus_one": mem_error, "past_end": mem_error, "huge": mem_error,
                          "exact": 0}
    assert r["other_intact"] and r["mine_written"] and r["serves"]


# 6. a late completion never lands in a reused stream slot ------------------------------------
def test_force_destroyed_streams_running_task_does_not_complete_the_next_stream(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        K = kernels()
        old = stream()
        old_slot = slot_of(old)
        ok(acl.rt.launch_kernel(K["nap"], 1, [0.3], old), "launch old")
        time.sleep(0.05)  # the old kernel is running on the AI CPU engine
        ok(acl.rt.destroy_stream_force(old))
        new = stream()
        R["same_slot"] = slot_of(new) == old_slot
        p = malloc(64)
        ok(acl.rt.launch_kernel(K["slow_fill"], 1, [p, 64, 0x5A, 3.0], new), "launch new")
        time.sleep(0.8)  # the old kernel has ended; the new one runs for seconds
        R["query"] = acl.rt.stream_query(new)[0]
        R["sync"] = acl.rt.synchronize_stream(new)
        R["filled"] = d2h(p, 64) == b"\\x5a" * 64
    """)
    assert r["same_slot"]
    assert r["query"] == NOT_READY
    assert r["sync"] == 0 and r["filled"]


# 7. runaway launches are refused or abortable ------------------------------------------------
def test_runaway_launches_are_limited_and_long_kernels_abort_between_blocks(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        K = kernels()
        s, other = stream(), stream()
        R["huge"] = acl.rt.launch_kernel(K["nap"], 2**50, [0.01], s)
        R["max_plus_one"] = acl.rt.launch_kernel(K["nap"], 65536, [0.01], s)
        ok(acl.rt.launch_kernel(K["nap"], 65535, [0.01], s), "launch 65535 blocks")  # ~11 min
        time.sleep(0.2)
        R["query_running"] = acl.rt.stream_query(s)[0]
        R["abort"] = acl.rt.stream_abort(s)
        R["sync_after_abort"] = acl.rt.synchronize_stream_with_timeout(s, 10000)
        # the AI CPU engine is free again: another stream's kernel runs
        ok(acl.rt.launch_kernel(K["nap"], 1, [0.0], other), "launch other")
        R["other"] = acl.rt.synchronize_stream_with_timeout(other, 10000)
        ok(acl.rt.launch_kernel(K["nap"], 65535, [0.01], s), "launch again")
        time.sleep(0.2)
        t0 = time.monotonic()
        R["reset"] = acl.rt.reset_device(0)  # must not wait for 65535 blocks
        R["reset_s"] = time.monotonic() - t0
    """, timeout=120)
    assert r["huge"] == errors.ACL_ERROR_INVALID_PARAM
    assert r["max_plus_one"] == errors.ACL_ERROR_INVALID_PARAM
    assert r["query_running"] == NOT_READY
    assert r["abort"] == 0 and r["sync_after_abort"] == 0 and r["other"] == 0
    assert r["reset"] == 0
    assert r["reset_s"] < 60  # bounded by the reset's drain, not the kernel's 65535 blocks


# 3. task execution timeout -------------------------------------------------------------------
def test_execution_timeout_fails_hung_and_overlong_tasks_and_the_stream_goes_on(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        K = kernels()
        R["interval"] = list(acl.rt.get_op_timeout_interval())
        R["default_ms"] = list(acl.rt.get_op_execute_timeout())
        R["v2"] = list(acl.rt.set_op_execute_timeout_v2(1))
        R["get_ms"] = list(acl.rt.get_op_execute_timeout())
        hung, long_k = stream(), stream()
        p = malloc(4096)
        inject(0, "hang", count=1)
        ok(acl.rt.memset_async(p, 4096, 1, 4096, hung), "memset_async")   # hangs
        ok(acl.rt.launch_kernel(K["nap"], 65535, [0.01], long_k), "launch")  # ~11 min
        R["hung_sync"] = acl.rt.synchronize_stream(hung)      # a plain synchronize returns
        R["long_sync"] = acl.rt.synchronize_stream(long_k)
        ok(acl.rt.memset_async(p, 4096, 9, 4096, hung), "memset_async after")
        R["after"] = acl.rt.synchronize_stream(hung)
        R["data"] = d2h(p, 4) == b"\\x09" * 4
        R["set_s"] = acl.rt.set_op_execute_time_out(0)
        R["get_max_ms"] = list(acl.rt.get_op_execute_timeout())
    """, timeout=120)
    interval = TIMEOUT_INTERVAL_US
    assert r["interval"] == [interval, 0]
    assert r["default_ms"] == [interval * 254 // 1000, 0]
    assert r["v2"] == [interval, 0] and r["get_ms"] == [interval // 1000, 0]
    assert r["hung_sync"] == errors.ACL_ERROR_RT_TASK_TIMEOUT
    assert r["long_sync"] == errors.ACL_ERROR_RT_AICPU_TIMEOUT
    assert r["after"] == 0 and r["data"]
    assert r["set_s"] == 0 and r["get_max_ms"] == [interval * 254 // 1000, 0]


# 9. raw copy frames cannot reach a card this process has not opened --------------------------
def test_raw_copy_frame_naming_another_cards_block_is_refused(module_node, spawn_py, run_py,
                                                              tmp_path):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    ptr_file = tmp_path / "ptr"
    owner = spawn_py(PRELUDE + f"""
ok(acl.rt.set_device(1))
secret = malloc(4096)
h2d(secret, b"S" * 4096)
open({str(ptr_file)!r} + ".tmp", "w").write(str(secret))
os.rename({str(ptr_file)!r} + ".tmp", {str(ptr_file)!r})
time.sleep(60)
""", env={"NPUEMU_NODE": name})
    t0 = time.monotonic()
    while not ptr_file.exists():
        assert owner.poll() is None, owner.communicate()
        assert time.monotonic() - t0 < 60
        time.sleep(0.05)
    r = scenario(run_py, f"""
        ok(acl.rt.set_device(0))
        mine = malloc(4096)
        secret = int(open({str(ptr_file)!r}).read())
        R["read"] = call(Op.COPY, mine, secret, 4096)
        R["write"] = call(Op.COPY, secret, mine, 4096)
        R["async"] = None
        s = stream()
        post(Op.COPY_ASYNC, 0, slot_of(s), 1, mine, secret, 4096)
        R["leaked"] = d2h(mine, 4) == b"SSSS"
        R["serves"] = serves()
    """, env={"NPUEMU_NODE": name})
    owner.kill()
    owner.wait(10)
    assert r["read"] == ["err", PARAM_INVALID] and r["write"] == ["err", PARAM_INVALID]
    assert not r["leaked"] and r["serves"]


# 10. threading: engines resolve while the loop frees; several threads write the log ----------
LINE_RE = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|EVENT)\] [A-Z]+\(\d+,npuemu-dev\d+\):"
                     r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} ")


def test_kernels_resolving_while_the_loop_frees_and_logging_from_every_thread(run_py):
    r = scenario(run_py, """
        ok(acl.rt.set_device(0))
        K = kernels()
        streams = [stream() for _ in range(3)]
        n = 1 << 16
        src, dst = malloc(n), malloc(n)
        h2d(src, bytes(range(256)) * (n // 256))
        stop = threading.Event()
        churn = [0]
        ctx = acl.rt.get_context()[0]

        def allocate_and_free():  # the loop thread frees while engines resolve
            ok(acl.rt.set_context(ctx), "set_context")
            while not stop.is_set():
                ptrs = [malloc(4096 * (1 + i % 7)) for i in range(20)]
                for q in ptrs:
                    ok(acl.rt.free(q))
                churn[0] += 1

        t = threading.Thread(target=allocate_and_free)
        t.start()
        for round_ in range(30):
            for i, s in enumerate(streams):
                ok(acl.rt.launch_kernel(K["copy"], 8, [src, dst, n], s), "launch copy")
                ok(acl.rt.launch_kernel(K["grab"], 1, [dst, -1], s), "launch faulting")
        codes = [acl.rt.synchronize_stream(s) for s in streams]
        stop.set()
        t.join()
        R["codes"] = codes
        R["copied"] = d2h(dst, n) == bytes(range(256)) * (n // 256)
        R["churn"] = churn[0]
        seg = shm.Segment(shm.name(runtime.get().node.name, "d0", "log"))
        text = logring.LogRing(seg.buf).read()
        R["lines"] = text.splitlines()[-3000:]
        R["serves"] = serves()
    """, env={"ASCEND_GLOBAL_LOG_LEVEL": "0"}, timeout=150)
    assert r["codes"] == [errors.ACL_ERROR_RT_DEVICE_MEM_ERROR] * 3
    assert r["copied"] and r["churn"] > 0 and r["serves"]
    lines = r["lines"][1:]  # the first line may be cut by the ring's wrap
    assert len(lines) > 100
    bad = [ln for ln in lines if ln.startswith("[") and not LINE_RE.match(ln)]
    assert not bad, bad[:5]


# 11. an idle card of a real SoC's size does not report all its HBM free ----------------------
def test_idle_card_reports_the_firmware_reservation(run_py):
    r = run_scenario(run_py, PRELUDE, """
        ok(acl.rt.set_device(0))
        R["hbm"] = list(acl.rt.get_mem_info(1))
        R["ddr"] = list(acl.rt.get_mem_info(0))
        R["soc"] = acl.get_soc_name()
    """, {"NPUEMU_DEVICES": "1"}, 90)
    free, total, ret = r["hbm"]
    assert ret == 0 and r["soc"] == "Ascend910B1" and total == 64 << 30
    assert free == total - (3 << 30)
    assert r["ddr"][0] == r["ddr"][1]  # device DDR has no firmware share


# 11. far pages (shared/pages.py) -----------------------------------------------------------
def test_raw_frames_naming_far_pages_never_published_are_refused(run_py):
    """The far range of an arena is address space with nothing mapped until the card
    publishes a block there: a raw copy naming it on a peer card, or running from a card's
    memory into it, is refused (107000), never a fault that kills the worker."""
    r = scenario(run_py, """
        ok(acl.rt.set_device(1))
        ok(acl.rt.set_device(0))
        mine = malloc(4096)
        far1 = address.encode(1, address.HBM, 64 << 20)     # card 1's far range, unused
        edge1 = address.encode(1, address.HBM, (64 << 20) - 16)
        R["peer_far"] = call(Op.COPY, mine, far1, 4096)
        R["peer_far_write"] = call(Op.COPY, far1 + (8 << 20), mine, 4096)
        R["peer_edge"] = call(Op.COPY, mine, edge1, 64)       # segment end into the far range
        R["own_far"] = call(Op.COPY, mine, address.encode(0, address.HBM, 64 << 20), 64)
        R["serves"] = serves()
        ok(acl.rt.set_device(1))
        R["peer_serves"] = serves()
    """)
    bad = ["err", PARAM_INVALID]
    assert [r["peer_far"], r["peer_far_write"], r["peer_edge"], r["own_far"]] == [bad] * 4
    assert r["serves"] and r["peer_serves"]
