"""``shared/relu.py``: the kernels' ``max(x, 0)`` equals ``np.maximum(x, 0)`` on every path
(the array path over zeros in chunks, the plain call for small, strided, integer or float16
arrays), in place and into another array, NaN included."""

from __future__ import annotations

import numpy as np
import pytest

from npuemu.shared import relu as R

SIZES = [1, 16, R.SMALL - 1, R.SMALL, R.CHUNK - 1, R.CHUNK, R.CHUNK + 1, 2 * R.CHUNK + 7]


def _values(n: int, dtype: str) -> np.ndarray:
    x = (np.random.default_rng(n).standard_normal(n) * 100).astype(dtype)
    if x.dtype.kind == "f":
        x[::97] = np.nan
        x[1::89] = -0.0
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
@pytest.mark.parametrize("n", SIZES)
def test_relu_is_maximum_with_zero_in_place_and_into_another_array(dtype: str, n: int) -> None:
    x = _values(n, dtype)
    want = np.maximum(x, 0)
    out = np.full_like(x, 7)
    assert R.relu(x, out) is out
    np.testing.assert_array_equal(out, want)
    assert R.relu(x, x) is x
    np.testing.assert_array_equal(x, want)


def test_relu_of_a_strided_view_and_of_a_2d_array() -> None:
    x = _values(3 * R.CHUNK, "float32").reshape(3, R.CHUNK)
    view = x[:, ::2]
    want = np.maximum(view, 0)
    out = np.empty_like(want)
    R.relu(view, out)
    np.testing.assert_array_equal(out, want)
    whole = np.maximum(x, 0)
    R.relu(x, x)
    np.testing.assert_array_equal(x, whole)


def test_the_zeros_are_read_only_and_stay_zero() -> None:
    x = _values(R.CHUNK, "float32")
    R.relu(x, x)
    for zeros in R.ZEROS.values():
        assert not zeros.flags.writeable
        assert not zeros.any()
