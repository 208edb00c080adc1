"""npuemu's pyACL-compatible ``acl`` module: ``import acl`` resolves here under
``npuemu run script.py`` (nothing named ``acl`` is installed: PyPI has an unrelated one).

Submodules as in pyACL: ``acl.rt`` (runtime), ``acl.util`` (pointer helpers), ``acl.prof``
(profiling). Calls return
``ret`` or a tuple ending in ``ret``; pointers and handles are ints.
"""

from __future__ import annotations

from npuemu.host.acl import prof, rt, util
from npuemu.host.acl._wrap import recent_message
from npuemu.host.core import device
from npuemu.host.core.runtime import get as _runtime
from npuemu.shared import errors

ACL_MAJOR_VERSION, ACL_MINOR_VERSION, ACL_PATCH_VERSION = 1, 17, 0


def init(config_path: str | None = None) -> int:
    """Mirrors ``aclInit``; a second call returns ACL_ERROR_REPEAT_INITIALIZE (100002).
    The config file is not read (no config key changes the emulator yet)."""
    rt_ = _runtime()
    if rt_.initialized:
        return errors.ACL_ERROR_REPEAT_INITIALIZE
    rt_.initialized = True
    return 0


def finalize() -> int:
    """Mirrors ``aclFinalize``; a repeat returns ACL_ERROR_REPEAT_FINALIZE (100037). Device
    resources are released at process exit or ``reset_device``, as on hardware."""
    rt_ = _runtime()
    if not rt_.initialized:
        return errors.ACL_ERROR_REPEAT_FINALIZE
    rt_.initialized = False
    return 0


def get_soc_name() -> str:
    """Mirrors ``aclrtGetSocName``."""
    return device.soc_name()


def get_version() -> tuple[int, int, int, int]:
    """Mirrors ``aclrtGetVersion``: ``(major, minor, patch, ret)``."""
    return ACL_MAJOR_VERSION, ACL_MINOR_VERSION, ACL_PATCH_VERSION, 0


def get_recent_err_msg() -> str:
    """Mirrors ``aclGetRecentErrMsg``: the text of this thread's most recent failure."""
    return recent_message()


__all__ = ["finalize", "get_recent_err_msg", "get_soc_name", "get_version", "init", "prof",
           "rt", "util"]
