"""How ``import acl`` reaches npuemu's pyACL module (``npuemu.host.acl``).

npuemu ships a top-level package ``acl`` (folder ``tools/acl_top/``) whose only job is to call
:func:`install`: ``sys.modules["acl"]`` becomes this package, and ``acl.<sub>`` names resolve
to ``npuemu.host.acl.<sub>`` (``acl.rt``, ``acl.util``, and later ``acl.op``, ``acl.mdl``), so
each submodule exists once whichever name imports it. Because it is an ordinary installed
package, it works in every Python process of the environment (plain ``python``, pytest,
multiprocessing children, subprocesses), and a real pyACL found earlier on ``sys.path`` (its
``set_env.sh`` puts it on ``PYTHONPATH``, ahead of site-packages) still wins. ``npuemu run``
calls :func:`install` directly, so there npuemu's module is used even if a real one exists.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

_PREFIX = "npuemu.host.acl"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``acl.<sub>`` to the already-importable ``npuemu.host.acl.<sub>``."""

    def find_spec(self, name: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("acl.") or getattr(sys.modules.get("acl"), "__name__",
                                                    None) != _PREFIX:
            return None
        if importlib.util.find_spec(_PREFIX + name[3:]) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(_PREFIX + spec.name[3:])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the module was executed under its npuemu name."""


_finder = _Alias()


def install() -> ModuleType:
    """Make ``acl`` and its submodules npuemu's; returns the ``acl`` module."""
    from npuemu.host import acl

    sys.modules["acl"] = acl
    for name, module in list(sys.modules.items()):
        if name.startswith(_PREFIX + ".") and module is not None:
            sys.modules["acl" + name[len(_PREFIX):]] = module
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    return acl
