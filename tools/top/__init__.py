"""npuemu: emulated Huawei Ascend NPUs and the CANN Runtime (pyACL-compatible), in Python.

The top-level package is deliberately small: it carries the version and ``python -m npuemu``.
The code lives in the subpackages, each installed from its own folder of the repository
(pyproject.toml's ``package-dir``; this file is ``tools/top/__init__.py``):

    npuemu.host      the host runtime: ``npuemu.host.acl`` (pyACL face), ``npuemu.host.api``
                     (Pythonic face: Device, Stream, DeviceArray, ...), core and driver
    npuemu.device    the device side: worker, scheduler, engines, supervisor
    npuemu.shared    what both sides import: byte layouts, rings, protocol, errors, config
    npuemu.tools     the ``npuemu`` command, bench, smi, msnpureport, inject, pytest plugin
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__: str = importlib.metadata.version("npuemu")
except importlib.metadata.PackageNotFoundError:  # imported from a tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
