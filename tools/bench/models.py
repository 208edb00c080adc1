"""``npuemu bench`` figures of offline models (``host/models``), each beside a limit measured
in the same run.

The figure ``models`` converts models with ``npuemu.host.models.atc`` in the bench process
(host work only) and runs the device measurements in a child (``python -m npuemu.tools.bench
--child-of npuemu.tools.bench.models --child IN OUT``, i.e. ``child_main``) with a fresh
one-card embedded node. Records:

* ``plan <model>``: the MemoryPlanner's workspace, bytes [the lower bound: the largest total
  of bytes live at one step of the task order]; target ≤ 1.05x. The saving against the
  naive sum (every intermediate its own memory) is noted. Every light model of the ``onnx``
  package (``--quick``: SqueezeNet only).
* ``load <model>``: ``acl.mdl.load_from_file`` (read, weights to HBM, ops compiled or taken
  from the op caches), ms [onnxruntime ``InferenceSession`` creation for the same ONNX].
  ``acl.mdl`` (imported on first use) is imported before the first load is timed, as
  onnxruntime is imported before its sessions are.
* ``ResNet-50 b1 latency``: median ``acl.mdl.execute`` of light ResNet-50 with random
  weights, ms [onnxruntime, one intra-op thread, same input]; target ≤ 1.5x. ``--quick``
  measures light SqueezeNet instead (``SqueezeNet b1 latency``, same limit and target).
* ``latency <model>``: median ``acl.mdl.execute`` of every light model (its shipped
  weights, a random input), ms [onnxruntime, one intra-op thread, same input]; target
  ≤ 2x. Not in ``--quick``.
* ``1000-op chain per op``: ``acl.mdl.execute`` of a chain of 1,000 tiny Relu/Neg ops (16
  floats), µs per op [numpy doing the same 1,000 ops in-process]; fixed target ≤ 10 µs. An
  execute is one ``MODEL_EXECUTE`` task, so this is the card's per-op cost (the kernel's
  own Python, views reused across executes); it is wall time, so a loaded host inflates it
  along with the numpy limit.

Without onnxruntime (it comes with the ``test`` extra, not with a plain install) the figure
is skipped with a note: its limits are onnxruntime timings.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.runner import child_env, run_module
from npuemu.tools.bench.sampling import check_ret

LIGHT = ["squeezenet", "shufflenet", "resnet50", "inception_v1", "inception_v2",
         "densenet121", "bvlc_alexnet", "zfnet512", "vgg19"]
QUICK = ["squeezenet"]
CHAIN = 1000


def _light(name: str) -> str:
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")


def _chain_model(path: str) -> None:
    import onnx
    from onnx import TensorProto, helper
    nodes, prev = [], "x"
    for i in range(CHAIN):
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [f"t{i}"]))
        prev = f"t{i}"
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [16])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def _random_weights(name: str, path: str) -> None:
    import onnx
    from onnx import numpy_helper

    from npuemu.host.models import onnx_front
    model = onnx_front.prepare(onnx.load(_light(name)))
    rng = np.random.default_rng(0)
    variances = {n.input[4] for n in model.graph.node if n.op_type == "BatchNormalization"}
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype == np.float32:
            new = rng.standard_normal(arr.shape).astype(np.float32) * 0.05
            new = np.abs(new) + 0.5 if init.name in variances else new
            init.CopyFrom(numpy_helper.from_array(new, init.name))
    onnx.save(model, path)


def _ort_session(path: str):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


@figure("models", timeout=1800.0)
def fig_models(ctx: Context) -> list[Record]:
    """Offline-model figures (see the module docstring)."""
    import importlib.util

    from npuemu.host.models import atc
    if importlib.util.find_spec("onnxruntime") is None:  # the limits need it (the test extra)
        ctx.note("models skipped: onnxruntime, whose timings are this figure's limits, is not "
                 "installed (pip install 'npuemu[test]')")
        return []
    records: list[Record] = []
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-models-") as tmp:
        jobs = {}
        for name in QUICK if ctx.quick else LIGHT:
            rep = atc.convert(_light(name), os.path.join(tmp, name), "Ascend910B1")
            records.append(Record(f"plan {name}", rep["planned_bytes"], "B", "lower bound",
                                  rep["lower_bound_bytes"],
                                  Target("≤ 1.05x lower bound", "ratio", "<=", 1.05)))
            ctx.note(f"plan {name}: {rep['savings_pct']:.1f} % below the naive "
                     f"{rep['naive_bytes'] / 2**20:.1f} MiB, {rep['streams']} stream(s)")
            t0 = time.perf_counter()
            sess = _ort_session(_light(name))
            jobs[name] = {"om": rep["om"], "ort_load_s": time.perf_counter() - t0}
            if not ctx.quick:
                jobs[name].update(_ort_latency(sess, os.path.join(tmp, f"x_{name}.npy")))
        latency_model = "squeezenet" if ctx.quick else "resnet50"
        _random_weights(latency_model, os.path.join(tmp, "rn.onnx"))
        jobs["resnet_random"] = {"om": atc.convert(os.path.join(tmp, "rn.onnx"),
                                                   os.path.join(tmp, "rn"),
                                                   "Ascend910B1")["om"]}
        _chain_model(os.path.join(tmp, "chain.onnx"))
        jobs["chain"] = {"om": atc.convert(os.path.join(tmp, "chain.onnx"),
                                           os.path.join(tmp, "chain"), "Ascend910B1")["om"]}
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        sess = _ort_session(os.path.join(tmp, "rn.onnx"))
        feed = {sess.get_inputs()[0].name: x}
        sess.run(None, feed)
        ort_ms = statistics.median(_time(lambda: sess.run(None, feed), 3 if ctx.quick else 5))
        small = np.random.default_rng(2).standard_normal(16).astype(np.float32)
        def numpy_chain() -> None:
            v = small
            for i in range(CHAIN):
                v = np.maximum(v, 0) if i % 2 else -v
        numpy_us = statistics.median(_time(numpy_chain, 7)) * 1e3 / CHAIN
        spec, out = os.path.join(tmp, "jobs.json"), os.path.join(tmp, "out.json")
        with open(spec, "w") as f:
            json.dump({"jobs": jobs, "x": os.path.join(tmp, "x.npy"), "quick": ctx.quick}, f)
        _spawn(ctx, child_env(1), "--child", spec, out)
        with open(out) as f:
            got = json.load(f)
    for name, job in jobs.items():
        if "ort_load_s" in job:
            records.append(Record(f"load {name}", got["load_s"][name] * 1e3, "ms",
                                  "onnxruntime session", job["ort_load_s"] * 1e3,
                                  Target("≤ 2x onnxruntime", "ratio", "<=", 2.0)))
    for name, job in jobs.items():
        if "ort_ms" in job:
            records.append(Record(f"latency {name}", got["latency_ms"][name], "ms",
                                  "onnxruntime 1 thread", job["ort_ms"],
                                  Target("≤ 2x onnxruntime", "ratio", "<=", 2.0)))
    label = "SqueezeNet" if ctx.quick else "ResNet-50"
    records.append(Record(f"{label} b1 latency", got["resnet_ms"], "ms",
                          "onnxruntime 1 thread", ort_ms,
                          Target("≤ 1.5x onnxruntime", "ratio", "<=", 1.5)))
    records.append(Record("1000-op chain per op", got["chain_us"], "µs", "numpy per op",
                          numpy_us, Target("≤ 10 µs (fixed target)", "value", "<=", 10.0)))
    return records


def _ort_latency(sess: Any, x_path: str) -> dict[str, Any]:
    """onnxruntime's median ms on a random input of the model's input shape (saved at
    ``x_path`` for the child), one untimed run first."""
    info = sess.get_inputs()[0]
    x = np.random.default_rng(3).standard_normal(info.shape).astype(np.float32)
    np.save(x_path, x)
    sess.run(None, {info.name: x})
    ms = statistics.median(_time(lambda: sess.run(None, {info.name: x}), 3))
    return {"x": x_path, "ort_ms": ms}


def _time(fn, n: int) -> list[float]:
    """Milliseconds of ``n`` calls of ``fn``."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _child(spec_path: str, out: str) -> int:
    from npuemu.tools.cli import install_acl
    install_acl()
    acl: Any = importlib.import_module("acl")  # the emulator's pyACL face (untyped)

    with open(spec_path) as f:
        spec = json.load(f)
    check_ret(acl.init(), "init")
    check_ret(acl.rt.set_device(0), "set_device")
    mdl = acl.mdl  # the module's import is not the first model's load
    load_s, ids = {}, {}
    for name, job in spec["jobs"].items():
        t0 = time.perf_counter()
        ids[name], ret = mdl.load_from_file(job["om"])
        check_ret(ret, f"load {name}")
        load_s[name] = time.perf_counter() - t0
    x = np.load(spec["x"])
    resnet = _run(acl, ids["resnet_random"], x, 1 if spec["quick"] else 3)
    latency = {name: _run(acl, ids[name], np.load(job["x"]), 3)
               for name, job in spec["jobs"].items() if "x" in job}
    chain = _run(acl, ids["chain"], np.ones(16, np.float32), 5)
    for mid in ids.values():
        check_ret(acl.mdl.unload(mid), "unload")
    with open(out, "w") as f:
        json.dump({"load_s": load_s, "resnet_ms": resnet, "chain_us": chain * 1e3 / CHAIN,
                   "latency_ms": latency}, f)
    acl.rt.reset_device(0)
    return 0


def _run(acl, model_id: int, x: np.ndarray, n: int) -> float:
    """Median ms of ``acl.mdl.execute`` (one untimed run first)."""
    desc = acl.mdl.create_desc()
    check_ret(acl.mdl.get_desc(desc, model_id), "get_desc")
    sets, ptrs = [], []
    for count, size_of in ((acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                           (acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
        ds = acl.mdl.create_dataset()
        for i in range(count):
            size = size_of(desc, i)
            ptr, ret = acl.rt.malloc(size, 0)
            check_ret(ret, "malloc")
            ptrs.append(ptr)
            acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
        sets.append(ds)
    data = np.ascontiguousarray(x).tobytes()
    check_ret(acl.rt.memcpy(ptrs[0], len(data), acl.util.bytes_to_ptr(data), len(data), 1), "h2d")
    check_ret(acl.mdl.execute(model_id, *sets), "execute")
    times = _time(lambda: check_ret(acl.mdl.execute(model_id, *sets), "execute"), n)
    for p in ptrs:
        acl.rt.free(p)
    acl.mdl.destroy_desc(desc)
    return statistics.median(times)


def _spawn(ctx: Context, env: dict, *args: str) -> None:
    run_module(ctx, "npuemu.tools.bench.models", env, list(args), 1500)


def child_main(argv: list[str]) -> int:
    """The figure's child (``runner.run_module``): ``--child IN OUT``."""
    return _child(argv[1], argv[2])
