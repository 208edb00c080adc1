"""Child program of ``tests/integration/test_security.py``: host programs of the security
tests (a pinned block planted by another user, hosts attached while the control socket is
abused, while an impostor says hello with their pid, while the node is stopped, while their
embedded node's supervisor is killed; hosts that keep the DMA engine busy) and ``forks``, a
fork server of hosts for the kill -9 cycles.

``python security_hosts.py SCENARIO [ARG...]`` runs one scenario (no ``aclInit``: each sets
device 0 of the node ``NPUEMU_NODE`` names, or of an embedded one) and prints ``R`` (see
``childlib``); the assertions are the test's. Hosts that wait for the test create the file
``$READY`` and wait for ``$GO``.
"""

import ctypes
import json
import os
import sys
import threading
import time
import traceback

from childlib import SCENARIOS, R, acl, d2h, h2d, main, malloc, ok, scenario, stream

from npuemu.host.core import runtime
from npuemu.shared import shm
from npuemu.shared.protocol import Op


def node_name():
    """The name of this process's node."""
    return runtime.get().node.name


def wait_go():
    """Wait for the file ``$GO`` (the test's bounded wait on this process covers it)."""
    while not os.path.exists(os.environ["GO"]):
        time.sleep(0.02)


@scenario
def copy_back(key, ch):
    """A block written with ``ch`` and read back: ``R[key]``."""
    ok(acl.rt.set_device(0))
    p = malloc(4096)
    h2d(p, ch.encode() * 4096)
    R[key] = d2h(p, 4) == ch.encode() * 4


@scenario
def set_and_reset():
    ok(acl.rt.set_device(0))
    ok(acl.rt.reset_device(0))


@scenario
def planted(uid):
    """``PIN`` frames naming a segment planted by user ``uid`` and a world-writable one of
    this process's; then the program's own pinned block in an async copy."""
    uid = int(uid)
    ok(acl.rt.set_device(0))
    host, ret = acl.rt.malloc_host(4096)
    ok(ret, "malloc_host")
    seg = runtime.get().pinned.find(host)
    R["own_name"] = seg.name
    planted = shm.name(node_name(), f"p{os.getpid()}", "planted")
    child = os.fork()
    if child == 0:  # another user plants a world-writable segment of a guessed name
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        fd = os.open("/dev/shm/" + planted[1:], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
        os.ftruncate(fd, 4096)
        os.fchmod(fd, 0o666)
        os._exit(0)
    os.waitpid(child, 0)
    R["planted_uid"] = os.stat("/dev/shm/" + planted[1:]).st_uid
    link = runtime.get().current_link()
    try:
        link.call(Op.PIN, host + 8192, 4096, planted)
    except Exception as err:
        R["foreign"] = getattr(err, "code", repr(err))
    mine = shm.Segment(shm.name(node_name(), f"p{os.getpid()}", "loose"), 4096,
                       create=True)
    os.fchmod(mine.fd, 0o666)
    try:
        link.call(Op.PIN, host + 16384, 4096, mine.name)
    except Exception as err:
        R["loose_mode"] = getattr(err, "code", repr(err))
    mine.unlink()
    mine.close()
    shm.unlink_segment(planted)
    # the program's own pinned block still works for async copies
    dev = malloc(4096)
    ctypes.memset(host, 0x5A, 4096)
    s = stream()
    ok(acl.rt.memcpy_async(dev, 4096, host, 4096, 1, s), "H2D async")
    ok(acl.rt.synchronize_stream(s))
    R["copied"] = d2h(dev, 4) == b"ZZZZ"
    R["alive"] = acl.rt.query_device_status(0)[0]


@scenario
def keeps_its_block():
    """A block written before ``$READY`` still reads back after ``$GO``."""
    ok(acl.rt.set_device(0))
    p = malloc(4096)
    h2d(p, b"k" * 4096)
    open(os.environ["READY"], "w").close()
    wait_go()
    R["kept"] = d2h(p, 4096) == b"k" * 4096
    p2 = malloc(4096)
    ok(acl.rt.free(p2), "free")


@scenario
def pinned_copy():
    """A pinned block, the node's name to ``$READY``; after ``$GO`` an async copy from it."""
    ok(acl.rt.set_device(0))
    pinned, ret = acl.rt.malloc_host(1 << 16)
    ok(ret, "malloc_host")
    with open(os.environ["READY"], "w") as f:
        f.write(node_name())
    wait_go()
    dev = malloc(1 << 16)
    ctypes.memset(pinned, 0x33, 1 << 16)
    s = stream()
    ok(acl.rt.memcpy_async(dev, 1 << 16, pinned, 1 << 16, 1, s), "H2D async")
    ok(acl.rt.synchronize_stream(s), "sync")
    R["ok"] = d2h(dev, 2) == b"33"


@scenario
def stopped_under():
    """A block and a stream before ``$READY``; after ``$GO`` (the node stopped) the calls."""
    ok(acl.rt.set_device(0))
    p = malloc(4096)
    s = stream()
    open(os.environ["READY"], "w").close()
    wait_go()
    R["free"] = acl.rt.free(p)
    R["malloc"] = acl.rt.malloc(4096, 0)[1]
    R["msg"] = acl.get_recent_err_msg()
    R["sync"] = acl.rt.synchronize_stream(s)
    R["reset"] = acl.rt.reset_device(0)


@scenario
def embedded_held():
    """A pinned block of an embedded node; its name and supervisor pid to ``$READY``."""
    ok(acl.rt.set_device(0))
    _pinned, ret = acl.rt.malloc_host(4096)
    ok(ret, "malloc_host")
    with open(os.environ["READY"] + ".tmp", "w") as f:
        f.write(f"{node_name()} {runtime.get().node.proc.pid}")
    os.rename(os.environ["READY"] + ".tmp", os.environ["READY"])
    time.sleep(120)


@scenario
def busy():
    """Async 1 MiB copies through a pinned block forever (the node's name to ``$READY``)."""
    ok(acl.rt.set_device(0))
    pinned, ret = acl.rt.malloc_host(1 << 20)
    ok(ret, "malloc_host")
    dev = malloc(1 << 20)
    s = stream()
    with open(os.environ["READY"], "w") as f:
        f.write(node_name())
    while True:
        ok(acl.rt.memcpy_async(dev, 1 << 20, pinned, 1 << 20, 1, s), "H2D async")
        ok(acl.rt.memcpy_async(pinned, 1 << 20, dev, 1 << 20, 2, s), "D2H async")
        acl.rt.synchronize_stream(s)


COPY_BYTES = 32 << 20
"""``busy_copies``: a copy takes milliseconds, so that a kill very likely lands while the card
is still copying through the pinned block, after the host is gone."""


@scenario
def busy_copies():
    """``COPY_BYTES`` H2D + D2H async copies through a pinned block and a stream synchronize,
    forever (the card's DMA engine always busy); ``$READY`` once buffers and stream exist."""
    ok(acl.rt.set_device(0))
    pinned, ret = acl.rt.malloc_host(COPY_BYTES)
    ok(ret, "malloc_host")
    dev = malloc(COPY_BYTES)
    s = stream()
    with open(os.environ["READY"], "w"):
        pass
    while True:
        ok(acl.rt.memcpy_async(dev, COPY_BYTES, pinned, COPY_BYTES, 1, s), "H2D async")
        ok(acl.rt.memcpy_async(pinned, COPY_BYTES, dev, COPY_BYTES, 2, s), "D2H async")
        ok(acl.rt.synchronize_stream(s), "synchronize_stream")


@scenario
def forks():
    """A fork server: each host of a kill cycle is a process forked from this interpreter
    (acl imported once, no device ever set here), so that a cycle costs no interpreter start.
    Commands on stdin, one a line: ``SCENARIO LOG [KEY=VALUE ...] [ARG ...]`` forks a host
    that sets the variables, sends its stdout and stderr to the file ``LOG``, runs the
    scenario and writes ``RESULT <json>`` there; the pid is printed. ``wait PID`` reaps that
    host and prints its exit code (negative: the signal that ended it). EOF ends the server.
    """
    if threading.active_count() != 1:  # a fork copies only the calling thread
        raise SystemExit(f"forks: {threading.active_count()} threads before the first fork")
    print("forks ready", flush=True)
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "wait":
            _, status = os.waitpid(int(args[0]), 0)
            print(os.waitstatus_to_exitcode(status), flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            _forked(cmd, args[0], args[1:])  # raises SystemExit: a normal interpreter exit
        print(pid, flush=True)


def _forked(name, log, args):
    """The forked host: run scenario ``name`` (see ``forks``), then exit the interpreter."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.update(a.split("=", 1) for a in args if "=" in a)
    try:
        SCENARIOS[name](*[a for a in args if "=" not in a])
    except SystemExit as stop:
        print(stop.code, file=sys.stderr, flush=True)
        sys.exit(1)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
    print("RESULT " + json.dumps(R), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
