"""IPC shareable handles between two host processes on one shared node: B reads what A
wrote only once A allowed B's pid; A freeing its handle and then dying while B still maps
the memory leaves B's view intact; when B closes it, nothing is left on the card."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from childprog import FILE_RENDEZVOUS

pytestmark = pytest.mark.integration

MiB = 1 << 20
COMMON = FILE_RENDEZVOUS + """
import json, os, sys, time
from npuemu.tools.cli import install_acl
install_acl()
import acl
SYNC = os.environ["SYNC"]
PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}

def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def mapped(handle, size):
    va, ret = acl.rt.reserve_mem_address(size, 0, 0, 0)
    ok(ret, "reserve")
    ok(acl.rt.map_mem(va, size, 0, handle, 0), "map")
    return va

PATTERN = bytes(range(256)) * 8192  # 2 MiB
"""

EXPORTER = COMMON + """
ok(acl.rt.set_device(0))
h, ret = acl.rt.malloc_physical(2 << 20, PROP, 0)
ok(ret, "malloc_physical")
va = mapped(h, 2 << 20)
ok(acl.rt.memcpy(va, len(PATTERN), acl.util.bytes_to_ptr(PATTERN), len(PATTERN), 1), "H2D")
key, ret = acl.rt.mem_export_to_shareable_handle(h, 1, 0)
ok(ret, "export")
R = {"bad_pid_key": acl.rt.mem_set_pid_to_shareable_handle(key + 2, [1]),
     "bad_type": acl.rt.mem_export_to_shareable_handle(h, 7, 0)[1]}
put("key", {"key": key, "pid": os.getpid()})
b = get("refused")                               # B tried before it was allowed
ok(acl.rt.mem_set_pid_to_shareable_handle(key, [b["pid"]]), "set_pid")
put("allowed", R)
get("read")                                      # B has mapped and read it
ok(acl.rt.unmap_mem(va), "unmap")
ok(acl.rt.free_physical(h), "free_physical")    # freed while B still maps it
put("freed", {})
time.sleep(600)                                  # killed by the test (exporter death)
"""

IMPORTER = COMMON + """
ok(acl.rt.set_device(0))
a = get("key")
R = {"refused": acl.rt.mem_import_from_shareable_handle(a["key"], 0)[1]}
put("refused", {"pid": os.getpid()})
R.update(get("allowed"))
h, ret = acl.rt.mem_import_from_shareable_handle(a["key"], 0)
ok(ret, "import")
R["unknown_key"] = acl.rt.mem_import_from_shareable_handle(a["key"] ^ 0x10, 0)[1]
va = mapped(h, 2 << 20)
out = bytearray(len(PATTERN))
ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), len(out), va, len(out), 2), "D2H")
R["read_ok"] = bytes(out) == PATTERN
put("read", {})
get("freed")
get("dead")                                      # the exporter is gone now
out2 = bytearray(len(PATTERN))
ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out2), len(out2), va, len(out2), 2), "D2H after")
R["still_ok"] = bytes(out2) == PATTERN
ok(acl.rt.memset(va, 16, 0x42, 16), "memset")   # writable by the importer
ok(acl.rt.unmap_mem(va))
ok(acl.rt.free_physical(h), "close import")
R["closed_twice"] = acl.rt.free_physical(h)
free, total, ret = acl.rt.get_mem_info(1)
R["all_free"] = free == total
print("RESULT " + json.dumps(R), flush=True)
"""


def _wait_file(path, procs, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                pytest.fail(f"child exited ({p.returncode}) before {path}:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.01)


def test_ipc_permission_read_and_exporter_death(shared_node, spawn_py, tmp_path, status):
    name = shared_node(devices=1, hbm="64M", ddr="16M")
    env = {"NPUEMU_NODE": name, "SYNC": str(tmp_path)}
    a = spawn_py(EXPORTER, env=env)
    b = spawn_py(IMPORTER, env=env)
    _wait_file(tmp_path / "freed", [a, b])
    os.kill(a.pid, signal.SIGKILL)
    a.communicate(timeout=30)
    (tmp_path / "dead").write_text("{}")
    out, err = b.communicate(timeout=60)
    assert b.returncode == 0, f"{out}\n{err}"
    r = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert r == {"refused": 107000, "bad_pid_key": 107000, "bad_type": 100000,
                 "unknown_key": 107000, "read_ok": True, "still_ok": True,
                 "closed_twice": 107000, "all_free": True}
    deadline = time.monotonic() + 10
    while status(name)["devices"][0]["hbm_used"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status(name)["devices"][0]["hbm_used"] == 0
