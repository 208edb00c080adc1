#!/usr/bin/env python3
"""Type-check npuemu from the checkout: build the import-name link tree, then run mypy.

The folders are not the import names (``host/`` installs as ``npuemu.host``, ``tools/top/`` is
``npuemu`` itself: pyproject's ``[tool.setuptools] package-dir``), and the editable install
maps them with an import hook that mypy and editors cannot follow. So this script writes
``build/typecheck/`` (git-ignored): one folder per import name, made of symlinks into the
checkout, which ``[tool.mypy] mypy_path`` (and ``[tool.pyright] extraPaths``) point at. A
package whose folder holds exactly its subpackages is one directory symlink (new modules show
up at once); the others (``npuemu`` = ``tools/top``, ``npuemu.tools``, whose folder also holds
``top/`` and ``acl_top/``) are real folders of per-file links, refreshed on every run.

Usage: ``python3 .ci/typecheck.py [mypy arguments]``. With no arguments mypy checks the
``packages`` of ``[tool.mypy]``; ``--tree`` only builds the tree (for editors). File names in
mypy's output are turned back into checkout paths (``shared/layout.py``, not the link).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
_LOCATION = re.compile(r"^(?P<path>[^\s:]+\.pyi?)(?P<rest>:.*)$")


def package_folders() -> dict[str, Path]:
    """Each installed package's folder in the checkout, as setuptools resolves package-dir."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = config["package-dir"]
    folders = {}
    for package in config["packages"]:
        parts = package.split(".")
        for cut in range(len(parts), 0, -1):
            base = ".".join(parts[:cut])
            if base in mapping:
                folders[package] = ROOT / mapping[base] / Path(*parts[cut:])
                break
        else:
            folders[package] = ROOT / Path(*parts)
    return folders


def _natural(package: str, folders: dict[str, Path]) -> bool:
    """True if the package sits in its parent package's folder under its own name."""
    parent, _, name = package.rpartition(".")
    return bool(parent) and folders.get(parent, Path()) / name == folders[package]


def _whole_folder(package: str, folders: dict[str, Path]) -> bool:
    """True if one directory symlink gives exactly the package and its subpackages."""
    children = {p for p in folders if p.rpartition(".")[0] == package}
    if any(not _natural(child, folders) for child in children):
        return False
    subdirs = {d.name for d in folders[package].iterdir() if (d / "__init__.py").exists()}
    return subdirs == {child.rpartition(".")[2] for child in children}


def _link(target: Path, source: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(os.path.relpath(source, target.parent))


def build_tree() -> None:
    """Write ``build/typecheck/`` afresh from pyproject's package list."""
    folders = package_folders()
    shutil.rmtree(TREE, ignore_errors=True)
    TREE.mkdir(parents=True)
    covered: set[str] = set()
    for package in sorted(folders, key=lambda p: p.count(".")):
        if package in covered:
            continue
        target = TREE / Path(*package.split("."))
        if _whole_folder(package, folders):
            _link(target, folders[package])
            covered.update(p for p in folders if p.startswith(package + "."))
            continue
        target.mkdir(parents=True, exist_ok=True)
        for source in folders[package].iterdir():
            if source.suffix in (".py", ".pyi") or source.name == "py.typed":
                _link(target / source.name, source)


def _checkout_path(line: str) -> str:
    match = _LOCATION.match(line)
    if not match or not match["path"].startswith(str(TREE.relative_to(ROOT))):
        return line
    real = os.path.relpath(os.path.realpath(ROOT / match["path"]), ROOT)
    return real + match["rest"]


def main(argv: list[str]) -> int:
    build_tree()
    if argv == ["--tree"]:
        return 0
    run = subprocess.run([sys.executable, "-m", "mypy", *argv], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, check=False)
    for line in run.stdout.splitlines():
        print(_checkout_path(line))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
