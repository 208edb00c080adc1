"""Device and context management (``aclrtSetDevice`` and friends), raising AclError.

A card whose worker died, or whose heartbeat stopped for longer than ``shared/config.py``
``DEVICE_LOST_TIMEOUT_S`` (a hung or SIGSTOPped worker), is ABNORMAL for
``query_device_status``, and blocked calls on it fail with 507010 (see
``host/driver/link.py``).

Threading model: no threads of its own; any thread calls in. ``Runtime.lock`` guards the
open devices and their reference counts (``set_device``/``reset_device`` are atomic against
each other); the current context is per thread (``Runtime.local``). ``OpenDevice.util_mark``
is written without a lock: concurrent ``utilization_rate`` calls may measure from either
one's mark (a benign race: both are valid marks).
"""

from __future__ import annotations

import functools
import time

from npuemu.host.core import runtime
from npuemu.host.core import stream as streams
from npuemu.host.core.runtime import Context, OpenDevice
from npuemu.shared import config, errors
from npuemu.shared.config import SocProfile
from npuemu.shared.enums import DevAttr, DeviceInfo, DeviceStatus
from npuemu.shared.protocol import Op


def set_device(dev: int) -> None:
    """Mirrors ``aclrtSetDevice``: attach (first time: blocks until the worker is up), bump
    the device's reference count and bind the calling thread to its primary context."""
    rt = runtime.get()
    with rt.lock:  # one step: a reset in another thread cannot close it in between
        od = rt.open_device(dev)
        od.refs += 1
    rt.local.ctx = od.primary


def reset_device(dev: int, force: bool = False) -> None:
    """Mirrors ``aclrtResetDevice`` (``force``: ``aclrtResetDeviceForce``). When the count
    reaches 0 every allocation and context of this process on the device is released."""
    rt = runtime.get()
    rt.check_device_id(dev)
    with rt.lock:
        od = rt.devices.get(dev)
        if od is None:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"device {dev} was not set in this process")
        od.refs = 0 if force else od.refs - 1
        if od.refs > 0:
            return
        if od.link.alive() and not force:
            _drain(od)
        rt.close_device(od)


RESET_DRAIN_S = 5.0
"""How long a reset waits for this process's pending tasks before it aborts what is left
(a runaway kernel must not hold ``aclrtResetDevice`` until its execution timeout)."""


def _drain(od: OpenDevice) -> None:
    """Wait up to ``RESET_DRAIN_S`` for every stream of this process on the device (reset
    waits for pending tasks), then abort the streams still busy (queued tasks dropped, a
    running kernel stopped at its next block); failures are not raised here: the streams go
    away with the reset."""
    deadline = time.monotonic() + RESET_DRAIN_S
    busy = []
    for s in streams.streams_of(od.link):
        target = s.submitted
        try:  # a hung task (injected fault) never completes: the reset clears it instead
            done = od.link.wait_until(streams.done_or_hung(s, target),
                                      max(deadline - time.monotonic(), 0.0))
        except errors.AclError:
            return  # the device died meanwhile: nothing left to wait for
        if not done:
            busy.append(s)
    for s in busy:
        try:
            od.link.call(Op.STREAM_ABORT, s.slot)
        except errors.AclError:
            return


def get_device() -> int:
    """Mirrors ``aclrtGetDevice``: the calling thread's device (107002 if none)."""
    return runtime.get().current().device


def get_device_count() -> int:
    """Mirrors ``aclrtGetDeviceCount`` (honours ``ASCEND_RT_VISIBLE_DEVICES``)."""
    return len(runtime.get().visible())


def query_device_status(dev: int) -> int:
    """Mirrors ``aclrtQueryDeviceStatus``: ABNORMAL if the device is lost (its worker died),
    hung (no heartbeat for ``DEVICE_LOST_TIMEOUT_S``) or its health is Alarm or worse (an
    uncorrectable ECC error), else NORMAL. Non-blocking, whatever state the card is in."""
    rt = runtime.get()
    rt.check_device_id(dev)
    od = rt.devices.get(dev)
    if od is not None and od.link.abnormal():
        return DeviceStatus.ACL_RT_DEVICE_STATUS_ABNORMAL
    return DeviceStatus.ACL_RT_DEVICE_STATUS_NORMAL


def synchronize_device(timeout_ms: int = -1) -> None:
    """Mirrors ``aclrtSynchronizeDevice(WithTimeout)``: blocks until every stream this
    process has on the current device is done, then raises the first unreported failure.
    Expiry is 507046."""
    wait_s = streams.timeout_s(timeout_ms)
    rt = runtime.get()
    link = rt.current_link()
    link.check_alive()
    deadline = None if wait_s is None else time.monotonic() + wait_s
    mine = streams.streams_of(link)
    for s in mine:
        target = s.submitted
        left = None if deadline is None else max(deadline - time.monotonic(), 1e-6)
        if not link.wait_until(functools.partial(s.done, target), left):
            raise errors.error_for(errors.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                                   f"device {link.logical}: stream {s.sid} not done after "
                                   f"{timeout_ms} ms")
    for s in mine:
        streams.raise_failure(s)


def utilization_rate(dev: int) -> dict[str, int]:
    """Mirrors ``aclrtGetDeviceUtilizationRate``: percent busy of the AI Core (cube), AI
    Vector and AI CPU engines since the previous call (or since the device booted), under
    the C record's field names. ``memoryUtilization`` is -1, the value the real runtime
    reports in that reserved field (memory use is ``aclrtGetMemInfo``'s)."""
    rt = runtime.get()
    od = rt.open_device(dev)
    link, now = od.link, time.monotonic_ns()
    busy = list(link.busy_ns())
    since, before = od.util_mark or (link.boot_ns(), [0, 0, 0])
    od.util_mark = (now, busy)
    wall = max(now - since, 1)
    cube, vector, aicpu = (min(100, (b - a) * 100 // wall)
                           for a, b in zip(before, busy, strict=True))
    return {"cubeUtilization": cube, "vectorUtilization": vector, "aicpuUtilization": aicpu,
            "memoryUtilization": -1}


def create_context(dev: int) -> int:
    """Mirrors ``aclrtCreateContext``: a new context on ``dev``, bound to this thread."""
    return runtime.get().create_context(dev).handle


def destroy_context(handle: int) -> None:
    """Mirrors ``aclrtDestroyContext``."""
    runtime.get().destroy_context(handle)


def set_context(handle: int) -> None:
    """Mirrors ``aclrtSetCurrentContext``."""
    rt = runtime.get()
    rt.local.ctx = rt.context_of(handle)


def get_context() -> int:
    """Mirrors ``aclrtGetCurrentContext`` (107002 if the thread has none)."""
    return runtime.get().current().handle


def current_context() -> Context:
    return runtime.get().current()


def soc_name() -> str | None:
    """Mirrors ``aclrtGetSocName``: the SoC of the node (the same for every card), as its
    supervisor reported it, never this process's ``NPUEMU_SOC`` when the node is a shared one
    (``NPUEMU_NODE``; attached here if not yet). None (the C call's NULL) if that node cannot
    be reached. Before an embedded node starts, the SoC it will be started with."""
    rt = runtime.get()
    if rt.node is None and rt.config.name:
        try:
            rt.ensure_node()
        except errors.AclError:
            return None
    return rt.node.soc if rt.node is not None else rt.config.soc.name


def soc_profile() -> SocProfile:
    """The hardware numbers (core counts, sizes) of :func:`soc_name`'s SoC: the AclError of
    attaching (207004: no such node) if the node cannot be reached, 207000 if its SoC has no
    profile in this host's ``shared/config.py``."""
    name = soc_name()
    if name is None:
        runtime.get().ensure_node()  # raises the reason the node cannot be reached
        name = soc_name()  # it can be reached now
    profile = config.soc_profile(name) if name is not None else None
    if profile is None:
        raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                               f"the node's SoC {name!r} has no profile in this host")
    return profile


def device_info(dev: int, attr: int) -> int:
    """Mirrors ``aclrtGetDeviceInfo``: one ``aclrtDevAttr`` of card ``dev`` from its SoC's
    profile (core counts, L2 size) and the node (the card's HBM size, its physical id; not
    virtual). Other attributes (the SIMT grid limits, super-pod ids, board facts) are not
    emulated: 207000; an unknown attribute 107000, a bad device 107001. Blocks to attach to
    the node the first time (and to the card for its memory size)."""
    rt = runtime.get()
    logical = rt.check_device_id(dev)
    profile = soc_profile()
    values = {DevAttr.ACL_DEV_ATTR_AICPU_CORE_NUM: profile.aicpu_num,
              DevAttr.ACL_DEV_ATTR_AICORE_CORE_NUM: profile.ai_core_num,
              DevAttr.ACL_DEV_ATTR_CUBE_CORE_NUM: profile.cube_core_num,
              DevAttr.ACL_DEV_ATTR_VECTOR_CORE_NUM: profile.vector_core_num,
              DevAttr.ACL_DEV_ATTR_L2_CACHE_SIZE: profile.l2_bytes,
              DevAttr.ACL_DEV_ATTR_IS_VIRTUAL: 0}
    if attr in values:
        return values[DevAttr(attr)]
    if attr == DevAttr.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE:  # attaches to the card (blocks)
        return int(rt.open_device(logical).link.memory_usage().hbm_total)
    if attr == DevAttr.ACL_DEV_ATTR_PHY_CHIP_ID:
        return rt.visible()[logical]
    if attr in DevAttr._value2member_map_:
        raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                               f"device attribute {DevAttr(attr).name} is not emulated")
    raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"unknown device attribute {attr!r}")


def device_capability(dev: int, info: int) -> int:
    """Mirrors ``aclGetDeviceCapability``: ``ACL_DEVICE_INFO_AI_CORE_NUM``,
    ``ACL_DEVICE_INFO_VECTOR_CORE_NUM`` or ``ACL_DEVICE_INFO_L2_SIZE`` of card ``dev``'s SoC
    profile; any other value 100000, a bad device 107001. Blocks only to attach to the node
    the first time."""
    runtime.get().check_device_id(dev)
    profile = soc_profile()
    values = {DeviceInfo.ACL_DEVICE_INFO_AI_CORE_NUM: profile.ai_core_num,
              DeviceInfo.ACL_DEVICE_INFO_VECTOR_CORE_NUM: profile.vector_core_num,
              DeviceInfo.ACL_DEVICE_INFO_L2_SIZE: profile.l2_bytes}
    if info not in values:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, f"device info type {info!r}")
    return values[DeviceInfo(info)]
