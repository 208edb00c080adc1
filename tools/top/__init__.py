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

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use: importing
    ``importlib.metadata`` costs ~16 ms, which every device worker would pay at start-up."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib.metadata

    try:
        version = importlib.metadata.version("npuemu")
    except importlib.metadata.PackageNotFoundError:  # a tree that is not installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version
