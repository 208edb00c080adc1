"""No code from files others can write, and frames that never carry byte code, against real
workers (the child program is ``tests/progs/trust_ops.py``):

- raw ``OP_LOAD`` frames with marshalled code, a crafted code object, bytes, or source that
  fails at compile or import in every way (SystemExit, KeyboardInterrupt, RecursionError,
  MemoryError, ...) and malformed ``OP_UNLOAD`` frames are 107000; the card is the same
  process, got its HBM back and still loads and runs a good kernel; a second host copying on
  the same card meanwhile sees nothing;
- past the per-client limit on op binaries the card answers 207012, and the op map makes
  room by evicting its oldest entry;
- the disk cache: a tampered entry is recompiled and never run; a forged, well-formed entry
  *is* run from a directory the user owns (the control: the payload works), and never from
  a directory or file another user owns or may write (0777, a parent 0777, chown 65534, a
  symlinked directory): compiled fresh, with the host-log warning;
- single-op model files: each corrupted field gives its code through ``aclopLoad`` in a
  process attached to a card, ``aclopSetModelDir`` skips them (and a FIFO, and an old file
  with code) and the good model runs.
"""

from __future__ import annotations

import glob
import json
import os
import time

import pytest

from npuemu.host.ops import compiler, diskcache
from tests.unit.test_trust_ops_files import corrupted_variants

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}
PROG = "trust_ops.py"
PARAM_INVALID, OVER_LIMIT = 107000, 207012
NOBODY = 65534


def program(run_prog, *argv: str, env: dict[str, str] | None = None,
            timeout: float = 120) -> dict:
    """The ``R`` of ``tests/progs/trust_ops.py`` run with ``argv`` (ENV + ``env``)."""
    res = run_prog(PROG, *argv, env={**ENV, **(env or {})}, timeout=timeout)
    assert res.returncode == 0, f"child failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, res.stdout + res.stderr
    return json.loads(lines[-1][len("RESULT "):])


# frames -----------------------------------------------------------------------------------------
def test_op_load_of_code_or_failing_source_is_107000_and_a_bystander_sees_nothing(
        module_node, run_prog, spawn_prog, tmp_path):
    name = module_node(devices=1, hbm="256M", ddr="64M")
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    good = spawn_prog(PROG, "bystander", str(stop),
                      env={"NPUEMU_NODE": name, "READY": str(ready)})
    t0 = time.monotonic()
    while not ready.exists():
        assert good.poll() is None, good.communicate()
        assert time.monotonic() - t0 < 60, "the bystander never got going"
        time.sleep(0.05)
    try:
        r = program(run_prog, "raw", env={"NPUEMU_NODE": name})
    finally:
        stop.touch()
    out, err = good.communicate(timeout=60)
    assert good.returncode == 0, out + err
    g = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert len(r["codes"]) == 19
    assert {k: v for k, v in r["codes"].items() if v != ["err", PARAM_INVALID]} == {}
    assert r["hbm_back"] and r["same_worker"] and r["ping"] == "ok" and r["good_kernel"]
    assert g["rounds"] >= 3 and g["failures"] == 0 and g["same_worker"]


@pytest.mark.slow
def test_past_the_op_binary_limit_207012_and_the_op_map_makes_room(run_prog):
    r = program(run_prog, "limit", env={"NPUEMU_OP_INCREMENTAL": "0"}, timeout=240)
    assert r["refused_with"] == OVER_LIMIT and r["loaded"] == 1 << 15
    assert r["refused"] == [OVER_LIMIT] and r["loaded_after_refusal"] == 0  # loads pipelined
    assert r["unload"] == ["ok", "ok"]
    assert r["adds"] == [[0, [True]]] * 3 and r["evictions"] == 1  # the third shed the first
    assert r["raw_again"] == ["err", OVER_LIMIT] and r["ping"] == "ok"


# the disk cache -------------------------------------------------------------------------------
def compile_run(run_prog, base, logs) -> dict:
    return program(run_prog, "compile", env={"ASCEND_CACHE_PATH": str(base),
                                            "ASCEND_GLOBAL_LOG_LEVEL": "2",
                                            "ASCEND_PROCESS_LOG_PATH": str(logs)})


def host_warnings(logs) -> str:
    text = ""
    for path in glob.glob(os.path.join(str(logs), "debug", "plog", "*.log")):
        with open(path) as f:
            text += f.read()
    return text


def forge(entry, marker, *, fix_hash: bool) -> bytes:
    """The cache file ``entry`` with a payload (writes ``marker`` when run) before its
    kernel; a well-formed entry if ``fix_hash``, else the old hash is kept (tampered)."""
    data = entry.read_bytes()
    digest = entry.name[: -len(".npuop")]
    meta, source = diskcache.parse(data, digest)
    payload = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n" + source
    if not fix_hash:
        return data.replace(source.encode(), payload.encode())
    meta = {k: v for k, v in meta.items() if k != "key"}
    meta["digest"] = compiler.source_digest(payload)
    return diskcache.encode(digest, meta, payload)


CASES = {
    "tampered": ("", "is corrupt"),
    "own_dir": ("", None),
    "dir_0777": ("mode 0777", None),
    "parent_0777": ("mode 0777", None),
    "dir_other_owner": ("uid 65534", None),
    "file_other_owner": ("uid 65534", None),
    "dir_symlink": ("without following links", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_disk_cache_runs_only_what_no_one_else_could_write(run_prog, tmp_path, case):
    base, marker = tmp_path / "base", tmp_path / "marker"
    first = compile_run(run_prog, base, tmp_path / "log1")
    assert first["ret"] == 0 and first["right"] == [True]
    assert first["stats"]["compiles"] == 1 and first["stats"]["disk_writes"] == 1
    cache_dir = base / diskcache.SUBDIR
    (entry,) = cache_dir.iterdir()
    entry.write_bytes(forge(entry, marker, fix_hash=case != "tampered"))
    if case == "dir_0777":
        cache_dir.chmod(0o777)
    elif case == "parent_0777":
        base.chmod(0o777)
    elif case == "dir_other_owner":
        os.chown(cache_dir, NOBODY, NOBODY)
    elif case == "file_other_owner":
        os.chown(entry, NOBODY, NOBODY)
    elif case == "dir_symlink":
        cache_dir.rename(tmp_path / "real_kernels")
        cache_dir.symlink_to(tmp_path / "real_kernels")
    r = compile_run(run_prog, base, tmp_path / "log2")
    assert r["ret"] == 0 and r["right"] == [True]
    stats, warnings = r["stats"], host_warnings(tmp_path / "log2")
    if case == "own_dir":  # the control: a well-formed entry in the user's own cache runs
        assert marker.exists() and stats["disk_hits"] == 1 and stats["compiles"] == 0
        return
    assert not marker.exists(), "the payload ran"
    assert stats["compiles"] == 1 and stats["disk_hits"] == 0
    refused, corrupt = CASES[case]
    if corrupt:
        assert stats["disk_corrupt"] == 1 and corrupt in warnings
    else:
        assert stats["disk_refused"] >= 1 and refused in warnings, warnings
        assert "compiled fresh" in warnings or case == "file_other_owner"


# single-op model files ------------------------------------------------------------------------
def test_single_op_files_are_checked_field_by_field_and_carry_no_code(run_prog, tmp_path):
    variants = corrupted_variants()
    folder, each = tmp_path / "models", tmp_path / "each"
    folder.mkdir()
    each.mkdir()
    for name, (data, _code) in variants.items():
        (each / name).write_bytes(data)
    (folder / "add.om").write_bytes(variants["good"][0])
    (folder / "old.om").write_bytes(variants["old_version_with_code"][0])
    (folder / "bad.om").write_bytes(variants["dim_huge"][0])
    os.mkfifo(folder / "fifo.om")
    r = program(run_prog, "models", str(folder), str(each))
    assert r["dir"] == 0 and r["stats"]["static_entries"] == 1
    assert r["load"] == {name: code for name, (_data, code) in variants.items()}
    assert r["ret"] == 0 and r["right"] == [True] and r["ping"] == "ok"
