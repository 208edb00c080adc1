"""pyACL behaviour that real programs written for hardware rely on.

Each scenario is one pyACL program (``tests/progs/pyacl_compat.py``, or
``pyacl_lifecycle.py`` for those that start before ``aclInit``) in a fresh interpreter with
an embedded node; the child records what it saw in ``R`` and the assertions are made here.
"""

from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import sys

import pytest
from childprog import result_of, run_program

from tests.conftest import PROGS

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
INVALID_PARAM = 100000
REPEAT_INITIALIZE = 100002
REPEAT_FINALIZE = 100037
BAD_ALLOC = 200000
RT_PARAM_INVALID = 107000
THREAD_SUBSCRIBE = 107012
NO_DEVICE = 207004

PROG = "pyacl_compat.py"


def scenario(run_prog, name: str, env: dict[str, str] | None = None,
             timeout: float = 90) -> dict:
    """Run the scenario ``name`` of the program in a child with ENV (+ ``env``); returns its
    ``R``."""
    return run_program(run_prog, PROG, name, env={**ENV, **(env or {})}, timeout=timeout)


def test_thread_ids_are_pthread_ids_and_subscriptions_end_with_their_stream(run_prog):
    r = scenario(run_prog, "thread_ids")
    assert r["start"] == 0 and r["tid_is_ident"]
    assert r["subscribe"] == 0 and r["subscribe_again"] == 100033
    assert r["bogus_tid"] == RT_PARAM_INVALID and r["none_tid"] == RT_PARAM_INVALID
    assert r["got"] == [7, True]
    assert not r["waiter_alive"] and r["waiter_ret"] == THREAD_SUBSCRIBE
    assert r["stop"] == 0


def test_memcpy_direction_from_addresses_and_memset_async_on_pinned_memory(run_prog):
    r = scenario(run_prog, "memcpy_direction")
    assert r == {"wrong_kind": 0, "back": True, "kind_list": RT_PARAM_INVALID,
                 "kind_99": RT_PARAM_INVALID, "memset_pinned": 0, "pinned_bytes": True,
                 "memset_pageable": RT_PARAM_INVALID}


def test_calls_without_parameters_data_buffers_app_log_and_type_sizes(run_prog, tmp_path):
    r = scenario(run_prog, "no_parameters", env={"ASCEND_PROCESS_LOG_PATH": str(tmp_path)})
    assert r["soc"] and r["rt_soc"] and r["version"] == [1, 17, 0, 0]
    assert r["run_mode"] == ["int", "int"] and r["run_mode_value"] == 1
    assert r["device"] == [0, 0] and r["status_type"] == "int"
    assert r["addr"] and r["size"] == [64, 64] and r["update"] == 0 and r["after"] == [32, 32]
    assert r["empty"] == 0 and r["destroy"] == 0 and r["destroy_again"] == INVALID_PARAM
    assert r["gone"] == [0, 0]
    assert r["sizes"] == [4, 2, 1, 4, 8, 8, 1, 0, 2, 0, 8]
    assert r["bad_level"] is None
    logs = "".join(pathlib.Path(p).read_text()
                   for p in glob.glob(f"{tmp_path}/debug/plog/plog-*.log"))
    assert "[ERROR] APP(" in logs and "app says hello" in logs
    assert "debug is filtered" not in logs


def test_persistent_stream_resources_are_reused(run_prog):
    r = scenario(run_prog, "persistent_stream")
    assert r == {"reused_id": True, "sync": 0, "bytes": True, "query": [0, 0],
                 "fresh_id": True}


def test_bad_arguments_return_codes_not_internal_exceptions(run_prog):
    r = scenario(run_prog, "bad_arguments")
    assert r["free_host_str"] == RT_PARAM_INVALID
    assert r["malloc_host_huge"] == [0, BAD_ALLOC]
    assert r["attrs_none"] == INVALID_PARAM
    assert r["ptr_to_bytes"] == ["ValueError"] * 4
    assert r["empty_ok"] and r["still_alive"] == 0


def test_finalize_behaves_as_acl_finalize(run_prog):
    got = run_program(run_prog, "pyacl_lifecycle.py", "finalize", env=ENV, timeout=90)
    assert got == {"finalize_before_init": 0, "finalize_twice": REPEAT_FINALIZE, "init": 0,
                   "init_twice": REPEAT_INITIALIZE, "finalize": 0, "after_finalize": True,
                   "sync": 0, "finalize_again": REPEAT_FINALIZE, "reinit": 0, "final": 0}


def test_peer_access_does_not_survive_reset_device(run_prog):
    r = scenario(run_prog, "peer_access_reset")
    assert r == {"before": [1, 0], "after": [0, 0], "enable_again": 0}


@pytest.mark.parametrize("var,value", [("NPUEMU_MAX_STREAMS", "abc"),
                                       ("NPUEMU_SOC", "Ascend910B9"),
                                       ("NPUEMU_TOPOLOGY", "0-9"),
                                       ("NPUEMU_DEVICES", "0")])
def test_bad_configuration_is_one_line_and_a_code(run_prog, var, value):
    res = run_prog("pyacl_lifecycle.py", "bad_configuration", env={**ENV, var: value},
                   timeout=60)
    r = result_of(res)
    assert r["init"] == INVALID_PARAM and r["set_device"] == NO_DEVICE
    assert r["count"] == [0, NO_DEVICE]
    assert var in r["msg"]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and var in lines[0] and "Traceback" not in res.stderr


def test_import_acl_everywhere_and_a_real_pyacl_wins(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = os.path.join(PROGS, "acl_everywhere.py")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert out.stdout.split() == ["npuemu.host.acl"] * 3, out.stderr
    real = tmp_path / "real"
    real.mkdir()
    (real / "acl.py").write_text("REAL = True\n")
    out = subprocess.run([sys.executable, "-c", "import acl; print(acl.REAL)"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**env, "PYTHONPATH": str(real)})
    assert out.stdout.strip() == "True", out.stderr


def test_npuemu_run_module(tmp_path):
    pkg = tmp_path / "prog"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys, acl\nprint(acl.__name__, sys.argv[1:])\n")
    out = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "run", "-m", "prog", "a",
                          "--flag"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "npuemu.host.acl ['a', '--flag']"


def test_callback_tables_under_concurrent_subscribe_launch_and_destroy(run_prog):
    """Stress for the threading model of host/core/callbacks.py: several threads subscribe,
    launch blocking callbacks, serve them, unsubscribe and destroy their streams while the
    report thread walks the subscriber map and exception callbacks come and go."""
    r = scenario(run_prog, "callback_tables", timeout=240)
    assert r == {"hung": 0, "codes": [], "served": 100, "reporter_alive": True}


def test_readme_pyacl_example_runs_as_written(run_py):
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## The pyACL face"):]
    example = section[section.index("```python") + len("```python"):]
    example = example[:example.index("```")]
    res = run_py(example + "\nprint('example ok', ret)\n",
                 env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"},
                 timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("example ok 0")
