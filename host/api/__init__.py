"""The Pythonic face of the host runtime: ``Device``, ``DeviceBuffer``, ``DeviceArray``.

One core, two faces: this module and the pyACL-compatible ``acl`` module both call
``host/core/device.py`` and ``host/core/memory.py``. Where ``acl`` returns codes, this module
raises the ``AclError`` subclasses of :mod:`npuemu.shared.errors` (``e.code``, ``e.name``), e.g.
``OutOfMemoryError`` with code 207001 when a device is full. Bad Python-level arguments (a
shape that does not match, a fill byte out of range) raise ``ValueError``/``TypeError``.

    >>> from npuemu.host import Device, DeviceArray
    >>> with Device(0) as dev:                       # aclrtSetDevice ... aclrtResetDevice
    ...     x = DeviceArray.from_numpy(np.arange(6.0).reshape(2, 3))   # malloc + H2D
    ...     y = x.to_numpy()                                            # D2H

The face is split by concept; this package only re-exports its public names:

- ``devices``: ``Device``, ``MemInfo``, ``device_count``, ``current_device``,
  ``retained_devices`` (attachment, lifetime and the per-thread context: its docstring);
- ``buffers``: ``DeviceBuffer`` (``aclrtMalloc`` bytes; blocking and forked children);
- ``arrays``: ``DeviceArray`` (typed n-d arrays over one buffer);
- ``streams``: ``Stream``, ``Event``; ``graph``: ``Graph`` (stream capture);
  ``kernels``: ``Kernel``, ``load_kernels``;
- ``errors``: the ``AclError`` classes; ``memory``: torch-named memory statistics;
- ``prof``: ``profile``; ``models``: ``Model``; ``ops``: ``run_op`` and friends;
  ``hccl``: the collectives.

No module of the package imports this one: each imports the modules it builds on.
"""

from __future__ import annotations

from npuemu.host.api import hccl
from npuemu.host.api.arrays import DeviceArray
from npuemu.host.api.buffers import DeviceBuffer
from npuemu.host.api.devices import (
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    Device,
    MemInfo,
    current_device,
    device_count,
    retained_devices,
)
from npuemu.host.api.errors import (
    AclError,
    ContextError,
    DeviceError,
    DeviceLostError,
    InvalidDeviceError,
    OutOfMemoryError,
    ParamError,
    ResourceError,
    StorageError,
    SyncTimeoutError,
)
from npuemu.host.api.graph import Graph as Graph
from npuemu.host.api.kernels import Kernel as Kernel
from npuemu.host.api.kernels import load_kernels as load_kernels
from npuemu.host.api.memory import (  # memory statistics, torch's names
    empty_cache,
    leak_report,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    pool_stats,
    reset_peak_memory_stats,
)
from npuemu.host.api.models import Model as Model
from npuemu.host.api.ops import op_cache_stats as op_cache_stats
from npuemu.host.api.ops import run_op as run_op
from npuemu.host.api.ops import set_max_op_queue_num as set_max_op_queue_num
from npuemu.host.api.prof import Profile, profile
from npuemu.host.api.streams import Event as Event
from npuemu.host.api.streams import Stream as Stream
from npuemu.shared.enums import DeviceStatus as DeviceStatus
from npuemu.shared.enums import MemAttr as MemAttr
from npuemu.shared.enums import MemcpyKind as MemcpyKind

__all__ = [
    "ACL_DDR_MEM",
    "ACL_HBM_MEM",
    "AclError",
    "ContextError",
    "Device",
    "DeviceArray",
    "DeviceBuffer",
    "DeviceError",
    "DeviceLostError",
    "InvalidDeviceError",
    "MemInfo",
    "OutOfMemoryError",
    "ParamError",
    "Profile",
    "ResourceError",
    "StorageError",
    "SyncTimeoutError",
    "current_device",
    "device_count",
    "empty_cache",
    "hccl",
    "leak_report",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "pool_stats",
    "profile",
    "reset_peak_memory_stats",
    "retained_devices",
]

