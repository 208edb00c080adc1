"""AIPP from C: a static AIPP model (aclmdlGetAippType, aclmdlGetFirstAippInfo, execute on
the raw image) and a dynamic AIPP model (an aclmdlAIPP set applied with aclmdlSetInputAIPP)
built by npuemu's atc (what the SDK's atc runs), their outputs against a numpy crop and
normalisation; the gears of a ``--dynamic_image_size`` model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.integration.test_models_aipp import conv_gap, identity, normalise, rgb_cfg

pytestmark = pytest.mark.integration


def _atc_runs(tmp_path, jobs) -> list:
    """``npuemu atc`` (what the SDK's ``bin/atc`` execs) for each ``(model, name, *options)``
    of ``jobs``, one after the other in one child interpreter (its imports paid once; the
    wrapper script itself is run by ``test_cabi_models``); the paths of the .om files."""
    argvs = []
    for model, name, *extra in jobs:
        onnx.save(model, tmp_path / f"{name}.onnx")
        argvs.append(["atc", f"--model={tmp_path / name}.onnx", "--framework=5",
                      f"--output={tmp_path / name}", "--soc_version=Ascend910B1", *extra])
    prog = Path(__file__).resolve().parents[1] / "progs" / "atc_many.py"
    res = subprocess.run([sys.executable, str(prog), json.dumps(argvs)], capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    return [tmp_path / f"{name}.om" for _, name, *_ in jobs]


def test_aipp_program(compile_c, run_c, sdk_root, tmp_path):
    (tmp_path / "s.cfg").write_text(rgb_cfg())
    (tmp_path / "d.cfg").write_text("aipp_op { aipp_mode: dynamic max_src_image_size: 360 }")
    static, dynamic, hw = _atc_runs(tmp_path, [
        (identity(3, 8, 8), "s", f"--insert_op_conf={tmp_path / 's.cfg'}"),
        (identity(3, 8, 8), "d", f"--insert_op_conf={tmp_path / 'd.cfg'}"),
        (conv_gap(), "hw", "--input_shape=x:1,3,-1,-1", "--dynamic_image_size=16,12;8,8")])
    raw = np.random.default_rng(8).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    (tmp_path / "raw.bin").write_bytes(raw.tobytes())
    res = run_c(compile_c("aipp.c"), str(static), str(dynamic), str(tmp_path / "raw.bin"),
                str(tmp_path / "s.bin"), str(tmp_path / "d.bin"), str(hw), timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "aipp program done" in res.stdout
    assert "static type 1 attached ffffffff format 1" in res.stdout
    assert "info 3 12x10 crop 1 at 2,1 mean 124 var 0.0171 dims 4" in res.stdout
    assert "hw gears 2: 8x8 16x12" in res.stdout
    assert "data size 160" in res.stdout and "aipp data input 1 of 160 bytes" in res.stdout
    crop = raw[1:9, 2:10]
    want = normalise(crop, [124, 117, 104], [0.5, 0, 0], [0.0171, 0.0175, 0.0174])
    got = np.frombuffer((tmp_path / "s.bin").read_bytes(), np.float32).reshape(3, 8, 8)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=0)
    want = normalise(crop, [124, 117, 104], [0, 0, 0], [0.5, 0.5, 0.5])
    got = np.frombuffer((tmp_path / "d.bin").read_bytes(), np.float32).reshape(3, 8, 8)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=0)
