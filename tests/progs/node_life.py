"""Child program of ``tests/integration/test_node.py``: host programs of a node's life
(two hosts sharing a card, a host killed while it holds memory, an unknown node name, an
embedded node torn down at exit, an uncaught exception or a signal, a worker killed during
a large device-to-device copy).

``python node_life.py SCENARIO`` runs one scenario (no ``aclInit``: ``aclrtSetDevice``
starts or attaches the node, ``NPUEMU_NODE`` naming a shared one) and prints ``R`` (see
``childlib``); the assertions are the test's. Scenarios take what they need from the
environment (``ROLE``, ``OTHER``, ``SYNC``, ``READY``, ``INFO``, ``MODE``).
"""

import json
import os
import signal
import threading
import time

from childlib import R, acl, d2h, h2d, main, malloc, ok, scenario, wait_file

from npuemu.host.core import runtime
from npuemu.shared import shm
from npuemu.tools import status


def node_info():
    """The name of this process's node and its status record (``npuemu status``)."""
    node = runtime.get().node
    return node.name, status.read_node(node.name)


@scenario
def share_a_card():
    """Host ``ROLE`` publishes its block in ``SYNC``, then tries the block of ``OTHER``."""
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
    with open(f"{sync}/{other}.ptr") as f:
        theirs = int(f.read())
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


@scenario
def hold_memory():
    """Device, pinned memory on card 1, then the file ``READY`` and a long sleep."""
    ok(acl.rt.set_device(1))
    ptrs = [malloc(64 << 20), malloc(64 << 20, 2), malloc(4096)]
    h2d(ptrs[0], b"x" * 4096)
    _pinned, ret = acl.rt.malloc_host(1 << 20)
    ok(ret, "malloc_host")
    open(os.environ["READY"], "w").close()
    time.sleep(60)


@scenario
def unknown_node():
    R["set"] = acl.rt.set_device(0)
    R["msg"] = acl.get_recent_err_msg()


@scenario
def teardown():
    """Memory on both cards of the embedded node, its pids to ``INFO``; then per ``MODE``
    exit, raise, or sleep for a signal."""
    ok(acl.rt.set_device(0))
    ok(acl.rt.set_device(1))
    ptrs = [malloc(16 << 20), malloc(4096)]
    ok(acl.rt.set_device(0))
    h2d(ptrs[0], b"y" * 4096)
    _pinned, ret = acl.rt.malloc_host(1 << 16)
    ok(ret)
    name, info = node_info()
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


@scenario
def worker_killed_in_copy():
    """Card 0's worker killed by SIGKILL during back-to-back 256 MiB copies; every later
    call on it, card 1, the registry and the dead card's names."""
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
    # everything of the dead card is gone but its log (kept for post-mortem reading)
    R["dead_card_names"] = [e for e in shm.leftovers(name)
                            if ".d0." in e and not e.endswith(".d0.log")]
    R["reset_lost"] = acl.rt.reset_device(0)


if __name__ == "__main__":
    main()
