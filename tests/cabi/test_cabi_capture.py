"""Stream capture and replay through the C ABI (``aclmdlRI*`` of ``acl_rt.h``): a captured
chain replayed twice, the instance's name, id and streams, a model built by hand on a
persistent stream, and the codes of a forbidden synchronize and of a call npuemu does not
emulate (tests/cabi/progs/capture.c)."""

from __future__ import annotations

import pytest

from tests.cabi.conftest import PROGS

pytestmark = pytest.mark.integration


def test_capture_and_replay_from_c(compile_c, run_c):
    res = run_c(compile_c("capture.c"), str(PROGS / "boom_kernels.py"))
    assert res.returncode == 0, res.stdout + res.stderr
    for line in ("replay ok", "built ok", "capture program done",
                 "code aclrtSynchronizeStream(stream) = 107027",
                 "code aclmdlRIUpdate(ri) = 207000"):
        assert line in res.stdout, res.stdout
