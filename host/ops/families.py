"""Imports every op family module once, so they register their ops."""

from npuemu.host.ops import cube, elementwise, image, norm, pooling, reduce, shape  # noqa: F401
