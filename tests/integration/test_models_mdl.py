"""acl.mdl through real workers: the image-classification sample flow (load from file,
descriptor queries, malloc per input/output size, datasets, execute, read back, unload) on
OM files made by ``atc.convert`` from ONNX models, compared with onnxruntime; the four
memory regions (no device allocation during execute); WithMem loads and query_size; dynamic
batch; the error paths (bad file, wrong buffer count or size, execute after unload)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from childprog import run_program

from npuemu.host.models import atc
from tests.unit.test_models_frontend import light, run_ort, without_final_softmax
from tests.unit.test_models_lowering import randomize_weights
from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "2G", "NPUEMU_DDR": "256M"}

PROG = "models_mdl.py"
"""The child program (``tests/progs/models_mdl.py``): one scenario a test."""


def ort_run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def convert(model: onnx.ModelProto, tmp_path, name: str, **kw) -> str:
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return atc.convert(path, tmp_path / name, "Ascend910B1", **kw)["om"]


def test_sample_flow_small_cnn_matches_onnxruntime(run_prog, tmp_path) -> None:
    model = small_cnn()
    om = convert(model, tmp_path, "cnn")
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    npys = tmp_path / "x.npy", tmp_path / "y.npy"
    r = run_program(run_prog, PROG, "flow", om, *npys, env=ENV, timeout=120)
    y = np.load(tmp_path / "y.npy")
    np.testing.assert_allclose(y, ort_run(model, x), rtol=1e-4, atol=1e-5)
    assert r["no_alloc_in_execute"] == [True, True, 2]
    assert r["streams"] == 2  # the schedule puts the two pooling branches on two streams
    # one stream task per execute, whatever the number of ops
    assert r["stream_tasks"] == 2 and r["submissions"] == 2 and r["ops"] > 2
    assert r["scratch"] == [True]  # the padded Conv2D works in its planned workspace block
    assert r["in_dims"] == {"name": "x", "dimCount": 4, "dims": [1, 3, 8, 8]}
    assert r["names"] == ["x", "y"]


def test_light_squeezenet_with_random_weights_matches_onnxruntime(run_prog, tmp_path) -> None:
    from npuemu.host.models import onnx_front
    model = randomize_weights(onnx_front.prepare(onnx.load(light("squeezenet"))), 7)
    om = convert(model, tmp_path, "squeezenet")
    x = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    npys = tmp_path / "x.npy", tmp_path / "y.npy"
    run_program(run_prog, PROG, "flow", om, *npys, env=ENV, timeout=300)
    want = ort_run(model, x)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-3, atol=1e-5)


def test_dynamic_batch_gear(run_prog, tmp_path) -> None:
    model = small_cnn("N")
    om = convert(model, tmp_path, "dyn", input_shape="x:-1,3,8,8", dynamic_batch_size="1,2,4")
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    npys = tmp_path / "x.npy", tmp_path / "y.npy"
    r = run_program(run_prog, PROG, "dynamic_batch", om, *npys, env=ENV, timeout=120)
    assert r["gears"] == [{"batchCount": 3, "batch": [1, 2, 4]}, 0]
    assert r["n_in"] == 2 and r["size0"] == 4 * 3 * 8 * 8 * 4
    assert r["in_dims"]["dims"] == [-1, 3, 8, 8]
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (2, 5)
    np.testing.assert_allclose(y, ort_run(model, x), rtol=1e-4, atol=1e-5)


def test_with_mem_query_size_and_error_paths(run_prog, tmp_path) -> None:
    om = convert(small_cnn(), tmp_path, "cnn")
    (tmp_path / "bad.om").write_bytes(Path(om).read_bytes()[:-10])
    r = run_program(run_prog, PROG, "with_mem_and_errors", om, tmp_path / "bad.om",
                    tmp_path / "none.om", env=ENV, timeout=120)
    assert r["sizes"] == [True, True] and r["with_mem_allocs"] == 0
    assert r["small_work"] == 145006
    assert r["bad_file"] == 145000 and r["missing"] == 145002
    assert r["no_inputs"] == 145000 and r["small_input"] == 145000
    assert r["after_unload"] == 145003 and r["unload_twice"] == 145003
    assert r["get_desc_unloaded"] == 145003


# The light models whose full run through a card is slow (weights, load, the largest
# convolutions) run whole only with NPUEMU_TEST_BIG_MODELS=1; without it, each of them except
# VGG-19 runs as its prefix through every op configuration none of the default ones has (see
# ``test_big_light_model_prefixes_match_onnxruntime``).
BIG_VAR = "NPUEMU_TEST_BIG_MODELS"
_BIG = pytest.mark.skipif(os.environ.get(BIG_VAR) != "1",
                          reason=f"a slow light model run whole; set {BIG_VAR}=1")
LIGHT_DEFAULT = ["squeezenet", "shufflenet", "inception_v1", "inception_v2"]
LIGHT_BIG = ["resnet50", "densenet121", "bvlc_alexnet", "zfnet512", "vgg19"]
LIGHT_ALL = LIGHT_DEFAULT + [pytest.param(n, marks=_BIG) for n in LIGHT_BIG]
PREFIXED = LIGHT_BIG[:-1]
"""VGG-19 has no prefix run: its configurations are AlexNet's and ZFNet's but one MaxPool,
behind two 224x224x64 convolutions (the slowest part of its run)."""


def _dummy_input(model: onnx.ModelProto) -> tuple[str, np.ndarray]:
    """The onnx backend runner's input for the light models (``generate_dummy_data``)."""
    inits = {i.name for i in model.graph.initializer}
    x = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    n = int(np.prod(shape))
    return x.name, (np.arange(n).reshape(shape) / n).astype(np.float32)


def _split_softmax(model: onnx.ModelProto) -> tuple[onnx.ModelProto, onnx.ModelProto | None]:
    """The model without its final Softmax (the Softmax's input becomes the graph output), and
    that Softmax alone as a one-node model of the same opset; ``(model, None)`` when the model
    does not end in a Softmax."""
    last = model.graph.node[-1]
    if last.op_type != "Softmax":
        return model, None
    node = onnx.helper.make_node("Softmax", ["logits"], ["probs"])
    node.attribute.extend(last.attribute)
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph([node], "softmax",
                                   [value("logits", onnx.TensorProto.FLOAT, None)],
                                   [value("probs", onnx.TensorProto.FLOAT, None)])
    alone = onnx.helper.make_model(graph, opset_imports=model.opset_import,
                                   ir_version=model.ir_version)
    return without_final_softmax(model), alone


def _typed(model: onnx.ModelProto, shape: tuple[int, ...]) -> onnx.ModelProto:
    """``model`` with its one input and output given the float32 ``shape``."""
    for vi in (model.graph.input[0], model.graph.output[0]):
        vi.CopyFrom(onnx.helper.make_tensor_value_info(vi.name, onnx.TensorProto.FLOAT, shape))
    return model


def _shipped_output(name: str) -> np.ndarray:
    expected = onnx.TensorProto()
    with open(light(name)[:-5] + "_output_0.pb", "rb") as f:
        expected.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(expected)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_ALL)
def test_light_model_matches_its_expected_output(run_prog, tmp_path, name: str) -> None:
    """Every light model: npuemu atc, then acl.mdl.execute. The light models' weights are
    constant, so the logits before their final Softmax are all equal and large (up to ~1e19):
    a softmax over them turns float32 summation-order differences (ours, onnxruntime's, the
    shipped output's) into 0 or 1. So the model without that Softmax is compared with
    onnxruntime to a relative tolerance, and the Softmax runs alone (as its own model) on
    equal logits, where the exact answer is the shipped uniform output, and on well-scaled
    random logits, against onnxruntime. A model without a final Softmax is compared with
    both onnxruntime and its shipped output."""
    model = onnx.load(light(name))
    body, softmax = _split_softmax(model)
    in_name, x = _dummy_input(model)
    logits = run_ort(body, {in_name: x})[0]
    jobs = [(convert(body, tmp_path, name), x)]
    if softmax is not None:
        _typed(softmax, logits.shape)
        sm_om = convert(softmax, tmp_path, name + "_softmax")
        scaled = np.random.default_rng(5).standard_normal(logits.shape).astype(np.float32) * 4
        jobs += [(sm_om, np.full_like(logits, logits.flat[0])), (sm_om, scaled)]
    for k, (_om, xk) in enumerate(jobs):
        np.save(tmp_path / f"x{k}.npy", xk)
    run_program(run_prog, PROG, "run_many", tmp_path, json.dumps([om for om, _ in jobs]),
                env=ENV, timeout=900)
    got = [np.load(tmp_path / f"y{k}.npy").view(np.float32)[:xk.size] for k, (_, xk) in
           enumerate(jobs)]
    np.testing.assert_allclose(got[0].reshape(logits.shape), logits, rtol=1e-4, atol=1e-6)
    want = _shipped_output(name)
    if softmax is None:
        np.testing.assert_allclose(got[0].reshape(want.shape), want, rtol=1e-4, atol=1e-6)
        return
    np.testing.assert_allclose(got[1].reshape(want.shape), want, rtol=1e-6, atol=0)
    np.testing.assert_allclose(got[2].reshape(logits.shape),
                               run_ort(softmax, {"logits": scaled})[0], rtol=1e-5, atol=1e-7)


def _configs(model: onnx.ModelProto) -> list[tuple | None]:
    """Each node's op configuration (type and attributes); None for a ConstantOfShape (the
    light models' weights)."""
    return [None if n.op_type == "ConstantOfShape" else
            (n.op_type, tuple(sorted((a.name, str(onnx.helper.get_attribute_value(a)))
                                     for a in n.attribute)))
            for n in model.graph.node]


def big_prefix(name: str) -> onnx.ModelProto:
    """Light model ``name`` up to the output of the last node that is the first of its op
    configuration to appear in no default light model, with random weights (prepared)."""
    from npuemu.host.models import onnx_front
    seen = set().union(*(_configs(onnx.load(light(n))) for n in LIGHT_DEFAULT))
    model = onnx.load(light(name))
    configs = _configs(model)
    cut = max(configs.index(c) for c in set(configs) - seen)
    out = model.graph.node[cut].output[0]
    need, keep = {out}, []
    for node in reversed(model.graph.node[:cut + 1]):  # the cut output's ancestors
        if need & set(node.output):
            keep.append(node)
            need |= set(node.input)
    del model.graph.node[:]
    model.graph.node.extend(reversed(keep))
    del model.graph.output[:]
    model.graph.output.append(onnx.helper.make_tensor_value_info(  # a Conv's or a pool's
        out, onnx.TensorProto.FLOAT, ["n", "c", "h", "w"]))
    return randomize_weights(onnx_front.prepare(model), 11)


@pytest.mark.slow
def test_big_light_model_prefixes_match_onnxruntime(run_prog, tmp_path) -> None:
    """The slow light models but VGG-19 as their prefixes (``big_prefix``: every op
    configuration of theirs that the default light models lack, with random weights),
    converted by atc, all run in one child through acl.mdl.execute, against onnxruntime."""
    oms, wants = [], []
    for k, name in enumerate(PREFIXED):
        model = big_prefix(name)
        in_name, x = _dummy_input(model)
        np.save(tmp_path / f"x{k}.npy", x)
        oms.append(convert(model, tmp_path, name))
        wants.append(run_ort(model, {in_name: x})[0])
    run_program(run_prog, PROG, "run_many", tmp_path, json.dumps(oms), env=ENV, timeout=600)
    for k, (name, want) in enumerate(zip(PREFIXED, wants, strict=True)):
        got = np.load(tmp_path / f"y{k}.npy").view(np.float32)[:want.size].reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5 * np.abs(want).max(),
                                   err_msg=name)


def test_pythonic_model_face(run_prog, tmp_path) -> None:
    model = small_cnn("N")
    om = convert(model, tmp_path, "dyn", input_shape="x:-1,3,8,8", dynamic_batch_size="1,4")
    x = np.random.default_rng(4).standard_normal((4, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    npys = tmp_path / "x.npy", tmp_path / "y.npy"
    r = run_program(run_prog, "models_api.py", "model_face", om, *npys,
                    tmp_path / "none.om", env=ENV, timeout=120)
    assert r == {"gears": [1, 4], "bad_gear": 145013, "unloaded": 145003, "missing": 145002}
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ort_run(model, x), rtol=1e-4,
                               atol=1e-5)


def test_small_models_through_acl_mdl_match_expected_outputs(run_prog, tmp_path, capsys) -> None:
    """Every small model of the onnx package whose ops npuemu covers compiles with atc and,
    run through acl.mdl.execute on a real worker, matches its shipped expected outputs."""
    from npuemu.host.models.codes import ModelError
    from tests.unit.test_models_lowering import _shipped_data, _small_models
    cases, refused = {}, 0
    for path in _small_models():
        name = path.split("/")[-2]
        data = _shipped_data(path)
        if data is None:
            continue
        feeds, want = data
        shape = ";".join(f"{k}:{','.join(map(str, v.shape))}" for k, v in feeds.items())
        try:
            om = atc.convert(path, tmp_path / name, "Ascend910B1", input_shape=shape or None)
        except ModelError:
            refused += 1
            continue
        folder = tmp_path / f"{name}.data"
        folder.mkdir()
        for k, x in enumerate(feeds.values()):
            np.save(folder / f"in{k}.npy", x)
        cases[name] = (om["om"], len(feeds), want, str(folder))
    jobs = {n: (om, n_in, folder) for n, (om, n_in, _w, folder) in cases.items()}
    run_program(run_prog, PROG, "run_cases", json.dumps(jobs), env=ENV, timeout=900)
    for name, (_om, _n, want, folder) in cases.items():
        for k, w in enumerate(want):
            got = np.load(f"{folder}/out{k}.npy").view(w.dtype)[:w.size].reshape(w.shape)
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4, err_msg=name)
    with capsys.disabled():
        print(f"\nsmall models through acl.mdl: {len(cases)} match their expected outputs, "
              f"{refused} refused by atc (ops the library does not cover)")
    assert len(cases) >= 130


def test_op_failure_and_hang_during_a_model(run_prog, tmp_path) -> None:
    """An AI Core fault in the model's Conv2D fails execute with 507015 and reaches the
    exception callback; a hung task makes synchronize-with-timeout return 507046; after
    stream_abort and unload (which drops the model's own streams' queued tasks) a reloaded
    model runs correctly."""
    model = small_cnn()
    om = convert(model, tmp_path, "cnn")
    x = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    npys = tmp_path / "x.npy", tmp_path / "y.npy"
    r = run_program(run_prog, PROG, "fault_and_hang", om, *npys, env=ENV, timeout=120)
    assert r["fault"] == 507015 and r["callback"] == [507015]
    assert r["timeout"] == 507046 and r["abort"] == 0 and r["again"] == 0
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ort_run(model, x)[0], rtol=1e-4,
                               atol=1e-5)
