"""C bodies of ``acl.h`` and the data-buffer, half-float and message calls of ``acl_base.h``.

Each mirrors the C call of its name through the ``acl`` face (``npuemu.host.acl``): the same
codes, handles and messages as a Python program gets. Nothing here blocks except ``aclInit``
(it reads the config file) and ``aclFinalize`` (it runs the features' release hooks).
"""

from __future__ import annotations

import struct
from typing import Any

import npuemu.host.acl as acl
from npuemu import __version__
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export


@export
def aclGetDeviceCapability(dev: int, info: int, value: Any) -> int:
    if value == X.ffi.NULL:
        return X.invalid("aclGetDeviceCapability", "value is NULL")
    result, ret = acl.get_device_capability(dev, info)
    if ret == 0:  # a failed call leaves *value as it was
        value[0] = result
    return ret


@export
def aclInit(config_path: Any) -> int:
    """Mirrors ``aclInit`` (NULL: no config file)."""
    return acl.init(X.text(config_path))


@export
def aclFinalize() -> int:
    """Mirrors ``aclFinalize``; devices stay set, as in the real runtime."""
    return acl.finalize()


@export
def aclFinalizeReference(ref_count: Any) -> int:
    """Mirrors ``aclFinalizeReference``: finalizes at once (npuemu keeps no init count); the
    count left, always 0, goes to ``refCount`` when it is not NULL."""
    ret = acl.finalize()
    if ref_count != X.ffi.NULL:
        ref_count[0] = 0
    return ret


@export
def aclrtGetVersion(major: Any, minor: Any, patch: Any) -> int:
    """Mirrors ``aclrtGetVersion`` (1.17.0)."""
    if X.ffi.NULL in (major, minor, patch):
        return X.invalid("aclrtGetVersion", "a version pointer is NULL")
    major[0], minor[0], patch[0], ret = acl.get_version()
    return ret


@export
def aclsysGetVersionStr(pkg_name: Any, version_str: Any) -> int:
    """Mirrors ``aclsysGetVersionStr``: the npuemu version for any package name, written into
    ``versionStr`` (the caller's buffer of ``ACL_PKG_VERSION_MAX_SIZE`` bytes)."""
    if pkg_name == X.ffi.NULL or version_str == X.ffi.NULL:
        return X.invalid("aclsysGetVersionStr", "a string pointer is NULL")
    data = __version__.encode()[:127] + b"\0"
    X.ffi.memmove(version_str, data, len(data))
    return 0


@export
def aclsysGetCANNVersion(name: int, version: Any) -> int:
    """Mirrors ``aclsysGetCANNVersion``: npuemu's version in every field of the record."""
    if version == X.ffi.NULL:
        return X.invalid("aclsysGetCANNVersion", "version is NULL")
    parts = ([*__version__.split("."), "0", "0", "0"])[:3]
    version.version = __version__.encode()
    version.majorVersion, version.minorVersion, version.patchVersion = (
        p.encode() for p in parts)
    version.releaseVersion = b""
    return 0


@export
def aclGetRecentErrMsg() -> Any:
    """Mirrors ``aclGetRecentErrMsg``: this thread's last failure text, NULL if none; valid
    until this thread's next call of it."""
    return X.kept_string("aclGetRecentErrMsg", acl.get_recent_err_msg() or None)


@export
def aclrtGetSocName() -> Any:
    """Mirrors ``aclrtGetSocName`` (NULL where the runtime has no device)."""
    return X.kept_string("aclrtGetSocName", acl.get_soc_name())


def npuemu_app_log(level: int, func: Any, file: Any, line: int, msg: Any) -> None:
    """The body behind the C ``aclAppLog`` (which formats the message first)."""
    acl.app_log(level, X.text(msg) or "")


# data buffers ---------------------------------------------------------------------------------
@export
def aclCreateDataBuffer(data: Any, size: int) -> Any:
    """Mirrors ``aclCreateDataBuffer`` (a handle cast to ``aclDataBuffer *``)."""
    return X.ffi.cast("aclDataBuffer *", acl.create_data_buffer(X.addr(data), size))


X.forward("aclDestroyDataBuffer", acl.destroy_data_buffer)


@export
def aclUpdateDataBuffer(buf: Any, data: Any, size: int) -> int:
    return acl.update_data_buffer(X.addr(buf), X.addr(data), size)


@export
def aclGetDataBufferAddr(buf: Any) -> Any:
    return X.ffi.cast("void *", acl.get_data_buffer_addr(X.addr(buf)))


X.forward("aclGetDataBufferSize", acl.get_data_buffer_size)
X.forward("aclGetDataBufferSizeV2", acl.get_data_buffer_size_v2)


@export
def aclDataTypeSize(data_type: int) -> int:
    return acl.data_type_size(data_type)


# half floats (IEEE binary16, as the card's) --------------------------------------------------
@export
def aclFloat16ToFloat(value: int) -> float:
    """Mirrors ``aclFloat16ToFloat``."""
    return struct.unpack("<e", struct.pack("<H", value & 0xFFFF))[0]


@export
def aclFloatToFloat16(value: float) -> int:
    """Mirrors ``aclFloatToFloat16`` (round to nearest even; out of range becomes inf)."""
    try:
        return struct.unpack("<H", struct.pack("<e", value))[0]
    except OverflowError:
        return 0x7C00 if value > 0 else 0xFC00
