"""What the integration tests' child programs share.

Integration scenarios are pyACL programs run in a fresh interpreter, so each has an
embedded node of its own that is torn down when it exits. ``run_program`` runs one scenario
of ``tests/progs/<area>.py`` (helpers in ``tests/progs/childlib.py``); the program fills the
dict ``R`` and ``result_of`` reads it back from its ``RESULT`` line.

``CHILD_HELPERS`` and ``run_scenario`` (a program made of strings: the helpers, the test
file's own, the scenario body, run by ``run_py``) remain only for the test files not yet
converted to program files (``tests/unit/test_child_programs_are_files.py`` lists them).
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
