"""Segments and frames are bounded: what another process does to a communicator segment,
and what one client asks of a card, cannot kill a worker, the supervisor or the node.

- a communicator segment truncated after its cards attached it: the collective fails with
  107000 on both cards (HcclGetCommAsyncError reads HCCL_E_MEMORY), the workers live and a
  new communicator works (``device/exec/collective.py``, ``host/driver/commseg.py``);
- segments named like communicators that are 12 bytes, garbage, open to others, a FIFO or
  a directory: the supervisor's reaper skips them (``device/supervisor.py``) and the node
  goes on serving, and still removes a real one its last rank's process left behind;
- ``VMM_MAP`` past the windows limit and past the memory-area limit: 207012, the worker's
  count of memory areas far below ``vm.max_map_count``, another process on the card maps
  and copies meanwhile (``device/memory/windows.py``);
- ``MODEL_LOAD`` of steps of 65535 blocks (a ~200-byte frame cost ~105 MB), past the step
  limit and past the model limit: 207012, the worker's RSS bounded by what was sent
  (``device/exec/model.py``);
- ``COMM_ATTACH`` past the limit: 207012, one engine thread per communicator at most, and
  reused after a detach;
- the card's own budgets across clients: a third client when two hold the card's 64
  communicator threads, and a second client past the card's memory areas for windows, get
  207005.

The host programs are ``tests/progs/bounds_host.py`` (one scenario per mode).
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from npuemu.device.exec import collective, model
from npuemu.device.memory import windows
from npuemu.shared import errors, layout, shm

pytestmark = pytest.mark.integration

HOST = Path(__file__).resolve().parent.parent / "progs" / "bounds_host.py"
OVER_LIMIT = errors.ACL_ERROR_RT_OVER_LIMIT  # 207012
PARAM_INVALID = errors.ACL_ERROR_RT_PARAM_INVALID  # 107000
HCCL_E_MEMORY = 3
ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "32M"}


def host(run_py, mode: str, env: dict[str, str], timeout: float = 120) -> dict:
    """Run ``bounds_host.py mode`` in a child; its result dict."""
    code = (f"import runpy, sys; sys.argv = [{str(HOST)!r}, {mode!r}]; "
            f"runpy.run_path({str(HOST)!r}, run_name='__main__')")
    res = run_py(code, env=env, timeout=timeout)
    assert res.returncode == 0, f"{mode} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line:\n{res.stdout}\n{res.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


def test_a_segment_truncated_after_attach_fails_the_collective_not_the_card(run_py) -> None:
    r = host(run_py, "truncated_comm", ENV)
    assert r["async_error"] == [HCCL_E_MEMORY, HCCL_E_MEMORY]
    assert r["codes"] == [PARAM_INVALID, PARAM_INVALID]
    assert r["same_workers"] and r["fresh_comm"] and r["copies"]


def _plant(node: str) -> list[str]:
    """Names under the communicator prefix that are not communicator segments."""
    base = f"{shm.SHM_DIR}/{shm.node_prefix(node)}hccl."
    made = []

    def file(suffix: str, data: bytes, mode: int = 0o600) -> None:
        path = base + suffix
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
        os.write(fd, data)
        os.fchmod(fd, mode)
        os.close(fd)
        made.append(path)

    file("tiny0000", b"x" * 12)
    file("junk0000", os.urandom(layout.COMM_SIZE))
    file("open0000", b"\0" * layout.COMM_SIZE, 0o644)
    os.mkfifo(base + "fifo0000", 0o600)
    made.append(base + "fifo0000")
    os.mkdir(base + "dir00000", 0o700)
    made.append(base + "dir00000")
    return made


def test_junk_named_like_a_communicator_leaves_the_supervisor_and_the_node_up(
        run_py, shared_node, status) -> None:
    name = shared_node(devices=2, hbm="64M", ddr="16M")
    before = status(name)
    made = _plant(name)
    try:
        env = {"NPUEMU_NODE": name}
        first = host(run_py, "serves", env)  # its exit runs the supervisor's reaper
        second = host(run_py, "serves", env)  # the supervisor and both cards still serve
        abandoned = host(run_py, "abandon", env)["segment"]  # a real one, left behind
        deadline = time.monotonic() + 10
        while os.path.exists(shm.SHM_DIR + abandoned) and time.monotonic() < deadline:
            time.sleep(0.05)
        after = status(name)
        left = [p for p in made if os.path.lexists(p)]
    finally:
        for path in made:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)
    assert first == second == {"copies": True, "all_reduce": True}
    assert not os.path.exists(shm.SHM_DIR + abandoned)  # the reaper still reads real ones
    assert psutil.pid_exists(before["supervisor_pid"])
    assert after["supervisor_pid"] == before["supervisor_pid"]
    assert [d["pid"] for d in after["devices"]] == [d["pid"] for d in before["devices"]]
    assert left == made  # skipped, not removed (not ours to judge)


def test_vmm_map_past_the_limits_is_refused_and_the_card_serves_another_process(
        run_py, spawn_py, shared_node, tmp_path) -> None:
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    hold = tmp_path / "hold"
    code = (f"import runpy, sys; sys.argv = [{str(HOST)!r}, 'vmm']; "
            f"runpy.run_path({str(HOST)!r}, run_name='__main__')")
    abuser = spawn_py(code, env={"NPUEMU_NODE": name, "HOLD": str(hold)})
    deadline = time.monotonic() + 120
    while not Path(str(hold) + ".ready").exists():
        assert abuser.poll() is None, abuser.communicate()
        assert time.monotonic() < deadline, "the mapping process never got to its limits"
        time.sleep(0.05)
    try:  # while it holds its limits, a fresh process reserves, maps and copies
        fresh = host(run_py, "vmm_fresh", {"NPUEMU_NODE": name})
    finally:
        hold.touch()
    out, err = abuser.communicate(timeout=60)
    assert abuser.returncode == 0, out + err
    r = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert fresh == {"copy": True}
    assert r["windows"] == [windows.MAX_WINDOWS, OVER_LIMIT]
    assert r["new_window_after_unmaps"] == 0
    # areas counted: 3 a one-run piece, 1 a window; held besides the pieces: the big window
    # and the small one mapped after the unmaps (1 + 3)
    assert r["pieces_code"] == OVER_LIMIT and r["mapped_after_refusal"] == 0
    assert r["pieces"] == (windows.MAX_CLIENT_AREAS - 5) // 3
    assert r["maps_full"] - r["maps_before"] <= windows.MAX_CLIENT_AREAS
    assert r["maps_full"] < r["max_map_count"] // 4
    assert r["malloc_after"] == 0 and r["unmap"] == 0 and r["map_again"] == 0
    assert r["same_worker"]


def test_model_loads_past_the_limits_are_refused_and_cost_what_they_ask(run_py) -> None:
    r = host(run_py, "models", {**ENV, "NPUEMU_DEVICES": "1"})
    assert r["wide_frame_bytes"] < 256
    assert r["wide_rss_mib"] < 8  # was ~105 MB: 12 steps x 65535 block contexts
    assert r["steps"] == [model.MAX_STEPS, OVER_LIMIT]
    # RSS of 65536 steps, generous: 64 x the bytes sent, plus 16 MiB
    assert r["steps_rss_mib"] < 64 * r["steps_bytes_mib"] + 16
    assert r["models"] == [model.MAX_MODELS, OVER_LIMIT]
    assert r["after_unload"] == 0 and r["same_worker"]


def test_comm_attach_past_the_limit_is_refused_and_threads_are_bounded(run_py) -> None:
    r = host(run_py, "comm_attach", {**ENV, "NPUEMU_DEVICES": "1"})
    assert [r["attached"], r["code"]] == [collective.MAX_COMMS, OVER_LIMIT]
    assert r["threads_grew"] <= collective.MAX_COMMS
    assert r["again"] == collective.MAX_COMMS
    assert r["threads_grew_again"] == r["threads_grew"]  # the detached ones' threads reused
    assert r["same_worker"]


def _hold(spawn_py, mode: str, env: dict[str, str], hold: Path):
    """Start ``bounds_host.py mode`` holding what it made until ``hold`` exists; returns the
    process once it is at its limits."""
    code = (f"import runpy, sys; sys.argv = [{str(HOST)!r}, {mode!r}]; "
            f"runpy.run_path({str(HOST)!r}, run_name='__main__')")
    proc = spawn_py(code, env={**env, "HOLD": str(hold)})
    deadline = time.monotonic() + 120
    while not Path(str(hold) + ".ready").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{mode} never got to its limits"
        time.sleep(0.05)
    return proc


def _finish(proc) -> dict:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    return json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])


def test_the_cards_budgets_hold_across_clients(run_py, spawn_py, shared_node,
                                               tmp_path) -> None:
    """Two clients at their communicator limit use the card's 64 threads: a third gets
    207005. One client at its memory-area limit leaves a second less than its own limit:
    past the card's budget (a quarter of vm.max_map_count) it gets 207005."""
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name}
    holders = [_hold(spawn_py, "comm_attach", env, tmp_path / f"comm{k}") for k in range(2)]
    try:
        third = host(run_py, "comm_attach", env)
    finally:
        for k in range(2):
            (tmp_path / f"comm{k}").touch()
    held = [_finish(p) for p in holders]
    assert [h["attached"] for h in held] == [collective.MAX_COMMS] * 2
    assert [third["attached"], third["code"]] == [0, errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL]
    assert third["threads_grew"] == 0  # refused before any thread was started
    assert max(h["threads"] for h in held) - min(h["threads"] for h in held) \
        <= collective.MAX_COMMS
    first = _hold(spawn_py, "vmm", env, tmp_path / "vmm")
    try:
        second = host(run_py, "vmm", env)
    finally:
        (tmp_path / "vmm").touch()
    first_r = _finish(first)
    assert first_r["pieces_code"] == OVER_LIMIT and first_r["mapped_after_refusal"] == 0
    assert first_r["same_worker"] and second["same_worker"]
    if windows.area_budget() >= 2 * windows.MAX_CLIENT_AREAS:  # a large vm.max_map_count
        pytest.skip(f"the card's budget of {windows.area_budget()} areas holds two clients")
    assert second["pieces_code"] == errors.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL
    assert second["mapped_after_refusal"] == 0
    assert second["pieces"] < first_r["pieces"]
    assert second["maps_full"] < second["max_map_count"] // 2
