"""The depthwise path of ``shared/conv.py`` (one filter per channel, computed tap by tap in
channels-last scratch) against the general GEMM path run channel by channel, over strides,
dilations, asymmetric pads, kernel shapes, bias and the fused Relu, with and without the
planned workspace; and which convolutions take it."""

from __future__ import annotations

import numpy as np
import pytest

from npuemu.shared import conv

CASES = [  # c, h, w, kh, kw, stride, dilation, pads
    (8, 9, 7, 3, 3, 1, 1, [1, 1, 1, 1]),
    (5, 12, 10, 3, 3, 2, 1, [1, 1, 1, 1]),
    (4, 11, 11, 5, 5, 1, 2, [4, 4, 4, 4]),
    (6, 8, 13, 1, 3, 2, 1, [0, 2, 1, 0]),
    (3, 6, 6, 3, 3, 3, 1, [0, 0, 0, 0]),
]


def _reference(x, w, s, d, pads, bias, relu):
    parts = [conv.conv2d(x[:, k:k + 1], w[k:k + 1], s, s, d, d, pads, 1,
                         bias=None if bias is None else bias[k:k + 1])
             for k in range(x.shape[1])]
    out = np.concatenate(parts, axis=1)
    return np.maximum(out, 0) if relu else out


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_depthwise_equals_the_gemm_path_channel_by_channel(case, dtype) -> None:
    c, h, wd, kh, kw, s, d, pads = case
    rng = np.random.default_rng(c * h)
    x = rng.standard_normal((2, c, h, wd)).astype(dtype)
    w = rng.standard_normal((c, 1, kh, kw)).astype(dtype)
    bias = rng.standard_normal(c).astype(dtype)
    ho, wo = conv.out_hw(h, wd, kh, kw, s, s, d, d, pads)
    assert conv.is_depthwise(c, w.shape, c, dtype)
    ws = np.zeros(conv.depthwise_bytes(c, h, wd, ho, wo, pads, np.dtype(dtype).itemsize),
                  np.uint8)
    for b, relu, scratch in [(bias, True, ws), (None, False, None), (bias, False, ws[:-1])]:
        out = np.full((2, c, ho, wo), np.nan, dtype)
        got = conv.conv2d(x, w, s, s, d, d, pads, c, scratch, out, b, relu)
        assert got is out
        want = _reference(x, w, s, d, pads, b, relu)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_which_convolutions_are_depthwise() -> None:
    assert conv.is_depthwise(16, (16, 1, 3, 3), 16, np.float32)
    assert not conv.is_depthwise(16, (32, 1, 3, 3), 16, np.float32)  # two filters a channel
    assert not conv.is_depthwise(16, (16, 4, 3, 3), 4, np.float32)  # grouped, not depthwise
    assert not conv.is_depthwise(1, (1, 1, 3, 3), 1, np.float32)  # an ordinary convolution
    assert not conv.is_depthwise(16, (16, 1, 3, 3), 16, np.float16)  # GEMM's accumulation
    assert not conv.is_depthwise(16, (16, 1, 3, 3), 16, np.int32)


def test_a_channel_multiplier_keeps_the_gemm_path() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    got = conv.conv2d(x, w, 1, 1, 1, 1, [1, 1, 1, 1], 3)
    want = np.concatenate([conv.conv2d(x[:, k // 2:k // 2 + 1], w[k:k + 1], 1, 1, 1, 1,
                                       [1, 1, 1, 1], 1) for k in range(6)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
