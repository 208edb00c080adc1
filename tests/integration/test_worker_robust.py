"""A worker no request can kill or wedge: raw frames pushed into a
real worker's ring, hosts that leave while their tasks run, runaway and timed-out tasks, and
the checks that keep a kernel inside its process's memory.

Each scenario is a pyACL program in a fresh interpreter attached as a host would be
(``tests/progs/worker_robust.py``, one function per scenario); raw frames go through that
host's own link (``runtime.get().current_link()``). Results come back as the child's ``R``
dict; assertions are here. Scenarios that need a second host use a shared node
(``module_node``) so the card outlives the first host.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest
from childprog import run_program

from npuemu.shared import errors
from npuemu.shared.kernel import TIMEOUT_INTERVAL_US

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "32M"}
PARAM_INVALID = errors.ACL_ERROR_RT_PARAM_INVALID
NOT_READY, COMPLETE = 1, 0

PROG = "worker_robust.py"


def scenario(run_prog, name: str, *args, env: dict | None = None, timeout: float = 90) -> dict:
    """Run the scenario ``name`` of the program; on an embedded node of ENV, or on the shared
    node that ``env`` names (``NPUEMU_NODE``)."""
    base = {} if env and "NPUEMU_NODE" in env else ENV
    return run_program(run_prog, PROG, name, *args, env={**base, **(env or {})},
                       timeout=timeout)


def test_requests_sent_as_a_generator_yields_them_each_get_their_own_reply(run_prog):
    r = scenario(run_prog, "call_many_streamed")
    assert r["count"] == 40000 and r["refused"] == [20000]
    assert r["refused_code"] == PARAM_INVALID and r["serves"]


# 1. exceptions in the dispatcher are classified; the worker keeps serving ---------------------
def test_pin_of_a_block_that_no_longer_exists_is_answered_and_the_worker_lives(run_prog):
    r = scenario(run_prog, "pin_gone")
    assert r["pin_gone"] == ["err", PARAM_INVALID]
    assert r["serves"] and r["same_worker"]
    assert r["bad_frames"] == 0  # a request about a vanished block is not a malformed frame


# 8. malformed frames and stream tasks are refused inside the frame's error handling ----------
def test_malformed_frames_and_task_frames_are_refused_not_fatal(run_prog):
    r = scenario(run_prog, "malformed")
    for key in ("malloc_str", "malloc_neg", "malloc_arity", "memset_neg", "copy_huge",
                "unknown_op", "inject_bad"):
        assert r[key] == ["err", PARAM_INVALID], (key, r[key])
    assert r["bad_frames"] >= 15
    # the refused task frames that named a real stream and task number fail in their turn
    assert r["serves"] and r["same_worker"] and r["stream_ok"] == PARAM_INVALID


def test_a_refused_task_frame_fails_its_task_instead_of_hanging_the_stream(run_prog):
    r = scenario(run_prog, "refused_task")
    assert r["sync"] == PARAM_INVALID  # not 507046: the stream did not wait for it
    assert r["after"] == 0 and r["serves"]


def test_corrupt_ring_header_detaches_that_client_only(module_node, run_prog):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    r = scenario(run_prog, "corrupt_ring", env={"NPUEMU_NODE": name})
    assert r["detached"]
    r2 = scenario(run_prog, "still_serves", env={"NPUEMU_NODE": name})
    assert r2["serves"] and r2["pid"] == r["pid"]


# 4. hosts that leave while their tasks run never take the card down -------------------------


@pytest.mark.parametrize("leave", ["exit", "reset_device_force"])
def test_host_leaving_with_tasks_running_does_not_kill_the_card(module_node, run_prog, leave):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    first = scenario(run_prog, "leave", leave, env={"NPUEMU_NODE": name})
    second = scenario(run_prog, "still_serves", env={"NPUEMU_NODE": name})
    assert second["serves"] and second["pid"] == first["pid"]


def test_kill_9_of_hosts_doing_large_async_copies_leaves_the_card_serving(
        module_node, spawn_prog, run_prog, tmp_path):
    """Four hosts killed one after the other in their copy loop. Each host first makes the
    check of ``still_serves`` (so hosts 1 to 3 check the card after the kill before them)
    and a last ``still_serves`` host checks it after the fourth kill."""
    name = module_node(devices=2, hbm="64M", ddr="32M")
    pids = set()
    for i in range(4):
        ready = tmp_path / f"ready{i}"
        proc = spawn_prog(PROG, "copy_forever", str(ready), env={"NPUEMU_NODE": name})
        deadline = 60
        t0 = time.monotonic()
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < deadline, "the host never got going"
            time.sleep(0.05)
        r = json.loads(ready.read_text())
        assert r["serves"], i  # after the kill of host i - 1 (i > 0)
        pids.add(r["pid"])
        time.sleep(0.1 * i)  # kill at different moments of the copy loop
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    r = scenario(run_prog, "still_serves", env={"NPUEMU_NODE": name})
    assert r["serves"]
    pids.add(r["pid"])
    assert len(pids) == 1  # the same worker served before the kills and after every one


# 5. a kernel's counts and pointers are checked before any view ------------------------------
def test_kernel_tensor_with_negative_or_oversized_count_faults_without_touching_memory(run_prog):
    r = scenario(run_prog, "tensor_counts")
    mem_error = errors.ACL_ERROR_RT_DEVICE_MEM_ERROR
    assert r["codes"] == {"minus_one": mem_error, "past_end": mem_error, "huge": mem_error,
                          "exact": 0}
    assert r["other_intact"] and r["mine_written"] and r["serves"]


# 6. a late completion never lands in a reused stream slot ------------------------------------
def test_force_destroyed_streams_running_task_does_not_complete_the_next_stream(run_prog):
    r = scenario(run_prog, "reused_slot")
    assert r["same_slot"]
    assert r["query"] == NOT_READY
    assert r["sync"] == 0 and r["filled"]


# 7. runaway launches are refused or abortable ------------------------------------------------
def test_runaway_launches_are_limited_and_long_kernels_abort_between_blocks(run_prog):
    r = scenario(run_prog, "runaway", timeout=120)
    assert r["huge"] == errors.ACL_ERROR_INVALID_PARAM
    assert r["max_plus_one"] == errors.ACL_ERROR_INVALID_PARAM
    assert r["query_running"] == NOT_READY
    assert r["abort"] == 0 and r["sync_after_abort"] == 0 and r["other"] == 0
    assert r["reset"] == 0
    assert r["reset_s"] < 60  # bounded by the reset's drain, not the kernel's 65535 blocks


# 3. task execution timeout -------------------------------------------------------------------
def test_execution_timeout_fails_hung_and_overlong_tasks_and_the_stream_goes_on(run_prog):
    r = scenario(run_prog, "exec_timeout", timeout=120)
    interval = TIMEOUT_INTERVAL_US
    assert r["interval"] == [interval, 0]
    assert r["default_ms"] == [interval * 254 // 1000, 0]
    assert r["v2"] == [interval, 0] and r["get_ms"] == [interval // 1000, 0]
    assert r["hung_sync"] == errors.ACL_ERROR_RT_TASK_TIMEOUT
    assert r["long_sync"] == errors.ACL_ERROR_RT_AICPU_TIMEOUT
    assert r["after"] == 0 and r["data"]
    assert r["set_s"] == 0 and r["get_max_ms"] == [interval * 254 // 1000, 0]


# 9. raw copy frames cannot reach a card this process has not opened --------------------------
def test_raw_copy_frame_naming_another_cards_block_is_refused(module_node, spawn_prog,
                                                              run_prog, tmp_path):
    name = module_node(devices=2, hbm="64M", ddr="32M")
    ptr_file = tmp_path / "ptr"
    owner = spawn_prog(PROG, "owner", str(ptr_file), env={"NPUEMU_NODE": name})
    t0 = time.monotonic()
    while not ptr_file.exists():
        assert owner.poll() is None, owner.communicate()
        assert time.monotonic() - t0 < 60
        time.sleep(0.05)
    r = scenario(run_prog, "foreign_copy", ptr_file, env={"NPUEMU_NODE": name})
    owner.kill()
    owner.wait(10)
    assert r["read"] == ["err", PARAM_INVALID] and r["write"] == ["err", PARAM_INVALID]
    assert not r["leaked"] and r["serves"]


# 10. threading: engines resolve while the loop frees; several threads write the log ----------
LINE_RE = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|EVENT)\] [A-Z]+\(\d+,npuemu-dev\d+\):"
                     r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} ")


def test_kernels_resolving_while_the_loop_frees_and_logging_from_every_thread(run_prog):
    r = scenario(run_prog, "churn_and_log", env={"ASCEND_GLOBAL_LOG_LEVEL": "0"}, timeout=150)
    assert r["codes"] == [errors.ACL_ERROR_RT_DEVICE_MEM_ERROR] * 3
    assert r["copied"] and r["churn"] > 0 and r["serves"]
    lines = r["lines"][1:]  # the first line may be cut by the ring's wrap
    assert len(lines) > 100
    bad = [ln for ln in lines if ln.startswith("[") and not LINE_RE.match(ln)]
    assert not bad, bad[:5]


# 11. an idle card of a real SoC's size does not report all its HBM free ----------------------
def test_idle_card_reports_the_firmware_reservation(run_prog):
    r = run_program(run_prog, PROG, "idle_card", env={"NPUEMU_DEVICES": "1"}, timeout=90)
    free, total, ret = r["hbm"]
    assert ret == 0 and r["soc"] == "Ascend910B1" and total == 64 << 30
    assert free == total - (3 << 30)
    assert r["ddr"][0] == r["ddr"][1] - (1 << 30)  # and 1 GiB of the card's DDR


# 11. far pages (shared/pages.py) -----------------------------------------------------------
def test_raw_frames_naming_far_pages_never_published_are_refused(run_prog):
    """The far range of an arena is address space with nothing mapped until the card
    publishes a block there: a raw copy naming it on a peer card, or running from a card's
    memory into it, is refused (107000), never a fault that kills the worker."""
    r = scenario(run_prog, "far_pages")
    bad = ["err", PARAM_INVALID]
    assert [r["peer_far"], r["peer_far_write"], r["peer_edge"], r["own_far"]] == [bad] * 4
    assert r["serves"] and r["peer_serves"]
