#!/usr/bin/env python3
"""Type-check npuemu from the checkout: build the import-name link tree, then run mypy.

The folders are not the import names (``host/`` installs as ``npuemu.host``, ``tools/top/`` is
``npuemu`` itself: pyproject's ``[tool.setuptools] package-dir``), and the editable install
maps them with an import hook that mypy and editors cannot follow. So this script writes
``build/typecheck/`` (git-ignored): one folder per import name, made of symlinks into the
checkout, which ``[tool.mypy] mypy_path`` (and ``[tool.pyright] extraPaths``) point at. A
package whose folder holds exactly its subpackages is one directory symlink (new modules show
up at once); the others (``npuemu`` = ``tools/top``, ``npuemu.tools``, whose folder also holds
``top/`` and ``acl_top/``) are real folders of per-file links. Every run brings the tree up to
date in place (links that are right are left alone, so runs side by side in one checkout do
not break each other).

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


def plan_tree() -> dict[Path, Path | None]:
    """Each path of the tree: the checkout file or folder it links to, or None for a real
    folder (of per-file links)."""
    folders = package_folders()
    plan: dict[Path, Path | None] = {}
    covered: set[str] = set()
    for package in sorted(folders, key=lambda p: p.count(".")):
        if package in covered:
            continue
        target = TREE / Path(*package.split("."))
        if _whole_folder(package, folders):
            plan[target] = folders[package]
            covered.update(p for p in folders if p.startswith(package + "."))
            continue
        plan[target] = None
        for source in folders[package].iterdir():
            if source.suffix in (".py", ".pyi") or source.name == "py.typed":
                plan[target / source.name] = source
    return plan


def _place(path: Path, source: Path | None) -> None:
    """Make ``path`` the planned folder or link, leaving it alone if it already is (other
    runs in the same checkout may be reading the tree)."""
    if source is None:
        if path.is_symlink() or path.is_file():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
        return
    link = os.path.relpath(source, path.parent)
    if path.is_symlink() and os.readlink(path) == link:
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    temp.symlink_to(link)
    os.replace(temp, path)  # atomic: readers see the old link or the new one


def build_tree() -> None:
    """Bring ``build/typecheck/`` in line with pyproject's package list: planned links are
    made or corrected, anything else in the tree is removed."""
    plan = plan_tree()
    TREE.mkdir(parents=True, exist_ok=True)
    for path in sorted(plan, key=lambda p: len(p.parts)):
        _place(path, plan[path])
    for folder in [TREE, *(p for p, source in plan.items() if source is None)]:
        for entry in folder.iterdir():
            if entry in plan:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


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
