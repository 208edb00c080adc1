"""Packaging rules: every package is listed, bare folder names are not importable, and the
shared package imports neither side (host and device never import each other)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = {"host": "npuemu.host", "device": "npuemu.device", "shared": "npuemu.shared",
           "tools": "npuemu.tools"}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapped = {folder: package for package, folder in config["package-dir"].items()}
    assert "npuemu" in listed  # the small top-level package (tools/top/): __version__, __main__
    assert (ROOT / config["package-dir"]["npuemu"] / "__init__.py").is_file()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if mapped.get(str(init.parent.relative_to(ROOT))) in ("npuemu", "acl"):
                continue  # a top-level package's own folder (tools/top, tools/acl_top)
            rel = init.parent.relative_to(ROOT / folder)
            package = ".".join([name, *rel.parts])
            assert package in listed, f"{package} missing from [tool.setuptools] packages"
            assert config["package-dir"][package] == str(init.parent.relative_to(ROOT))


def test_bare_folder_names_are_not_importable() -> None:
    code = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(n) for n in " \
           "('host', 'device', 'shared', 'tools')))"
    assert subprocess.run([sys.executable, "-P", "-c", code], cwd="/").returncode == 0


def _imports(folder: str) -> set[str]:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
    return found


def test_layers_do_not_import_each_other() -> None:
    def touches(mods: set[str], side: str) -> set[str]:
        return {m for m in mods if m == side or m.startswith(side + ".")}

    assert not touches(_imports("shared"), "npuemu.host")
    assert not touches(_imports("shared"), "npuemu.device")
    assert not touches(_imports("host"), "npuemu.device")
    assert not touches(_imports("device"), "npuemu.host")
