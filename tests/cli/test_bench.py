"""``npuemu bench --quick --json PATH`` end to end: the table and the JSON records' shape.

No performance threshold is asserted anywhere: the figures depend on the machine and its load.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time

import psutil
import pytest

from npuemu.shared import shm

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = {"name", "value", "unit", "limit_name", "limit_value", "ratio"}
QUICK_SIZES = ("4 KiB", "64 KiB", "1 MiB", "16 MiB", "64 MiB")
EXPECTED = {
    "sync round trip (PING)",
    "sync round trip vs sem",
    "idle CPU, 8 devices",
    "malloc+free (256 B)",
    "node start-up, 8 devices",
    *(f"{kind} {size}" for kind in ("H2D", "D2H", "D2D") for size in QUICK_SIZES),
    "P2P 64 MiB",
    "P2P bidirectional",
    "async submission (record_event)",
    "stream query",
    "event query",
    "synchronize idle stream",
    "empty kernel launch+sync",
    "copy+compute overlap",
    "stream create+destroy",
    "stream create+destroy, PERSISTENT",
}
P2P_CARDS = 4
MATRIX = {f"P2P 16 MiB {i}->{j}" for i in range(P2P_CARDS) for j in range(P2P_CARDS)}
"""Cells of the P2P bandwidth matrix: records in the JSON, one matrix block in the table."""
GRACE_S = 5.0


def _bench_leftovers(before: set[str]) -> list[str]:
    """New /dev/shm names of the bench's nodes: ``bench-<pid>``, ``bench-raw<pid>`` and
    embedded nodes ``e<pid>-*`` whose owner is gone."""
    left = []
    for entry in set(shm.leftovers()) - before:
        node = (entry[4:] if entry.startswith("sem.") else entry)[len(shm.PREFIX):]
        node = node.split(".", 1)[0]
        m = re.fullmatch(r"e(\d+)-[0-9a-f]+", node)
        if re.fullmatch(r"bench-(raw)?\d+", node) or (m and not psutil.pid_exists(int(m[1]))):
            left.append(entry)
    return left


def _bench_helpers() -> list[str]:
    """Our descendants still running bench code (orphans stay in our tree when the suite's
    conftest makes the test process a child subreaper)."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "npuemu.tools.bench" in " ".join(
                    p.cmdline()):
                found.append(f"{p.pid}: {' '.join(p.cmdline())}")
        except psutil.Error:
            continue
    return found


CORE_FIGURES = ("sync-round-trip", "idle-cpu", "node-start-up", "copy-bandwidth", "malloc-free",
                "execution", "stream-create-destroy", "p2p-bandwidth")
"""The runtime's own figures; the feature figures (ops, models, ...) have tests of their own."""


def test_bench_quick_writes_consistent_records(tmp_path) -> None:
    before = set(shm.leftovers())
    path = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPUEMU_") or
           k == "NPUEMU_TEST_SESSION"}
    try:
        res = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "bench", "--quick",
                              "--only", ",".join(CORE_FIGURES), "--json", str(path)],
                             env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"npuemu bench --quick did not finish in 120 s\n{err.stdout}\n{err.stderr}")
    assert res.returncode == 0, f"--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"

    records = json.loads(path.read_text())
    assert isinstance(records, list) and records
    names = [r["name"] for r in records]
    assert len(names) == len(set(names)), f"duplicate figure names: {names}"
    missing = (EXPECTED | MATRIX) - set(names)
    assert not missing, f"missing figures: {sorted(missing)}"
    assert not [n for n in names if "256 MiB" in n], "--quick must skip 256 MiB copies"
    for r in records:
        assert set(r) == KEYS, r
        for key in ("name", "unit", "limit_name"):
            assert isinstance(r[key], str) and r[key], r
        for key in ("value", "limit_value", "ratio"):
            v = r[key]
            assert isinstance(v, (int, float)) and not isinstance(v, bool), r
            assert math.isfinite(v) and v > 0, r
        assert math.isclose(r["ratio"], r["value"] / r["limit_value"], rel_tol=1e-9), r

    out = res.stdout
    for name in set(names) - MATRIX:  # the printed table has every figure
        assert name in out, name
    by_name = {r["name"]: r for r in records}
    for name in ("P2P 64 MiB", "P2P bidirectional"):
        assert by_name[name]["unit"] == "GB/s", by_name[name]
    assert by_name["P2P 64 MiB"]["limit_name"] == "np.copyto 64 MiB"
    # the matrix cells are printed as one block: a header, a row per source card, the limit
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("P2P 16 MiB i->j, GB/s"))
    assert lines[head + 1].split() == [f"->{j}" for j in range(P2P_CARDS)], lines[head + 1]
    for i in range(P2P_CARDS):
        row = lines[head + 2 + i].split()
        assert row[0] == f"{i}->" and len(row) == P2P_CARDS + 1, row
        assert all(float(v) > 0 for v in row[1:]), row
    assert lines[head + 2 + P2P_CARDS].strip().startswith("limit (same run): np.copyto 16 MiB")
    assert not [ln for ln in lines if re.match(r"P2P 16 MiB \d->\d", ln)], \
        "matrix cells must not also be table rows"
    assert "total runtime" in out
    assert "nothing left behind" in out, out

    deadline = time.monotonic() + GRACE_S
    while (_bench_leftovers(before) or _bench_helpers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _bench_leftovers(before)
    assert not _bench_helpers()


def test_bench_only_runs_the_named_figures_and_refuses_unknown_keys(tmp_path) -> None:
    path = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "bench", "--quick",
                          "--only", "ops,models", "--json", str(path)], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
    records = json.loads(path.read_text())
    assert records and "[1/2] ops" in res.stdout and "[2/2] models" in res.stdout
    for r in records:
        assert math.isfinite(r["value"]) and r["limit_value"] > 0, r
    bad = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "bench", "--only", "nope"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no figure nope" in bad.stderr, bad.stderr
