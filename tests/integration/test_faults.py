"""Fault injection against real device workers: every fault kind with the exact code it
gives at the sync point (and on the host side for isolated pages), the exception callback,
health and ECC counters, the device log ring, the ``ASCEND_*`` log variables, device loss
and a fresh worker after it.

Each scenario is one function of a pyACL program (``tests/progs/faults.py``) run in a fresh
interpreter, mostly on an embedded node; the child records what it saw in a dict ``R``
printed as JSON, assertions are here. A few scenarios feed more than one test (several tests
check one run): their result is cached per module so the child runs once.
"""

from __future__ import annotations

import re

import pytest
from childprog import run_program

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

PROG = "faults.py"


def scenario(run_prog, name: str, env: dict[str, str] | None = None,
             timeout: float = 40) -> dict:
    """The ``R`` of the scenario ``name`` of the program, run with ENV (+ ``env``)."""
    return run_program(run_prog, PROG, name, env={**ENV, **(env or {})}, timeout=timeout)


_CACHE: dict[str, dict] = {}


def cached(key: str, run_prog, env: dict[str, str] | None = None) -> dict:
    """The scenario ``key`` run once per module (several tests check one run)."""
    if key not in _CACHE:
        _CACHE[key] = scenario(run_prog, key, env)
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


def ecc_result(run_prog) -> dict:
    return cached("ecc", run_prog, env={"NPUEMU_ECC_SBE_WARN": "3"})


def test_multi_bit_ecc_isolates_a_page_everywhere(run_prog):
    r = ecc_result(run_prog)
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


def test_single_bit_ecc_counts_and_warns_at_the_threshold(run_prog):
    r = ecc_result(run_prog)
    assert r["sbe"] == [[1, 1, HEALTH_OK], [2, 2, HEALTH_OK], [3, 3, HEALTH_WARNING]]
    assert r["sbe_copy"] == 0
    assert r["sbe_cleared"] == [0, 3, HEALTH_OK]


def test_clear_ecc_resets_counters_but_keeps_isolated_pages(run_prog):
    r = ecc_result(run_prog)
    assert r["cleared"] == [HEALTH_OK, 0, 1, 1]
    assert r["cleared_copy"] == [HBM_ECC, 0]
    assert r["cleared_status"] == OK_STATUS


def test_ecc_faults_are_in_the_device_log(run_prog):
    lines = parse_log(ecc_result(run_prog)["log"])
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


def test_a_page_reported_twice_is_isolated_once(run_prog):
    assert ecc_result(run_prog)["dup"] == [2, 1]


# ---------------------------------------------------------------------------- engines


def test_engine_faults_fail_the_nth_matching_launch(run_prog):
    r = scenario(run_prog, "engines")
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


def test_hang_times_out_and_stream_abort_clears_it_and_dma_errors(run_prog):
    r = scenario(run_prog, "stream_faults")
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


def test_device_reset_clears_a_hang(run_prog):
    r = scenario(run_prog, "reset_hung")
    assert r["reset"] == [0]


# ----------------------------------------------------------------------------- links


def links_result(run_prog) -> dict:
    return cached("links", run_prog, env={"NPUEMU_DEVICES": "3"})


def test_link_error_fails_p2p_copies_over_that_link_only(run_prog):
    r = links_result(run_prog)
    assert r["by0"] == {"0<-1": LINK_ERROR, "1<-0": LINK_ERROR, "0<-2": 0, "2<-0": 0}
    assert r["others"] == {"2<-1 by 2": 0, "1<-2 by 1": 0}
    assert r["async"] == [0, LINK_ERROR]
    assert r["callbacks"] == [[LINK_ERROR, 0]]
    assert r["cleared"] == 0


def test_link_error_is_seen_from_both_ends(run_prog):
    assert links_result(run_prog)["by1"] == {"0<-1 by 1": LINK_ERROR, "1<-0 by 1": LINK_ERROR}


# ------------------------------------------------------------------------------ loss


def test_lost_device_fails_fast_and_a_reset_brings_up_a_fresh_card(run_prog, shared_node,
                                                                   status):
    name = shared_node(devices=2, hbm="64M", ddr="64M")
    r = scenario(run_prog, "loss", env={"NPUEMU_NODE": name})
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
ALL_ERROR = {"level": 3, "event": 1, "modules": {}}


def log_lines(run_prog, env: dict[str, str]) -> tuple[dict, list[tuple[str, str, str]]]:
    r = scenario(run_prog, "logs", env=env)
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
def test_log_level_variables(run_prog, env, expect):
    r, lines = log_lines(run_prog, env)
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
