"""Files the op layer reads, without a device: the disk cache's trust rule (owner, mode,
links, file type, on every open) and content checks (tampered, bad metadata), and the
single-op model file's field checks (every field corrupted gives its ACL code through
``acl.op.load``, never an exception; random corruption likewise, by hypothesis)."""

from __future__ import annotations

import json
import os
import stat
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuemu.host import acl
from npuemu.host.ops import (
    binaries,
    compiler,
    diskcache,
    models,
    opfile,
    registry,
    signature,
)
from npuemu.host.ops import desc as D
from npuemu.shared import errors

NOBODY = 65534
PARSE, DESERIALIZE, MISSING = 100013, 100012, 100016


# single-op model files ---------------------------------------------------------------------------
def add_file(rows: int = 4) -> bytes:
    """A valid single-op model of Add over two ``[rows, 8]`` float32 inputs."""
    op = registry.lookup("Add")
    ins = [D.TensorDesc(0, (rows, 8), 2), D.TensorDesc(0, (rows, 8), 2)]
    specs = [signature.spec(d) for d in ins]
    binary = compiler.build(op, specs, signature.outputs(op, specs, [], {}), {})
    return models.encode("Add", ins, ins[:1], None, binary)


def _parts(data: bytes) -> tuple[dict, dict]:
    model_def, tiling = opfile.partitions(data)
    return json.loads(model_def), json.loads(tiling)


def _pack(model: object, tiling: object, *, version: int = opfile.VERSION,
          extra: list[tuple[int, bytes]] = ()) -> bytes:
    """A file with these partitions as JSON (``bytes`` values are written as they are)."""
    blobs = [(opfile.MODEL_DEF, model), (opfile.TILING_DATA, tiling), *extra]
    blobs = [(k, v if isinstance(v, bytes) else json.dumps(v).encode()) for k, v in blobs]
    table = struct.pack("<I", len(blobs))
    offset = 0
    for kind, blob in blobs:
        table += struct.pack("<IQQ", kind, offset, len(blob))
        offset += len(blob)
    body = b"".join(b for _k, b in blobs)
    header = bytearray(opfile.HEADER)
    struct.pack_into("<III", header, 0, opfile.MAGIC, opfile.HEADER, version)
    struct.pack_into("<I", header, 76, len(table) + len(body))
    return bytes(header) + table + body


def _with(data: bytes, path: tuple, value: object, *, tiling: bool = False) -> bytes:
    """``data`` with one field of MODEL_DEF (or TILING_DATA) replaced, or deleted when
    ``value`` is ``_DELETE``."""
    model, til = _parts(data)
    node = til if tiling else model
    for step in path[:-1]:
        node = node[step]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return _pack(model, til)


_DELETE = object()


def _header(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def corrupted_variants() -> dict[str, tuple[bytes, int]]:
    """Name -> (file bytes, the code ``aclopLoad`` returns for it). Shared with the
    integration test, which loads them through a real card's process."""
    good = add_file()
    model, til = _parts(good)
    old = _pack(model, til, version=0x20000000, extra=[(opfile.TBE_KERNELS, b"\xe3code")])
    in0 = ("input_desc", 0)
    return {
        "good": (good, 0),
        "header_only": (good[:opfile.HEADER], PARSE),
        "length_short": (good[:-1], PARSE),
        "length_long": (good + b"\0", PARSE),
        "bad_magic": (b"XMOD" + good[4:], DESERIALIZE),
        "bad_header_size": (_header(good, 4, "<I", 255), DESERIALIZE),
        "old_version_with_code": (old, DESERIALIZE),
        "code_partition": (_pack(model, til, extra=[(opfile.TBE_KERNELS, b"\xe3code")]),
                           DESERIALIZE),
        "table_count_huge": (_header(good, opfile.HEADER, "<I", 10**6), DESERIALIZE),
        "table_count_zero": (_header(good, opfile.HEADER, "<I", 0), DESERIALIZE),
        "partition_past_end": (_header(good, opfile.HEADER + 4 + 12, "<Q", 1 << 40),
                               DESERIALIZE),
        "partition_twice": (_pack(model, til, extra=[(opfile.MODEL_DEF, model)]), DESERIALIZE),
        "model_def_not_json": (_pack(b"{not json", til), DESERIALIZE),
        "model_def_not_utf8": (_pack(b"\xff\xfe", til), DESERIALIZE),
        "model_def_a_list": (_pack([1, 2], til), DESERIALIZE),
        "model_def_deep": (_pack(b"[" * 100000 + b"]" * 100000, til), DESERIALIZE),
        "tiling_not_json": (_pack(model, b"nope"), DESERIALIZE),
        "no_op": (_with(good, ("op",), _DELETE), MISSING),
        "no_inputs": (_with(good, ("input_desc",), _DELETE), MISSING),
        "no_outputs": (_with(good, ("output_desc",), _DELETE), MISSING),
        "no_dtype": (_with(good, (*in0, "type"), _DELETE), MISSING),
        "no_format": (_with(good, (*in0, "format"), _DELETE), MISSING),
        "no_shape": (_with(good, (*in0, "shape"), _DELETE), MISSING),
        "no_tiling": (_with(good, ("tiling",), _DELETE, tiling=True), MISSING),
        "op_not_str": (_with(good, ("op",), 7), PARSE),
        "op_empty": (_with(good, ("op",), ""), PARSE),
        "op_unknown": (_with(good, ("op",), "NoSuchOp"), errors.ACL_ERROR_OP_TYPE_NOT_MATCH),
        "inputs_not_list": (_with(good, ("input_desc",), {"a": 1}), PARSE),
        "inputs_too_many": (_with(good, ("input_desc",), [model["input_desc"][0]] * 300),
                            PARSE),
        "desc_not_map": (_with(good, in0, 5), PARSE),
        "dtype_unknown": (_with(good, (*in0, "type"), 999), PARSE),
        "dtype_bool": (_with(good, (*in0, "type"), True), PARSE),
        "dtype_text": (_with(good, (*in0, "type"), "0"), PARSE),
        "dtype_float": (_with(good, (*in0, "type"), 0.0), PARSE),
        "format_unknown": (_with(good, (*in0, "format"), 999), PARSE),
        "storage_format_unknown": (_with(good, (*in0, "storage_format"), -7), PARSE),
        "shape_not_list": (_with(good, (*in0, "shape"), "4,8"), PARSE),
        "dim_below_minus_two": (_with(good, (*in0, "shape"), [4, -3]), PARSE),
        "dim_huge": (_with(good, (*in0, "shape"), [4, 1 << 40]), PARSE),
        "dim_float": (_with(good, (*in0, "shape"), [4, 8.0]), PARSE),
        "dim_text": (_with(good, (*in0, "shape"), [4, "8"]), PARSE),
        "unknown_rank_with_dims": (_with(good, (*in0, "shape"), [-2, 8]), PARSE),
        "too_many_dims": (_with(good, (*in0, "shape"), [1] * 200), PARSE),
        "elements_past_2_48": (_with(good, (*in0, "shape"), [1 << 30, 1 << 30]), PARSE),
        "range_not_pair": (_with(good, (*in0, "shape_range"), [[1]]), PARSE),
        "range_empty": (_with(good, (*in0, "shape_range"), [[5, 2]]), PARSE),
        "range_negative": (_with(good, (*in0, "shape_range"), [[-4, 2]]), PARSE),
        "const_not_hex": (_with(good, (*in0, "const"), "zz" * 128), PARSE),
        "const_wrong_size": (_with(good, (*in0, "const"), "00" * 3), PARSE),
        "const_not_text": (_with(good, (*in0, "const"), 12), PARSE),
        "const_on_dynamic": (_with(_with(good, (*in0, "shape"), [-1, 8]), (*in0, "const"), ""),
                             PARSE),
        "attr_not_list": (_with(good, ("attr",), {"a": 1}), PARSE),
        "attr_not_triple": (_with(good, ("attr",), [["alpha", "float"]]), PARSE),
        "attr_kind_unknown": (_with(good, ("attr",), [["alpha", "tensor", 1]]), PARSE),
        "attr_int_text": (_with(good, ("attr",), [["n", "int", "1"]]), PARSE),
        "attr_int_huge": (_with(good, ("attr",), [["n", "int", 1 << 70]]), PARSE),
        "attr_bool_int": (_with(good, ("attr",), [["b", "bool", 1]]), PARSE),
        "attr_list_mixed": (_with(good, ("attr",), [["l", "list_int", [1, "2"]]]), PARSE),
        "attr_list_list_flat": (_with(good, ("attr",), [["l", "list_list_int", [1, 2]]]),
                                PARSE),
        "attr_name_empty": (_with(good, ("attr",), [["", "int", 1]]), PARSE),
        "tiling_short": (_with(good, ("tiling",), [1, 1, 1], tiling=True), PARSE),
        "tiling_text": (_with(good, ("tiling",), ["1", 1, 1, 1], tiling=True), PARSE),
        "tiling_zero_blocks": (_with(good, ("tiling",), [0, 4, 4, 1], tiling=True), PARSE),
        "tiling_too_many_blocks": (_with(good, ("tiling",), [70000, 4, 4, 1], tiling=True),
                                   PARSE),
        "tiling_zero_tile": (_with(good, ("tiling",), [1, 4, 0, 1], tiling=True), PARSE),
        "tiling_bool": (_with(good, ("tiling",), [True, 4, 4, 1], tiling=True), PARSE),
        "one_input_for_add": (_with(good, ("input_desc",), model["input_desc"][:1]),
                              errors.ACL_ERROR_OP_INPUT_NOT_MATCH),
        "dtype_without_numpy": (_with(_with(good, (*in0, "type"), 13), ("input_desc", 1, "type"),
                                      13), errors.ACL_ERROR_UNSUPPORTED_DATA_TYPE),
    }


@pytest.fixture(autouse=True)
def _fresh_models():
    models.reset()
    yield
    models.reset()


VARIANTS = corrupted_variants()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_corrupted_field_is_its_code_through_acl_op_load(name):
    data, want = VARIANTS[name]
    assert acl.op.load(data) == want, acl.get_recent_err_msg()
    assert bool(models.STATIC) == (want == 0)


def test_empty_model_is_100000_and_a_good_file_carries_no_code():
    assert acl.op.load(b"") == errors.ACL_ERROR_INVALID_PARAM
    good = add_file()
    op = registry.lookup("Add")
    specs = [signature.spec(D.TensorDesc(0, (4, 8), 2))] * 2
    source = compiler.build(op, specs, signature.outputs(op, specs, [], {}), {}).source
    assert source.encode() not in good and b"k_Add" not in good
    model = opfile.decode(good)
    assert model.op_type == "Add" and model.tiling == compiler.check_tiling(
        json.loads(opfile.partitions(good)[1])["tiling"])


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_byte_corruption_never_raises(data):
    good = VARIANTS["good"][0]
    blob = bytearray(good)
    for _ in range(data.draw(st.integers(1, 8))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    ret = acl.op.load(bytes(blob[:cut]) if data.draw(st.booleans()) else bytes(blob))
    assert type(ret) is int
    models.reset()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats()
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=12)
FIELDS = [("op",), ("input_desc",), ("output_desc",), ("attr",), ("input_desc", 0),
          ("input_desc", 0, "type"), ("input_desc", 0, "format"), ("input_desc", 0, "shape"),
          ("input_desc", 0, "shape_range"), ("input_desc", 0, "const"),
          ("input_desc", 0, "storage_format"), ("output_desc", 0, "shape")]


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.sampled_from([*FIELDS, ("tiling",)]), json_values)
def test_any_value_in_any_field_is_a_code_never_an_exception(path, value):
    good = VARIANTS["good"][0]
    ret = acl.op.load(_with(good, path, value, tiling=path == ("tiling",)))
    assert type(ret) is int
    if ret == 0:  # accepted: the model is registered and its values are of the right types
        (record,) = models.STATIC.values()
        assert all(type(d) is int for s in record["ins"] for d in s.shape)
    models.reset()


def test_set_model_dir_skips_what_is_not_a_regular_usable_file(tmp_path):
    (tmp_path / "good.om").write_bytes(VARIANTS["good"][0])
    (tmp_path / "old.om").write_bytes(VARIANTS["old_version_with_code"][0])
    (tmp_path / "bad.om").write_bytes(VARIANTS["dtype_unknown"][0])
    os.mkfifo(tmp_path / "fifo.om")  # opened and read, it would block forever
    (tmp_path / "dir.om").mkdir()
    os.symlink("/dev/zero", tmp_path / "zero.om")  # endless
    assert models.set_model_dir(str(tmp_path)) == 1
    assert len(models.STATIC) == 1


def test_read_path_refuses_a_file_past_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(opfile, "FILE_MAX", 1000)
    (tmp_path / "big.om").write_bytes(b"\0" * 1001)
    with pytest.raises(opfile.ModelFileError) as info:
        opfile.read_path(str(tmp_path / "big.om"))
    assert info.value.code == PARSE


# the disk cache -------------------------------------------------------------------------------
@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_CACHE_PATH", str(tmp_path / "base"))
    monkeypatch.delenv("ASCEND_MAX_OP_CACHE_SIZE", raising=False)
    monkeypatch.setattr(diskcache, "OPTIONS", {})
    monkeypatch.setattr(diskcache, "STATS", dict.fromkeys(diskcache.STATS, 0))
    monkeypatch.setattr(diskcache, "_warned", set())
    return tmp_path / "base" / diskcache.SUBDIR


KEY = ("Add", "signature")


def test_created_dirs_are_0700_and_files_0600(disk, monkeypatch):
    old = os.umask(0)
    try:
        diskcache.write(KEY, {"n": 1}, "x = 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(disk.stat().st_mode) == 0o700
    assert stat.S_IMODE(disk.parent.stat().st_mode) == 0o700
    (f,) = disk.iterdir()
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert diskcache.read(KEY)[1] == "x = 1\n"
    assert b"x = 1" in f.read_bytes() and diskcache.MAGIC in f.read_bytes()


def _refused(disk, why: str) -> None:
    assert diskcache.read(KEY) is None
    assert diskcache.STATS["refused"] >= 1 and diskcache.STATS["reads"] == 0
    assert any(why in w for _p, w in diskcache._warned), diskcache._warned


@pytest.mark.parametrize("case", ["dir_0777", "dir_0770", "dir_other_owner", "base_0777",
                                  "base_other_owner", "dir_symlink"])
def test_an_untrusted_directory_is_never_read_nor_written(disk, tmp_path, case):
    diskcache.write(KEY, {"n": 1}, "x = 1\n")
    assert diskcache.read(KEY) is not None
    diskcache.STATS["reads"] = 0
    why = {"dir_0777": "mode 0777", "dir_0770": "mode 0770", "dir_other_owner": "uid 65534",
           "base_0777": "mode 0777", "base_other_owner": "uid 65534",
           "dir_symlink": "without following links"}[case]
    if case == "dir_0777":
        disk.chmod(0o777)
    elif case == "dir_0770":
        disk.chmod(0o770)
    elif case == "dir_other_owner":
        os.chown(disk, NOBODY, NOBODY)
    elif case == "base_0777":
        disk.parent.chmod(0o777)
    elif case == "base_other_owner":
        os.chown(disk.parent, NOBODY, NOBODY)
    else:
        real = tmp_path / "real"
        disk.rename(real)
        disk.symlink_to(real)
    _refused(disk, why)
    before = sorted(p.name for p in disk.iterdir())
    diskcache.write(("other",), {}, "y = 2\n")
    assert sorted(p.name for p in disk.iterdir()) == before  # nothing written there


def test_a_sticky_world_writable_ancestor_is_trusted(disk, tmp_path):
    diskcache.write(KEY, {"n": 1}, "x = 1\n")
    disk.parent.parent.chmod(0o1777)  # as /tmp
    assert diskcache.read(KEY) is not None
    disk.chmod(0o1777)  # but the cache directory itself never
    assert diskcache.read(KEY) is None


@pytest.mark.parametrize("case", ["other_owner", "mode_0666", "symlink", "fifo", "too_big"])
def test_an_untrusted_file_is_a_miss(disk, tmp_path, case):
    diskcache.write(KEY, {"n": 1}, "x = 1\n")
    (f,) = disk.iterdir()
    if case == "other_owner":
        os.chown(f, NOBODY, NOBODY)
    elif case == "mode_0666":
        f.chmod(0o666)
    elif case == "symlink":
        target = tmp_path / "elsewhere"
        f.rename(target)
        f.symlink_to(target)
    elif case == "fifo":
        f.unlink()
        os.mkfifo(f, 0o600)
    else:
        f.write_bytes(f.read_bytes() + b"\0" * diskcache.FILE_MAX)
    assert diskcache.read(KEY) is None and diskcache.STATS["reads"] == 0


def test_a_tampered_file_is_a_miss_and_is_deleted(disk):
    diskcache.write(KEY, {"n": 1}, "x = 1\n")
    (f,) = disk.iterdir()
    f.write_bytes(f.read_bytes().replace(b"x = 1", b"x = 2"))
    assert diskcache.read(KEY) is None and not f.exists()
    assert diskcache.STATS["corrupt"] == 1


@settings(max_examples=200, deadline=None, database=None)
@given(st.binary(max_size=200), st.text(max_size=40))
def test_parse_takes_only_intact_files(junk, source):
    digest = diskcache.key_digest(KEY)
    assert diskcache.parse(junk, digest) is None or junk.startswith(diskcache.MAGIC)
    data = diskcache.encode(digest, {"a": 1}, source)
    assert diskcache.parse(data, digest) == (({"a": 1, "key": digest}, source) if source
                                             else None)
    if len(junk) and source:
        i = len(junk) % len(data)
        flipped = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
        assert diskcache.parse(flipped, digest) is None


@pytest.mark.parametrize("meta", [
    {"tiling": ["1", "2", "3", "4"]}, {"tiling": [1, 2]}, {"tiling": None},
    {"name": "k_Sub"}, {"digest": "0" * 16}, {"workspace": -1}, {"workspace": "big"}])
def test_bad_metadata_in_a_cache_entry_is_rebuilt_not_a_type_error(disk, meta):
    op = registry.lookup("Add")
    specs = [signature.spec(D.TensorDesc(0, (4, 8), 2))] * 2
    outs = signature.outputs(op, specs, [], {})
    key = ("Add", "meta", tuple(meta))
    binary, from_disk = binaries.build(op, specs, outs, {}, key)
    assert not from_disk
    digest = diskcache.key_digest(key)
    found = diskcache.read(key)
    assert found is not None
    (f,) = disk.iterdir()
    f.write_bytes(diskcache.encode(digest, {**found[0], **meta}, found[1]))
    again, from_disk = binaries.build(op, specs, outs, {}, key)
    assert not from_disk and again.source == binary.source
    assert diskcache.STATS["corrupt"] == 1
    assert binaries.build(op, specs, outs, {}, key)[1]  # rebuilt entry is good again


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.one_of(st.integers(-(1 << 50), 1 << 50), st.booleans(), st.floats(),
                          st.text(max_size=3), st.none()), max_size=6))
def test_check_tiling_takes_four_ints_in_range_only(values):
    try:
        tiling = compiler.check_tiling(values)
    except ValueError:
        ok = (len(values) == 4 and all(type(v) is int for v in values)
              and 1 <= values[0] <= 65535 and all(1 <= v <= 1 << 48 for v in values[1:]))
        assert not ok
    else:
        assert compiler.tiling_list(tiling) == values


def _op_file(op_type: str, ins: list[D.TensorDesc], attr: dict[str, tuple[str, object]]) -> bytes:
    values = D.OpAttr()
    values.values.update(attr)
    return opfile.encode(op_type, ins, [], values, compiler.Tiling(1, 1, 1, 1))


def test_descriptions_the_op_library_chokes_on_are_codes_and_quick():
    huge_split = _op_file("Split", [D.TensorDesc(0, (0, 4), 2)],
                          {"split_dim": ("int", 0), "num_split": ("int", 1 << 40)})
    t0 = time.monotonic()
    assert acl.op.load(huge_split) == errors.ACL_ERROR_INVALID_PARAM  # the op's own refusal
    assert time.monotonic() - t0 < 5
    odd_reshape = _op_file("Reshape", [D.TensorDesc(12, (), 2), D.TensorDesc(0, (), 2)],
                           {"shape": ("list_int", (2,))})
    assert type(acl.op.load(odd_reshape)) is int  # whatever the op library raises inside
