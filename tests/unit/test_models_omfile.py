"""OM files and the ATC model path: round trip, alignment, the reader's refusals (truncated,
corrupted, newer version, malformed) with the real runtime's load codes and never a crash, the
``--mode=1`` dump, the CLI argument handling and dynamic batch gears."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile

import numpy as np
import onnx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from npuemu.host.models import atc, omfile
from npuemu.host.models.codes import (
    ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
    ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID,
    ACL_ERROR_GE_PARAM_INVALID,
    ModelError,
)
from tests.unit.test_models_frontend import light


def small_cnn(batch: int | str = 1) -> onnx.ModelProto:
    """Conv -> Relu -> two branches (MaxPool, AvgPool) -> Concat -> Flatten -> Gemm."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((5, 128)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2],
                         name="maxpool"),
        helper.make_node("AveragePool", ["r"], ["a"], kernel_shape=[2, 2], strides=[2, 2],
                         name="avgpool"),
        helper.make_node("Concat", ["m", "a"], ["cat"], axis=1, name="concat"),
        helper.make_node("Flatten", ["cat"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                           [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5])], [w, b, fc])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture
def cnn_path(tmp_path) -> str:
    path = tmp_path / "cnn.onnx"
    onnx.save(small_cnn(), path)
    return str(path)


@pytest.fixture
def om_bytes(cnn_path, tmp_path) -> bytes:
    report = atc.convert(cnn_path, tmp_path / "cnn", "Ascend910B1")
    with open(report["om"], "rb") as f:
        return f.read()


def test_round_trip_keeps_weights_tasks_and_plan(cnn_path, tmp_path) -> None:
    report = atc.convert(cnn_path, tmp_path / "cnn", "Ascend910B1")
    assert report["om"] == str(tmp_path / "cnn.om") and os.path.getsize(report["om"]) == \
        report["bytes"]
    assert sorted(os.listdir(tmp_path)) == ["cnn.om", "cnn.onnx"]  # no temporary left
    om = omfile.read_file(report["om"])
    assert om.version == omfile.FORMAT_VERSION and om.name == "small_cnn" and not om.dynamic
    assert om.model_def["inputs"] == ["x"] and om.model_def["outputs"] == ["y"]
    assert om.model_def["soc_version"] == "Ascend910B1"
    weights = {t[0]: t for t in om.tensors if t[2] == "weight"}
    src = {i.name: numpy_helper.to_array(i) for i in small_cnn().graph.initializer}
    for name in ("w", "b", "fc"):
        _, dtype, _, (shape,), (off, size) = weights[name]
        assert off % 64 == 0
        got = np.frombuffer(om.weights[off:off + size], dtype).reshape(shape)
        np.testing.assert_array_equal(got, src[name])
    (prog,) = om.programs
    ops = [om.op_refs[t[0]][0] for t in prog["tasks"]]
    assert ops == ["Conv2D", "MaxPool", "AvgPool", "Concat", "Reshape", "MatMul"]
    assert om.op_refs[prog["tasks"][0][0]][1]["fused_relu"]  # ATC fused the Relu
    assert len(prog["streams"]) == 2 and prog["events"]  # the two pooling branches
    plan = om.memory_plan
    assert plan["size"] == report["planned_bytes"] <= plan["naive"]
    assert om.work_size == plan["size"] and om.weight_size == report["weight_bytes"]


def test_partitions_are_64_byte_aligned(om_bytes) -> None:
    count = struct.unpack_from("<I", om_bytes, 52)[0]
    assert om_bytes[:4] == b"IMOD" and struct.unpack_from("<I", om_bytes)[0] == 0x444F4D49
    for k in range(count):
        _, _, off, _ = struct.unpack_from("<IIQQ", om_bytes, 256 + 24 * k)
        assert off % 64 == 0


def _expect(code: int, data: bytes, match: str = "") -> None:
    with pytest.raises(ModelError, match=match) as info:
        omfile.read(data)
    assert info.value.code == code


@pytest.mark.parametrize("keep", [0, 3, 255, 256, 300, -1000, -1])
def test_truncated_file_is_refused(om_bytes, keep: int) -> None:
    _expect(ACL_ERROR_GE_PARAM_INVALID, om_bytes[:keep], "truncated|not an OM")


def test_newer_version_is_refused(om_bytes) -> None:
    data = bytearray(om_bytes)
    struct.pack_into("<I", data, 8, omfile.FORMAT_VERSION + 1)
    data = omfile.seal(data)  # a well-formed file of a newer format (sealed as the newest)
    _expect(ACL_ERROR_GE_PARAM_INVALID, bytes(data), "version")


def test_version_1_files_sealed_with_sha256_still_read(om_bytes, tmp_path) -> None:
    """Files of format version 1 (sealed with sha256, before XXH3-128) load whole and staged;
    a damaged seal is a checksum mismatch."""
    data = bytearray(om_bytes)
    struct.pack_into("<I", data, 8, 1)
    data[12:44] = bytes(32)
    data[12:44] = hashlib.sha256(data).digest()
    path = tmp_path / "v1.om"
    path.write_bytes(data)
    assert omfile.read(data).version == 1
    staged = omfile.read_file(path, lambda size: memoryview(bytearray(size)))
    assert staged.version == 1 and bytes(staged.weights) == bytes(omfile.read(om_bytes).weights)
    assert omfile.encode(staged)[12:44] == bytes(data[12:44])  # re-encoded as version 1
    data[12] ^= 1
    _expect(ACL_ERROR_GE_PARAM_INVALID, bytes(data), "checksum")


def test_corrupted_byte_is_refused(om_bytes) -> None:
    data = bytearray(om_bytes)
    data[len(data) // 2] ^= 0x40
    _expect(ACL_ERROR_GE_PARAM_INVALID, bytes(data), "checksum")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_damage_is_a_model_error_never_a_crash(data) -> None:
    base = _fixed_om()
    damaged = bytearray(base)
    for _ in range(data.draw(st.integers(1, 4))):
        damaged[data.draw(st.integers(0, len(base) - 1))] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        damaged = damaged[:data.draw(st.integers(0, len(damaged)))]
    assume(bytes(damaged) != base)
    with pytest.raises(ModelError) as info:
        omfile.read(bytes(damaged))
    assert info.value.code == ACL_ERROR_GE_PARAM_INVALID


_CACHE: dict[str, bytes] = {}


def _fixed_om() -> bytes:
    if "om" not in _CACHE:
        with tempfile.TemporaryDirectory() as d:
            onnx.save(small_cnn(), os.path.join(d, "m.onnx"))
            report = atc.convert(os.path.join(d, "m.onnx"), os.path.join(d, "m"), "Ascend910B1")
            with open(report["om"], "rb") as f:
                _CACHE["om"] = f.read()
    return _CACHE["om"]


def test_consistent_checksum_but_broken_references_are_refused(om_bytes) -> None:
    om = omfile.read(om_bytes)
    om.programs[0]["tasks"][0][1] = ["no_such_tensor"]
    _expect(ACL_ERROR_GE_PARAM_INVALID, omfile.encode(om), "unknown tensors")
    om = omfile.read(om_bytes)
    om.tensors[0][4] = [om.weight_size, 64] if om.tensors[0][2] == "weight" else "nope"
    _expect(ACL_ERROR_GE_PARAM_INVALID, omfile.encode(om), "outside|no block")
    om = omfile.read(om_bytes)
    om.memory_plan = {"size": 0}
    _expect(ACL_ERROR_GE_PARAM_INVALID, omfile.encode(om), "malformed")
    for scratch in (["no_such_block"] * len(om.programs[0]["tasks"]), ["conv::workspace"], 7):
        om = omfile.read(om_bytes)
        om.programs[0]["workspaces"] = scratch
        _expect(ACL_ERROR_GE_PARAM_INVALID, omfile.encode(om), "workspace blocks")


def test_missing_unreadable_or_empty_path_is_145002(tmp_path) -> None:
    for path in (tmp_path / "none.om", tmp_path):
        with pytest.raises(ModelError) as info:
            omfile.read_file(path)
        assert info.value.code == ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID
    (tmp_path / "empty.om").write_bytes(b"")
    with pytest.raises(ModelError) as info:
        omfile.read_file(tmp_path / "empty.om")
    assert info.value.code == ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID


def test_dump_json_has_the_plan_and_no_weight_bytes(cnn_path, tmp_path) -> None:
    report = atc.convert(cnn_path, tmp_path / "cnn.om", "Ascend910B1")
    assert atc.run(["--mode=1", f"--om={report['om']}", f"--json={tmp_path / 'cnn.json'}"]) == 0
    doc = json.loads((tmp_path / "cnn.json").read_text())
    assert doc["memory_plan"]["size"] == report["planned_bytes"]
    assert doc["model_def"]["report"]["lower_bound_bytes"] == report["lower_bound_bytes"]
    # a block per intermediate but the Flatten's output (a Reshape sharing its input's
    # block), and one per op scratch (the padded Conv2D's im2col)
    scratch = {ws for p in doc["programs"] for ws in p["workspaces"] if ws}
    assert scratch == {"conv::workspace"}
    assert {b[0] for b in doc["memory_plan"]["blocks"]} == \
        {t["name"] for t in doc["tensors"] if t["kind"] == "intermediate"} - {"f"} | scratch
    assert doc["weights_bytes"] == report["weight_bytes"] and "weights" not in doc


def test_cli_run_success_and_failures(cnn_path, tmp_path, capsys) -> None:
    out = tmp_path / "m"
    assert atc.run([f"--model={cnn_path}", "--framework=5", f"--output={out}",
                    "--soc_version=Ascend910B1", "--input_shape=x:1,3,8,8",
                    "--input_format=NCHW", "--log=error"]) == 0
    assert "ATC run success" in capsys.readouterr().out
    assert (tmp_path / "m.om").exists()
    cases = [
        [f"--model={cnn_path}", "--framework=3", f"--output={out}2",
         "--soc_version=Ascend910B1"],
        [f"--model={cnn_path}", f"--output={out}2", "--soc_version=Ascend999"],
        [f"--model={cnn_path}", f"--output={out}2"],
        [f"--model={tmp_path / 'none.onnx'}", f"--output={out}2", "--soc_version=Ascend910B1"],
        [f"--model={cnn_path}", f"--output={out}2", "--soc_version=Ascend910B1",
         "--input_shape=y:1,3,8,8"],
        ["--mode=1", f"--om={tmp_path / 'none.om'}", f"--json={tmp_path / 'x.json'}"],
    ]
    for argv in cases:
        assert atc.run(argv) == 1, argv
        assert "ATC run failed" in capsys.readouterr().err
    assert not (tmp_path / "m2.om").exists()


def test_dynamic_batch_gears_share_weights_and_one_plan(tmp_path) -> None:
    path = tmp_path / "dyn.onnx"
    onnx.save(small_cnn("N"), path)
    report = atc.convert(path, tmp_path / "dyn", "Ascend910B1", input_shape="x:-1,3,8,8",
                         dynamic_batch_size="4,1,2")
    om = omfile.read_file(report["om"])
    assert om.dynamic and om.model_def["dynamic_batch"] == [1, 2, 4]
    assert [p["batch"] for p in om.programs] == [1, 2, 4]
    shapes = {t[0]: t[3] for t in om.tensors}
    assert shapes["x"] == [[1, 3, 8, 8], [2, 3, 8, 8], [4, 3, 8, 8]]
    assert shapes["y"] == [[1, 5], [2, 5], [4, 5]]
    blocks = {b[0]: b for b in om.memory_plan["blocks"]}
    assert blocks["r"][2] == 4 * 4 * 8 * 8 * 4  # planned at the largest gear (Conv + Relu)


@pytest.mark.parametrize(("shape", "gears"), [
    ("x:-1,3,8,8", "1"), ("x:-1,3,8,8", "1,1"), ("x:-1,3,8,8", "0,2"), ("x:-1,3,8,8", "a,b"),
    ("x:2,3,8,8", "1,2"), ("x:1,-1,8,8", "1,2")])
def test_bad_dynamic_batch_is_refused(tmp_path, shape: str, gears: str) -> None:
    path = tmp_path / "dyn.onnx"
    onnx.save(small_cnn("N"), path)
    with pytest.raises(ModelError) as info:
        atc.convert(path, tmp_path / "dyn", "Ascend910B1", input_shape=shape,
                    dynamic_batch_size=gears)
    assert info.value.code == ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    assert not (tmp_path / "dyn.om").exists()


def test_light_resnet50_converts_within_the_plan_target(tmp_path) -> None:
    report = atc.convert(light("resnet50"), tmp_path / "resnet50", "Ascend910B1")
    assert report["planned_bytes"] <= 1.05 * report["lower_bound_bytes"]
    om = omfile.read_file(report["om"])
    assert om.model_def["inputs"] == ["gpu_0/data_0"]
    assert len(om.programs[0]["tasks"]) == report["tasks"]


def test_npuemu_atc_without_singleop_is_model_mode(cnn_path, tmp_path, capsys) -> None:
    from npuemu.tools import atc as atc_tool
    assert atc_tool.main([f"--model={cnn_path}", "--framework=5", f"--output={tmp_path / 'c'}",
                          "--soc_version=Ascend910B1"]) == 0
    assert omfile.read_file(tmp_path / "c.om").model_def["inputs"] == ["x"]
    assert "ATC run success" in capsys.readouterr().out


def test_weights_read_into_their_place_and_checked_there(om_bytes, tmp_path,
                                                        monkeypatch) -> None:
    """read_file with a place: the weights land in the given buffer (the model's weights are
    a view of it), in chunks smaller than them; a flipped weight byte is the checksum's
    145000 (after the place was filled), a file cut short 145000 before it is asked."""
    data = om_bytes
    om = omfile.read(data)
    assert len(om.weights) > 2 * 64
    monkeypatch.setattr(omfile, "CHUNK_BYTES", 64)
    path = tmp_path / "m.om"
    path.write_bytes(data)
    given: list[bytearray] = []

    def place(size: int) -> memoryview:
        given.append(bytearray(size))
        return memoryview(given[-1])

    got = omfile.read_file(path, place)
    assert len(given) == 1 and bytes(given[0]) == bytes(om.weights)
    assert np.shares_memory(got.weights, np.frombuffer(given[0], np.uint8))
    assert got.tensors == om.tensors and got.programs == om.programs
    at = data.index(bytes(om.weights)) + len(om.weights) // 2
    path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    with pytest.raises(ModelError, match="checksum") as err:
        omfile.read_file(path, place)
    assert err.value.code == 145000 and len(given) == 2
    path.write_bytes(data[:-1])
    with pytest.raises(ModelError) as err:
        omfile.read_file(path, place)
    assert err.value.code == 145000 and len(given) == 2


def test_open_file_decodes_while_the_weights_arrive(om_bytes, tmp_path) -> None:
    """open_file hands back the model with a Weights whose finish waits for the read (the
    place is whole after it) and says the same every time; a file bad in its weights and in
    another partition is reported by its checksum (145000), as when read in file order."""
    data = om_bytes
    om = omfile.read(data)
    path = tmp_path / "m.om"
    path.write_bytes(data)
    buf = bytearray(len(om.weights))
    got, weights = omfile.open_file(path, lambda size: memoryview(buf))
    weights.finish()
    weights.finish()
    assert bytes(buf) == bytes(om.weights) and got.tensors == om.tensors
    w_at = data.index(bytes(om.weights)) + len(om.weights) // 2
    flipped = data[:w_at] + bytes([data[w_at] ^ 1]) + data[w_at + 1:]
    path.write_bytes(flipped)
    _om, weights = omfile.open_file(path, lambda size: memoryview(bytearray(size)))
    for _ in range(2):
        with pytest.raises(ModelError, match="checksum") as err:
            weights.finish()
        assert err.value.code == ACL_ERROR_GE_PARAM_INVALID
    t_at = flipped.index(omfile.msgpack.packb(om.programs)[:8])  # TASK_INFO's first bytes
    path.write_bytes(flipped[:t_at] + b"\xc1" * 8 + flipped[t_at + 8:])  # 0xc1: never used
    with pytest.raises(ModelError, match="checksum") as err:
        omfile.open_file(path, lambda size: memoryview(bytearray(size)))
    assert err.value.code == ACL_ERROR_GE_PARAM_INVALID
