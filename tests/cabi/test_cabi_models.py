"""Models from C++: an OM file made by the SDK's atc (npuemu atc) from ONNX, loaded,
described, executed (sync, and async with the caller's memory), compared with onnxruntime;
the dynamic-batch gear set through ACL_DYNAMIC_TENSOR_NAME."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration


def _atc(sdk_root, model, tmp_path, name, *extra):
    src = tmp_path / f"{name}.onnx"
    onnx.save(model, src)
    res = subprocess.run([str(sdk_root / "bin" / "atc"), f"--model={src}", "--framework=5",
                          f"--output={tmp_path / name}", "--soc_version=Ascend910B1", *extra],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    return tmp_path / f"{name}.om"


def _ort(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("batch", [0, 2], ids=["static", "dynamic-gear-2"])
def test_model_program(compile_c, run_c, sdk_root, tmp_path, batch):
    model = small_cnn("N" if batch else 1)
    extra = ("--input_shape=x:-1,3,8,8", "--dynamic_batch_size=1,2,4") if batch else ()
    om = _atc(sdk_root, model, tmp_path, "cnn", *extra)
    x = np.random.default_rng(5).standard_normal((batch or 1, 3, 8, 8)).astype(np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    res = run_c(compile_c("model.cpp"), str(om), str(tmp_path / "x.bin"),
                str(tmp_path / "y.bin"), str(batch), timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "model program done" in res.stdout
    if batch:
        assert "gears: 1 2 4" in res.stdout
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), np.float32)[: (batch or 1) * 5]
    np.testing.assert_allclose(y.reshape(-1, 5), _ort(model, x), rtol=1e-4, atol=1e-5)
