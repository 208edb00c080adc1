"""Node life: shared nodes with several hosts, ``npuemu run``, embedded-node teardown, and
device loss (a worker or a host killed with SIGKILL).

Every host program runs in a child interpreter with a timeout, so a call that hangs on a
lost device fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import re
import signal
import textwrap
import time

import pytest

from npuemu.shared import shm

pytestmark = pytest.mark.integration

MiB = 1 << 20
LOST_HEARTBEAT = 507010
EMBEDDED = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "64M"}

HELPERS = """
import ctypes, json, os, sys, threading, time
from npuemu.tools.cli import install_acl
install_acl()
import acl
R = {}

def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")

def malloc(size, policy=0):
    ptr, ret = acl.rt.malloc(size, policy)
    ok(ret, f"malloc({size})")
    return ptr

def h2d(dst, data):
    ok(acl.rt.memcpy(dst, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")

def d2h(src, n):
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2), "D2H")
    return bytes(out)

def wait_file(path, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.01)

def node_info():
    from npuemu.host.core import runtime
    from npuemu.tools import status
    node = runtime.get().node
    return node.name, status.read_node(node.name)

def result():
    print("RESULT " + json.dumps(R), flush=True)
"""


def code(body: str) -> str:
    return HELPERS + textwrap.dedent(body)


def result_of(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line in:\n{stdout}"
    return json.loads(lines[-1][len("RESULT "):])


def wait_for_file(path, proc=None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"child exited ({proc.returncode}) before {path}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.01)


def wait_until(predicate, timeout: float, what: str):
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s", pytrace=False)
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")  # zombie: exited
    except FileNotFoundError:
        return True


# ------------------------------------------------------------------------------ shared node
def test_two_hosts_share_a_device_and_see_only_their_own_data(module_node, spawn_py, status,
                                                               tmp_path):
    name = module_node(devices=4)
    host = code("""
        role, other, sync = os.environ["ROLE"], os.environ["OTHER"], os.environ["SYNC"]
        n = 1 << 20
        ok(acl.rt.set_device(0))
        R["count"] = acl.rt.get_device_count()[0]
        p = malloc(n)
        data = bytes([ord(role)]) * n
        h2d(p, data)
        with open(f"{sync}/{role}.ptr.tmp", "w") as f:
            f.write(str(p))
        os.rename(f"{sync}/{role}.ptr.tmp", f"{sync}/{role}.ptr")
        wait_file(f"{sync}/go")
        theirs = int(open(f"{sync}/{other}.ptr").read())
        R["distinct"] = theirs != p
        R["mine_ok"] = d2h(p, n) == data
        buf = bytearray(n)
        R["read_theirs"] = acl.rt.memcpy(acl.util.bytes_to_ptr(buf), n, theirs, n, 2)
        R["write_theirs"] = acl.rt.memcpy(theirs, n, acl.util.bytes_to_ptr(buf), n, 1)
        R["d2d_theirs"] = acl.rt.memcpy(p, n, theirs, n, 3)
        R["free_theirs"] = acl.rt.free(theirs)
        R["untouched"] = buf == bytearray(n)
        # let the other host finish its checks before our exit frees our block
        open(f"{sync}/{role}.done", "w").close()
        wait_file(f"{sync}/{other}.done")
        R["still_mine"] = d2h(p, n) == data
        ok(acl.rt.free(p))
        result()
    """)
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    a = spawn_py(host, env={**env, "ROLE": "a", "OTHER": "b"})
    b = spawn_py(host, env={**env, "ROLE": "b", "OTHER": "a"})
    wait_for_file(tmp_path / "a.ptr", a)
    wait_for_file(tmp_path / "b.ptr", b)

    dev0 = status(name)["devices"][0]
    hosts = {h["pid"]: h for h in dev0["hosts"]}
    assert {a.pid, b.pid} <= set(hosts), dev0
    for pid in (a.pid, b.pid):
        assert hosts[pid]["allocs"] == 1 and hosts[pid]["used"] >= MiB, hosts[pid]
    assert dev0["hbm_used"] >= 2 * MiB

    (tmp_path / "go").touch()
    results = {}
    for role, proc in (("a", a), ("b", b)):
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, f"host {role}: {out}\n{err}"
        results[role] = result_of(out)
    for role in "ab":
        assert results[role] == {
            "count": 4, "distinct": True, "mine_ok": True, "read_theirs": 107000,
            "write_theirs": 107000, "d2d_theirs": 107000, "free_theirs": 107000,
            "untouched": True, "still_mine": True}, role

    def released():
        dev = status(name)["devices"][0]
        return dev["hbm_used"] == 0 and not {a.pid, b.pid} & {h["pid"] for h in dev["hosts"]}

    wait_until(released, 5, "both hosts detached from device 0")


def test_killed_host_memory_is_reclaimed_on_a_shared_node(module_node, spawn_py, status,
                                                        tmp_path):
    name = module_node(devices=4)
    proc = spawn_py(code("""
        ok(acl.rt.set_device(1))
        ptrs = [malloc(64 << 20), malloc(64 << 20, 2), malloc(4096)]
        h2d(ptrs[0], b"x" * 4096)
        pinned, ret = acl.rt.malloc_host(1 << 20)
        ok(ret, "malloc_host")
        open(os.environ["READY"], "w").close()
        time.sleep(60)
    """), env={"NPUEMU_NODE": name, "READY": str(tmp_path / "ready")})
    wait_for_file(tmp_path / "ready", proc)

    dev1 = status(name)["devices"][1]
    assert proc.pid in {h["pid"] for h in dev1["hosts"]}, dev1
    assert dev1["hbm_used"] >= 128 * MiB
    assert any(e.startswith(f"{shm.PREFIX}{name}.p{proc.pid}.") for e in shm.leftovers(name))

    proc.kill()
    proc.wait(10)
    t0 = time.monotonic()

    def reclaimed():
        dev = status(name)["devices"][1]
        return (dev["hbm_used"] == 0 and dev["live_allocs"] == 0
                and proc.pid not in {h["pid"] for h in dev["hosts"]})

    wait_until(reclaimed, 5, f"memory of killed host {proc.pid} reclaimed")
    assert time.monotonic() - t0 < 5
    def host_names():
        return [e for e in shm.leftovers(name)
                if f".p{proc.pid}." in e or re.search(r"\.d1\.c\d+", e)]

    wait_until(lambda: not host_names(), 5,
               f"pinned and client segments of the killed host unlinked: {host_names()}")
    dev1 = status(name)["devices"][1]
    assert dev1["state"] == "READY" and dev1["starts"] == 1  # the worker itself lived on


def test_unknown_node_name_is_an_error_not_a_hang(run_py):
    res = run_py(code("""
        R["set"] = acl.rt.set_device(0)
        R["msg"] = acl.get_recent_err_msg()
        result()
    """), env={"NPUEMU_NODE": "pt-no-such-node"}, timeout=30)
    assert res.returncode == 0, res.stderr
    r = result_of(res.stdout)
    assert r["set"] == 207004, r  # ACL_ERROR_RT_NO_DEVICE
    assert "pt-no-such-node" in r["msg"]


# ---------------------------------------------------------------------------- npuemu run
PROGRAM = """\
import sys

import acl
import numpy as np

ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 0, 1, 2


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed: {ret}")


check(acl.init(), "init")
count, ret = acl.rt.get_device_count()
check(ret, "get_device_count")
print("devices", count)
check(acl.rt.set_device(1), "set_device")
print("device", acl.rt.get_device()[0])
arr = np.arange(1024, dtype=np.int32) * 3
dev_ptr, ret = acl.rt.malloc(arr.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
check(ret, "malloc")
check(acl.rt.memcpy(dev_ptr, arr.nbytes, acl.util.bytes_to_ptr(arr), arr.nbytes,
                    ACL_MEMCPY_HOST_TO_DEVICE), "h2d")
host_ptr, ret = acl.rt.malloc_host(arr.nbytes)
check(ret, "malloc_host")
check(acl.rt.memcpy(host_ptr, arr.nbytes, dev_ptr, arr.nbytes, ACL_MEMCPY_DEVICE_TO_HOST), "d2h")
back = np.frombuffer(acl.util.ptr_to_bytes(host_ptr, arr.nbytes), dtype=np.int32)
print("sum", int(back.sum()), "equal", bool((back == arr).all()))
print("soc", acl.get_soc_name())
print("args", sys.argv[1:])
print("name", __name__)
check(acl.rt.free_host(host_ptr), "free_host")
check(acl.rt.free(dev_ptr), "free")
check(acl.rt.reset_device(1), "reset_device")
check(acl.finalize(), "finalize")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
"""


def test_npuemu_run_executes_a_pyacl_program(npuemu_cli, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    res = npuemu_cli("run", str(script), "--flag", "x", env=EMBEDDED, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines() == [
        "devices 2", "device 1", f"sum {3 * 1023 * 1024 // 2} equal True", "soc Ascend910B1",
        "args ['--flag', 'x']", "name __main__"], res.stdout + res.stderr


def test_npuemu_run_passes_the_exit_status_through(npuemu_cli, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    res = npuemu_cli("run", str(script), "3", env=EMBEDDED)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "sum 1571328 equal True" in res.stdout
    bad = tmp_path / "bad.py"
    bad.write_text("import acl\nassert acl.rt.set_device(0) == 0\nraise KeyError('boom')\n")
    res = npuemu_cli("run", str(bad), env=EMBEDDED)
    assert res.returncode == 1
    assert "KeyError: 'boom'" in res.stderr


# ---------------------------------------------------------------- embedded-node teardown
TEARDOWN_CHILD = """
ok(acl.rt.set_device(0)); ok(acl.rt.set_device(1))
ptrs = [malloc(16 << 20), malloc(4096)]
ok(acl.rt.set_device(0))
h2d(ptrs[0], b"y" * 4096)
pinned, ret = acl.rt.malloc_host(1 << 16)
ok(ret)
name, info = node_info()
from npuemu.host.core import runtime
R["node"] = name
R["supervisor"] = runtime.get().node.proc.pid
R["workers"] = [d["pid"] for d in info["devices"]]
with open(os.environ["INFO"] + ".tmp", "w") as f:
    json.dump(R, f)
os.rename(os.environ["INFO"] + ".tmp", os.environ["INFO"])
mode = os.environ["MODE"]
if mode == "exception":
    raise RuntimeError("uncaught on purpose")
if mode in ("sigterm", "sigkill"):
    time.sleep(60)
"""


@pytest.mark.parametrize("mode", ["exit", "exception", "sigterm", "sigkill"])
def test_embedded_node_is_torn_down(mode, spawn_py, tmp_path):
    info_path = tmp_path / "info.json"
    proc = spawn_py(code(TEARDOWN_CHILD), env={**EMBEDDED, "MODE": mode,
                                               "INFO": str(info_path)})
    wait_for_file(info_path, proc)
    info = json.loads(info_path.read_text())
    assert len(info["workers"]) == 2 and all(info["workers"]), info
    assert shm.leftovers(info["node"]), "the node should be alive now"
    if mode == "sigterm":
        proc.send_signal(signal.SIGTERM)
    elif mode == "sigkill":
        proc.kill()
    out, err = proc.communicate(timeout=20)
    expected_rc = {"exit": 0, "exception": 1, "sigterm": 128 + signal.SIGTERM,
                   "sigkill": -signal.SIGKILL}[mode]
    assert proc.returncode == expected_rc, f"{out}\n{err}"
    if mode == "exception":
        assert "RuntimeError: uncaught on purpose" in err
    # exit/exception/SIGTERM run the atexit teardown, which waits for the supervisor
    bound = 5.0 if mode == "sigkill" else 0.5
    wait_until(lambda: not shm.leftovers(info["node"]), bound,
               f"/dev/shm names of node {info['node']} gone after {mode}")
    for pid in [info["supervisor"], *info["workers"]]:
        wait_until(lambda pid=pid: gone(pid), bound, f"process {pid} gone after {mode}")


# ------------------------------------------------------------------------------ device lost
def test_worker_killed_during_a_large_d2d_copy(run_py):
    res = run_py(code("""
        import signal
        from npuemu.shared import address
        ok(acl.rt.set_device(0))
        n = 256 << 20
        a, b = malloc(n), malloc(n)
        h2d(a, b"z" * 4096)
        name, info = node_info()
        victim = info["devices"][0]["pid"]
        R["other_card_pid"] = info["devices"][1]["pid"]  # None: card 1 not started yet
        killer = threading.Timer(0.15, os.kill, (victim, signal.SIGKILL))
        killer.start()
        rets, t_fail = [], None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # back-to-back copies: the kill lands in one
            t0 = time.monotonic()
            ret = acl.rt.memcpy(b, n, a, n, 3)
            if ret:
                t_fail = time.monotonic() - t0
                rets.append(ret)
                break
            rets.append(ret)
        killer.join()
        R["copies_ok"] = rets.count(0)
        R["failed_with"] = rets[-1]
        R["fail_s"] = t_fail
        src, dst = bytes(16), bytearray(16)  # kept alive: the copies get their addresses
        t0 = time.monotonic()
        R["later"] = {
            "malloc": list(acl.rt.malloc(4096, 0)),
            "h2d": acl.rt.memcpy(a, 16, acl.util.bytes_to_ptr(src), 16, 1),
            "d2h": acl.rt.memcpy(acl.util.bytes_to_ptr(dst), 16, a, 16, 2),
            "d2d": acl.rt.memcpy(b, 4096, a, 4096, 3),
            "memset": acl.rt.memset(a, 16, 0, 16),
            "mem_info": list(acl.rt.get_mem_info(1)),
            "sync": acl.rt.synchronize_device(),
            "status": list(acl.rt.query_device_status(0)),
        }
        R["later_s"] = time.monotonic() - t0
        R["free"] = acl.rt.free(a)
        # another card of the same process still works
        ok(acl.rt.set_device(1))
        p = malloc(1 << 20)
        data = os.urandom(1 << 20)
        h2d(p, data)
        R["card1_ok"] = d2h(p, 1 << 20) == data
        R["card1_status"] = list(acl.rt.query_device_status(1))
        ok(acl.rt.free(p))
        dev0 = node_info()[1]["devices"][0]
        R["registry"] = [dev0["state"], dev0["last_exit"]]
        from npuemu.shared import shm
        # everything of the dead card is gone but its log (kept for post-mortem reading)
        R["dead_card_names"] = [e for e in shm.leftovers(name)
                                if ".d0." in e and not e.endswith(".d0.log")]
        R["reset_lost"] = acl.rt.reset_device(0)
        result()
    """), env=EMBEDDED, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    r = result_of(res.stdout)
    assert r["failed_with"] == LOST_HEARTBEAT, r
    assert r["fail_s"] < 5.0, r  # liveness bound: a lost device never hangs a call
    assert r["later"] == {
        "malloc": [0, LOST_HEARTBEAT], "h2d": LOST_HEARTBEAT, "d2h": LOST_HEARTBEAT,
        "d2d": LOST_HEARTBEAT, "memset": LOST_HEARTBEAT, "mem_info": [0, 0, LOST_HEARTBEAT],
        "sync": LOST_HEARTBEAT, "status": [1, 0]}, r
    assert r["later_s"] < 5.0
    assert r["card1_ok"] is True and r["card1_status"] == [0, 0]
    assert r["registry"] == ["LOST", -signal.SIGKILL], r
    assert r["dead_card_names"] == [], r
    assert r["reset_lost"] == 0, r
