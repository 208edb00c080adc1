"""What the integration tests' child programs share (``tests/progs/<area>.py``).

A child program is a pyACL program run in a fresh interpreter as
``python tests/progs/<area>.py SCENARIO [ARG...]`` (``childprog.run_program`` in the tests),
so each has an embedded node of its own that is torn down when it exits, unless
``NPUEMU_NODE`` names a shared one. Importing this module installs npuemu's ``acl`` (and
``pyhccl``) as ``npuemu run`` would. A scenario is a function of its program module, marked
``@scenario``, that fills the dict ``R``; ``main`` runs the scenario named on the command
line and prints ``R`` as one ``RESULT <json>`` line, which the test reads back and asserts on.
"""

import json
import os
import sys
import threading
import time
from collections.abc import Callable

from npuemu.shared import errors
from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the acl module is npuemu's once install_acl has run)
import pyhccl  # noqa: E402, F401  (npuemu's too; programs import it from here)

R: dict = {}
"""The scenario's results, printed as JSON by ``main`` (or ``emit``)."""


def ok(ret, what=""):
    """Exit the child with the code and the runtime's last message unless ``ret`` is 0."""
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def code_of(fn, *args):
    """0, or the ACL code of the ``AclError`` that ``fn(*args)`` raised."""
    try:
        fn(*args)
    except errors.AclError as err:
        return err.code
    return 0


def ints(result):
    """A pyACL result tuple as plain ints (JSON friendly)."""
    return [int(v) for v in result]


def malloc(size, policy=0):
    """``aclrtMalloc`` of ``size`` bytes; exits the child on an error."""
    ptr, ret = acl.rt.malloc(size, policy)
    ok(ret, f"malloc({size}, {policy:#x})")
    return ptr


def h2d(dst, data):
    """A synchronous host-to-device ``aclrtMemcpy`` of ``data``."""
    ok(acl.rt.memcpy(dst, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")


def d2h(src, n):
    """``n`` bytes read back by a synchronous device-to-host ``aclrtMemcpy``."""
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2), "D2H")
    return bytes(out)


def zeroed(n):
    """A device block of ``n`` bytes set to 0 (``aclrtMemset``)."""
    p = malloc(n)
    ok(acl.rt.memset(p, n, 0, n), "memset")
    return p


def stream():
    """``aclrtCreateStream``; exits the child on an error."""
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    return s


def event(flag=None):
    """``aclrtCreateEvent`` (or ``aclrtCreateEventWithFlag`` with ``flag``)."""
    e, ret = acl.rt.create_event() if flag is None else acl.rt.create_event_with_flag(flag)
    ok(ret, "create_event")
    return e


def hold(s):
    """Block stream ``s`` with a host function until the returned Event is set."""
    gate = threading.Event()
    ok(acl.rt.launch_host_func(s, lambda _: gate.wait(20), None), "launch_host_func")
    return gate


def emit():
    """Print ``R`` as the ``RESULT`` line now (flushed), for a scenario that leaves early."""
    print("RESULT " + json.dumps(R), flush=True)


def put(sync, name, value):
    """Publish ``value`` as JSON under ``name`` in the directory ``sync`` (atomic rename)."""
    with open(os.path.join(sync, name + ".tmp"), "w") as f:
        json.dump(value, f)
    os.rename(os.path.join(sync, name + ".tmp"), os.path.join(sync, name))


def wait_file(path, timeout=30):
    """Wait until the file ``path`` exists; exits the child past ``timeout``."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.01)


def get(sync, name, timeout=120):
    """The value another process ``put`` under ``name``; exits the child past ``timeout``."""
    path = os.path.join(sync, name)
    wait_file(path, timeout)
    with open(path) as f:
        return json.load(f)


def source(name):
    """The text of ``tests/progs/<name>`` (a kernel file given to ``aclrtBinaryLoadFromData``)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)) as f:
        return f.read()


SCENARIOS: dict[str, Callable[..., None]] = {}
"""The program's scenarios by name (``@scenario``)."""


def scenario(fn: Callable[..., None]) -> Callable[..., None]:
    """Register ``fn`` as a scenario that ``main`` runs by its name."""
    SCENARIOS[fn.__name__] = fn
    return fn


def main() -> None:
    """Run the scenario ``sys.argv[1]`` with the string arguments after it; print ``R``."""
    if len(sys.argv) < 2 or sys.argv[1] not in SCENARIOS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{','.join(SCENARIOS)}}} [ARG...]")
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    emit()
