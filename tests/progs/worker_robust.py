"""Child program of ``tests/integration/test_worker_robust.py``: a pyACL host attached as a
host would be, pushing raw frames through its own link (``runtime.get().current_link()``).

``python worker_robust.py SCENARIO [ARG...]`` runs one scenario and prints ``R`` (see
``childlib``); the assertions are the test's. The kernels are ``robust_kernels.py``.
"""

import json
import os
import threading
import time

from childlib import R, acl, d2h, emit, h2d, main, malloc, ok, scenario, source, stream

from npuemu.host.core import runtime
from npuemu.host.core import stream as core_stream
from npuemu.host.core.faults import inject
from npuemu.shared import address, errors, layout, logring, protocol, shm
from npuemu.shared.protocol import Op

C = layout.DEVICE_CTL
KERNEL_NAMES = ("nap", "slow_fill", "grab", "copy", "spin")


def link():
    """This host's link to the current card."""
    return runtime.get().current_link()


def slot_of(s):
    """The card's slot of stream ``s``."""
    return core_stream.resolve(s).slot


def call(op, *args):
    """A raw request with a reply: ["ok", results] or ["err", code]."""
    try:
        return ["ok", list(link().call(op, *args))]
    except errors.AclError as err:
        return ["err", err.code]


def post(*frame):
    """A raw frame without a reply, exactly as given."""
    push_bytes(protocol.pack(frame))


def push_bytes(payload):
    """Raw bytes pushed into this host's request ring."""
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


def worker_pid():
    """The pid of the current card's worker."""
    return int(link().ctl[C.PID])


def kernels():
    """The functions of ``robust_kernels.py`` by name."""
    b, ret = acl.rt.binary_load_from_data(source("robust_kernels.py"))
    ok(ret, "binary_load_from_data")
    out = {}
    for name in KERNEL_NAMES:
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out


# ------------------------------------------------------------------ the dispatcher's refusals
@scenario
def pin_gone():
    """A PIN of a block that does not exist, and a pinned block freed."""
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


def malformed_frames(slot, p):
    """Frames of wrong types, counts and arities (each must be refused)."""
    return [
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


@scenario
def call_many_streamed():
    """``call_many`` fed by a generator: 40000 PINGs, one of them with an argument the wire
    cannot carry (not sent: its 107000 in its place); more replies than the completion ring
    holds, so the link must take them while it is still sending."""
    ok(acl.rt.set_device(0))
    bad = 20000

    def requests():
        for i in range(40000):
            yield (Op.PING, object()) if i == bad else (Op.PING,)

    results = link().call_many(requests())
    refused = [i for i, r in enumerate(results) if isinstance(r, errors.AclError)]
    R["count"], R["refused"] = len(results), refused
    R["refused_code"] = results[bad].code if refused == [bad] else None
    R["serves"] = serves()


@scenario
def malformed():
    """Malformed frames posted, bytes that are not frames, bad requests with replies."""
    ok(acl.rt.set_device(0))
    pid = worker_pid()
    s = stream()
    p = malloc(4096)
    before = int(link().ctl[C.BAD_FRAMES])
    for frame in malformed_frames(slot_of(s), p):
        post(*frame)
    push_bytes(b"\xc1\xc1\xc1")                             # not msgpack
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


@scenario
def refused_task():
    """A task frame counted by the host as a real task, then refused by the card."""
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


@scenario
def corrupt_ring():
    """This host's ring header made inconsistent (head behind tail); leaves at once."""
    ok(acl.rt.set_device(0))
    pid = worker_pid()
    lk = link()
    entry = layout.CTL_CLIENTS + lk.slot * layout.CLIENT_ENTRY.words
    ring = lk.sub._ctl
    ring[layout.RING_HEADER.TAIL] = ring[layout.RING_HEADER.HEAD] + 4096  # head behind tail
    lk.bell.release()
    deadline = time.monotonic() + 10
    while lk.ctl[entry + layout.CLIENT_ENTRY.STATE] == layout.ClientState.ACTIVE:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    R["detached"] = int(lk.ctl[entry + layout.CLIENT_ENTRY.STATE]) != layout.ClientState.ACTIVE
    R["pid"] = pid
    emit()
    os._exit(0)


@scenario
def still_serves():
    """The card answers a new host; the pid of its worker."""
    ok(acl.rt.set_device(0))
    R["serves"] = serves()
    R["pid"] = worker_pid()


# ------------------------------------------------------------ hosts that leave mid-task
def leaver():
    """A kernel and 60 large copies (device, pinned host) queued on two streams."""
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
    return s, n, a, b, hp


@scenario
def leave(how):
    """``leaver`` then leave: by exiting (``exit``) or after ``reset_device_force``."""
    leaver()
    if how == "reset_device_force":
        ok(acl.rt.reset_device_force(0))


@scenario
def copy_forever(ready):
    """``still_serves``'s check (written into the file ``ready``, as JSON), ``leaver``, then
    ``ready`` appears (renamed into place, whole) and the host copies until killed."""
    ok(acl.rt.set_device(0))
    check = {"serves": serves(), "pid": worker_pid()}
    s, n, a, b, hp = leaver()
    with open(ready + ".part", "w") as f:
        json.dump(check, f)
    os.rename(ready + ".part", ready)
    while True:
        for _ in range(5):
            ok(acl.rt.memcpy_async(b, n, a, n, 3, s), "D2D")
            ok(acl.rt.memcpy_async(hp, n, b, n, 2, s), "D2H pinned")
        acl.rt.synchronize_stream(s)


# ------------------------------------------------------------ kernels' counts and streams
@scenario
def tensor_counts():
    """A kernel viewing -1, past-the-end, huge and exact counts of a block."""
    ok(acl.rt.set_device(0))
    K = kernels()
    s = stream()
    mine, other = malloc(4096), malloc(4096)
    h2d(other, b"\x11" * 4096)
    results = {}
    for label, count in (("minus_one", -1), ("past_end", 5000), ("huge", 2**62)):
        ok(acl.rt.launch_kernel(K["grab"], 1, [mine, count], s), "launch")
        results[label] = acl.rt.synchronize_stream(s)
    ok(acl.rt.launch_kernel(K["grab"], 1, [mine, 4096], s), "launch")
    results["exact"] = acl.rt.synchronize_stream(s)
    R["codes"] = results
    R["other_intact"] = d2h(other, 4096) == b"\x11" * 4096
    R["mine_written"] = d2h(mine, 4) == b"\xee" * 4
    R["serves"] = serves()


@scenario
def reused_slot():
    """A force-destroyed stream's running kernel, and a new stream in the same slot."""
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
    R["filled"] = d2h(p, 64) == b"\x5a" * 64


@scenario
def runaway():
    """Launches of too many blocks, a long kernel aborted, a reset during another."""
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


@scenario
def exec_timeout():
    """The execution timeout's getters and setters; a hung task and an overlong kernel."""
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
    R["data"] = d2h(p, 4) == b"\x09" * 4
    R["set_s"] = acl.rt.set_op_execute_time_out(0)
    R["get_max_ms"] = list(acl.rt.get_op_execute_timeout())


# ------------------------------------------------------------ another card's block
@scenario
def owner(ptr_file):
    """A block of card 1 filled with ``S``; its address published in ``ptr_file``; sleeps."""
    ok(acl.rt.set_device(1))
    secret = malloc(4096)
    h2d(secret, b"S" * 4096)
    with open(ptr_file + ".tmp", "w") as f:
        f.write(str(secret))
    os.rename(ptr_file + ".tmp", ptr_file)
    time.sleep(60)


@scenario
def foreign_copy(ptr_file):
    """Raw copy frames between a block of card 0 and the block ``ptr_file`` names."""
    ok(acl.rt.set_device(0))
    mine = malloc(4096)
    with open(ptr_file) as f:
        secret = int(f.read())
    R["read"] = call(Op.COPY, mine, secret, 4096)
    R["write"] = call(Op.COPY, secret, mine, 4096)
    R["async"] = None
    s = stream()
    post(Op.COPY_ASYNC, 0, slot_of(s), 1, mine, secret, 4096)
    R["leaked"] = d2h(mine, 4) == b"SSSS"
    R["serves"] = serves()


# ------------------------------------------------------------ threads and the log
@scenario
def churn_and_log():
    """Kernels resolving on three streams while another thread mallocs and frees; the log."""
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
    for _ in range(30):
        for s in streams:
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


# ------------------------------------------------------------ memory sizes and far pages
@scenario
def idle_card():
    """An idle card's memory info and SoC name."""
    ok(acl.rt.set_device(0))
    R["hbm"] = list(acl.rt.get_mem_info(1))
    R["ddr"] = list(acl.rt.get_mem_info(0))
    R["soc"] = acl.get_soc_name()


@scenario
def far_pages():
    """Raw copies naming far pages of card 1 and card 0 that were never published."""
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


if __name__ == "__main__":
    ok(acl.init(), "init")
    main()
