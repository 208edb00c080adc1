"""bfloat16 as uint16 bits (shared/bf16.py, re-exported by host/hccl/types.py): widening is
exact, narrowing rounds to nearest even (checked against an independent float64 reference),
NaN/inf/overflow/subnormals, and ``bf16_reduce`` against a float32 reference with bf16
rounding, across the chunk boundary."""

from __future__ import annotations

import numpy as np
import pytest

from npuemu.host.hccl import types
from npuemu.shared import bf16
from npuemu.shared.bf16 import bf16_reduce, from_float32, to_float32


def _reference_round(values: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even by comparing distances in float64 to the two neighbours (the
    truncated bf16 and the next one up in magnitude). Finite inputs only."""
    u = values.astype(np.float32).view(np.uint32)
    low = (u >> 16).astype(np.uint32)
    high = low + 1
    v = values.astype(np.float64)
    lo_val = (low << 16).view(np.float32).astype(np.float64)
    hi_bits = (high << 16)
    hi_val = hi_bits.view(np.float32).astype(np.float64)
    # the neighbour past the largest bf16 is 2**128 in magnitude (IEEE overflow rule)
    over = (high & 0x7FFF) == 0x7F80
    hi_val[over] = np.copysign(2.0 ** 128, v[over])
    d_lo, d_hi = np.abs(v - lo_val), np.abs(hi_val - v)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (low & 1 == 1))
    return np.where(pick_hi, high, low).astype(np.uint16)


def test_widening_is_exact_for_every_bit_pattern() -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    f = to_float32(bits)
    finite = np.isfinite(f)
    assert np.array_equal(from_float32(f)[finite], bits[finite])
    assert np.isnan(f[(bits & 0x7FFF) > 0x7F80]).all()


def test_rounding_matches_a_float64_reference() -> None:
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    vals = raw.view(np.float32)
    vals = vals[np.isfinite(vals)]
    # ties: low 16 bits exactly 0x8000, with even and odd kept halves
    ties = ((rng.integers(0, 1 << 16, 2000).astype(np.uint32) << 16) | 0x8000).view(np.float32)
    ties = ties[np.isfinite(ties)]
    for v in (vals, ties):
        assert np.array_equal(from_float32(v), _reference_round(v))


@pytest.mark.parametrize(("value", "bits"), [
    (1.0, 0x3F80), (1.0 + 2 ** -8, 0x3F80), (1.0 + 3 * 2 ** -8, 0x3F82),  # ties to even
    (-2.5, 0xC020), (-0.0, 0x8000), (float("inf"), 0x7F80), (float("-inf"), 0xFF80),
    (3.4e38, 0x7F80),  # past the largest bf16 (about 3.39e38): infinity
    (1e-40, 0x0001),  # float32 subnormal: kept as a bf16 subnormal
])
def test_known_values(value: float, bits: int) -> None:
    assert int(from_float32(np.array([value], np.float32))[0]) == bits


def test_nan_stays_nan_and_quiet() -> None:
    nans = np.array([0x7F800001, 0xFFC00000, 0x7FFFFFFF], np.uint32).view(np.float32)
    out = from_float32(nans)
    assert np.isnan(to_float32(out)).all()
    assert ((out & 0x0040) != 0).all()
    assert int(out[1]) & 0x8000


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_reduce_matches_float32_then_rounding(op: str) -> None:
    rng = np.random.default_rng(11)
    n = bf16.CHUNK + 1234  # crosses a chunk boundary
    a = from_float32(rng.normal(0, 100, n).astype(np.float32))
    x = from_float32(rng.normal(0, 100, n).astype(np.float32))
    fn = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    want = from_float32(fn(to_float32(a), to_float32(x)))
    out = np.empty(n, np.uint16)
    assert bf16_reduce(op, a, x, out=out) is out
    assert np.array_equal(out, want)
    acc = a.copy()
    bf16_reduce(op, acc, x)  # in place
    assert np.array_equal(acc, want)


def test_reduce_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        bf16_reduce("sum", np.zeros(3, np.uint16), np.zeros(4, np.uint16))


def test_hccl_bfp16_is_tagged_uint16() -> None:
    dt = types.numpy_dtype(types.HcclDataType.HCCL_DATA_TYPE_BFP16)
    assert dt == np.uint16 and dt.itemsize == 2
    assert types.is_bf16(dt) and types.kernel_dtype(dt) == "bfloat16"
    assert types.kernel_dtype(types.numpy_dtype(8)) == "uint16"  # UINT16 stays an integer
    assert not types.is_bf16(np.dtype(np.uint16))
    with pytest.raises(types.HcclError) as err:
        types.numpy_dtype(types.HcclDataType.HCCL_DATA_TYPE_INT128)
    assert err.value.code == types.HcclResult.HCCL_E_NOT_SUPPORT
