"""The DVPP task's fields as a frame carries them (``Op.DVPP``: kind, picture record
addresses, integer parameters), checked at intake by the scheduler. Kept apart from
``dvpp.py`` so that a card imports its codecs (OpenCV, Pillow, PyAV: about a quarter of a
second) only when its first DVPP task arrives, not at every worker start."""

from __future__ import annotations

from npuemu.shared.protocol import BadFrame, u64

KINDS = ("jpegd", "pngd", "jpege", "vpc", "vdec", "venc")
MAX_RECORDS = 256
"""Most picture records of one task (a batch crop's inputs and outputs)."""


def _kind(value: object) -> None:
    if value not in KINDS:
        raise BadFrame(f"DVPP kind {value!r:.40} is not one of {KINDS}")


def _records(value: object) -> None:
    if not isinstance(value, list | tuple) or len(value) > MAX_RECORDS:
        raise BadFrame(f"DVPP records must be an array of at most {MAX_RECORDS} addresses")
    for v in value:
        u64(v)


def _params(value: object) -> None:
    if not isinstance(value, list | tuple) or len(value) > 8 * MAX_RECORDS:
        raise BadFrame("DVPP parameters must be an array of integers")
    for v in value:
        u64(v)


TASK_ARGS = (_kind, _records, _params)
