"""Imports every op family module once, so they register their ops."""

from npuemu.host.ops import (  # noqa: F401
    activation,
    cube,
    elementwise,
    gemm,
    image,
    indexing,
    norm,
    pooling,
    reduce,
    resize,
    shape,
    slicing,
    volume,
)
