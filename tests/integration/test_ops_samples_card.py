"""The single-op samples' ops on a real card: ArgMaxV2, TopK, GEMM (int8) and
ResizeBilinearV2 through ``acl.op.compile_and_execute_v2`` with const index inputs
(``tests/progs/sample_ops.py``), compared with numpy; an index input that is not const is
refused with 100000 and the card keeps serving."""

from __future__ import annotations

import numpy as np
import pytest
from childprog import run_program

from tests.unit.test_ops_samples import run_op

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}


def test_sample_ops_on_a_card_match_numpy(run_prog, tmp_path) -> None:
    rng = np.random.default_rng(21)
    x = {"am_x": rng.integers(-3, 3, (4, 5, 6)).astype(np.float16),
         "tk_x": rng.standard_normal((5, 8)).astype(np.float32),
         "g_a": rng.integers(-128, 128, (6, 5)).astype(np.int8),
         "g_b": rng.integers(-128, 128, (7, 5)).astype(np.int8),
         "g_c": rng.integers(-1000, 1000, (6, 7)).astype(np.int32),
         "r_x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **x)
    r = run_program(run_prog, "sample_ops.py", "run", tmp_path / "in.npz",
                    tmp_path / "out.npz", env=ENV, timeout=180)
    assert r == {"ArgMaxV2": 0, "TopK": 0, "GEMM": 0, "ResizeBilinearV2": 0,
                 "missing_const": 100000}
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_array_equal(got["argmax"], np.argmax(x["am_x"], axis=1))
    order = np.argsort(-x["tk_x"], axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(got["topk_i"], order)
    np.testing.assert_array_equal(got["topk_v"], np.take_along_axis(x["tk_x"], order, -1))
    want = 2 * (x["g_a"].astype(np.int64) @ x["g_b"].astype(np.int64).T) - x["g_c"]
    np.testing.assert_array_equal(got["gemm"], want)
    (host,) = run_op("ResizeBilinearV2", [x["r_x"], np.array([7, 9], np.int32)],
                     {"half_pixel_centers": True}, consts=(1,))  # the same kernel, no card
    np.testing.assert_array_equal(got["resize"], host)
