"""Device and context management (``aclrtSetDevice`` and friends), raising AclError."""

from __future__ import annotations

from npuemu.host import runtime
from npuemu.host.runtime import Context
from npuemu.shared import errors
from npuemu.shared.enums import DeviceStatus


def set_device(dev: int) -> None:
    """Mirrors ``aclrtSetDevice``: attach (first time: blocks until the worker is up), bump
    the device's reference count and bind the calling thread to its primary context."""
    rt = runtime.get()
    od = rt.open_device(dev)
    with rt.lock:
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
        rt.close_device(od)


def get_device() -> int:
    """Mirrors ``aclrtGetDevice``: the calling thread's device (107002 if none)."""
    return runtime.get().current().device


def get_device_count() -> int:
    """Mirrors ``aclrtGetDeviceCount`` (honours ``ASCEND_RT_VISIBLE_DEVICES``)."""
    return len(runtime.get().visible())


def query_device_status(dev: int) -> int:
    """Mirrors ``aclrtQueryDeviceStatus``: NORMAL unless this process saw the device lost."""
    rt = runtime.get()
    rt.check_device_id(dev)
    od = rt.devices.get(dev)
    if od is not None and not od.link.alive():
        return DeviceStatus.ACL_RT_DEVICE_STATUS_ABNORMAL
    return DeviceStatus.ACL_RT_DEVICE_STATUS_NORMAL


def synchronize_device(timeout_ms: int = -1) -> None:
    """Mirrors ``aclrtSynchronizeDevice(WithTimeout)``. No stream work exists yet, so this
    checks the timeout argument and the device's liveness only (streams: see the README)."""
    if type(timeout_ms) is not int or timeout_ms < -1:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"timeout {timeout_ms!r} must be -1 or >= 0 ms")
    runtime.get().current_link().check_alive()


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


def soc_name() -> str:
    """Mirrors ``aclrtGetSocName`` (the node's SoC profile; the same for every card)."""
    rt = runtime.get()
    return rt.node.soc if rt.node is not None else rt.config.soc.name
