"""What programs written for real cards check of pyACL, through real workers (the child
program ``tests/progs/fidelity.py``): ``get_device_utilization_rate``'s dict keys,
``start_thread``/``stop_thread``'s argument errors in pyACL's own texts, 100024 for an op
type with no compiled model, ``dir()`` of the submodules, the firmware's share of HBM and DDR
on an idle card (and ``npuemu status`` counting it as used, as ``aclrtGetMemInfo`` leaves it
out of free), and ``ASCEND_SLOG_PRINT_TO_STDOUT``."""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration
PROG = "fidelity.py"
SMALL = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
MiB, GiB = 1 << 20, 1 << 30


def run(run_prog, scenario: str, env: dict[str, str] | None = None) -> dict:
    return run_program(run_prog, PROG, scenario, env={**SMALL, **(env or {})}, timeout=120)


def test_utilization_rate_has_pyacls_keys(run_prog):
    r = run(run_prog, "utilization")
    rates, ret = r["rates"]
    assert ret == 0
    assert set(rates) == {"cube_utilization", "vector_utilization", "aicpu_utilization",
                          "memory_utilization", "utilization_extend"}
    assert rates["memory_utilization"] == -1 and rates["utilization_extend"] == 0
    assert all(0 <= rates[k] <= 100 for k in ("cube_utilization", "vector_utilization",
                                              "aicpu_utilization"))
    bad, ret = r["bad"]
    assert ret != 0 and set(bad) == set(rates) and not any(bad.values())  # pyACL's zeroed record


def test_thread_argument_errors_are_pyacls(run_prog):
    r = run(run_prog, "thread_args")
    assert r["start"] == ["function takes exactly 2 arguments (0 given)",
                          "function takes exactly 2 arguments (1 given)",
                          "function takes exactly 2 arguments (3 given)",
                          "parameter must be callable",
                          "start_thread() takes no keyword arguments"]
    assert r["stop"] == ["function takes exactly 1 argument (0 given)",
                         "argument 1 must be int, not str",
                         "function takes exactly 1 argument (2 given)"]
    assert r["run"] == [0, 0, ["ran"], 100000]  # joined once; then an unknown id


def test_an_op_type_without_a_compiled_model_is_100024(run_prog):
    r = run(run_prog, "op_without_model")
    assert r["codes"] == {"Relu": 100024, "NoSuchOpType": 100024}
    assert r["handle"] == 100024
    assert r["compile"] == 100020  # compiling needs the op's definition


def test_dir_of_the_submodules_shows_pyacl_names_only(run_prog):
    r = run(run_prog, "module_names")
    for names in r.values():
        assert names == sorted(names) and all(not n.startswith("_") for n in names)
    assert {"set_device", "malloc", "get_device_utilization_rate", "memcpy"} <= set(r["rt"])
    assert not {"memory", "device", "stream", "with_result", "Any", "annotations"} & set(r["rt"])
    assert r["util"] == ["NPY_TYPES", "STOP_THREAD_TIMEOUT_S", "bytes_to_ptr",
                         "numpy_contiguous_to_ptr", "numpy_to_ptr", "ptr_to_bytes",
                         "ptr_to_numpy", "start_thread", "stop_thread"]
    assert "execute_v2" in r["op"] and not {"executor", "runtime", "T", "D"} & set(r["op"])


def test_idle_card_of_profile_size_reserves_hbm_and_ddr_and_status_agrees(
        npuemu_cli, node_name, run_prog, status, tmp_path):
    """A card of the SoC's own sizes (64 GiB HBM, 8 GiB DDR: sparse shared memory) keeps a
    firmware share of both; ``aclrtGetMemInfo`` leaves it out of free and ``npuemu status``
    shows it as used, so both tell the same used figure on an idle card."""
    res = npuemu_cli("start", "--name", node_name, "--devices", "1",
                     env={"TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stdout + res.stderr
    r = run_program(run_prog, PROG, "idle_memory", env={"NPUEMU_NODE": node_name},
                    timeout=120)
    (hbm_free, hbm_total, ret1), (ddr_free, ddr_total, ret2) = r["hbm"], r["ddr"]
    assert ret1 == ret2 == 0
    assert (hbm_total, ddr_total) == (64 * GiB, 8 * GiB)
    assert hbm_total - hbm_free == 3 * GiB and ddr_total - ddr_free == 1 * GiB
    card = status(node_name)["devices"][0]
    assert (card["hbm_used"], card["ddr_used"]) == (3 * GiB, 1 * GiB), card


def test_a_small_card_reserves_nothing(run_prog):
    r = run(run_prog, "idle_memory")
    assert [r["hbm"][0], r["ddr"][0]] == [256 * MiB, 64 * MiB]


@pytest.mark.parametrize("var", ["ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_LOG_PRINT_TO_STDOUT"])
def test_print_to_stdout_prints_the_host_log_line(run_prog, var, tmp_path):
    env = {**SMALL, var: "1", "ASCEND_PROCESS_LOG_PATH": str(tmp_path)}
    res = run_prog(PROG, "failing_call", env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("[ERROR] ")]
    assert lines and "set_device" in lines[0], res.stdout


def test_without_print_to_stdout_the_line_stays_in_the_log(run_prog, tmp_path):
    env = {**SMALL, "ASCEND_PROCESS_LOG_PATH": str(tmp_path)}
    res = run_prog(PROG, "failing_call", env=env, timeout=60)
    assert res.returncode == 0 and "[ERROR]" not in res.stdout, res.stdout
    logs = list(tmp_path.glob("debug/plog/plog-*.log"))
    assert logs and "[ERROR]" in logs[0].read_text()
