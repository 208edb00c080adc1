"""Bad host pointers and sizes given to the pyACL calls that read host memory
(``aclmdlLoadFromMem(WithMem)``, ``aclmdlQuerySizeFromMem``, ``aclmdlGetDescFromMem``,
``aclopLoad``, ``aclSetTensorConst``): null, 1, -1, unmapped low addresses, a freed pinned
block, a freed large NumPy buffer, a device pointer, a size beyond the mapping, negative,
past 2**64, non-integers, the kernel's ``[vvar]`` page and a mapping of a truncated file
(both listed readable, both SIGBUS on a read). Each call returns ACL_ERROR_INVALID_PARAM
(100000) and the process goes on: the calls run in a child program
(``tests/progs/host_pointers.py``), so a segfault is this test's failure, not a dead pytest;
afterwards the child still loads a good image and uses its card."""

from __future__ import annotations

import json

import onnx
import pytest

from npuemu.host.models import atc
from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}
PROG = "host_pointers.py"
INVALID_PARAM = 100000
ALLOWED_EMPTY = {"set_tensor_const"}
"""Calls for which a size of 0 is legal (``aclSetTensorConst`` with ``len == 0`` still marks
the input const)."""


def run_child(run_prog, om_path: str) -> dict:
    res = run_prog(PROG, om_path, env=ENV, timeout=180)
    assert res.returncode == 0, f"child died ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, res.stdout + res.stderr
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def om_path(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("ptrs")
    onnx.save(small_cnn(), d / "m.onnx")
    return atc.convert(d / "m.onnx", d / "m", "Ascend910B1")["om"]


def test_bad_host_pointers_are_100000_and_the_process_goes_on(run_prog, om_path) -> None:
    r = run_child(run_prog, om_path)
    assert len(r["codes"]) == 6
    for call, by_case in r["codes"].items():
        assert len(by_case) == 19, call
        for case, code in by_case.items():
            want = 0 if case == "zero_size" and call in ALLOWED_EMPTY else INVALID_PARAM
            assert code == want, f"{call}({case}) returned {code}, expected {want}"
    assert r["after"] == {"load_from_mem": 0, "unload": 0, "const_zero_size": 0,
                          "ptr_to_bytes_vvar": "ValueError", "h2d_from_vvar": 107000,
                          "d2h": 0, "free": 0}
