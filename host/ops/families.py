"""Imports every op family module once, so they register their ops."""

from npuemu.host.ops import elementwise  # noqa: F401
