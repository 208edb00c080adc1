"""Imports every op family module once, so they register their ops."""

from npuemu.host.ops import (  # noqa: F401
    activation,
    cube,
    elementwise,
    image,
    norm,
    pooling,
    reduce,
    shape,
    slicing,
    volume,
)
