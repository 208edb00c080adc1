"""Single operators from C++: the compile/execute flow, compile-and-execute, handles, cast,
attributes, and op model files made by `npuemu atc --singleop` loaded with aclopSetModelDir."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.integration

ADD_INT32 = {"op": "Add",
             "input_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"},
                            {"format": "ND", "shape": [8, 16], "type": "int32"}],
             "output_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"}]}


def test_single_op_program(compile_c, run_c, sdk_root, tmp_path):
    spec = tmp_path / "ops.json"
    spec.write_text(json.dumps([ADD_INT32]))
    out = tmp_path / "op_models"
    res = subprocess.run([str(sdk_root / "bin" / "atc"), f"--singleop={spec}",
                          f"--output={out}", "--soc_version=Ascend910B1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    res = run_c(compile_c("single_op.cpp"), str(out))
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
    for line in ("model dir ok", "compile then execute ok", "compile and execute, cast ok",
                 "reduce with attr ok", "single op program done"):
        assert line in res.stdout
