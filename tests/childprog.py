"""What the integration tests' child programs share.

Most integration scenarios are pyACL programs run in a fresh interpreter (``run_py``), so
each has an embedded node of its own that is torn down when it exits. A program is
``CHILD_HELPERS`` + the test file's own helpers + the scenario body; it fills the dict
``R``, which ``run_scenario`` reads back from its ``RESULT`` line.

Converted test files run real program files instead: ``run_program`` runs one scenario of
``tests/progs/<area>.py`` (helpers in ``tests/progs/childlib.py``) and reads its ``R`` the
same way. ``CHILD_HELPERS`` stays for the files not converted yet.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from typing import Any

CHILD_HELPERS = '''
import ctypes, json, os, sys, threading, time
import numpy as np
from npuemu.tools.cli import install_acl
install_acl()
import acl
R = {}


def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")

def ints(result):
    """A pyACL result tuple as plain ints (JSON friendly)."""
    return [int(v) for v in result]

def malloc(size, policy=0):
    ptr, ret = acl.rt.malloc(size, policy)
    ok(ret, f"malloc({size}, {policy:#x})")
    return ptr

def h2d(dst, data):
    ok(acl.rt.memcpy(dst, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")

def d2h(src, n):
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2), "D2H")
    return bytes(out)

def zeroed(n):
    p = malloc(n)
    ok(acl.rt.memset(p, n, 0, n), "memset")
    return p

def stream():
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    return s

def event(flag=None):
    e, ret = acl.rt.create_event() if flag is None else acl.rt.create_event_with_flag(flag)
    ok(ret, "create_event")
    return e

def hold(s):
    """Block stream ``s`` with a host function until the returned Event is set."""
    gate = threading.Event()
    ok(acl.rt.launch_host_func(s, lambda _: gate.wait(20), None), "launch_host_func")
    return gate
'''

EPILOGUE = '\nprint("RESULT " + json.dumps(R))\n'

FILE_RENDEZVOUS = '''
def put(name, value):
    """Publish ``value`` as JSON under ``name`` in the directory $SYNC (atomic rename)."""
    with open(os.path.join(SYNC, name + ".tmp"), "w") as f:
        json.dump(value, f)
    os.rename(os.path.join(SYNC, name + ".tmp"), os.path.join(SYNC, name))

def get(name, timeout=120):
    """The value another process ``put`` under ``name``; exits the child past ``timeout``."""
    path = os.path.join(SYNC, name)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {name}")
        time.sleep(0.01)
    with open(path) as f:
        return json.load(f)
'''
"""Two child processes meeting through files: ``put``/``get`` (the program imports ``os``,
``json``, ``time`` and sets ``SYNC`` before it calls them)."""


def run_scenario(run_py: Callable[..., Any], prelude: str, body: str, env: dict[str, str],
                 timeout: float) -> dict:
    """Run ``prelude`` + ``body`` in a child with ``env``; returns the child's ``R``."""
    return result_of(run_py(prelude + textwrap.dedent(body) + EPILOGUE, env=env,
                            timeout=timeout))


def result_of(res: Any) -> dict:
    """The ``R`` of a finished child (a CompletedProcess) that exited 0."""
    assert res.returncode == 0, f"child failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line:\n{res.stdout}\n{res.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


def run_program(run_prog: Callable[..., Any], prog: str, scenario: str, *args: Any,
                env: dict[str, str], timeout: float) -> dict:
    """Run the scenario ``scenario`` of ``tests/progs/<prog>`` with ``args`` (as strings) in a
    child with ``env``; returns the child's ``R``."""
    return result_of(run_prog(prog, scenario, *map(str, args), env=env, timeout=timeout))
