"""``acl.rt``: the pyACL runtime functions (names, argument order, tuple returns with ``ret``
last, enum values and error codes as in pyACL). Each is a thin wrapper over the runtime core
(``host/device.py``, ``host/memory.py``); the docstrings there say what each mirrors and
whether it blocks."""

from __future__ import annotations

from npuemu.host import device, memory
from npuemu.host.acl._wrap import ret_only, with_result
from npuemu.shared.enums import RunMode

# device and context ---------------------------------------------------------------------------
set_device = ret_only(device.set_device)
reset_device = ret_only(device.reset_device)
reset_device_force = ret_only(lambda dev: device.reset_device(dev, force=True))
get_device = with_result(-1)(device.get_device)
get_device_count = with_result(0)(device.get_device_count)
query_device_status = with_result(0xFFFF)(device.query_device_status)
synchronize_device = ret_only(device.synchronize_device)
synchronize_device_with_timeout = ret_only(device.synchronize_device)
create_context = with_result(0)(device.create_context)
destroy_context = ret_only(device.destroy_context)
set_context = ret_only(device.set_context)
get_context = with_result(0)(device.get_context)


@with_result(RunMode.ACL_HOST)
def get_run_mode() -> int:
    """Mirrors ``aclrtGetRunMode``: the emulator always runs the program on the host."""
    return RunMode.ACL_HOST


def get_soc_name() -> str:
    """Mirrors ``aclrtGetSocName`` (returns the string, as pyACL does)."""
    return device.soc_name()


# memory ---------------------------------------------------------------------------------------
malloc = with_result(0)(memory.malloc)
free = ret_only(memory.free)
malloc_host = with_result(0)(memory.malloc_host)
free_host = ret_only(memory.free_host)
memcpy = ret_only(memory.memcpy)
memset = ret_only(memory.memset)
get_mem_info = with_result(0, 0)(memory.get_mem_info)
pointer_get_attributes = with_result({})(memory.pointer_get_attributes)
