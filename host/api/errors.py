"""The exceptions of the Pythonic face: each carries the ACL code of the failure (``e.code``)
and its name (``e.name``, e.g. ``ACL_ERROR_RT_MEMORY_ALLOCATION``).

Where the ``acl`` face returns a code, this face raises the most specific of these classes
for it (``npuemu.shared.errors.error_for``): ``OutOfMemoryError`` for 207001,
``InvalidDeviceError`` for 107001, ``SyncTimeoutError`` for 507046, ``DeviceLostError`` once
a card is gone, ``ContextError`` without a current context; the band classes
(``ParamError`` 1xxxxx, ``ResourceError`` 2xxxxx, ``StorageError`` 3xxxxx, ``DeviceError``
5xxxxx) for the rest, all of them ``AclError``. The classes are those of
:mod:`npuemu.shared.errors` (one set for the whole runtime), re-exported here.
"""

from __future__ import annotations

from npuemu.shared.errors import (
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

__all__ = [
    "AclError",
    "ContextError",
    "DeviceError",
    "DeviceLostError",
    "InvalidDeviceError",
    "OutOfMemoryError",
    "ParamError",
    "ResourceError",
    "StorageError",
    "SyncTimeoutError",
]
