"""Fault injection from the host API: ``inject(device, kind, **params)``.

The fault is sent to the card's worker (``device/faults.py`` lists the kinds and their
effects) and surfaces exactly as a hardware fault would: in the failing task's code at the
next synchronize, in the exception callbacks, in ``query_device_status`` and in the health
view. ``kind="lost"`` kills the worker: later calls on the card return 507010 until
``reset_device`` and ``set_device`` bring up a fresh card.
"""

from __future__ import annotations

from npuemu.host.core import runtime
from npuemu.shared import errors
from npuemu.shared.protocol import Op

KINDS = ("ecc_single", "ecc_multi", "aicore", "aivector", "aicpu", "hang", "dma", "link",
         "lost", "clear_ecc")


def inject(dev: int, kind: str, **params: object) -> None:
    """Inject ``kind`` into logical device ``dev`` (attaching to it if needed; blocks for
    one round trip). Raises AclError 107000 for an unknown kind or bad parameters."""
    if kind not in KINDS:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"unknown fault {kind!r}; one of {', '.join(KINDS)}")
    link = runtime.get().open_device(dev).link
    if kind == "lost":
        link.post(Op.INJECT, kind, params)
        return
    link.call(Op.INJECT, kind, params)
