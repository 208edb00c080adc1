"""The profiling bench figure runs on its own (``npuemu bench --only profiling``) and writes
consistent records. No performance threshold is asserted (the figures depend on the machine
and its load); that every record of the full-rate run reached the raw data is asserted: the
run synchronizes every 5000 tasks, so the default ring can never be full."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

NAMES = {"async submission, profiling on", "async submit+complete, profiling on",
         "profiling off: hook cost per task", "trace records kept at full rate"}


def test_bench_profiling_figure(tmp_path):
    path = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPUEMU_") or
           k == "NPUEMU_TEST_SESSION"}
    res = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "bench", "--quick",
                          "--only", "profiling", "--json", str(path)], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, f"--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
    records = {r["name"]: r for r in json.loads(path.read_text())}
    assert set(records) == NAMES
    for r in records.values():
        assert math.isfinite(r["value"]) and r["value"] > 0 and r["limit_value"] > 0, r
        assert math.isclose(r["ratio"], r["value"] / r["limit_value"], rel_tol=1e-9), r
    kept = records["trace records kept at full rate"]
    assert kept["value"] == kept["limit_value"], kept
    assert "records dropped" in res.stdout
