"""The driver seam holds: on the host only ``host/driver/`` imports
``npuemu.shared.layout``, and no host module imports npuemu code inside a function (the way
import cycles used to be dodged)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import npuemu.host

HOST = Path(npuemu.host.__file__).parent


def _modules() -> list[Path]:
    return sorted(HOST.rglob("*.py"))


def test_only_the_driver_reads_the_shared_layout():
    offenders = []
    for path in _modules():
        if path.relative_to(HOST).parts[0] == "driver":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n == "npuemu.shared.layout" or n.startswith("npuemu.shared.layout.")
                   for n in names):
                offenders.append(str(path.relative_to(HOST)))
    assert offenders == []


def test_no_function_local_imports_of_npuemu_in_the_runtime():
    offenders = []
    for path in _modules():
        if path.relative_to(HOST).parts[0] not in ("core", "driver", "api"):
            continue
        for func in ast.walk(ast.parse(path.read_text())):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                module = (node.module if isinstance(node, ast.ImportFrom)
                          else node.names[0].name if isinstance(node, ast.Import) else "")
                if module and module.startswith("npuemu"):
                    offenders.append(f"{path.relative_to(HOST)}:{node.lineno} {module}")
    assert offenders == []


def test_both_links_have_everything_of_the_link_interface():
    from npuemu.host.driver import fake, interface, link

    wanted = {n for n in vars(interface.Link) if not n.startswith("_")}
    wanted |= set(interface.Link.__annotations__)
    node = fake.FakeNode(devices=1)
    fake_link = node.open_link(0)
    try:
        assert [n for n in wanted if not hasattr(fake_link, n)] == []
    finally:
        node.close()
    source = Path(link.__file__).read_text()
    assert [n for n in wanted if not hasattr(link.DeviceLink, n)
            and not re.search(rf"self\.{n}\b\s*[:=,]", source)] == []
