"""Fault injection against real device workers: every fault kind with the exact code it
gives at the sync point (and on the host side for isolated pages), the exception callback,
health and ECC counters, the device log ring, the ``ASCEND_*`` log variables, device loss
and a fresh worker after it.

Each scenario is one pyACL program in a fresh interpreter (``run_py``, mostly on an embedded
node); the child records what it saw in a dict ``R`` printed as JSON, assertions are here.
A few scenarios feed more than one test (several tests check one run): their result is
cached per module so the child runs once.
"""

from __future__ import annotations

import re

import pytest
from childprog import run_scenario

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "64M"}

OK_STATUS, ABNORMAL = 0, 1
PARAM_INVALID = 107000
AICORE, AIVECTOR, AICPU = 507015, 507035, 507018
STREAM_SYNC_TIMEOUT, EVENT_SYNC_TIMEOUT = 507046, 507047
SYS_DMA, DEVICE_MEM_ERROR = 507013, 507053
HBM_ECC, LINK_ERROR, LOST = 507054, 507056, 507010
HEALTH_OK, HEALTH_WARNING, HEALTH_ALARM = 0, 1, 2
LIVENESS_S = 5.0
LINE_RE = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|EVENT)\] ([A-Z]+)\((\d+),npuemu-dev\d+\):"
                     r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} (.*)")

PRELUDE = """
import ctypes, json, os, sys, threading, time
from npuemu.tools.cli import install_acl
install_acl()
import acl
from npuemu.host.core import runtime
from npuemu.host.core.faults import inject
from npuemu.host.core.kernel import LIBRARY
from npuemu.shared import errors, layout, logring, shm
C = layout.DEVICE_CTL
R = {}
CODES = []

def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")

def malloc(size):
    ptr, ret = acl.rt.malloc(size, 0)
    ok(ret, f"malloc({size})")
    return ptr

def h2d(dst, n, fill=0):
    data = bytes([fill]) * n
    return acl.rt.memcpy(dst, n, acl.util.bytes_to_ptr(data), n, 1)

def d2h(src, n):
    out = bytearray(n)
    return acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2)

def stream():
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    return s

def functions(names):
    b, ret = acl.rt.binary_load_from_file(LIBRARY)
    ok(ret, "binary_load_from_file")
    out = {}
    for name in names:
        out[name], ret = acl.rt.binary_get_function(b, name)
        ok(ret, name)
    return out

def run(s, *submitted):
    return [*submitted, acl.rt.synchronize_stream(s)]

def ctl(dev=0):
    return runtime.get().devices[dev].link.ctl

def log_text(dev=0):
    seg = shm.Segment(shm.name(runtime.get().node.name, f"d{dev}", "log"))
    ring = logring.LogRing(seg.buf)
    try:
        return ring.read()
    finally:
        ring.release()
        seg.close()

def fails(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except errors.AclError as err:
        return err.code
    return 0

def on_exception(info):
    CODES.append([acl.rt.get_error_code_from_exception_info(info),
                  acl.rt.get_device_id_from_exception_info(info)])

def wait_codes(n, timeout=3.0):
    deadline = time.monotonic() + timeout
    while len(CODES) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(CODES)

ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device(0)")
ok(acl.rt.set_exception_info_callback(on_exception), "set_exception_info_callback")
"""

EPILOGUE = """
print("RESULT " + json.dumps(R), flush=True)
"""


def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 40) -> dict:
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


_CACHE: dict[str, dict] = {}


def cached(key: str, run_py, body: str, env: dict[str, str] | None = None) -> dict:
    """``scenario`` run once per module for ``key`` (several tests check one run)."""
    if key not in _CACHE:
        _CACHE[key] = scenario(run_py, body, env)
    return _CACHE[key]


def parse_log(text: str) -> list[tuple[str, str, str]]:
    """(level, module, message) of each line; every line must have the slog format."""
    out = []
    for line in text.splitlines():
        m = LINE_RE.fullmatch(line)
        if m:
            out.append((m.group(1), m.group(2), m.group(4)))
        else:
            assert not line.startswith("["), f"malformed log line: {line!r}"
    return out


# ------------------------------------------------------------------------------------ ECC
ECC = """
PAGE = 4096
p, q = malloc(3 * PAGE), malloc(3 * PAGE)
ok(h2d(p, 3 * PAGE, 7), "h2d before")
R["health_before"] = ctl()[C.HEALTH]
inject(0, "ecc_multi", ptr=p + PAGE + 100)
c = ctl()
R["after"] = [c[C.HEALTH], c[C.ECC_DBE], c[C.ECC_DBE_TOTAL], c[C.POISONED], c[C.LAST_ERROR],
              c[C.FAULTS]]
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
R["kernel_page"] = run(s, acl.rt.launch_kernel(fill, 2, [p, 3 * PAGE // 4, 1.0, "float32"], s))
R["kernel_clean"] = run(s, acl.rt.launch_kernel(fill, 2, [q, 3 * PAGE // 4, 1.0, "float32"], s))
R["callbacks"] = wait_codes(3)
R["status"] = [int(acl.rt.query_device_status(0)[0]), int(acl.rt.query_device_status(1)[0])]
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
"""


def ecc_result(run_py) -> dict:
    return cached("ecc", run_py, ECC, env={"NPUEMU_ECC_SBE_WARN": "3"})


def test_multi_bit_ecc_isolates_a_page_everywhere(run_py):
    r = ecc_result(run_py)
    assert r["health_before"] == HEALTH_OK
    assert r["after"] == [HEALTH_ALARM, 1, 1, 1, HBM_ECC, 1], r["after"]
    # host-side copies check the POISON table before moving a byte
    assert (r["h2d_page"], r["h2d_overlap"], r["h2d_clean"]) == (HBM_ECC, HBM_ECC, [0, 0])
    assert (r["d2h_page"], r["d2h_clean"]) == (HBM_ECC, 0)
    assert r["memset"] == HBM_ECC
    assert (r["d2d_from"], r["d2d_into"]) == (HBM_ECC, HBM_ECC)
    # stream tasks fail at the sync point
    assert r["memset_async"] == [0, HBM_ECC]
    assert r["memset_async_clean"] == [0, 0]
    assert r["memcpy_async"] == [0, HBM_ECC]
    assert r["kernel_page"] == [0, HBM_ECC]
    assert r["kernel_clean"] == [0, 0]
    assert r["callbacks"] == [[HBM_ECC, 0]] * 3, r["callbacks"]
    assert r["status"] == [ABNORMAL, OK_STATUS]
    assert (r["p2p_page"], r["p2p_clean"]) == (HBM_ECC, 0)
    assert r["bad"] == {"foreign_ptr": PARAM_INVALID, "host_ptr": PARAM_INVALID,
                        "missing_ptr": PARAM_INVALID}


def test_single_bit_ecc_counts_and_warns_at_the_threshold(run_py):
    r = ecc_result(run_py)
    assert r["sbe"] == [[1, 1, HEALTH_OK], [2, 2, HEALTH_OK], [3, 3, HEALTH_WARNING]]
    assert r["sbe_copy"] == 0
    assert r["sbe_cleared"] == [0, 3, HEALTH_OK]


def test_clear_ecc_resets_counters_but_keeps_isolated_pages(run_py):
    r = ecc_result(run_py)
    assert r["cleared"] == [HEALTH_OK, 0, 1, 1]
    assert r["cleared_copy"] == [HBM_ECC, 0]
    assert r["cleared_status"] == OK_STATUS


def test_ecc_faults_are_in_the_device_log(run_py):
    lines = parse_log(ecc_result(run_py)["log"])
    ecc = [(lvl, mod, msg) for lvl, mod, msg in lines if msg.startswith("HBM MULTI BIT ECC")]
    assert len(ecc) == 1, lines
    assert ecc[0][:2] == ("ERROR", "DRV")
    assert re.fullmatch(r"HBM MULTI BIT ECC, Uncorrectable ECC, device_id=0, "
                        r"event_id=0x80e01801, time us=\d{16}", ecc[0][2]), ecc
    events = [msg for lvl, _, msg in lines if lvl == "EVENT"]
    assert [m.split()[2] for m in events if m.startswith("fault injected:")] == [
        "ecc_multi", "clear_ecc"], events
    failed = [msg for lvl, mod, msg in lines if lvl == "ERROR" and mod == "TS"]
    assert len([m for m in failed if m.endswith(f"ret={HBM_ECC} "
                                                 "(ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR)")]) >= 3
    # default level ERROR: the WARNING line of a corrected error is not written, nor DEBUG
    assert {lvl for lvl, _, _ in lines} <= {"ERROR", "EVENT"}


def test_a_page_reported_twice_is_isolated_once(run_py):
    assert ecc_result(run_py)["dup"] == [2, 1]


# ---------------------------------------------------------------------------- engines
ENGINES = """
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
R["named"] = [[name, *run(s, acl.rt.launch_kernel(fn, 1, args, s))] for name, (fn, args) in order]
R["callbacks"] = wait_codes(5)
R["health"] = ctl()[C.HEALTH]
R["bad"] = {"nth0": fails(inject, 0, "aicore", nth=0),
            "unknown": fails(inject, 0, "meltdown"),
            "bad_param": fails(inject, 0, "aicpu", core=3)}
R["log"] = log_text(0)
"""


def test_engine_faults_fail_the_nth_matching_launch(run_py):
    r = scenario(run_py, ENGINES)
    for engine, code in (("aicore", AICORE), ("aivector", AIVECTOR), ("aicpu", AICPU)):
        assert r[engine] == [[0, 0], [0, code], [0, 0]], (engine, r[engine])
        assert r[engine + "_last"] == code
    assert r["named"] == [["fill", 0, 0], ["relu", 0, AIVECTOR], ["relu", 0, 0],
                          ["matmul", 0, AICORE]], r["named"]
    assert r["callbacks"] == [[AICORE, 0], [AIVECTOR, 0], [AICPU, 0], [AIVECTOR, 0],
                              [AICORE, 0]], r["callbacks"]
    assert r["health"] == HEALTH_OK  # a kernel exception is not a hardware health problem
    assert r["bad"] == {"nth0": PARAM_INVALID, "unknown": PARAM_INVALID,
                        "bad_param": PARAM_INVALID}
    lines = parse_log(r["log"])
    failed = [msg for lvl, mod, msg in lines if lvl == "ERROR" and mod == "TS"]
    for code, name in ((AICORE, "ACL_ERROR_RT_AICORE_EXCEPTION"),
                       (AIVECTOR, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION"),
                       (AICPU, "ACL_ERROR_RT_AICPU_EXCEPTION")):
        assert any(m.endswith(f"ret={code} ({name})") for m in failed), (code, failed)
    injected = [m.split()[2] for lvl, mod, m in lines
                if lvl == "EVENT" and mod == "DRV" and m.startswith("fault injected:")]
    assert injected == ["aicore", "aivector", "aicpu", "aivector", "aicore"], injected


# ---------------------------------------------------------------- hang, abort and DMA
STREAM_FAULTS = """
p, q = malloc(1 << 20), malloc(1 << 20)
s = stream()
inject(0, "hang")
ok(acl.rt.memset_async(p, 4096, 0, 4096, s), "memset_async")
t0 = time.monotonic()
R["stream_timeout"] = acl.rt.synchronize_stream_with_timeout(s, 150)
R["stream_waited"] = time.monotonic() - t0
e, ret = acl.rt.create_event()
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
"""


def test_hang_times_out_and_stream_abort_clears_it_and_dma_errors(run_py):
    r = scenario(run_py, STREAM_FAULTS)
    assert r["stream_timeout"] == STREAM_SYNC_TIMEOUT
    assert r["event_timeout"] == EVENT_SYNC_TIMEOUT
    assert r["device_timeout"] == STREAM_SYNC_TIMEOUT
    assert 0.14 <= r["stream_waited"] < 2 and 0.14 <= r["event_waited"] < 2, r
    assert r["query"] == 1  # ACL_STREAM_STATUS_NOT_READY
    assert (r["abort"], r["after_abort"], r["works_again"]) == (0, 0, [0, 0]), r
    assert r["hang_logged"]
    assert r["dma_copy"] == [0, SYS_DMA] and r["dma_next"] == [0, 0]
    assert r["dma_memset"] == [0, DEVICE_MEM_ERROR]
    assert (r["dma_sync_d2d"], r["dma_sync_next"]) == (SYS_DMA, 0)
    assert r["dma_bad_code"] == PARAM_INVALID
    assert r["callbacks"] == [[SYS_DMA, 0], [DEVICE_MEM_ERROR, 0]], r["callbacks"]


RESET_HUNG = """
p = malloc(4096)
s = stream()
inject(0, "hang")
ok(acl.rt.memset_async(p, 4096, 0, 4096, s), "memset_async")
done = []
t = threading.Thread(target=lambda: done.append(acl.rt.reset_device(0)), daemon=True)
t.start()
t.join(3.0)
R["reset"] = done
print("RESULT " + json.dumps(R), flush=True)
os._exit(0)  # a reset stuck in the hung stream would keep the process alive
"""


def test_device_reset_clears_a_hang(run_py):
    r = scenario(run_py, RESET_HUNG)
    assert r["reset"] == [0]


# ----------------------------------------------------------------------------- links
LINKS = """
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
"""


def links_result(run_py) -> dict:
    return cached("links", run_py, LINKS, env={"NPUEMU_DEVICES": "3"})


def test_link_error_fails_p2p_copies_over_that_link_only(run_py):
    r = links_result(run_py)
    assert r["by0"] == {"0<-1": LINK_ERROR, "1<-0": LINK_ERROR, "0<-2": 0, "2<-0": 0}
    assert r["others"] == {"2<-1 by 2": 0, "1<-2 by 1": 0}
    assert r["async"] == [0, LINK_ERROR]
    assert r["callbacks"] == [[LINK_ERROR, 0]]
    assert r["cleared"] == 0


def test_link_error_is_seen_from_both_ends(run_py):
    assert links_result(run_py)["by1"] == {"0<-1 by 1": LINK_ERROR, "1<-0 by 1": LINK_ERROR}


# ------------------------------------------------------------------------------ loss
LOSS = """
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
"""


def test_lost_device_fails_fast_and_a_reset_brings_up_a_fresh_card(run_py, shared_node,
                                                                   status):
    name = shared_node(devices=2, hbm="64M", ddr="64M")
    r = scenario(run_py, LOSS, env={"NPUEMU_NODE": name})
    assert r["sync"] == LOST and r["elapsed"] < LIVENESS_S, r
    assert r["status"] == [OK_STATUS, ABNORMAL]
    assert (r["malloc"], r["copy"]) == (LOST, LOST)
    assert r["left"] == ["d1.log"], r["left"]  # the supervisor removed all but the log
    assert any(lvl == "EVENT" and msg == "device 1 lost (injected)"
               for lvl, _, msg in parse_log(r["log"]))
    assert r["dev0"] == [0, 0]
    assert r["fresh"] == [0, 0, 0] and r["fresh_status"] == OK_STATUS and r["new_pid"], r
    node = status(name)
    assert [(d["state"], d["starts"]) for d in node["devices"]] == [("READY", 1),
                                                                     ("READY", 2)]
    assert node["devices"][1]["last_exit"] == -9  # SIGKILL
    assert [d["health"] for d in node["devices"]] == ["OK", "OK"]


# ------------------------------------------------------------------------- log levels
LOGS = """
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
"""
ALL_ERROR = {"level": 3, "event": 1, "modules": {}}


def log_lines(run_py, env: dict[str, str]) -> tuple[dict, list[tuple[str, str, str]]]:
    r = scenario(run_py, LOGS, env=env)
    assert r["failed"] == [0, SYS_DMA]
    return r, parse_log(r.pop("log"))


def mallocs(lines: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [line for line in lines if line[2].startswith("malloc size=4096 ")]


@pytest.mark.parametrize("env, expect", [
    ({"ASCEND_GLOBAL_LOG_LEVEL": "0"}, {"level": 0, "event": 1, "modules": {}}),
    ({"ASCEND_GLOBAL_LOG_LEVEL": "4"}, {"level": 4, "event": 1, "modules": {}}),
    ({"ASCEND_GLOBAL_LOG_LEVEL": "7", "ASCEND_GLOBAL_EVENT_ENABLE": "0"},
     {"level": 3, "event": 0, "modules": {}}),
    ({"ASCEND_MODULE_LOG_LEVEL": "DEVMM=0:TS=0"},
     {"level": 3, "event": 1, "modules": {"DEVMM": 0, "TS": 0}}),
    ({"ASCEND_MODULE_LOG_LEVEL": "devmm=0", "ASCEND_GLOBAL_LOG_LEVEL": "4"},
     {"level": 4, "event": 1, "modules": {"DEVMM": 0}}),
    ({"ASCEND_MODULE_LOG_LEVEL": "DEVMM=0:TS=0:NOPE=1"}, ALL_ERROR),
    ({"ASCEND_MODULE_LOG_LEVEL": "DEVMM=0:TS=9"}, ALL_ERROR),
], ids=["global-debug", "global-null", "bad-global-events-off", "modules", "one-module",
        "bad-module", "bad-level"])
def test_log_level_variables(run_py, env, expect):
    r, lines = log_lines(run_py, env)
    assert r == {**expect, "failed": [0, SYS_DMA]}
    levels = {lvl for lvl, _, _ in lines}
    debug = {m for m in ("DEVMM", "TS")
             if expect["modules"].get(m, expect["level"]) == 0}
    if "DEVMM" in debug:  # the malloc lines belong to DEVMM, at DEBUG
        assert mallocs(lines) and {(lvl, m) for lvl, m, _ in mallocs(lines)} == {
            ("DEBUG", "DEVMM")}, lines
    else:
        assert not mallocs(lines), lines
    # the scheduler's task lines belong to TS
    assert any(lvl == "DEBUG" and mod == "TS" and msg.endswith("complete")
               for lvl, mod, msg in lines) == ("TS" in debug), lines
    assert {mod for lvl, mod, _ in lines if lvl == "DEBUG"} <= debug, lines
    if expect["level"] == 4:  # NULL: no ERROR line; the event switch alone governs EVENT
        assert levels <= {"EVENT", "DEBUG"}, lines
    else:
        assert any(lvl == "ERROR" and msg.endswith(f"ret={SYS_DMA} (ACL_ERROR_RT_SYS_DMA)")
                   for lvl, _, msg in lines), lines
    assert ("EVENT" in levels) == bool(expect["event"]), lines
