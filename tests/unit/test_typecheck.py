"""The type checker sees the region layouts' fields: ``DEVICE_CTL.HEARTBEAT`` is an ``int``
and a field that does not exist is an error (mypy through ``.ci/typecheck.py``, on
``tests/progs/layout_misuse.py``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROG = Path("tests/progs/layout_misuse.py")


def _expected() -> set[tuple[int, str]]:
    lines = (ROOT / PROG).read_text().splitlines()
    return {(n, m[1]) for n, line in enumerate(lines, 1)
            if (m := re.search(r"# refused: ([a-z-]+)$", line))}


def test_mypy_refuses_exactly_the_wrong_layout_uses() -> None:
    run = subprocess.run([sys.executable, ".ci/typecheck.py", str(PROG)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=False)
    found = {(int(m[1]), m[2]) for m in
             re.finditer(rf"^{re.escape(str(PROG))}:(\d+): error: .*\[([a-z-]+)\]$",
                         run.stdout, re.M)}
    assert len(_expected()) == 3
    assert found == _expected(), run.stdout + run.stderr
    assert run.returncode == 1
