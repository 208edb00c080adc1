"""Uses of the region layouts that the type checker must refuse, and one it must accept.

Never run: ``tests/unit/test_typecheck.py`` runs mypy (``.ci/typecheck.py``) on this file and
expects an error on exactly the lines marked ``# refused: <error code>``.
"""

from __future__ import annotations

from npuemu.shared.layout import DEVICE_CTL, RING_HEADER, Layout

words: int = DEVICE_CTL.HEARTBEAT + RING_HEADER.words * 8  # a word offset and a size are ints
name: str = DEVICE_CTL.HEARTBEAT  # refused: assignment
lost = RING_HEADER.HEAD_POS  # refused: attr-defined
layouts: list[type[Layout]] = [DEVICE_CTL, RING_HEADER]
wrong: list[Layout] = [DEVICE_CTL]  # refused: list-item
