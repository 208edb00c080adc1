"""Sealed but malformed OM files: a real small OM file (``atc.convert`` of a small CNN) with
one field of one msgpack partition replaced at a time (a value of the wrong type, out of
range, huge, negative, or the field removed), re-sealed (checksum and length) so that only the
content is wrong. Every ``acl.mdl`` entry point that reads an OM file or image
(``query_size``, ``query_size_from_mem``, ``get_desc_from_file``, ``get_desc_from_mem`` and
every descriptor getter after them) and ``atc --mode=1`` return a code, never raise, and
agree with the reader: 145000 for bad content. The loads (``load_from_file``,
``load_from_mem``) run in a child program on a real card (``tests/progs/om_hostile_load.py``)
over a fixed sample of the same mutations. Also: raw header and partition-table damage,
``/dev/zero``, a FIFO, a directory, a header declaring a huge length."""

from __future__ import annotations

import copy
import json
import os
import random
import struct
import subprocess
import sys
import threading
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuemu.host.acl import mdl, util
from npuemu.host.models import atc, omfile
from npuemu.host.models.codes import ModelError
from tests.unit.test_models_omfile import _fixed_om

PARTS = ("model_def", "tensors", "programs", "op_refs", "memory_plan")
DELETE = "<delete>"


def _deep(n: int) -> list:
    value: list = [0]
    for _ in range(n):
        value = [value]
    return value


FIXED = [None, True, False, -1, 0, -(2**63), 2**63 - 1, 2**63, 2**64 - 1, 2**31, 1.5,
         float("nan"), float("inf"), "", "x", "a" * 70000, b"\xff\x00", [], {}, [[]],
         [-1], [2**40, 2**40], {"k": 1}, {1: 2}, _deep(40), DELETE]
"""Hostile values: wrong types, int64 edges and past them, huge, negative, deep, removal."""
VALUES = st.one_of(st.sampled_from(FIXED), st.integers(-(2**63), 2**64 - 1),
                   st.floats(), st.text(max_size=6), st.binary(max_size=6),
                   st.lists(st.integers(-3, 2**33), max_size=3))
PROG = "om_hostile_load.py"
BAD_CONTENT, BAD_PATH = 145000, 145002


def base() -> omfile.OmModel:
    return omfile.read(_fixed_om())


def paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a decoded partition: the partition itself, each key, each item."""
    out = [prefix]
    items = obj.items() if isinstance(obj, dict) else (
        enumerate(obj) if isinstance(obj, list) else ())
    for key, value in items:
        out += paths(value, (*prefix, key))
    return out


ALL_PATHS = [(part, p) for part in PARTS for p in paths(getattr(base(), part))]


def mutated(part: str, path: tuple, value: Any) -> bytes:
    """The base file with ``part[path]`` replaced by ``value`` (or removed), re-sealed."""
    om = copy.deepcopy(base())
    if not path:
        setattr(om, part, None if value == DELETE else value)
        return omfile.encode(om)
    target = getattr(om, part)
    for key in path[:-1]:
        target = target[key]
    if value == DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return omfile.encode(om)


def reader_code(data: bytes) -> int:
    try:
        omfile.read(data)
    except ModelError as exc:
        return exc.code
    return 0


def placed_code(path: str) -> int:
    """The code of ``omfile.read_file`` reading the weights into a place of their own (the
    model load's path: straight into device memory, hashed as read)."""
    try:
        omfile.read_file(path, lambda size: memoryview(bytearray(size)))
    except ModelError as exc:
        return exc.code
    return 0


def getters(desc: int) -> None:
    """Every descriptor getter, for every input and output and one index past them."""
    for i in range(mdl.get_num_inputs(desc) + 1):
        for get in (mdl.get_input_size_by_index, mdl.get_input_dims, mdl.get_input_name_by_index,
                    mdl.get_input_format, mdl.get_input_data_type):
            get(desc, i)
    for i in range(mdl.get_num_outputs(desc) + 1):
        for get in (mdl.get_output_size_by_index, mdl.get_output_dims, mdl.get_cur_output_dims,
                    mdl.get_output_name_by_index, mdl.get_output_format,
                    mdl.get_output_data_type):
            get(desc, i)
    mdl.get_dynamic_batch(desc)
    mdl.get_input_index_by_name(desc, "x")
    mdl.get_output_index_by_name(desc, "y")


def entry_codes(path: str, data: bytes | None = None) -> dict[str, int]:
    """The code of each entry point for the file at ``path`` (and ``data`` in memory)."""
    desc = mdl.create_desc()
    codes = {"query_size": mdl.query_size(path)[-1], "read_file_placed": placed_code(path),
             "get_desc_from_file": mdl.get_desc_from_file(desc, path)}
    getters(desc)
    if data is not None:
        ptr = util.bytes_to_ptr(data)
        codes["query_size_from_mem"] = mdl.query_size_from_mem(ptr, len(data))[-1]
        codes["get_desc_from_mem"] = mdl.get_desc_from_mem(desc, ptr, len(data))
        getters(desc)
    assert mdl.destroy_desc(desc) == 0
    codes["atc_mode_1_status"] = atc.run(["--mode=1", "--om", path, "--json", f"{path}.json"])
    return codes


def check_file(tmp: str, data: bytes) -> int:
    """Every entry point returns the reader's code for ``data``; returns that code."""
    want = reader_code(data)
    assert want in (0, BAD_CONTENT)
    path = os.path.join(tmp, "m.om")
    with open(path, "wb") as f:
        f.write(data)
    codes = entry_codes(path, data)
    assert codes.pop("atc_mode_1_status") == (1 if want else 0)
    assert codes == dict.fromkeys(codes, want), codes
    return want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(ALL_PATHS), value=VALUES)
def test_one_malformed_field_is_a_code_at_every_entry_point(tmp_path, where, value) -> None:
    part, path = where
    try:
        data = mutated(part, path, value)
    except (TypeError, ValueError, OverflowError):  # msgpack cannot even hold the value
        return
    check_file(str(tmp_path), data)


@pytest.mark.parametrize("value", [None, "x", -1, 2**64 - 1, DELETE])
def test_every_field_one_by_one(tmp_path, value) -> None:
    """Each place of every partition, with one hostile value: a code, never an exception."""
    refused = 0
    for part, path in ALL_PATHS:
        data = mutated(part, path, value)
        want = reader_code(data)
        assert want in (0, BAD_CONTENT), (part, path)
        refused += want == BAD_CONTENT
        ptr = util.bytes_to_ptr(data)
        assert mdl.query_size_from_mem(ptr, len(data))[-1] == want, (part, path)
        desc = mdl.create_desc()
        assert mdl.get_desc_from_mem(desc, ptr, len(data)) == want, (part, path)
        getters(desc)
        mdl.destroy_desc(desc)
    assert refused > len(ALL_PATHS) // 3  # most fields matter; free-form ones (report) do not


def _raw(offset: int, fmt: str, value: int) -> bytes:
    data = bytearray(_fixed_om())
    struct.pack_into(fmt, data, offset, value)
    return omfile.seal(data)


def _partition(ptype: int, blob: bytes) -> bytes:
    """The base file with partition ``ptype``'s bytes replaced by ``blob`` (same layout)."""
    data = bytearray(_fixed_om())
    count = struct.unpack_from("<I", data, 52)[0]
    for k in range(count):
        at = omfile.HEADER_SIZE + k * 24
        kind, _, off, size = struct.unpack_from("<IIQQ", data, at)
        if kind == ptype:
            new = blob[:size].ljust(size, b"\0")
            data[off:off + size] = new
            struct.pack_into("<Q", data, at + 16, min(len(blob), size))
    return omfile.seal(data)


RAW = {
    "huge_declared_length": _raw(44, "<Q", 2**62),
    "huge_partition_count": _raw(52, "<I", 2**32 - 1),
    "partition_offset_past_end": _raw(omfile.HEADER_SIZE + 8, "<Q", 2**63),
    "partition_size_past_end": _raw(omfile.HEADER_SIZE + 16, "<Q", 2**64 - 1),
    "name_not_utf8": omfile.seal(bytearray(_fixed_om()[:57]) + b"\xff\xfe" +
                          bytearray(_fixed_om()[59:])),
    "model_def_not_msgpack": _partition(omfile.MODEL_DEF, b"\xc1\xc1\xc1"),
    "model_def_deep": _partition(omfile.MODEL_DEF, b"\x91" * 100 + b"\x00"),
    "tensors_huge_array": _partition(omfile.TENSOR_DESC, b"\xdd\xff\xff\xff\xff"),
    "plan_a_string": _partition(omfile.MEMORY_PLAN, msgpack.packb("plan")),
}


@pytest.mark.parametrize("name", sorted(RAW))
def test_raw_header_and_partition_damage(tmp_path, name) -> None:
    assert check_file(str(tmp_path), RAW[name]) == BAD_CONTENT


def _in_thread(fn: Any, timeout: float = 20) -> Any:
    """``fn()`` in a thread: a hang fails the test instead of blocking it."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the call hangs"
    return out[0]


def test_dev_zero_fifo_and_directory_are_bad_paths(tmp_path) -> None:
    fifo = str(tmp_path / "fifo.om")
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo, str(tmp_path)):
        codes = _in_thread(lambda p=path: entry_codes(p))
        assert codes["query_size"] == codes["get_desc_from_file"] == BAD_PATH, (path, codes)
        assert codes["atc_mode_1_status"] == 1
        with pytest.raises(ModelError) as info:
            omfile.read_file(path)
        assert info.value.code == BAD_PATH


def test_header_declaring_a_huge_length_reads_only_the_file(tmp_path) -> None:
    path = tmp_path / "huge.om"
    path.write_bytes(RAW["huge_declared_length"])
    assert _in_thread(lambda: entry_codes(str(path)))["query_size"] == BAD_CONTENT


def test_atc_mode_1_prints_no_traceback(tmp_path) -> None:
    """The CLI itself, as a user runs it, on a malformed file and on /dev/zero."""
    bad = tmp_path / "bad.om"
    bad.write_bytes(mutated("tensors", (0, 3), "x"))
    for om in (str(bad), "/dev/zero"):
        res = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "atc", "--mode=1",
                              f"--om={om}", f"--json={tmp_path / 'out.json'}"],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert "ATC run failed" in res.stderr


SAMPLE = 160


@pytest.mark.integration
def test_malformed_files_load_with_a_code_on_a_real_card(run_prog, tmp_path) -> None:
    """A fixed sample of the mutations above (and the raw cases), loaded from the file and
    from memory on a real card: each is a code (the reader's 145000 for those it refuses;
    loads of the others may fail with the op compiler's codes), and the card still loads a
    good model afterwards."""
    rng = random.Random(22)
    expected: dict[str, int] = {}
    for k in range(SAMPLE):
        part, path = rng.choice(ALL_PATHS)
        data = mutated(part, path, rng.choice(FIXED))
        expected[f"{k:03d}.om"] = reader_code(data)
        (tmp_path / f"{k:03d}.om").write_bytes(data)
    for name, data in RAW.items():
        expected[f"raw_{name}.om"] = BAD_CONTENT
        (tmp_path / f"raw_{name}.om").write_bytes(data)
    good = tmp_path / "good.om.keep"
    good.write_bytes(_fixed_om())
    res = run_prog(PROG, str(tmp_path), str(good), env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G",
                                                   "NPUEMU_DDR": "256M"}, timeout=400)
    assert res.returncode == 0, f"child died ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    r = json.loads(line[len("RESULT "):])
    assert r["after"] == 0 and sorted(r["codes"]) == sorted(expected)
    for name, (from_file, from_mem) in r["codes"].items():
        assert from_file == from_mem, name
        if expected[name]:
            assert from_file == expected[name], name
        else:
            assert isinstance(from_file, int), name
    assert sum(1 for v in expected.values() if v) > SAMPLE // 3
