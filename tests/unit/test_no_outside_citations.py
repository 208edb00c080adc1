"""No citation a reader of the repository cannot follow: tracked source, tests, C headers and
the README name the CANN call, header or behaviour they mean, never a section number, an
issue number or a document that lives outside the repository (the team's planning notes,
their reference digests), and never the digests' "UNVERIFIED" marker (we say "our choice"
where CANN's documentation is silent). This file is left out of the scan: it spells the
patterns."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()
SUFFIXES = {".py", ".md", ".toml", ".c", ".h", ".cpp", ".hpp", ".txt", ".cfg", ".ini", ".sh",
            ".json", ".yaml", ".yml"}
NO_SUFFIX = {".ci/run"}

CITATIONS = [
    ("section sign", re.compile("\u00a7")),
    ("issue number", re.compile(r"\bissues?\s+#?\d", re.IGNORECASE)),
    ("#N reference", re.compile(r"(?<![\w&/#])#\d{2,}\b")),
    ("UNVERIFIED marker", re.compile(r"\bUNVERIFIED\b")),
    ("outside document", re.compile(
        r"ACLRT_REFERENCE|CANN_OPS_MODELS_REFERENCE|CANN_SDK_LAYOUT|SEED_SPEC|/work/shared")),
    ("the team's notes", re.compile(r"\btask brief\b|\bthe seed(?:'s\b|\s*\()", re.IGNORECASE)),
    ("'the reference'", re.compile(
        r"\bthe reference(?:'s\b|\s*[.;)]|\s+(?:is|says|does|did|names|leaves|gives|asks"
        r"|lists|supports|keeps)\b)", re.IGNORECASE)),
]
"""What counts as a citation, by name. ``the reference`` is flagged only where it stands for
a document ("as the reference.", "the reference's switch", "the reference says"); "a float32
reference", "reference count" and onnx's reference evaluator are left alone."""


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=30).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout ({exc}): the tracked files cannot be listed")
    names = [n for n in out.decode().split("\0") if n]
    return [n for n in names if n != SELF
            and (Path(n).suffix in SUFFIXES or n in NO_SUFFIX)]


def citations_in(text: str) -> list[tuple[int, str, str]]:
    """``(line number, kind, line)`` of every citation in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in CITATIONS:
            if pattern.search(line):
                found.append((number, kind, line.strip()))
    return found


def test_the_scanner_flags_citations_and_nothing_else():
    cited = ["(seed \u00a73.3)", "reference \u00a72.8", "issue 12", "(issues 8 and 9)",
             "see Issue #3", "fixed in #12", "a code, UNVERIFIED", "ACLRT_REFERENCE.md 2.4",
             "CANN_OPS_MODELS_REFERENCE section 5", "SEED_SPEC", "the task brief said",
             "the seed's level-2 merge", "the seed (4.1) quotes", "as the reference.",
             "the reference's switch", "where the reference is silent", "(as the reference)"]
    innocent = ["random.seed(3)", "seed=7", "a float32 reference with bf16 rounding",
                "reference count", "onnx's reference evaluator", "dereferences it",
                "MainThread (tid 1, #1)", "the last reference to it", "0x1 | flags",
                "# 12 bytes of header", "color #fff", "our choice: not documented"]
    assert [s for s in cited if not citations_in(s)] == []
    assert [(s, citations_in(s)) for s in innocent if citations_in(s)] == []


def test_no_tracked_file_cites_a_document_outside_the_repository():
    offenders = []
    for name in _tracked():
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # deleted in the work tree, or not text
        offenders += [f"{name}:{n}: [{kind}] {line}" for n, kind, line in citations_in(text)]
    assert offenders == [], "\n" + "\n".join(offenders)
