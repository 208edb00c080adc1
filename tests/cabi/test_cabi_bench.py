"""The bench's C ABI figures (``npuemu bench --only capi``): the C program builds against the
SDK tree, runs, and its four records come out beside the Python face's (their targets are
checked by the table; timing on a shared machine is not asserted here)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import _run

pytestmark = pytest.mark.integration


def test_bench_capi_figures(tmp_path):
    path = tmp_path / "bench.json"
    res = _run([sys.executable, "-m", "npuemu.tools.cli", "bench", "--quick", "--only", "capi",
                "--json", str(path)], None, 240)
    assert res.returncode == 0, res.stdout + res.stderr
    records = {r["name"]: r for r in json.loads(path.read_text())}
    assert set(records) == {"C malloc+free", "C empty kernel launch+sync", "C H2D 64 MiB",
                            "C D2H 64 MiB"}
    assert records["C malloc+free"]["limit_name"] == "acl.rt malloc+free"
    assert all(r["value"] > 0 and r["limit_value"] > 0 for r in records.values())
