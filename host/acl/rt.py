"""``acl.rt``: the pyACL runtime functions (names, argument order, tuple returns with ``ret``
last, enum values and error codes as in pyACL). Each is a thin wrapper over the runtime core
(``host/core/device.py``, ``host/core/memory.py``); the docstrings there say what each mirrors and
whether it blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from npuemu.host.acl._wrap import fail, last_error, no_args, ret_only, with_result
from npuemu.host.core import (
    caching,
    callbacks,
    copy2d,
    device,
    ipc,
    kernel,
    memory,
    mempool,
    p2p,
    stream,
    vmm,
)
from npuemu.shared import errors
from npuemu.shared.enums import EventStatus, RunMode, StreamStatus

_IMPORTED = frozenset(globals())


def __dir__() -> list[str]:
    """``dir(acl.rt)`` lists the runtime calls, not the modules this one imports."""
    return sorted(n for n in globals() if n not in _IMPORTED and not n.startswith("_"))


# device and context ---------------------------------------------------------------------------
set_device = ret_only(device.set_device)
reset_device = ret_only(device.reset_device)
reset_device_force = ret_only(lambda dev: device.reset_device(dev, force=True))
get_device = no_args(with_result(-1)(device.get_device))
get_device_count = no_args(with_result(0)(device.get_device_count))
query_device_status = with_result(0xFFFF)(device.query_device_status)
get_device_info = with_result(0)(device.device_info)
synchronize_device = ret_only(device.synchronize_device)
synchronize_device_with_timeout = ret_only(device.synchronize_device)
create_context = with_result(0)(device.create_context)
destroy_context = ret_only(device.destroy_context)
set_context = ret_only(device.set_context)
get_context = no_args(with_result(0)(device.get_context))


@no_args
@with_result(int(RunMode.ACL_HOST))
def get_run_mode() -> int:
    """Mirrors ``aclrtGetRunMode``: ``(mode, ret)``, mode a plain int; the emulator always
    runs the program on the host (``ACL_HOST`` = 1)."""
    return int(RunMode.ACL_HOST)


@no_args
def get_soc_name() -> str | None:
    """Mirrors ``aclrtGetSocName`` (returns the string, as pyACL does)."""
    return device.soc_name()


# memory ---------------------------------------------------------------------------------------
# NPUEMU_CACHING_ALLOCATOR=1: malloc/free through the host caching allocator (host/core/caching.py)
_CACHED = caching.acl_enabled()
malloc = with_result(0)(caching.acl_malloc if _CACHED else memory.malloc)
free = ret_only(caching.acl_free if _CACHED else memory.free)
malloc_cached = malloc  # aclrtMallocCached: the same memory as aclrtMalloc's (cached too)
malloc_align32 = with_result(0)(memory.malloc_align32)
malloc_host = with_result(0)(memory.malloc_host)


@ret_only
def free_with_dev_sync(ptr: int) -> None:
    """Mirrors ``aclrtFreeWithDevSync``: waits for the current device's streams (blocks,
    as ``aclrtSynchronizeDevice``), then frees as ``aclrtFree``."""
    device.synchronize_device()
    memory.free(ptr)
free_host = ret_only(memory.free_host)
get_mem_info = with_result(0, 0)(memory.get_mem_info)
get_mem_usage_info = with_result([])(memory.get_mem_usage_info)
pointer_get_attributes = with_result({})(memory.pointer_get_attributes)


@no_args
@with_result(7, 0)
def device_get_stream_priority_range() -> tuple[int, int]:
    """Mirrors ``aclrtDeviceGetStreamPriorityRange``: ``(least, greatest, ret)`` = (7, 0)."""
    return 7, 0


_UTILIZATION_KEYS = {"cubeUtilization": "cube_utilization",
                     "vectorUtilization": "vector_utilization",
                     "aicpuUtilization": "aicpu_utilization",
                     "memoryUtilization": "memory_utilization"}


@with_result({**dict.fromkeys(_UTILIZATION_KEYS.values(), 0), "utilization_extend": 0})
def get_device_utilization_rate(dev: int) -> dict[str, int]:
    """Mirrors ``aclrtGetDeviceUtilizationRate`` as pyACL returns it: ``(rates, ret)``, the
    ``aclrtUtilizationInfo`` fields under pyACL's snake-case keys, ``utilization_extend`` the
    reserved pointer (0). On failure the zeroed record, as pyACL's."""
    rates = device.utilization_rate(dev)
    return {key: rates[c_name] for c_name, key in _UTILIZATION_KEYS.items()} | {
        "utilization_extend": 0}


# streams --------------------------------------------------------------------------------------
def _handle(make: Callable[..., Any]) -> Callable[..., int]:
    return lambda *args: make(*args).handle


create_stream = no_args(with_result(0)(_handle(stream.create_stream)))
create_stream_with_config = with_result(0)(_handle(stream.create_stream))
destroy_stream = ret_only(stream.destroy_stream)
destroy_stream_force = ret_only(lambda s: stream.destroy_stream(s, force=True))
synchronize_stream = ret_only(stream.synchronize_stream)
synchronize_stream_with_timeout = ret_only(stream.synchronize_stream)
stream_query = with_result(StreamStatus.ACL_STREAM_STATUS_RESERVED)(stream.stream_query)
stream_get_id = with_result(-1)(stream.stream_get_id)
set_stream_failure_mode = ret_only(stream.set_failure_mode)
stream_abort = ret_only(stream.stream_abort)
stream_wait_event = ret_only(stream.stream_wait_event)
stream_wait_event_with_timeout = ret_only(stream.stream_wait_event)

# events ---------------------------------------------------------------------------------------
create_event = no_args(with_result(0)(_handle(stream.create_event)))
create_event_with_flag = with_result(0)(_handle(stream.create_event))
create_event_ex_with_flag = with_result(0)(_handle(stream.create_event))
record_event = ret_only(stream.record_event)
reset_event = ret_only(stream.reset_event)
query_event = with_result(EventStatus.ACL_EVENT_STATUS_RESERVED)(stream.query_event)
query_event_status = with_result(0)(stream.query_event_status)
query_event_wait_status = with_result(0xFFFF)(stream.query_event)
synchronize_event = ret_only(stream.synchronize_event)
synchronize_event_with_timeout = ret_only(stream.synchronize_event)
event_elapsed_time = with_result(0.0)(stream.event_elapsed_time)
event_get_timestamp = with_result(0)(stream.event_get_timestamp)
destroy_event = ret_only(stream.destroy_event)

# kernels --------------------------------------------------------------------------------------
binary_load_from_file = with_result(0)(
    lambda path, options=None: kernel.binary_load_from_file(path).handle)
binary_load_from_data = with_result(0)(
    lambda data, options=None: kernel.binary_load_from_data(data).handle)
binary_get_function = with_result(0)(_handle(kernel.binary_get_function))
binary_unload = ret_only(kernel.binary_unload)
launch_kernel = ret_only(kernel.launch_kernel)

# task execution timeout (helper "worker"; host/core/kernel.py) ---------------------------------
set_op_execute_time_out = ret_only(kernel.set_op_execute_timeout)  # the pyACL doc's name
set_op_execute_timeout = set_op_execute_time_out  # the name pyACL's own error message uses
set_op_execute_timeout_v2 = with_result(0)(kernel.set_op_execute_timeout_v2)
get_op_timeout_interval = with_result(0)(kernel.get_op_timeout_interval)
get_op_execute_timeout = with_result(0)(kernel.get_op_execute_timeout)

# callbacks and errors -------------------------------------------------------------------------
subscribe_report = ret_only(callbacks.subscribe_report)
unsubscribe_report = ret_only(callbacks.unsubscribe_report)
process_report = ret_only(callbacks.process_report)
launch_callback = ret_only(callbacks.launch_callback)
launch_host_func = ret_only(callbacks.launch_host_func)
set_exception_info_callback = ret_only(callbacks.set_exception_info_callback)
exception_info_callback_register = ret_only(callbacks.exception_info_callback_register)
exception_info_callback_unregister = ret_only(callbacks.exception_info_callback_unregister)


def get_task_id_from_exception_info(info: int) -> int:
    """Mirrors ``aclrtGetTaskIdFromExceptionInfo`` (0xFFFFFFFF for an invalid info)."""
    return callbacks.info_field(info, "task_id")


def get_stream_id_from_exception_info(info: int) -> int:
    return callbacks.info_field(info, "stream_id")


def get_thread_id_from_exception_info(info: int) -> int:
    return callbacks.info_field(info, "thread_id")


def get_device_id_from_exception_info(info: int) -> int:
    return callbacks.info_field(info, "device_id")


def get_error_code_from_exception_info(info: int) -> int:
    return callbacks.info_field(info, "error_code")


def peek_at_last_error(level: int = 0) -> int:
    """Mirrors ``aclrtPeekAtLastError``: the calling thread's last failure code."""
    return last_error(clear=False)


def get_last_error(level: int = 0) -> int:
    """Mirrors ``aclrtGetLastError``: the last failure code, then cleared."""
    return last_error(clear=True)

# peer to peer ----------------------------------------------------------------------------------
device_can_access_peer = with_result(0)(p2p.can_access_peer)
device_enable_peer_access = ret_only(p2p.enable_peer_access)
device_disable_peer_access = ret_only(p2p.disable_peer_access)
device_peer_access_status = with_result(0)(p2p.peer_access_status)
get_devices_topo = with_result(0)(p2p.devices_topo)


# memory in depth: stream-ordered pools (aclrtMemPool*, host/core/mempool.py) and
# virtual memory (host/core/vmm.py); copies and fills (the only bindings of aclrtMemcpy,
# aclrtMemset and their async forms) also take virtual addresses -------------------------------
mem_pool_create = with_result(0)(_handle(mempool.create))
mem_pool_destroy = ret_only(mempool.destroy)
mem_pool_malloc_async = with_result(0)(mempool.malloc_async)
mem_pool_free_async = ret_only(mempool.free_async)
mem_pool_trim_to = ret_only(mempool.trim_to)
mem_pool_set_attr = ret_only(mempool.set_attr)
mem_pool_get_attr = with_result(0)(mempool.get_attr)
reserve_mem_address = with_result(0)(vmm.reserve_mem_address)
release_mem_address = ret_only(vmm.release_mem_address)
malloc_physical = with_result(0)(_handle(vmm.malloc_physical))
free_physical = ret_only(vmm.free_physical)
map_mem = ret_only(vmm.map_mem)
unmap_mem = ret_only(vmm.unmap_mem)
mem_get_allocation_granularity = with_result(0)(vmm.granularity)
mem_set_access = ret_only(vmm.set_access)
mem_get_access = with_result(0)(vmm.get_access)
mem_export_to_shareable_handle = with_result(0)(ipc.export)
mem_set_pid_to_shareable_handle = ret_only(ipc.set_pids)
mem_import_from_shareable_handle = with_result(0)(_handle(ipc.import_handle))


def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> int:
    """``aclrtMemcpy`` (blocks for the copy): ``memory.small_copy`` first, called straight
    from here (a small copy's whole cost is a few calls), else ``vmm.memcpy``."""
    try:
        if not memory.small_copy(dst, dest_max, src, count, kind):
            vmm.memcpy(dst, dest_max, src, count, kind)
    except errors.AclError as err:
        return fail(err, "rt.memcpy")
    return 0


memset = ret_only(vmm.memset)
memcpy_async = ret_only(vmm.memcpy_async)
memset_async = ret_only(vmm.memset_async)
memcpy2d = ret_only(copy2d.memcpy2d)
memcpy2d_async = ret_only(copy2d.memcpy2d_async)
