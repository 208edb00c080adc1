"""The tests' child programs are real files (``tests/progs/``: linted, importable helpers in
``childlib.py``), not Python programs inside string literals of a test file.

The scan parses every tracked ``.py`` file under ``tests/`` and flags each string literal
(docstrings aside) of ``MIN_LINES`` or more non-blank lines that itself parses as Python
and does something (an import, a call, a ``def`` or ``class``). An f-string is read with
its replacement fields as names. C and C++ sources (``tests/cabi``), prose, tables, INI
files and rank-table JSON do not parse as such a program, so they are never flagged.
``DATA`` lists the files whose program strings are deliberate (hostile kernel files as test
data). ``NOT_YET`` lists the files still holding programs in strings: the list only shrinks
(a file converted is removed from it; the test says so when a listed file holds none any
more).
"""

from __future__ import annotations

import ast
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()
"""This file, left out of the scan: its scanner test spells programs in strings."""
MIN_LINES = 3
"""Fewer lines than this are a one-liner (``python -c 'import acl; ...'``), not a program."""

NOT_YET = {
    "tests/childprog.py",  # CHILD_HELPERS, the prelude of the files below
    "tests/cli/test_bench_package.py",
    "tests/cli/test_cli.py",
    "tests/cli/test_diagnosis.py",
    "tests/cli/test_pytest_plugin.py",
    "tests/cli/test_ux_bench_child.py",
    "tests/cli/test_ux_cli.py",
    "tests/integration/test_fidelity_tools.py",
    "tests/integration/test_prof.py",
}
"""Test files that still embed child programs, to be converted (then dropped from here)."""

DATA = {
    "tests/progs/trust_ops.py": "hostile kernel files (recursion at import, sys.exit...) and "
                                "the good one they are measured against, loaded from text",
}
"""Files whose program strings are the data under test, not child programs."""


def _tracked_tests() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "tests"], cwd=ROOT, capture_output=True,
                             check=True, timeout=30).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout ({exc}): the tracked files cannot be listed")
    return sorted(n for n in out.decode().split("\0") if n.endswith(".py") and n != SELF)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal but docstrings and f-string pieces; an
    f-string's replacement fields read as the name ``_``."""
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
            text = "".join(v.value if isinstance(v, ast.Constant) else "_" for v in node.values)
            out.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in skip:
            out.append((node.lineno, node.value))
    return out


def is_program(text: str) -> bool:
    """Whether ``text`` is a Python program of ``MIN_LINES`` or more lines."""
    if sum(1 for ln in text.splitlines() if ln.strip()) < MIN_LINES:
        return False
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return False
    acting = (ast.Call, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    return any(isinstance(node, acting) for node in ast.walk(tree))


def programs_in(source: str) -> list[tuple[int, int]]:
    """``(line, lines)`` of each program string literal of the Python ``source``."""
    return [(line, len(text.splitlines())) for line, text in _literals(ast.parse(source))
            if is_program(text)]


def test_the_scanner_flags_programs_and_nothing_else():
    flagged = ['x = """\nimport acl\nR = {}\nprint(R)\n"""',
               'run("""\n    ok(acl.init())\n    p = malloc(8)\n    R["p"] = p\n""")',
               'f"""\nmid = load({om!r})\nok(mid)\nR["m"] = {n}\n"""']
    innocent = ['"""A docstring\nthat mentions\nimport acl\n"""',
                'c = """\n#include <acl/acl.h>\nint main(void) {\n  return 0;\n}\n"""',
                'p = """\nA paragraph of prose,\nover three lines,\nwith no code.\n"""',
                't = """\nalpha\nbeta\ngamma\n"""',
                'j = """\n{"server_count": "1",\n "server_list": [],\n "status": "ok"}\n"""',
                'one = "import acl; print(acl.__name__)"',
                'two = "a = 1\\nb = 2\\n"',
                'ini = "[op_compiler_cache]\\nmax_op_cache_size=3\\nremain_cache_size_ratio=2\\n"']
    assert [s for s in flagged if not programs_in(s)] == []
    assert [s for s in innocent if programs_in(s)] == []


def test_no_test_file_embeds_a_child_program():
    found: dict[str, list[tuple[int, int]]] = {}
    for name in _tracked_tests():
        path = ROOT / name
        if not path.exists():  # deleted in the working tree, not yet committed
            continue
        spots = programs_in(path.read_text())
        if spots:
            found[name] = spots
    new = {n: spots for n, spots in found.items() if n not in NOT_YET and n not in DATA}
    assert not new, ("child programs inside string literals (make them files under "
                     f"tests/progs/, see tests/progs/childlib.py): {new}")
    done = sorted(NOT_YET - set(found))
    assert not done, f"these hold no program string any more: drop them from NOT_YET: {done}"
