"""The ATC model path: ``convert`` (ONNX -> OM, ``--mode=0``) and ``dump`` (OM -> JSON,
``--mode=1``), plus :func:`run`, the argument handling of ``npuemu atc`` in model mode.

``convert`` loads and checks the ONNX model, folds constants, infers shapes (per batch gear
for ``--dynamic_batch_size``), lowers every node onto the op library (one error naming every
unsupported op and its node, before anything is written), orders the tasks, spreads
independent branches over streams, plans the workspace and writes the OM file atomically (a
temporary file renamed into place, so a failed conversion never leaves a half-written file).

Streams "where that helps": branches go to up to ``max_streams`` streams unless the plan then
needs more than :data:`STREAM_MEMORY_SLACK` times the serial lower bound, in which case fewer
streams are tried (down to one); concurrency that costs memory beyond that is refused.

Dynamic batch: one program per gear (shapes and op signatures differ per gear) over shared
weights and one workspace, planned at the largest gear; every smaller gear's block must fit
its slot, which is checked. Each op reference carries the op library's tiling for its
shapes (block_dim, rows, tile, loops). Ops that declare scratch (``OpDef.workspace``, e.g.
Conv2D's im2col matrix) get a ``<node>::workspace`` block of the plan, live during their
task only; each program lists its tasks' workspace blocks (``"workspaces"``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from npuemu.host.models import (
    aipp,
    fold,
    interface,
    lowering,
    omfile,
    onnx_front,
    planner,
    streams,
)
from npuemu.host.models.codes import (
    ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
    ACL_ERROR_GE_PARAM_INVALID,
    ModelError,
)
from npuemu.host.models.graph import ACL_FORMATS, Graph, Node, signature
from npuemu.host.ops import compiler, registry
from npuemu.host.ops.registry import Spec
from npuemu.shared.config import PROFILES, SOC_FAMILIES, soc_profile

STREAM_MEMORY_SLACK = 1.05
MAX_GEARS = 100


def parse_dynamic_batch(text: str | None) -> list[int]:
    """``--dynamic_batch_size="1,2,4,8"`` -> sorted distinct gears (2..100 of them, each > 0)."""
    if not text:
        return []
    try:
        gears = [int(x) for x in text.split(",")]
    except ValueError as exc:
        raise ModelError(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                         f"--dynamic_batch_size {text!r}: not a list of integers") from exc
    if len(set(gears)) != len(gears) or not 2 <= len(gears) <= MAX_GEARS or min(gears) < 1:
        raise ModelError(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                         f"--dynamic_batch_size {text!r}: needs 2..{MAX_GEARS} distinct "
                         "positive gears")
    return sorted(gears)


def _gear_shapes(shapes: dict[str, list[int]], gears: list[int]) -> list[dict[str, list[int]]]:
    marked = {n for n, dims in shapes.items() if -1 in dims}
    if gears and not marked:
        raise ModelError(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                         "--dynamic_batch_size needs -1 on N in --input_shape")
    if marked and not gears:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"--input_shape has -1 for {sorted(marked)} but no gears are given")
    for name in marked:
        if shapes[name][0] != -1 or shapes[name].count(-1) != 1:
            raise ModelError(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                             f"input {name!r}: only the batch dim (first) may be -1")
    if not gears:
        return [shapes]
    return [{n: [g if d == -1 else d for d in dims] for n, dims in shapes.items()}
            for g in gears]


def build_graphs(model: str | os.PathLike, input_shape: str | None = None,
                 dynamic_batch_size: str | None = None, **flags: Any
                 ) -> tuple[list[Graph], list[int], list[dict]]:
    """Front end + lowering for every gear (one graph for a static model), then the
    interface flags and AIPP (``host/models/interface.py``, ``aipp.py``); returns the graphs,
    the batch gears and the model definition's ``aipp`` entries."""
    gears = parse_dynamic_batch(dynamic_batch_size)
    hw = interface.parse_hw(flags.get("dynamic_image_size"))
    if gears and hw:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, "--dynamic_batch_size and "
                         "--dynamic_image_size cannot be used together")
    shapes = onnx_front.parse_input_shape(input_shape)
    base = interface.select_outputs(onnx_front.load(model), flags.get("out_nodes"))
    per_gear = interface.hw_gear_shapes(shapes, hw, flags.get("input_format", "NCHW")) \
        if hw else _gear_shapes(shapes, gears)
    graphs = [lowering.lower(onnx_front.prepare(base, s)) for s in per_gear]
    if fold.enabled(flags.get("fold")):  # BatchNorm / Mul / Add into the Conv or MatMul
        for g in graphs:
            fold.apply(g)
    entries = _interface(graphs, base, bool(hw), **flags)
    ref = graphs[-1]
    for g in graphs[:-1]:
        if [(n.op, n.inputs, n.outputs) for n in g.nodes] != \
           [(n.op, n.inputs, n.outputs) for n in ref.nodes] or g.weights.keys() != \
           ref.weights.keys():
            raise ModelError(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                             "the graph's structure or weights change with the batch size")
    return graphs, gears, entries


def _interface(graphs: list[Graph], base: Any, hw: bool, **flags: Any) -> list[dict]:
    """``--input_fp16_nodes``, ``--output_type`` and ``--insert_op_conf`` on every gear."""
    fp16 = interface.parse_fp16_nodes(flags.get("input_fp16_nodes"))
    configs = aipp.read(flags["insert_op_conf"]) if flags.get("insert_op_conf") else []
    if hw and any(not c.dynamic for c in configs):
        raise aipp.fail("static AIPP with --dynamic_image_size is not supported by npuemu")
    entries: list[dict] = []
    batches = {n: graphs[-1].tensors[n].shape[0] for n in graphs[-1].inputs
               if graphs[-1].tensors[n].shape}
    for g in graphs:
        entries = aipp.insert(g, configs, fp16, flags.get("input_format", "NCHW"),
                              batches) if configs else []
        interface.fp16_inputs(g, fp16)
        interface.output_types(g, base, flags.get("output_type"))
    return entries


def op_workspace(graph: Graph) -> Callable[[Node], int]:
    """Bytes of scratch each node's op declares for its shapes (``OpDef.workspace``)."""
    def need(node: Node) -> int:
        op = registry.lookup(node.op)
        if op.workspace is None:
            return 0
        ins = [Spec(graph.tensors[n].dtype, tuple(graph.tensors[n].shape))
               for n in node.inputs if n]
        outs = [Spec(graph.tensors[n].dtype, tuple(graph.tensors[n].shape))
                for n in node.outputs]
        return compiler.workspace_of(op, ins, outs, node.attrs)
    return need


def schedule_and_plan(graph: Graph, max_streams: int = 4
                      ) -> tuple[streams.Schedule, planner.MemoryPlan]:
    """The most streams (<= max_streams) whose plan (intermediates and op workspaces)
    stays within the memory slack."""
    workspace = op_workspace(graph)
    for count in range(max(1, max_streams), 0, -1):
        sched = streams.assign_streams(graph, count)
        mplan = planner.plan(graph, sched, workspace)
        if count == 1 or mplan.size <= STREAM_MEMORY_SLACK * mplan.lower_bound:
            return sched, mplan
    raise AssertionError("unreachable")


def convert(model: str | os.PathLike, output: str | os.PathLike, soc_version: str,
            input_shape: str | None = None, input_format: str = "NCHW",
            dynamic_batch_size: str | None = None, max_streams: int = 4,
            **flags: Any) -> dict[str, Any]:
    """ONNX -> OM (ATC ``--mode=0 --framework=5``). Returns the report; raises ModelError.
    ``flags``: ``insert_op_conf``, ``input_fp16_nodes``, ``output_type``, ``out_nodes``,
    ``dynamic_image_size`` (ATC's flags of those names); ``fold`` (bool): the weight-folding
    passes of :mod:`.fold` (default: on unless ``NPUEMU_ATC_FOLD=off``)."""
    profile = soc_profile(soc_version)  # a family name (Ascend910_93) means its profile
    if profile is None:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"--soc_version {soc_version!r} unknown (known: "
                         f"{sorted([*PROFILES, *SOC_FAMILIES])})")
    soc_version = profile.name
    if input_format not in ACL_FORMATS:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"--input_format {input_format!r}")
    graphs, gears, entries = build_graphs(model, input_shape, dynamic_batch_size,
                                          input_format=input_format, **flags)
    big = graphs[-1]
    sched, mplan = schedule_and_plan(big, max_streams)
    planner.verify(mplan, big, sched)
    for g in graphs[:-1]:
        for blk in planner.collect_blocks(g, op_workspace(g)):
            if blk.size > mplan.blocks[blk.name].size:
                raise ModelError(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                                 f"{blk.name!r} grows when the batch shrinks")
    om = _assemble(graphs, gears, sched, mplan, soc_version, input_format)
    hw = interface.parse_hw(flags.get("dynamic_image_size"))
    om.model_def.update(aipp=entries, dynamic_hw=hw)
    om.dynamic = om.dynamic or bool(hw)
    for prog, gear in zip(om.programs, hw, strict=False):
        prog["hw"] = gear
    path = os.fspath(output)
    path = path if path.endswith(".om") else path + ".om"
    size = omfile.write(path, om)
    return {"om": path, "bytes": size, **om.model_def["report"]}


def _assemble(graphs: list[Graph], gears: list[int], sched: streams.Schedule,
              mplan: planner.MemoryPlan, soc: str, fmt: str) -> omfile.OmModel:
    big = graphs[-1]
    blob, offsets = omfile.pack_weights({k: v.tobytes() for k, v in big.weights.items()})
    programs: list[Any] = []
    op_refs: list[Any] = []
    index: dict[Any, Any] = {}
    for g, batch in zip(graphs, gears or [0] * len(graphs), strict=True):
        tasks, scratch = [], []
        for i, node in enumerate(g.nodes):
            key = signature(g, node)
            if key not in index:
                index[key] = len(op_refs)
                op_refs.append([node.op, node.attrs, node.tiling])
            tasks.append([index[key], node.inputs, node.outputs, sched.stream_of[i]])
            ws = f"{node.name}::workspace"
            scratch.append(ws if ws in mplan.blocks else "")
        programs.append({"batch": batch, "streams": sched.streams,
                         "events": [list(e) for e in sched.events], "tasks": tasks,
                         "workspaces": scratch})
    tensors = []
    for name, t in big.tensors.items():
        shapes = [list(g.tensors[name].shape) for g in graphs]
        locate: dict[str, Callable[[str], Any]] = {
            "weight": lambda n: [offsets[n], big.tensors[n].nbytes],
            "intermediate": lambda n: mplan.aliases.get(n, n),  # its block (maybe shared)
            "input": big.inputs.index, "output": big.outputs.index}
        where = locate[t.kind](name)
        tensors.append([name, t.dtype, t.kind, shapes, where])
    report = {**mplan.report(), "streams": len(sched.streams), "events": len(sched.events),
              "tasks": len(big.nodes), "op_signatures": len(op_refs),
              "weight_bytes": len(blob)}
    model_def = {"name": big.name, "soc_version": soc, "framework": 5, "input_format": fmt,
                 "inputs": big.inputs, "outputs": big.outputs, "dynamic_batch": gears,
                 "report": report}
    plan_part = {"size": mplan.size, "naive": mplan.naive, "lower_bound": mplan.lower_bound,
                 "blocks": [[b.name, b.offset, b.size, b.producer, b.users]
                            for b in mplan.blocks.values()]}
    return omfile.OmModel(omfile.FORMAT_VERSION, big.name[:32], bool(gears), model_def,
                          tensors, programs, op_refs, plan_part, blob)


def dump(om_path: str | os.PathLike, json_path: str | os.PathLike) -> dict[str, Any]:
    """OM -> JSON (ATC ``--mode=1 --om X.om --json X.json``): everything but weight bytes.
    A bad OM file is its read code (145000 / 145002), an unwritable JSON path 100004."""
    om = omfile.read_file(om_path)
    doc = {"format_version": om.version, "name": om.name, "dynamic": om.dynamic,
           "model_def": om.model_def, "weights_bytes": om.weight_size,
           "tensors": [dict(zip(("name", "dtype", "kind", "shapes", "location"), t,
                                strict=True)) for t in om.tensors],
           "op_refs": [dict(zip(("op", "attrs", "tiling"), r, strict=True))
                       for r in om.op_refs],
           "programs": om.programs, "memory_plan": om.memory_plan}
    try:
        text = json.dumps(doc, indent=1, default=str)
    except (TypeError, ValueError, RecursionError) as exc:  # omcheck keeps these out
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"{om_path}: cannot be dumped as JSON: "
                         f"{exc!r}") from exc
    try:
        with open(json_path, "w") as f:
            f.write(text)
    except (OSError, TypeError, ValueError) as exc:
        raise ModelError(100004, f"cannot write {json_path!r}: {exc}") from exc  # WRITE_FILE
    return doc


def parser() -> argparse.ArgumentParser:
    """The ATC flags of model mode (those of the real ``atc``), for ``tools/atc.py`` to wire in."""
    p = argparse.ArgumentParser(
        prog="npuemu atc", description="ONNX -> OM offline model",
        epilog="single-op mode: npuemu atc --singleop=ops.json --output=DIR (see "
               "`npuemu atc --singleop=- -h`)")
    p.add_argument("--mode", type=int, default=0, choices=(0, 1),
                   help="0: convert --model into --output.om (default); 1: dump --om to --json")
    p.add_argument("--model", help="the ONNX model to convert (mode 0)")
    p.add_argument("--framework", type=int, default=5, help="5 (ONNX), the only one")
    p.add_argument("--output", help="the OM file to write, without .om (mode 0)")
    p.add_argument("--soc_version", help="required in mode 0: Ascend910B1..Ascend910B4, "
                   "Ascend910_9391 (Ascend910_93), Ascend310P3 or Ascend310B1")
    p.add_argument("--input_shape", help='e.g. "x:-1,3,224,224" (-1: the dynamic batch dim)')
    p.add_argument("--input_format", default="NCHW", help="NCHW (default), NHWC, ND or NCDHW")
    p.add_argument("--dynamic_batch_size", help='batch gears with a -1 input dim, e.g. "1,2,4"')
    p.add_argument("--dynamic_image_size", help='H,W gears with -1 H and W input dims, e.g. '
                   '"224,224;448,448"')
    p.add_argument("--insert_op_conf", help="AIPP configuration file (static or dynamic AIPP)")
    p.add_argument("--input_fp16_nodes", help='inputs that take float16 data, e.g. "x;y"')
    p.add_argument("--output_type", help='FP32, FP16, UINT8 or INT8, or "node:0:FP16;..."')
    p.add_argument("--out_nodes", help='the model\'s outputs, e.g. "prob:0;fc:0"')
    p.add_argument("--log", default="null", choices=("debug", "info", "warning", "error", "null"),
                   help="info or debug: print the memory plan's report (JSON, on stderr)")
    p.add_argument("--om", help="the OM file to dump (mode 1)")
    p.add_argument("--json", help="where the dump goes (mode 1)")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    """``npuemu atc`` model mode: 0 on success, 1 with an ``ATC run failed`` message."""
    args = parser().parse_args(argv)
    try:
        if args.mode == 1:
            _need(args, "om", "json")
            dump(args.om, args.json)
        else:
            _need(args, "model", "output", "soc_version")
            if args.framework != 5:
                raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                                 f"--framework={args.framework}: only 5 (ONNX) is supported")
            report = convert(args.model, args.output, args.soc_version, args.input_shape,
                             args.input_format, args.dynamic_batch_size,
                             **{k: getattr(args, k) for k in _FLAGS})
            if args.log in ("debug", "info"):
                print(json.dumps(report), file=sys.stderr)
    except ModelError as exc:
        print(f"ATC run failed: {exc}", file=sys.stderr)
        return 1
    print("ATC run success, welcome to the next use.")
    return 0


_FLAGS = ("insert_op_conf", "input_fp16_nodes", "output_type", "out_nodes", "dynamic_image_size")


def _need(args: argparse.Namespace, *names: str) -> None:
    missing = [f"--{n}" for n in names if not getattr(args, n)]
    if missing:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"missing {', '.join(missing)}")
