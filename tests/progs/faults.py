"""Child program of ``tests/integration/test_faults.py``: injected faults (ECC, engines, hang,
DMA, links, device loss) and the codes the runtime gives for them at the sync point
(``aclrtSynchronizeStream``) or at once on the host, the exception callback
(``aclrtSetExceptionInfoCallback``), the health and ECC counters, the device log ring.

``python faults.py SCENARIO`` initializes pyACL, sets device 0, installs the exception
callback, runs one scenario and prints ``R`` (see ``childlib``); the assertions are the
test's. ``h2d``/``d2h`` here return the copy's code instead of exiting on an error.
"""

import os
import threading
import time

from childlib import R, acl, emit, main, malloc, ok, scenario, stream

from npuemu.host.core import runtime
from npuemu.host.core.faults import inject
from npuemu.host.core.kernel import LIBRARY
from npuemu.shared import errors, layout, logring, shm

C = layout.DEVICE_CTL
CODES = []
"""[code, device] of each exception callback (appended by the callback's thread)."""
PAGE = 4096


def h2d(dst, n, fill=0):
    """The code of a synchronous H2D copy of ``n`` bytes of ``fill``."""
    data = bytes([fill]) * n
    return acl.rt.memcpy(dst, n, acl.util.bytes_to_ptr(data), n, 1)


def d2h(src, n):
    """The code of a synchronous D2H copy of ``n`` bytes."""
    out = bytearray(n)
    return acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2)


def functions(names):
    """The library's functions ``names``."""
    b, ret = acl.rt.binary_load_from_file(LIBRARY)
    ok(ret, "binary_load_from_file")
    out = {}
    for name in names:
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out


def run(s, *submitted):
    """The submit codes then the synchronize code of stream ``s``."""
    return [*submitted, acl.rt.synchronize_stream(s)]


def ctl(dev=0):
    """The control words of card ``dev``."""
    return runtime.get().devices[dev].link.ctl


def log_text(dev=0):
    """The text of card ``dev``'s log ring."""
    seg = shm.Segment(shm.name(runtime.get().node.name, f"d{dev}", "log"))
    ring = logring.LogRing(seg.buf)
    try:
        return ring.read()
    finally:
        ring.release()
        seg.close()


def fails(fn, *args, **kw):
    """The code of the AclError ``fn`` raises, 0 if none."""
    try:
        fn(*args, **kw)
    except errors.AclError as err:
        return err.code
    return 0


def on_exception(info):
    """The exception callback: records the code and the device."""
    CODES.append([acl.rt.get_error_code_from_exception_info(info),
                  acl.rt.get_device_id_from_exception_info(info)])


def wait_codes(n, timeout=3.0):
    """The callbacks' codes once ``n`` arrived (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    while len(CODES) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(CODES)


# ------------------------------------------------------------------------------------ ECC
@scenario
def ecc():
    """A multi-bit ECC error isolating a page; single-bit errors; clear_ecc."""
    p, q = malloc(3 * PAGE), malloc(3 * PAGE)
    ok(h2d(p, 3 * PAGE, 7), "h2d before")
    R["health_before"] = ctl()[C.HEALTH]
    inject(0, "ecc_multi", ptr=p + PAGE + 100)
    c = ctl()
    R["after"] = [c[C.HEALTH], c[C.ECC_DBE], c[C.ECC_DBE_TOTAL], c[C.POISONED],
                  c[C.LAST_ERROR], c[C.FAULTS]]
    ecc_copies(p, q)
    R["callbacks"] = wait_codes(3)
    R["status"] = [int(acl.rt.query_device_status(0)[0]), int(acl.rt.query_device_status(1)[0])]
    r1 = ecc_card_1(p)
    ok(acl.rt.set_device(0))
    # npu-smi clear: counters back to 0, health recomputed; the page stays isolated
    inject(0, "clear_ecc")
    c = ctl()
    R["cleared"] = [c[C.HEALTH], c[C.ECC_DBE], c[C.ECC_DBE_TOTAL], c[C.POISONED]]
    R["cleared_copy"] = [h2d(p + PAGE, PAGE), h2d(p, PAGE)]
    R["cleared_status"] = int(acl.rt.query_device_status(0)[0])
    R["bad"] = {"foreign_ptr": fails(inject, 0, "ecc_multi", ptr=r1),
                "host_ptr": fails(inject, 0, "ecc_single", ptr=0x1000),
                "missing_ptr": fails(inject, 0, "ecc_multi")}
    R["log"] = log_text(0)


def ecc_copies(p, q):
    """Copies, memsets and a kernel touching the isolated page of ``p``, and clean ones."""
    R["h2d_page"] = h2d(p + PAGE, PAGE)
    R["h2d_overlap"] = h2d(p + PAGE - 8, 16)
    R["h2d_clean"] = [h2d(p, PAGE), h2d(p + 2 * PAGE, PAGE)]
    R["d2h_page"] = d2h(p + PAGE + 4000, 10)
    R["d2h_clean"] = d2h(p + 2 * PAGE, PAGE)
    R["memset"] = acl.rt.memset(p + PAGE, PAGE, 0, PAGE)
    R["d2d_from"] = acl.rt.memcpy(q, 3 * PAGE, p, 3 * PAGE, 3)
    R["d2d_into"] = acl.rt.memcpy(p, 3 * PAGE, q, 3 * PAGE, 3)
    s = stream()
    R["memset_async"] = run(s, acl.rt.memset_async(p + PAGE, PAGE, 1, PAGE, s))
    R["memset_async_clean"] = run(s, acl.rt.memset_async(p, PAGE, 1, PAGE, s))
    R["memcpy_async"] = run(s, acl.rt.memcpy_async(q, 3 * PAGE, p, 3 * PAGE, 3, s))
    fill = functions(["fill"])["fill"]
    R["kernel_page"] = run(s, acl.rt.launch_kernel(fill, 2, [p, 3 * PAGE // 4, 1.0, "float32"],
                                                   s))
    R["kernel_clean"] = run(s, acl.rt.launch_kernel(fill, 2, [q, 3 * PAGE // 4, 1.0,
                                                              "float32"], s))


def ecc_card_1(p):
    """A peer copy from the isolated page; single-bit errors and a page twice on card 1."""
    # a peer card's copy touching the isolated page fails too
    ok(acl.rt.set_device(1))
    ok(acl.rt.device_enable_peer_access(0, 0))
    r1 = malloc(2 * PAGE)
    R["p2p_page"] = acl.rt.memcpy(r1, PAGE, p + PAGE, PAGE, 3)
    R["p2p_clean"] = acl.rt.memcpy(r1, PAGE, p, PAGE, 3)
    # single-bit errors on card 1: counted, health WARNING at NPUEMU_ECC_SBE_WARN (3 here)
    sbe = []
    for i in range(3):
        inject(1, "ecc_single", ptr=r1 + i)
        sbe.append([ctl(1)[C.ECC_SBE], ctl(1)[C.ECC_SBE_TOTAL], ctl(1)[C.HEALTH]])
    R["sbe"] = sbe
    R["sbe_copy"] = h2d(r1, PAGE)  # corrected: data still moves
    inject(1, "clear_ecc")
    R["sbe_cleared"] = [ctl(1)[C.ECC_SBE], ctl(1)[C.ECC_SBE_TOTAL], ctl(1)[C.HEALTH]]
    # the same page reported twice is still one isolated page
    inject(1, "ecc_multi", ptr=r1 + PAGE)
    inject(1, "ecc_multi", ptr=r1 + PAGE + 64)
    R["dup"] = [ctl(1)[C.ECC_DBE], ctl(1)[C.POISONED]]
    return r1


# ---------------------------------------------------------------------------- engines
@scenario
def engines():
    """Engine faults on the nth launch, narrowed by kernel name; bad injections."""
    F = functions(["matmul", "fill", "relu", "reduce_sum"])
    p, q = malloc(4096), malloc(4096)
    ok(acl.rt.memset(p, 4096, 0, 4096))
    s = stream()
    launches = {"aicore": (F["matmul"], [p, p, q, 4, 4, 4, "float32"]),
                "aivector": (F["fill"], [p, 16, 1.0, "float32"]),
                "aicpu": (F["reduce_sum"], [p, q, 16, "float32"])}
    for engine, (fn, args) in launches.items():
        inject(0, engine, nth=2)
        R[engine] = [run(s, acl.rt.launch_kernel(fn, 1, args, s)) for _ in range(3)]
        R[engine + "_last"] = ctl()[C.LAST_ERROR]
    # a kernel name narrows the fault; other engines' launches do not count
    inject(0, "aivector", kernel="relu", nth=1)
    inject(0, "aicore", nth=1)
    relu = (F["relu"], [p, q, 16, "float32"])
    order = [("fill", launches["aivector"]), ("relu", relu), ("relu", relu),
             ("matmul", launches["aicore"])]
    R["named"] = [[name, *run(s, acl.rt.launch_kernel(fn, 1, args, s))]
                  for name, (fn, args) in order]
    R["callbacks"] = wait_codes(5)
    R["health"] = ctl()[C.HEALTH]
    R["bad"] = {"nth0": fails(inject, 0, "aicore", nth=0),
                "unknown": fails(inject, 0, "meltdown"),
                "bad_param": fails(inject, 0, "aicpu", core=3)}
    R["log"] = log_text(0)


# ---------------------------------------------------------------- hang, abort and DMA
@scenario
def stream_faults():
    """A hung task: timeouts, query, abort; then DMA errors on copies and memsets."""
    p, q = malloc(1 << 20), malloc(1 << 20)
    s = stream()
    inject(0, "hang")
    ok(acl.rt.memset_async(p, 4096, 0, 4096, s), "memset_async")
    t0 = time.monotonic()
    R["stream_timeout"] = acl.rt.synchronize_stream_with_timeout(s, 150)
    R["stream_waited"] = time.monotonic() - t0
    e, _ret = acl.rt.create_event()
    ok(acl.rt.record_event(e, s), "record_event")
    t0 = time.monotonic()
    R["event_timeout"] = acl.rt.synchronize_event_with_timeout(e, 150)
    R["event_waited"] = time.monotonic() - t0
    R["device_timeout"] = acl.rt.synchronize_device_with_timeout(100)
    R["query"] = int(acl.rt.stream_query(s)[0])
    R["abort"] = acl.rt.stream_abort(s)
    R["after_abort"] = acl.rt.synchronize_stream_with_timeout(s, 2000)
    R["works_again"] = run(s, acl.rt.memset_async(p, 4096, 3, 4096, s))
    R["hang_logged"] = "hangs (injected)" in log_text(0)
    # DMA engine errors: the next copy or memset task fails with the injected code, once
    inject(0, "dma", code=507013)
    R["dma_copy"] = run(s, acl.rt.memcpy_async(q, 1 << 20, p, 1 << 20, 3, s))
    R["dma_next"] = run(s, acl.rt.memcpy_async(q, 1 << 20, p, 1 << 20, 3, s))
    inject(0, "dma", code=507053)
    R["dma_memset"] = run(s, acl.rt.memset_async(p, 64, 0, 64, s))
    inject(0, "dma")
    R["dma_sync_d2d"] = acl.rt.memcpy(q, 4096, p, 4096, 3)
    R["dma_sync_next"] = acl.rt.memcpy(q, 4096, p, 4096, 3)
    R["dma_bad_code"] = fails(inject, 0, "dma", code=507054)
    R["callbacks"] = wait_codes(2)


@scenario
def reset_hung():
    """aclrtResetDevice with a hung task pending (on a thread, waited 3 s); leaves at once."""
    p = malloc(4096)
    s = stream()
    inject(0, "hang")
    ok(acl.rt.memset_async(p, 4096, 0, 4096, s), "memset_async")
    done = []
    t = threading.Thread(target=lambda: done.append(acl.rt.reset_device(0)), daemon=True)
    t.start()
    t.join(3.0)
    R["reset"] = done
    emit()
    os._exit(0)  # a reset stuck in the hung stream would keep the process alive


# ----------------------------------------------------------------------------- links
@scenario
def links():
    """A link error between cards 0 and 1: copies over it by each end, others, cleared."""
    n = 8192
    bufs = {}
    for d in (0, 1, 2):
        ok(acl.rt.set_device(d))
        for peer in (0, 1, 2):
            if peer != d:
                ok(acl.rt.device_enable_peer_access(peer, 0), f"peer {d}->{peer}")
        bufs[d] = malloc(n)

    def copy(executor, dst, src):
        ok(acl.rt.set_device(executor))
        return acl.rt.memcpy(bufs[dst], n, bufs[src], n, 3)

    inject(0, "link", peer=1)
    R["by0"] = {"0<-1": copy(0, 0, 1), "1<-0": copy(0, 1, 0), "0<-2": copy(0, 0, 2),
                "2<-0": copy(0, 2, 0)}
    R["others"] = {"2<-1 by 2": copy(2, 2, 1), "1<-2 by 1": copy(1, 1, 2)}
    ok(acl.rt.set_device(0))
    s = stream()
    R["async"] = run(s, acl.rt.memcpy_async(bufs[1], n, bufs[0], n, 3, s))
    R["callbacks"] = wait_codes(1)
    R["by1"] = {"0<-1 by 1": copy(1, 0, 1), "1<-0 by 1": copy(1, 1, 0)}
    inject(0, "link", peer=1, clear=True)
    R["cleared"] = copy(0, 0, 1)


# ------------------------------------------------------------------------------ loss
@scenario
def loss():
    """Card 1 of the shared node NPUEMU_NODE lost with a task pending; reset; fresh card."""
    n = 4096
    name = os.environ["NPUEMU_NODE"]
    p0 = malloc(n)
    ok(acl.rt.set_device(1), "set_device(1)")
    p1 = malloc(n)
    s1 = stream()
    inject(1, "hang")  # a task that is still pending when the card dies
    ok(acl.rt.memset_async(p1, n, 0, n, s1), "memset_async")
    pid = ctl(1)[C.PID]
    t0 = time.monotonic()
    inject(1, "lost")
    R["sync"] = acl.rt.synchronize_stream(s1)
    R["elapsed"] = time.monotonic() - t0
    R["status"] = [int(acl.rt.query_device_status(d)[0]) for d in (0, 1)]
    R["malloc"] = acl.rt.malloc(n, 0)[1]
    R["copy"] = h2d(p1, n)

    def left():
        return sorted(e.split(".", 2)[2] for e in shm.leftovers(name) if ".d1." in e)

    t_end = time.monotonic() + 20  # the supervisor cleans up on its own thread: bounded wait
    while left() != ["d1.log"] and time.monotonic() < t_end:
        time.sleep(0.05)
    R["left"] = left()
    R["log"] = log_text(1)
    ok(acl.rt.set_device(0), "set_device(0)")
    R["dev0"] = [h2d(p0, n, 5), d2h(p0, n)]
    ok(acl.rt.reset_device(1), "reset_device(1)")
    ok(acl.rt.set_device(1), "set_device(1) again")
    q = malloc(n)
    s = stream()
    R["fresh"] = [h2d(q, n, 9), *run(s, acl.rt.memset_async(q, n, 1, n, s))]
    R["fresh_status"] = int(acl.rt.query_device_status(1)[0])
    R["new_pid"] = ctl(1)[C.PID] != pid


# ------------------------------------------------------------------------- log levels
@scenario
def logs():
    """A good and a DMA-failed memset; the log levels the card was given; its log."""
    p = malloc(4096)
    s = stream()
    ok(run(s, acl.rt.memset_async(p, 4096, 0, 4096, s))[1], "memset_async")
    inject(0, "dma", code=507013)
    R["failed"] = run(s, acl.rt.memset_async(p, 4096, 0, 4096, s))
    c = ctl()
    R["level"], R["event"] = c[C.LOG_LEVEL], c[C.EVENT_ENABLE]
    R["modules"] = {m: c[layout.CTL_MODULE_LEVELS + i] for i, m in enumerate(logring.MODULES)
                    if c[layout.CTL_MODULE_LEVELS + i] != 0xFF}
    R["log"] = log_text(0)


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device(0)")
    ok(acl.rt.set_exception_info_callback(on_exception), "set_exception_info_callback")
    main()
