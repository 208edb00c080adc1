"""``npuemu bench --quick --only KEYS --json PATH`` end to end: the table and the JSON records'
shape, on the two cheapest figures that take both ways a figure runs (a fresh child with its
own embedded node; in the bench process); the matrix block of the table from records.

No performance threshold is asserted anywhere: the figures depend on the machine and its load.
What each figure measures is not under test here (``npuemu bench`` runs them all).
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
from npuemu.tools.bench import FIGURES
from npuemu.tools.bench.records import Record, format_table

KEYS = {"name", "value", "unit", "limit_name", "limit_value", "ratio"}
CHEAP = ("stream-create-destroy", "fragmentation")
"""A figure run in a child on its own 1-device node (its records come back through the
child's JSON, a target among them), and one run in the bench process (targets and none)."""
EXPECTED = {
    "stream create+destroy", "stream create+destroy, PERSISTENT",
    *(f"fragmentation, {level}, {how}" for level in ("no pooling", "level 1 (pooling)",
                                                     "level 1+2 (merge)")
      for how in ("contiguous blocks", "pages joined")),
}
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


def _bench(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPUEMU_") or
           k == "NPUEMU_TEST_SESSION"}
    try:
        return subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "bench", *args],
                              env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"npuemu bench {args} did not finish in {timeout} s\n{err.stdout}\n"
                    f"{err.stderr}")


@pytest.mark.integration
def test_bench_quick_only_writes_consistent_records(tmp_path) -> None:
    by_key = {f.key: f for f in FIGURES}
    assert by_key[CHEAP[0]].devices and by_key[CHEAP[1]].devices is None  # both ways
    before = set(shm.leftovers())
    path = tmp_path / "bench.json"
    res = _bench("--quick", "--only", ",".join(CHEAP), "--json", str(path), timeout=120)
    assert res.returncode == 0, f"--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
    out = res.stdout
    ran = re.findall(r"^\[(\d)/(\d)\] (\S+) \.\.\.", out, re.M)
    assert ran == [("1", "2", CHEAP[0]), ("2", "2", CHEAP[1])], out  # only these, in order

    records = json.loads(path.read_text())
    assert isinstance(records, list) and records
    names = [r["name"] for r in records]
    assert len(names) == len(set(names)), f"duplicate figure names: {names}"
    assert set(names) == EXPECTED, sorted(names)
    for r in records:
        assert set(r) == KEYS, r
        for key in ("name", "unit", "limit_name"):
            assert isinstance(r[key], str) and r[key], r
        for key in ("value", "limit_value", "ratio"):
            v = r[key]
            assert isinstance(v, (int, float)) and not isinstance(v, bool), r
            assert math.isfinite(v) and v >= 0, r
        assert r["limit_value"] > 0, r
        assert math.isclose(r["ratio"], r["value"] / r["limit_value"], rel_tol=1e-9), r
    lines = out.splitlines()
    for name in names:  # the printed table has every figure, with its target if it has one
        row = next(ln for ln in lines if ln.startswith(name + " "))
        has_target = name.endswith(("PERSISTENT", "level 1+2 (merge), pages joined"))
        assert bool(re.search(r": (yes|NO)$", row)) == has_target, row
    assert "i->j" not in out  # no matrix cells, no matrix block
    assert re.search(r"cleanup: 1 nodes and \d+ helper processes started, nothing left "
                     r"behind", out), out
    assert "total runtime" in out and "FAILED" not in out

    deadline = time.monotonic() + GRACE_S
    while (_bench_leftovers(before) or _bench_helpers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _bench_leftovers(before)
    assert not _bench_helpers()


def test_bench_refuses_unknown_keys() -> None:
    bad = _bench("--only", "nope", timeout=60)
    assert bad.returncode == 2 and "no figure nope" in bad.stderr, bad.stderr
    assert "sync-round-trip" in bad.stderr and "[1/" not in bad.stdout  # nothing ran


def test_matrix_cells_are_printed_as_one_block_below_the_rows() -> None:
    cards = 3
    cells = [Record(f"P2P 16 MiB {i}->{j}", 10.0 * (i + 1) + j, "GB/s", "np.copyto 16 MiB",
                    20.0) for i in range(cards) for j in range(cards) if (i, j) != (2, 0)]
    plain = Record("P2P 64 MiB", 15.0, "GB/s", "np.copyto 64 MiB", 30.0)
    lines = format_table([cells[0], plain, *cells[1:]]).splitlines()
    assert [ln.split()[0] for ln in lines[2:3]] == ["P2P"] and "0.5x" in lines[2]
    assert not [ln for ln in lines if re.match(r"P2P 16 MiB \d->\d", ln)]  # no table rows
    head = next(i for i, ln in enumerate(lines) if ln.startswith("P2P 16 MiB i->j, GB/s"))
    assert lines[head - 1] == "" and head == 4
    assert lines[head + 1].split() == [f"->{j}" for j in range(cards)], lines[head + 1]
    assert lines[head + 2].split() == ["0->", "10.0", "11.0", "12.0"]
    assert lines[head + 3].split() == ["1->", "20.0", "21.0", "22.0"]
    assert lines[head + 4].split() == ["2->", "-", "31.0", "32.0"]  # a missing cell
    assert lines[head + 5] == ("  limit (same run): np.copyto 16 MiB 20.0 GB/s; "
                               "ratio 0.5x .. 1.6x")
    assert len(lines) == head + 6
