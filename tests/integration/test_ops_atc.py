"""``npuemu atc --singleop`` then the pyACL sample flow of ``acl_execute_add.py``:
``set_model_dir`` → ``execute_v2`` (no compile in the program) → results compared (the
program is ``tests/progs/ops_atc.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

OPS = [
    {"op": "Add", "input_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"},
                                 {"format": "ND", "shape": [8, 16], "type": "int32"}],
     "output_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"}]},
    {"op": "ReduceSum",
     "input_desc": [{"format": "ND", "shape": [4, 6], "type": "float"},
                    {"format": "ND", "shape": [1], "type": "int32", "is_const": True,
                     "const_value": [1]}],
     "output_desc": [{"format": "ND", "shape": [4, 1], "type": "float"}],
     "attr": [{"name": "keep_dims", "type": "bool", "value": True}]},
    {"op": "Relu",  # a dynamic-shape model: one file for every batch in 1..64
     "input_desc": [{"format": "ND", "shape": [-1, 8], "type": "float",
                     "shape_range": [[1, 64], [8, 8]]}],
     "output_desc": [{"format": "ND", "shape": [-1, 8], "type": "float",
                      "shape_range": [[1, 64], [8, 8]]}]},
]


def test_atc_singleop_then_set_model_dir_and_execute_v2(run_prog, tmp_path):
    spec = tmp_path / "ops.json"
    spec.write_text(json.dumps([*OPS, {"op": "NoSuchOp", "input_desc": [],
                                       "output_desc": []}]))
    out = tmp_path / "op_models"
    res = subprocess.run([sys.executable, "-m", "npuemu.tools.atc", f"--singleop={spec}",
                          f"--output={out}", "--soc_version=Ascend910B1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "100020" in res.stderr  # the unknown op, reported
    names = sorted(p.name for p in out.iterdir())
    assert names == ["0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om",
                     "1_ReduceSum_0_2_4_6_3_2_1_0_2_4_1.om", "2_Relu_0_2_-1_8_0_2_-1_8.om"]
    assert (out / names[0]).read_bytes()[:4] == b"IMOD"
    r = run_program(run_prog, "ops_atc.py", "execute", out,
                    env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"},
                    timeout=60)
    assert r["dir"] == 0 and r["exec"] == 0 and r["ok"]
    assert r["reduce"] == 0 and r["sum"] == [15.0, 51.0, 87.0, 123.0]
    assert r["unmatched"] == 100024  # execute_v2 never compiles
    assert r["relu"] == [True, True, 100024]  # inside the model's range, then outside
