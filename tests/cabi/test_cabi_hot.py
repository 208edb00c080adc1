"""libascendcl's hot calls (aclrtMalloc, aclrtFree, aclrtLaunchKernel, aclrtSynchronizeStream
are written in C, host/capi/native.c): loaded into a Python program with ctypes, they work with
the GIL released and held, refuse malformed arguments with the Python bodies' codes and
messages, look the Python functions up on each call, and turn a raising body into 500000."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cabi.conftest import sdk_env
from tests.conftest import _run

pytestmark = pytest.mark.integration
PROG = Path(__file__).parent.parent / "progs" / "cabi_ctypes_hot.py"


def test_hot_calls_from_ctypes(sdk_root):
    env = sdk_env(sdk_root, {"NPUEMU_SDK_LIB": str(sdk_root / "lib64")})
    res = _run([sys.executable, str(PROG)], env, 120)
    assert res.returncode == 0, res.stdout + res.stderr
    for line in ("hot calls ok with the GIL released and held", "launch ok",
                 "replacements seen", "all ok"):
        assert line in res.stdout, res.stdout + res.stderr
    assert "internal error in a C call" in res.stderr
    assert "ZeroDivisionError: npuemu test: a body that raises" in res.stderr
