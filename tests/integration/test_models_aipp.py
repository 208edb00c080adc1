"""AIPP, the interface flags and dynamic image sizes through real workers.

Static AIPP (RGB888 crop and normalisation; YUV420SP CSC, crop, bilinear scaling and padding)
and dynamic AIPP (two images with their own crop, padding and mean) are checked exactly
(within a float16 ulp: AIPP's output type) on an identity model against a numpy pipeline
written here (chroma by index arithmetic, CSC by an integer einsum, scaling by onnxruntime's
``Resize``), then on real models against onnxruntime fed that pipeline's result: the small
CNN of the model tests and SqueezeNet (random weights) with the same top-1. The scenarios
are ``tests/progs/aipp.py``'s.
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from childprog import run_program
from onnx import TensorProto, helper, numpy_helper

from npuemu.host.models import atc
from tests.unit.test_models_frontend import light
from tests.unit.test_models_lowering import randomize_weights
from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "2G", "NPUEMU_DDR": "256M"}
JPEG_CSC = [256, 0, 359, 256, -88, -183, 256, 454, 0]  # YUV -> RGB, CANN's JPEG matrix


def scenario(run_prog, *args, timeout: float = 120) -> dict:
    return run_program(run_prog, "aipp.py", *args, env=ENV, timeout=timeout)


def ort_run(model: onnx.ModelProto, x: np.ndarray, output: int = 0) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[output]


def identity(c: int, h: int, w: int, n: int | str = 1) -> onnx.ModelProto:
    """y = x * 1: the model's output is its input, so AIPP's result is read back as is."""
    one = numpy_helper.from_array(np.ones((1, c, 1, 1), np.float32), "one")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "one"], ["y"], name="mul")], "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, h, w])], [one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def build(tmp_path, model: onnx.ModelProto, name: str, cfg: str | None = None, **kw) -> str:
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    if cfg is not None:
        (tmp_path / f"{name}.cfg").write_text(cfg)
        kw["insert_op_conf"] = str(tmp_path / f"{name}.cfg")
    return atc.convert(path, tmp_path / name, "Ascend910B1", **kw)["om"]


# the numpy pipeline (independent of shared/aipp.py) -----------------------------------------
def yuv_to_rgb(raw: np.ndarray, w: int, h: int, matrix: list[int], bias: list[int]
               ) -> np.ndarray:
    """NV12 -> (h, w, 3) int, ``(M @ (yuv - bias)) >> 8`` clipped."""
    y = raw[:w * h].reshape(h, w).astype(np.int64)
    uv = raw[w * h:w * h * 3 // 2].reshape(h // 2, w).astype(np.int64)
    rows, cols = np.arange(h) // 2, (np.arange(w) // 2) * 2
    u, v = uv[rows][:, cols], uv[rows][:, cols + 1]
    yuv = np.stack([y - bias[0], u - bias[1], v - bias[2]], axis=-1)
    return np.clip(np.einsum("hwc,kc->hwk", yuv, np.array(matrix).reshape(3, 3)) // 256,
                   0, 255)


def resize(img: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """(h, w, c) -> (out_h, out_w, c) float32 with onnxruntime's bilinear Resize."""
    x = img.transpose(2, 0, 1)[None].astype(np.float32)
    sizes = numpy_helper.from_array(np.array([1, x.shape[1], out_h, out_w], np.int64), "s")
    node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="linear",
                            coordinate_transformation_mode="half_pixel")
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x.shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [sizes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return ort_run(model, x)[0].transpose(1, 2, 0)


def normalise(img: np.ndarray, mean, low, var, pad=(0, 0, 0, 0), value=0.0) -> np.ndarray:
    """(x - mean - min) * var_reci as float16, padded (top, bottom, left, right), CHW."""
    k = img.shape[2]
    out = ((img.astype(np.float32) - np.float32(mean[:k]) - np.float32(low[:k]))
           * np.float32(var[:k])).astype(np.float16)
    t, b, left, r = pad
    out = np.pad(out, ((t, b), (left, r), (0, 0)), constant_values=np.float16(value))
    return out.transpose(2, 0, 1).astype(np.float32)


def rgb_cfg(w: int = 12, h: int = 10, crop: int = 8) -> str:
    """Static AIPP of an RGB image: a crop at (2, 1), then mean and scale."""
    return RGB_CFG.format(w=w, h=h, crop=crop)


RGB_CFG = """# static AIPP of an RGB image: crop, then mean and scale
aipp_op {{
    aipp_mode: static
    input_format : RGB888_U8
    src_image_size_w : {w}
    src_image_size_h : {h}
    crop: true
    load_start_pos_w: 2
    load_start_pos_h: 1
    crop_size_w: {crop}
    crop_size_h: {crop}
    mean_chn_0 : 124
    mean_chn_1 : 117
    mean_chn_2 : 104
    min_chn_0 : 0.5
    var_reci_chn_0 : 0.0171
    var_reci_chn_1 : 0.0175
    var_reci_chn_2 : 0.0174
}}
"""

YUV_CFG = f"""aipp_op {{
    aipp_mode: static
    input_format: YUV420SP_U8
    src_image_size_w: 16
    src_image_size_h: 12
    csc_switch: true
    rbuv_swap_switch: false
    {' '.join(f'matrix_r{k // 3}c{k % 3}: {v}' for k, v in enumerate(JPEG_CSC))}
    input_bias_0: 0
    input_bias_1: 128
    input_bias_2: 128
    crop: true
    load_start_pos_w: 2
    load_start_pos_h: 2
    crop_size_w: 10
    crop_size_h: 8
    resize: true
    resize_output_w: 6
    resize_output_h: 6
    padding: true
    left_padding_size: 1
    right_padding_size: 1
    top_padding_size: 1
    bottom_padding_size: 1
    padding_value: 0.25
    mean_chn_0: 10
    var_reci_chn_0: 0.5
    var_reci_chn_1: 0.25
}}
"""


def rgb_ref(raw: np.ndarray) -> np.ndarray:
    img = raw[0][1:9, 2:10]
    return normalise(img, [124, 117, 104], [0.5, 0, 0], [0.0171, 0.0175, 0.0174])[None]


def yuv_ref(raw: np.ndarray) -> np.ndarray:
    rgb = yuv_to_rgb(raw.reshape(-1), 16, 12, JPEG_CSC, [0, 128, 128])[2:10, 2:12]
    return normalise(resize(rgb, 6, 6), [10, 0, 0], [0, 0, 0], [0.5, 0.25, 1.0],
                     (1, 1, 1, 1), 0.25)[None]


def test_static_rgb888_crop_and_normalisation_exact(run_prog, tmp_path) -> None:
    om = build(tmp_path, identity(3, 8, 8), "rgb", rgb_cfg())
    raw = np.random.default_rng(0).integers(0, 256, (1, 10, 12, 3), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw)
    r = scenario(run_prog, "static", om, tmp_path / "raw.npy", tmp_path / "y.npy")
    assert r["n_inputs"] == 1
    assert r["input"] == {"format": 1, "dtype": 4, "size": 10 * 12 * 3, "dims": [1, 10, 12, 3],
                          "dims_v2": [1, 10, 12, 3], "name": "x",
                          "aipp_type": [1, 0xFFFFFFFF, 0]}
    assert r["info_ret"] == 0 and r["info"] == {
        "inputFormat": 3, "srcImageSizeW": 12, "srcImageSizeH": 10, "cropSwitch": 1,
        "meanChn0": 124, "srcDatatype": 0, "outDims": [{
            "srcDims": [1, 10, 12, 3], "srcSize": 360, "aippOutdims": [1, 3, 8, 8],
            "aippOutSize": 3 * 8 * 8 * 4}]}
    assert r["bad_index"] == 100000 and r["info_bad_index"] == 100000
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), rgb_ref(raw), rtol=1e-3, atol=0)


def test_static_yuv420sp_csc_crop_resize_padding(run_prog, tmp_path) -> None:
    om = build(tmp_path, identity(3, 8, 8), "yuv", YUV_CFG)
    raw = np.random.default_rng(1).integers(0, 256, (1, 18, 16, 1), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw)
    r = scenario(run_prog, "static", om, tmp_path / "raw.npy", tmp_path / "y.npy")
    # the input is the NV12 image: w*h*3/2 bytes, NHWC uint8, V2 dims its raw layout
    assert r["input"]["size"] == 16 * 12 * 3 // 2 and r["input"]["dims"] == [1, 12, 16, 3]
    assert r["input"]["dims_v2"] == [1, 18, 16, 1] and r["input"]["format"] == 1
    want = yuv_ref(raw)
    got = np.load(tmp_path / "y.npy")
    assert (got[:, :, 0, :] == np.float32(np.float16(0.25))).all()  # the padding rows
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_static_aipp_on_models_matches_onnxruntime(run_prog, tmp_path) -> None:
    model = small_cnn()
    om = build(tmp_path, model, "cnn", rgb_cfg())
    raw = np.random.default_rng(2).integers(0, 256, (1, 10, 12, 3), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw)
    scenario(run_prog, "static", om, tmp_path / "raw.npy", tmp_path / "y.npy")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ort_run(model, rgb_ref(raw)),
                               rtol=1e-4, atol=1e-4)


def test_static_aipp_squeezenet_same_top1_as_onnxruntime(run_prog, tmp_path) -> None:
    from npuemu.host.models import onnx_front
    model = randomize_weights(onnx_front.prepare(onnx.load(light("squeezenet"))), 7)
    om = build(tmp_path, model, "squeezenet", rgb_cfg(240, 232, 224))
    raw = np.random.default_rng(3).integers(0, 256, (1, 232, 240, 3), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw)
    scenario(run_prog, "static", om, tmp_path / "raw.npy", tmp_path / "y.npy", timeout=300)
    x = normalise(raw[0][1:225, 2:226], [124, 117, 104], [0.5, 0, 0],
                  [0.0171, 0.0175, 0.0174])[None]
    want, got = ort_run(model, x), np.load(tmp_path / "y.npy")
    assert got.reshape(-1).argmax() == want.reshape(-1).argmax()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


DYN_CFG = """aipp_op {
    aipp_mode: dynamic
    max_src_image_size: 1000
}
"""


def test_dynamic_aipp_two_images_own_parameters(run_prog, tmp_path) -> None:
    om = build(tmp_path, identity(3, 8, 8, 2), "dyn", DYN_CFG)
    raw = np.random.default_rng(4).integers(0, 256, (2, 10, 12, 3), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", np.concatenate([raw.reshape(-1), np.zeros(280, np.uint8)]))
    spec = {"src": [12, 10], "format": 3, "csc": [0, *([0] * 15)], "batches": [
        {"crop": [1, 0, 0, 8, 8], "scf": [0, 0, 0, 0, 0], "pad": [0, 0, 0, 0, 0],
         "mean": [1, 2, 3, 0], "min": [0, 0, 0, 0], "var": [1.0, 1.0, 1.0, 1.0]},
        {"crop": [1, 4, 2, 6, 6], "scf": [0, 0, 0, 0, 0], "pad": [1, 1, 1, 1, 1],
         "mean": [100, 50, 0, 0], "min": [0.5, 0, 0, 0], "var": [0.5, 2.0, 1.0, 1.0]}]}
    r = scenario(run_prog, "dynamic", om, tmp_path / "raw.npy", tmp_path / "y.npy",
                 json.dumps(spec))
    assert r["index"] == 1 and r["types"] == [[2, 1, 0], [3, 0xFFFFFFFF, 0]]
    assert r["data_size"] == [64 + 96 * 2, [256, 0]]
    assert r["info_dynamic"] == 100038 and set(r["set_codes"]) == {0}
    assert r["by_index"] == 0
    e = r["errors"]
    assert e["create_0"] == 0 and e["src_odd_range"] == 100000
    assert e["format_raw10"] == 100000 and e["crop_batch_index"] == 100000
    assert e["mean_range"] == 100000 and e["csc_count"] == 100000 and e["no_src"] == 100000
    assert e["wrong_size"] == 145000 and e["not_aipp_input"] == 145000
    assert e["bad_set"] == 100000
    assert r["zeroed_record"] == 507015  # its task fails on the AI Core; the card goes on
    assert r["destroy_twice"] == 100000 and r["after"] == 0
    want = np.stack([normalise(raw[0][0:8, 0:8], [1, 2, 3], [0] * 3, [1.0] * 3),
                     normalise(raw[1][2:8, 4:10], [100, 50, 0], [0.5, 0, 0], [0.5, 2.0, 1.0],
                               (1, 1, 1, 1))])
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-3, atol=0)


def conv_gap() -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool -> Flatten: any H and W."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["y"], name="flatten")]
    graph = helper.make_graph(nodes, "conv_gap", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, "h", "w"])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_dynamic_image_size_gears(run_prog, tmp_path) -> None:
    model = conv_gap()
    om = build(tmp_path, model, "hw", input_shape="x:1,3,-1,-1",
               dynamic_image_size="16,12;8,8")
    x = np.random.default_rng(6).standard_normal((1, 3, 16, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = scenario(run_prog, "dynamic_hw", om, tmp_path / "x.npy", tmp_path / "y.npy", 16, 12)
    assert r["hw"] == [{"hwCount": 2, "hw": [[8, 8], [16, 12]]}, 0]
    assert r["dims"] == [1, 3, -1, -1] and r["bad_gear"] == 145000
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ort_run(model, x), rtol=1e-4,
                               atol=1e-5)


def test_fp16_input_fp16_output_and_out_nodes(run_prog, tmp_path) -> None:
    model = small_cnn()
    x = np.random.default_rng(7).standard_normal((1, 3, 8, 8)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    om = build(tmp_path, model, "fp16", input_fp16_nodes="x", output_type="FP16")
    r = scenario(run_prog, "plain", om, tmp_path / "x.npy", tmp_path / "y.npy", "float16",
                 "float16")
    assert r["in_dtype"] == 1 and r["out_dtype"] == 1
    np.testing.assert_allclose(np.load(tmp_path / "y.npy").astype(np.float32),
                               ort_run(model, x.astype(np.float32)), rtol=2e-2, atol=2e-2)
    om = build(tmp_path, model, "cut", out_nodes="relu:0;maxpool:0", output_type="relu:0:FP32")
    r = scenario(run_prog, "plain", om, tmp_path / "x.npy", tmp_path / "y.npy", "float32",
                 "float32")
    assert r["n_outputs"] == 2 and r["out_names"] == ["r", "m"]
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    cut.graph.output.insert(0, helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"),
                               ort_run(cut, x.astype(np.float32)), rtol=1e-5, atol=1e-6)


def readme_block(after: str, lang: str) -> str:
    """The first ``lang`` code block of the README after the text ``after``."""
    text = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text[text.index(after):]
    start = section.index(f"```{lang}\n") + len(f"```{lang}\n")
    return section[start:section.index("```", start)]


def test_readme_aipp_cfg_and_program_run_as_written(run_py, tmp_path) -> None:
    """The README's cfg builds (on a 224x224 model that returns its input) and its program
    runs as written, checking every code; its top-1 is that of the numpy pipeline."""
    cfg = readme_block("An example `aipp.cfg`", "text")
    om = build(tmp_path, identity(3, 224, 224), "resnet50_aipp", cfg)
    assert om == str(tmp_path / "resnet50_aipp.om")
    program = readme_block("and a program feeding it", "python")
    res = run_py(f"import os\nos.chdir({str(tmp_path)!r})\n" + program, env=ENV, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    image = np.random.default_rng(0).integers(0, 256, 224 * 224 * 3 // 2, np.uint8)
    rgb = yuv_to_rgb(image, 224, 224, JPEG_CSC, [0, 128, 128])
    want = normalise(rgb, [124, 117, 104], [0, 0, 0], [0.0171, 0.0175, 0.0174])
    assert f"top-1: {int(want.argmax())}" in res.stdout


def scene(width: int = 320, height: int = 240) -> bytes:
    """A JPEG of gradients and blocks (a photo's range of colours and edges)."""
    from PIL import Image  # Pillow: the DVPP engine's own codec library
    yy, xx = np.mgrid[0:height, 0:width]
    rgb = np.stack([xx * 255 // width, yy * 255 // height, (xx + yy) % 256], -1)
    rgb[60:140, 80:200] = [220, 40, 30]
    rgb[150:220, 200:300] = [20, 60, 200]
    out = io.BytesIO()
    Image.fromarray(rgb.astype(np.uint8)).save(out, "JPEG", quality=95)
    return out.getvalue()


def rgb_path(jpeg: bytes) -> np.ndarray:
    """The RGB path: the JPEG decoded to RGB, resized bilinearly to 224x224, normalised."""
    from PIL import Image
    rgb = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
    small = resize(rgb, 224, 224)
    return ((small - np.float32([124, 117, 104])) * np.float32([0.0171, 0.0175, 0.0174])
            ).transpose(2, 0, 1)[None].astype(np.float32)


def colour_classifier() -> onnx.ModelProto:
    """GlobalAveragePool -> Flatten -> Gemm: 8 classes scored by the mean colour."""
    w = numpy_helper.from_array(np.random.default_rng(9).standard_normal((8, 3)).astype(
        np.float32), "w")
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "colour", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 224, 224])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("name", ["squeezenet", "colour"])
def test_jpeg_decode_vpc_resize_aipp_model_top1_as_rgb_path(run_prog, tmp_path, name) -> None:
    """jpegd -> vpc resize -> the static AIPP model (the README's cfg: NV12 to normalised RGB),
    as the samples write it: the same top-1 as onnxruntime on the RGB path."""
    from npuemu.host.models import onnx_front
    model = colour_classifier() if name == "colour" else randomize_weights(
        onnx_front.prepare(onnx.load(light("squeezenet"))), 7)
    om = build(tmp_path, model, name, readme_block("An example `aipp.cfg`", "text"))
    jpeg = scene()
    (tmp_path / "a.jpg").write_bytes(jpeg)
    r = scenario(run_prog, "pipeline", om, tmp_path / "a.jpg", tmp_path / "y.npy",
                 tmp_path / "nv12.npy", timeout=300)
    assert r["input_size"] == 224 * 224 * 3 // 2
    got = np.load(tmp_path / "y.npy").reshape(-1)
    want = ort_run(model, rgb_path(jpeg)).reshape(-1)
    assert got.argmax() == want.argmax(), (got, want)
    # and exactly what the model makes of the picture DVPP produced
    nv12 = np.load(tmp_path / "nv12.npy")
    seen = normalise(yuv_to_rgb(nv12, 224, 224, JPEG_CSC, [0, 128, 128]), [124, 117, 104],
                     [0, 0, 0], [0.0171, 0.0175, 0.0174])[None]
    np.testing.assert_allclose(got, ort_run(model, seen).reshape(-1), rtol=1e-3, atol=1e-4)


def test_dynamic_aipp_with_batch_gears(run_prog, tmp_path) -> None:
    """The record holds the largest gear's images; a set of one image runs gear 1."""
    model = identity(3, 8, 8, "N")
    om = build(tmp_path, model, "dynb", DYN_CFG, input_shape="x:-1,3,8,8",
               dynamic_batch_size="1,2")
    raw = np.random.default_rng(10).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw.reshape(-1))
    spec = {"src": [12, 10], "format": 3, "csc": [0, *([0] * 15)], "batches": [
        {"crop": [1, 2, 2, 8, 8], "scf": [0, 0, 0, 0, 0], "pad": [0, 0, 0, 0, 0],
         "mean": [5, 6, 7, 0], "min": [0, 0, 0, 0], "var": [1.0, 1.0, 1.0, 1.0]}]}
    r = scenario(run_prog, "dynamic", om, tmp_path / "raw.npy", tmp_path / "y.npy",
                 json.dumps(spec), 1)
    assert r["data_size"] == [64 + 96 * 2, [160, 0]] and r["after"] == 0
    want = normalise(raw[2:10, 2:10], [5, 6, 7], [0] * 3, [1.0] * 3)[None]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-3, atol=0)


@pytest.mark.parametrize("fmt, channels, swap", [("XRGB8888_U8", 4, True),
                                                 ("YUV400_U8", 1, False)])
def test_static_xrgb_swap_and_yuv400(run_prog, tmp_path, fmt, channels, swap) -> None:
    """XRGB8888 with rbuv_swap_switch: X dropped, R and B exchanged; YUV400: one channel."""
    cfg = (f"aipp_op {{ aipp_mode: static input_format: {fmt} src_image_size_w: 8 "
           f"src_image_size_h: 8 rbuv_swap_switch: {str(swap).lower()} mean_chn_0: 3 }}")
    c = 3 if channels == 4 else 1
    om = build(tmp_path, identity(c, 8, 8), "fmt", cfg)
    raw = np.random.default_rng(11).integers(0, 256, (1, 8, 8, channels), dtype=np.uint8)
    np.save(tmp_path / "raw.npy", raw)
    r = scenario(run_prog, "static", om, tmp_path / "raw.npy", tmp_path / "y.npy")
    assert r["input"]["size"] == 8 * 8 * channels and r["input"]["dims"] == [1, 8, 8, c]
    pixels = raw[0][:, :, [3, 2, 1]] if channels == 4 else raw[0]  # X R G B -> B G R
    want = normalise(pixels, [3, 0, 0], [0, 0, 0], [1.0, 1.0, 1.0])[None]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
