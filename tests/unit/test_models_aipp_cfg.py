"""The ``--insert_op_conf`` file (parsing, ATC's checks and codes, defaults), the dynamic AIPP
record's layout, the interface flags' errors and the OM entries AIPP adds (no node)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from npuemu.host.models import aipp, atc, interface, modeldesc, omfile
from npuemu.host.models.codes import ModelError
from npuemu.shared import aipp as A
from tests.unit.test_models_omfile import small_cnn

# a cfg as the samples write them (comments, spaces before colons, the JPEG CSC matrix)
SAMPLE_CFG = """
aipp_op{
    aipp_mode:static
    input_format : YUV420SP_U8
    src_image_size_w : 8
    src_image_size_h : 8
    csc_switch : true
    rbuv_swap_switch : false
    matrix_r0c0 : 256
    matrix_r0c1 : 0
    matrix_r0c2 : 359
    matrix_r1c0 : 256
    matrix_r1c1 : -88
    matrix_r1c2 : -183
    matrix_r2c0 : 256
    matrix_r2c1 : 454
    matrix_r2c2 : 0
    input_bias_0 : 0
    input_bias_1 : 128
    input_bias_2 : 128
    # normalisation
    mean_chn_0 : 104
    mean_chn_1 : 117
    mean_chn_2 : 123
    var_reci_chn_0 : 0.0039216
}
"""


def built(tmp_path, cfg_text: str, model: onnx.ModelProto | None = None,
          **kw) -> omfile.OmModel:
    """The OM file atc makes of ``model`` (the small CNN) with ``cfg_text`` as AIPP file."""
    path = tmp_path / "m.onnx"
    onnx.save(model or small_cnn(), path)
    cfg = tmp_path / "a.cfg"
    cfg.write_text(cfg_text)
    return omfile.read_file(atc.convert(path, tmp_path / "m", "Ascend910B1",
                                        insert_op_conf=str(cfg), **kw)["om"])


def code_and_text(text: str) -> tuple[int, str]:
    with pytest.raises(ModelError) as info:
        for cfg in aipp.parse(text):
            if not cfg.dynamic:
                aipp.to_params(cfg, (1, 3, 8, 8), 1)
    return info.value.code, str(info.value)


def test_sample_cfg_parses_with_defaults_filled() -> None:
    (cfg,) = aipp.parse(SAMPLE_CFG)
    assert not cfg.dynamic and cfg.rank == 0
    p = aipp.to_params(cfg, (1, 3, 8, 8), 2)
    assert p.fmt == A.YUV420SP_U8 and p.csc and p.matrix[:3] == [256, 0, 359]
    assert p.in_bias == [0, 128, 128] and p.out_bias == [16, 128, 128]
    b = p.batches[0]
    assert len(p.batches) == 2 and b.mean[:3] == [104, 117, 123]
    assert b.var_reci == pytest.approx([0.0039216, 1.0, 1.0, 1.0])
    # no source size: the model's; no crop size: what the model needs
    (cfg,) = aipp.parse("aipp_op { aipp_mode: static input_format: RGB888_U8 crop: true "
                        "load_start_pos_w: 4 load_start_pos_h: 2 src_image_size_w: 16 "
                        "src_image_size_h: 12 }")
    p = aipp.to_params(cfg, (1, 3, 8, 8), 1)
    assert (p.src_w, p.src_h, p.batches[0].crop_w, p.batches[0].crop_h) == (16, 12, 8, 8)
    assert p.matrix == [66, 129, 25, -38, -74, 112, 112, -94, -18]  # RGB -> YUV default


@pytest.mark.parametrize("text, words", [
    ("aipp_op { input_format: RGB888_U8 }", "aipp_mode must be configured"),
    ("aipp_op { aipp_mode: static }", "Input format of AIPP conf is undefined"),
    ("aipp_op { aipp_mode: dynamic }", "max_src_image_size must be set"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 matrix_r0c0: 1 matrix_r0c0: 2 }",
     "matrix_r0c0 can not be configed repeatedly"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: -2 }",
     "Src_image_size_w must not be configed smaller than 0"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 colour: 1 }", "colour"),
    ("aipp_op { aipp_mode: statik input_format: RGB888_U8 }", "statik"),
    ("aipp_op { aipp_mode: static input_format: RAW10 }", "RAW10 is not supported"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 mean_chn_0: 300 }",
     "outside [0, 255]"),
    ("aipp_op { aipp_mode: static input_format: YUV420SP_U8 src_image_size_w: 7 }",
     "must be even"),
    ("aipp_op { aipp_mode: static input_format: YUV420SP_U8 src_image_size_w: 16 "
     "src_image_size_h: 16 crop: true load_start_pos_w: 1 }", "must be even"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 crop: true load_start_pos_w: 4 crop_size_w: 8 crop_size_h: 8 }",
     "is not inside"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 10 }",
     "the model input is 8x8"),
    ("aipp_op { aipp_mode: static input_format: YUV400_U8 }", "gives 1 channels"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 5000 }",
     "outside [1, 4096]"),
    ("", "no aipp_op block"),
])
def test_bad_cfg_is_145000_with_atc_reason(text: str, words: str) -> None:
    code, message = code_and_text(text)
    assert code == 145000 and "E10043" in message and words in message


def test_unreadable_cfg_file_and_cfg_errors_through_convert(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(small_cnn(), model)
    with pytest.raises(ModelError) as info:
        atc.convert(model, tmp_path / "m", "Ascend910B1", insert_op_conf=str(tmp_path / "no"))
    assert info.value.code == 145000 and "E10001" in str(info.value)
    cfg = tmp_path / "a.cfg"
    cfg.write_text("aipp_op { aipp_mode: static input_format: RGB888_U8 }")
    with pytest.raises(ModelError) as info:  # an input with AIPP cannot be fp16 too
        atc.convert(model, tmp_path / "m", "Ascend910B1", insert_op_conf=str(cfg),
                    input_fp16_nodes="x")
    assert info.value.code == 145000 and "E10034" in str(info.value)
    cfg.write_text("aipp_op { aipp_mode: static related_input_rank: 3 "
                   "input_format: RGB888_U8 }")
    with pytest.raises(ModelError) as info:
        atc.convert(model, tmp_path / "m", "Ascend910B1", insert_op_conf=str(cfg))
    assert "related_input_rank 3" in str(info.value)
    assert not (tmp_path / "m.om").exists()


def test_om_of_a_static_aipp_model_and_its_descriptor(tmp_path) -> None:
    om = built(tmp_path, SAMPLE_CFG)
    (entry,) = om.model_def["aipp"]
    assert entry["input"] == "x" and entry["mode"] == "static"
    assert om.op_refs[om.programs[0]["tasks"][0][0]][0] == "Aipp"  # the first task
    desc = modeldesc.describe(om)
    x = desc.inputs[0]
    assert (x.name, x.dtype, x.format) == ("x", 4, 1)  # uint8, NHWC
    assert x.dims == [[1, 12, 8, 1]] and x.size(0) == 8 * 8 * 3 // 2
    assert x.shown_dims() == [1, 8, 8, 3] and x.shown_dims(v2=True) == [1, 12, 8, 1]


def test_dynamic_aipp_adds_the_parameter_input(tmp_path) -> None:
    om = built(tmp_path, "aipp_op { aipp_mode: dynamic max_src_image_size: 300 }")
    desc = modeldesc.describe(om)
    assert [(t.name, t.dtype, t.size(0)) for t in desc.inputs] == [
        ("x", 4, 300), (aipp.DYNAMIC_AIPP_NAME, 4, 64 + 96)]


def test_dynamic_record_layout_round_trips() -> None:
    p = A.Params(A.RGB888_U8, True, True, False, 12, 10, list(range(9)), [1, 2, 3],
                 [4, 5, 6], [A.Batch(crop=True, crop_x=2, crop_y=4, crop_w=6, crop_h=8,
                                     mean=[1, 2, 3, 4], min=[0.5, 0, 0, 0],
                                     var_reci=[0.25, 1, 1, 1]), A.Batch()])
    record = A.pack(p)
    assert len(record) == A.record_size(2) == 64 + 2 * 96
    assert record[0] == 3 and record[4] == 2  # inputFormat, batchNum
    assert int.from_bytes(record[8:12], "little") == 12  # srcImageSizeW at offset 8
    back = A.unpack(np.frombuffer(record, np.uint8))
    assert back.matrix == p.matrix and back.in_bias == [4, 5, 6]
    assert back.batches[0].crop_x == 2 and back.batches[0].var_reci[0] == 0.25
    with pytest.raises(ValueError):
        A.unpack(record[:100])


@pytest.mark.parametrize("kw, words", [
    ({"out_nodes": "nope:0"}, "E10016"),
    ({"out_nodes": "relu"}, "node_name:output_index"),
    ({"input_fp16_nodes": "y"}, "E10016"),
    ({"output_type": "FP64"}, "--output_type"),
    ({"dynamic_image_size": "8,8"}, "2..100"),
    ({"dynamic_image_size": "8,8;16,x"}, "h,w pairs"),
    ({"dynamic_image_size": "8,8;16,16"}, "-1 on H and W"),
    ({"dynamic_image_size": "8,8;16,16", "input_shape": "x:-1,3,-1,-1"}, "only H and W"),
])
def test_interface_flag_errors(tmp_path, kw: dict, words: str) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(small_cnn(), model)
    with pytest.raises(ModelError) as info:
        atc.convert(model, tmp_path / "m", "Ascend910B1", **kw)
    assert info.value.code == 145000 and words in str(info.value)


def test_hw_gears_sorted_largest_last() -> None:
    assert interface.parse_hw("448,448;224,224;224,320") == [[224, 224], [224, 320],
                                                              [448, 448]]


def test_cli_takes_the_samples_flags(tmp_path, capsys) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(small_cnn(), model)
    rc = atc.run([f"--model={model}", "--framework=5", f"--output={tmp_path / 'm'}",
                  "--soc_version=Ascend910B1", "--input_format=NCHW", "--input_fp16_nodes=x",
                  "--output_type=FP32", "--out_nodes=fc:0", "--log=error"])
    assert rc == 0 and "ATC run success" in capsys.readouterr().out
    rc = atc.run([f"--model={model}", "--framework=5", f"--output={tmp_path / 'm'}",
                  "--soc_version=Ascend910B1", f"--insert_op_conf={tmp_path / 'none.cfg'}"])
    assert rc == 1 and "E10001" in capsys.readouterr().err


def two_inputs() -> onnx.ModelProto:
    """y = a + b (NCHW 1x3x4x4 each)."""
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")], "two",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, 4, 4]) for n in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_one_aipp_per_input_by_related_input_rank(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(two_inputs(), model)
    cfg = tmp_path / "a.cfg"
    cfg.write_text("aipp_op { aipp_mode: dynamic related_input_rank: 1 "
                   "max_src_image_size: 100 }\n"
                   "aipp_op { aipp_mode: static related_input_rank: 0 "
                   "input_format: YUV400_U8 }")
    with pytest.raises(ModelError):  # YUV400 gives one channel, the input has three
        atc.convert(model, tmp_path / "m", "Ascend910B1", insert_op_conf=str(cfg))
    cfg.write_text("aipp_op { aipp_mode: dynamic related_input_rank: 1 "
                   "max_src_image_size: 100 }\n"
                   "aipp_op { aipp_mode: static related_input_rank: 0 "
                   "input_format: RGB888_U8 }")
    om = omfile.read_file(atc.convert(model, tmp_path / "m", "Ascend910B1",
                                      insert_op_conf=str(cfg))["om"])
    desc = modeldesc.describe(om)
    assert [(t.name, t.dtype, t.size(0)) for t in desc.inputs] == [
        ("a", 4, 48), ("b", 4, 100), (aipp.DYNAMIC_AIPP_NAME, 4, 160)]
    assert [e["mode"] for e in om.model_def["aipp"]] == ["static", "dynamic"]


def test_nhwc_input_gets_channels_last_aipp(tmp_path) -> None:
    from onnx import TensorProto, helper
    graph = helper.make_graph(  # an NHWC input (as TF exports) transposed by the model
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 3, 1, 2], name="t")], "nhwc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])])
    om = built(tmp_path, "aipp_op { aipp_mode: static input_format: RGB888_U8 mean_chn_0: 1 }",
               helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
               input_format="NHWC")
    (entry,) = om.model_def["aipp"]
    assert entry["model_dims"] == [1, 3, 8, 8]
    attrs = om.op_refs[om.programs[0]["tasks"][0][0]][1]
    assert attrs["out_layout"] == "NHWC" and attrs["out_shape"] == [1, 8, 8, 3]
    raw = np.arange(8 * 8 * 3, dtype=np.uint8) % 251
    out = np.zeros((1, 8, 8, 3), np.float32)
    A.run(raw, A.from_attrs(entry["params"], 1), out, channels_last=True)
    want = raw.reshape(8, 8, 3).astype(np.float32) - np.float32([1, 0, 0])
    np.testing.assert_array_equal(out[0], want)


@pytest.mark.parametrize("entry", [
    "not a map", {"input": "x", "mode": "sideways", "model_dims": [1, 3, 8, 8]},
    {"input": "x", "mode": "static", "model_dims": [1, 3, 8]},
    {"input": "x", "mode": "static", "model_dims": [1, 3, 8, 8], "params": {}},
    {"input": "x", "mode": "dynamic", "model_dims": [1, 3, 8, 8]},
])
def test_om_with_a_malformed_aipp_entry_is_refused(tmp_path, entry) -> None:
    om = built(tmp_path, SAMPLE_CFG)
    om.model_def["aipp"] = [entry]
    with pytest.raises(ModelError) as info:
        omfile.read(omfile.encode(om))
    assert info.value.code == 145000 and "AIPP entry" in str(info.value)
