"""acl.op against real workers: the pyACL single-op sample flow, cache keying, LRU capacity
(API, aclInit-style setter, env var, bad values), HBM accounting of kernel binaries through
eviction and reset, re-tile and dynamic shapes against full compiles, single-op models,
the disk cache across two processes (incl. a corrupted file), and bad input codes.

Each scenario is one function of a pyACL program (``tests/progs/ops_cache.py``) run in a
fresh interpreter; the child prints what it saw as ``R`` and the assertions are here."""

from __future__ import annotations

import os

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

PROG = "ops_cache.py"


def scenario(run_prog, name: str, *args: str, env: dict[str, str] | None = None,
             timeout: float = 60) -> dict:
    """The ``R`` of the scenario ``name`` of the program (with ``args``), run with ENV (+
    ``env``)."""
    return run_program(run_prog, PROG, name, *args, env={**ENV, **(env or {})},
                       timeout=timeout)


def test_pyacl_sample_flow_compile_then_execute_v2(run_prog):
    r = scenario(run_prog, "sample_flow")
    assert r["before"] == 100024 and r["compile"] == 0 and r["exec"] == 0 and r["ok"]
    assert r["handle"] == [0, 0, 100021, 100022]
    assert r["cast"] == 0 and r["cast_ok"] and r["cast_handle"] == [0, 0]
    assert r["infer"] == [0, 2, 3]
    assert r["stats"]["compiles"] == 2 and r["stats"]["hits"] >= 3  # Add, Cast


def test_keying_attr_change_is_a_miss_and_lru_capacity(run_prog, tmp_path):
    r = scenario(run_prog, "keying_lru",
                 env={"NPUEMU_OP_INCREMENTAL": "0", "ASCEND_GLOBAL_LOG_LEVEL": "0",
                      "ASCEND_PROCESS_LOG_PATH": str(tmp_path)})
    assert r["keyed"]["compiles"] == 2 and r["keyed"]["hits"] == 1
    assert r["bad"] == [100000, 100000]
    assert r["shrunk"]["entries"] == 2
    assert r["evicting"]["entries"] == 2 and r["evicting"]["evictions"] >= 2
    assert r["lru_hit"] == [2.0, 2.0, 2.0] and r["evicted"] == 100024
    assert r["hbm"] > 0 and "op kernels" in r["usage_names"]
    assert r["null_attr"] == 100000 and r["bad_attr"] == 100000
    with open(r["plog"]) as f:  # at DEBUG every compile and eviction is logged
        log = f.read()
    assert log.count("op compile Add") == r["evicting"]["compiles"]
    assert log.count("op cache evict Add") == r["evicting"]["evictions"]


def test_env_capacity_and_hbm_back_to_zero_after_eviction_and_reset(run_prog):
    r = scenario(run_prog, "env_capacity",
                 env={"ASCEND_OP_CACHE_MAX_SIZE": "1", "NPUEMU_OP_INCREMENTAL": "0"})
    assert r["cap"] == 1
    assert r["one_entry"] == [1, True]
    assert r["after_clear"] == 0 and r["again"]
    freed, base = r["mem_info_back"]
    assert freed == base > 0  # the card's free HBM grows by exactly the kernels' bytes
    assert r["after_reset"] == [0, 0]


def test_retile_and_dynamic_shapes_give_the_numbers_of_a_full_compile(run_prog):
    r = scenario(run_prog, "retile_dynamic")
    assert r["retile"] == {"3": True, "40": True, "5000": True}
    assert r["stats"]["compiles"] == 1 and r["stats"]["retiles"] == 2
    assert r["dyn_compile"] == 0 and r["dyn"] == [True, True, True]
    assert r["out_of_range"] == 100024
    assert r["dyn_stats"]["dynamic_tiles"] == 4
    assert r["writeback"] == [0, 5, True]
    assert r["unknown_rank"] == [True, True, True]


def test_bad_input_codes_and_nothing_left_behind(run_prog):
    r = scenario(run_prog, "bad_inputs")
    c = r["codes"]
    assert c == {"unknown_type": 100020, "too_many_inputs": 100021, "desc_buf_mismatch": 100000,
                 "buffer_too_small": 100000, "dtype": 100026, "format": 100027,
                 "dead_desc": 100000, "engine": 100000, "compile_type": 200001,
                 "bad_out_desc": 100000}
    assert r["bad_desc"] == 0 and r["gather"] == 507018 and r["still_ok"] == [2.0] * 4


def test_single_op_models_round_trip_and_static_entries_never_age(run_prog, tmp_path):
    r = scenario(run_prog, "single_op_models", str(tmp_path), env={"NPUEMU_OP_INCREMENTAL": "0"})
    assert r["dir"] == [0, 100002] and r["missing"] == 100000
    assert r["first"] == [6.0, 6.0] and r["still"] == [6.0, 6.0]
    assert r["stats"]["static_entries"] == 1 and r["stats"]["compiles"] == 3


def test_disk_cache_across_two_processes_and_a_corrupted_file(run_prog, tmp_path):
    env = {"ASCEND_CACHE_PATH": str(tmp_path), "NPUEMU_OP_INCREMENTAL": "0"}
    one = scenario(run_prog, "disk_cache", env=env)
    assert one["stats"]["compiles"] == 2 and one["stats"]["disk_writes"] == 2
    two = scenario(run_prog, "disk_cache", env=env)
    assert two["stats"]["compiles"] == 0 and two["stats"]["disk_hits"] == 2
    files = sorted((tmp_path / "npuemu_kernels").iterdir())
    assert len(files) == 2
    data = files[0].read_bytes()
    files[0].write_bytes(data[:-40] + bytes(40))
    three = scenario(run_prog, "disk_cache", env=env)
    assert three["stats"]["disk_corrupt"] == 1 and three["stats"]["compiles"] == 1
    assert three["stats"]["disk_hits"] == 1
    assert len(list((tmp_path / "npuemu_kernels").iterdir())) == 2
    assert not [f for f in os.listdir(tmp_path / "npuemu_kernels") if f.startswith(".tmp")]


def test_op_failure_reaches_sync_exception_callbacks_and_stop_mode(run_prog):
    r = scenario(run_prog, "op_failure")
    assert r["sync"] == 507018 and r["callback"] == [507018]
    assert r["dropped"] == [0.0] * 4          # stop-on-failure dropped the Add behind it
    assert r["after"] == [2.0] * 4
