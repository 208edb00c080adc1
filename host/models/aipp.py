"""AIPP in ATC: the ``--insert_op_conf`` file, its checks, and the ``Aipp`` tasks it inserts.

The file is protobuf text of CANN's ``InsertNewOps`` message (``aipp_op { aipp_mode: static
input_format: YUV420SP_U8 src_image_size_w: 224 ... }``, ``#`` comments, one ``aipp_op``
block per model input it pre-processes, ``related_input_rank`` naming the input). It is
parsed by protobuf's own text parser against a schema built here with the message's field
names, types and numbers, so an unknown field, a bad value or a syntax error is refused as
CANN's parser refuses it.

Checks: CANN ATC's (its ``E10043`` reasons: aipp_mode set, the CSC / normalisation lists not
repeated, max_src_image_size > 0 for dynamic AIPP, input_format set and sizes not negative
for static AIPP; ``E10034``: an input with AIPP cannot also be in ``--input_fp16_nodes``),
then the ranges CANN's documentation and configuration template give (source size 1..4096,
YUV420SP sizes and crop offsets even, the crop inside the source, mean 0..255, min 0..255,
var_reci within float16, matrix int16, biases 0..255), then the result
of crop, scaling and padding equal to the model input's H and W, its C the format's. Each
failure is ``ACL_ERROR_GE_PARAM_INVALID`` (145000) with the ATC message.

Defaults as ATC fills them: a source size of 0 is the model's W / H; a crop size of 0 is
what the model input needs (after padding); CSC matrices not given are CANN's default
BT.601 matrices (YUV -> RGB, or RGB -> YUV for RGB inputs) and biases (16, 128, 128);
var_reci 1.0. The padding value is ``padding_value`` (the field CANN's documentation shows)
or ``cpadding_value`` (the older schema's).

The model then takes the raw image: static AIPP: uint8 ``N x (H*3/2) x W x 1`` for
YUV420SP, ``N x H x W x 3`` for RGB888, ``x 4`` for XRGB8888, ``x 1`` for YUV400 (what
``aclmdlGetInputDimsV2`` reports; ``aclmdlGetInputDims`` shows ``N, H, W, C`` NHWC);
dynamic AIPP: ``max_src_image_size`` bytes, plus an input ``ascend_dynamic_aipp_data``
(``64 + 96 * N`` bytes, N the largest batch gear's) for the parameters (a second dynamic
AIPP input's is ``ascend_dynamic_aipp_data_1``, and so on: our choice of names).

``model_dims`` of the entries are NCHW whatever ``--input_format`` (NHWC: the Aipp task writes
channels last). Stateless; no threads.

Not here: the formats other than YUV420SP_U8, XRGB8888_U8, RGB888_U8 and YUV400_U8 (refused),
``support_rotation``, ``single_line_mode``, ``input_edge_idx`` (one AIPP per input), RAW
inputs, and static AIPP together with ``--dynamic_image_size`` (refused).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError
from npuemu.host.models.graph import Graph, Node, Tensor
from npuemu.shared import aipp as A

DYNAMIC_AIPP_NAME = "ascend_dynamic_aipp_data"
MAX_SIDE = 4096
_F16_MAX = 65504.0
_FORMATS = ["UNDEFINED", "YUV420SP_U8", "XRGB8888_U8", "RGB888_U8", "YUV400_U8",
            "NC1HWC0DI_FP16", "NC1HWC0DI_S8", "ARGB8888_U8", "YUYV_U8", "YUV422SP_U8",
            "AYUV444_U8", "RAW10", "RAW12", "RAW16", "RAW24", "RGB16", "RGB20", "RGB24",
            "RGB8_IR", "RGB16_IR", "RGB24_IR"]
_T = descriptor_pb2.FieldDescriptorProto
_SCALARS: list[tuple[str, int, int]] = [
    ("related_input_rank", 2, _T.TYPE_UINT32), ("max_src_image_size", 4, _T.TYPE_UINT32),
    ("support_rotation", 5, _T.TYPE_BOOL), ("csc_switch", 52, _T.TYPE_BOOL),
    ("cpadding_value", 53, _T.TYPE_FLOAT), ("rbuv_swap_switch", 54, _T.TYPE_BOOL),
    ("ax_swap_switch", 55, _T.TYPE_BOOL), ("single_line_mode", 56, _T.TYPE_BOOL),
    ("src_image_size_w", 57, _T.TYPE_INT32), ("src_image_size_h", 58, _T.TYPE_INT32),
    ("crop", 59, _T.TYPE_BOOL), ("load_start_pos_w", 60, _T.TYPE_INT32),
    ("load_start_pos_h", 61, _T.TYPE_INT32), ("crop_size_w", 62, _T.TYPE_INT32),
    ("crop_size_h", 63, _T.TYPE_INT32), ("resize", 64, _T.TYPE_BOOL),
    ("resize_output_w", 65, _T.TYPE_INT32), ("resize_output_h", 66, _T.TYPE_INT32),
    ("padding", 67, _T.TYPE_BOOL), ("left_padding_size", 68, _T.TYPE_INT32),
    ("right_padding_size", 69, _T.TYPE_INT32), ("top_padding_size", 70, _T.TYPE_INT32),
    ("bottom_padding_size", 71, _T.TYPE_INT32), ("padding_value", 72, _T.TYPE_FLOAT),
    ("mean_chn_0", 10, _T.TYPE_INT32), ("mean_chn_1", 11, _T.TYPE_INT32),
    ("mean_chn_2", 12, _T.TYPE_INT32), ("mean_chn_3", 19, _T.TYPE_INT32),
    ("min_chn_0", 13, _T.TYPE_FLOAT), ("min_chn_1", 14, _T.TYPE_FLOAT),
    ("min_chn_2", 15, _T.TYPE_FLOAT), ("min_chn_3", 20, _T.TYPE_FLOAT),
    ("raw_rgbir_to_f16_n", 45, _T.TYPE_UINT32)]
_MATRIX = [f"matrix_r{r}c{c}" for r in range(3) for c in range(3)]
_LISTS: list[tuple[str, int, int]] = [
    *[(f"var_reci_chn_{k}", n, _T.TYPE_FLOAT) for k, n in enumerate((16, 17, 18, 21))],
    *[(name, 30 + k, _T.TYPE_INT32) for k, name in enumerate(_MATRIX)],
    *[(f"output_bias_{k}", 39 + k, _T.TYPE_INT32) for k in range(3)],
    *[(f"input_bias_{k}", 42 + k, _T.TYPE_INT32) for k in range(3)],
    ("input_edge_idx", 3, _T.TYPE_UINT32)]
_YUV2RGB = [298, 516, 0, 298, -100, -208, 298, 0, 409]  # CANN's defaults, rows as it fills them
_RGB2YUV = [66, 129, 25, -38, -74, 112, 112, -94, -18]
_BIAS = [16, 128, 128]


def _schema() -> Any:
    """The message class of ``InsertNewOps`` (fields of CANN's ``insert_op.proto``)."""
    f = descriptor_pb2.FileDescriptorProto(name="npuemu_insert_op.proto", package="npuemu",
                                           syntax="proto3")
    top = f.message_type.add(name="InsertNewOps")
    top.field.add(name="aipp_op", number=1, type=_T.TYPE_MESSAGE, label=_T.LABEL_REPEATED,
                  type_name=".npuemu.AippOpParams")
    msg = f.message_type.add(name="AippOpParams")
    fmt = msg.enum_type.add(name="InputFormat")
    for k, name in enumerate(_FORMATS):
        fmt.value.add(name=name, number=k)
    mode = msg.enum_type.add(name="AippMode")
    for k, name in enumerate(("undefined", "static", "dynamic")):
        mode.value.add(name=name, number=k)
    msg.field.add(name="aipp_mode", number=1, type=_T.TYPE_ENUM, label=_T.LABEL_OPTIONAL,
                  type_name=".npuemu.AippOpParams.AippMode")
    msg.field.add(name="input_format", number=51, type=_T.TYPE_ENUM, label=_T.LABEL_OPTIONAL,
                  type_name=".npuemu.AippOpParams.InputFormat")
    for name, number, kind in _SCALARS:
        msg.field.add(name=name, number=number, type=kind, label=_T.LABEL_OPTIONAL)
    for name, number, kind in _LISTS:
        msg.field.add(name=name, number=number, type=kind, label=_T.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("npuemu.InsertNewOps"))


_InsertNewOps = _schema()


@dataclass
class Config:
    """One ``aipp_op`` block: its protobuf message and the values checks resolved."""

    op: Any
    rank: int
    dynamic: bool


def fail(reason: str, code: str = "E10043") -> ModelError:
    """The ATC error of a bad AIPP configuration (145000)."""
    return ModelError(ACL_ERROR_GE_PARAM_INVALID, f"{code}: Failed to parse the AIPP "
                      f"configuration (--insert_op_conf). Reason: {reason}")


def read(path: str | os.PathLike) -> list[Config]:
    """Parse and check the ``--insert_op_conf`` file (see module doc)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                         f"E10001: Value [{os.fspath(path)}] for parameter [--insert_op_conf] "
                         f"is invalid. Reason: {exc}") from exc
    return parse(text)


def parse(text: str) -> list[Config]:
    """Parse and check configuration text."""
    msg = _InsertNewOps()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        raise fail(f"the file is not an AIPP configuration: {exc}") from exc
    if not msg.aipp_op:
        raise fail("the file has no aipp_op block")
    configs = [_check(op) for op in msg.aipp_op]
    ranks = [c.rank for c in configs]
    if len(set(ranks)) != len(ranks):
        raise fail(f"two aipp_op blocks name the same related_input_rank ({ranks})")
    return configs


def _check(op: Any) -> Config:
    if op.aipp_mode == 0:
        raise fail("When insert AIPP op, aipp_mode must be configured as static or dynamic ")
    for name, _n, _k in _LISTS:
        if len(getattr(op, name)) > 1:
            raise fail(f"The parameter {name} can not be configed repeatedly")
    dynamic = op.aipp_mode == 2
    if dynamic:
        if op.max_src_image_size <= 0:
            raise fail("For dynamic AIPP params, max_src_image_size must be set which number "
                       "should be greater than 0")
        return Config(op, op.related_input_rank, True)
    if op.input_format == 0:
        raise fail("Input format of AIPP conf is undefined")
    for name in ("src_image_size_w", "src_image_size_h", "load_start_pos_w",
                 "load_start_pos_h", "crop_size_w", "crop_size_h", "resize_output_w",
                 "resize_output_h", "left_padding_size", "right_padding_size",
                 "top_padding_size", "bottom_padding_size"):
        if getattr(op, name) < 0:
            raise fail(f"{name.capitalize()} must not be configed smaller than 0")
    if op.input_format not in A.COMPUTED:
        raise fail(f"input_format {_FORMATS[op.input_format]} is not supported (npuemu "
                   "computes YUV420SP_U8, XRGB8888_U8, RGB888_U8 and YUV400_U8)")
    _check_ranges(op)
    return Config(op, op.related_input_rank, False)


def _check_ranges(op: Any) -> None:
    for k in range(4):
        mean, low = getattr(op, f"mean_chn_{k}"), getattr(op, f"min_chn_{k}")
        if not 0 <= mean <= 255 or not 0 <= low <= 255:
            raise fail(f"mean_chn_{k} {mean} / min_chn_{k} {low} outside [0, 255]")
        var = getattr(op, f"var_reci_chn_{k}")
        if var and not -_F16_MAX <= var[0] <= _F16_MAX:
            raise fail(f"var_reci_chn_{k} {var[0]} outside [-65504, 65504]")
    for name in (*_MATRIX, "output_bias_0", "output_bias_1", "output_bias_2",
                 "input_bias_0", "input_bias_1", "input_bias_2"):
        values = getattr(op, name)
        lo, hi = (-32768, 32767) if name.startswith("matrix") else (0, 255)
        if values and not lo <= values[0] <= hi:
            raise fail(f"{name} {values[0]} outside [{lo}, {hi}]")


def to_params(cfg: Config, model_shape: tuple[int, ...], batch: int) -> A.Params:
    """The static pipeline parameters of ``cfg`` for a model input of NCHW ``model_shape``
    (defaults filled as ATC fills them); 145000 when the result cannot be that input."""
    op = cfg.op
    _n, c, h, w = model_shape
    fmt = op.input_format
    src_w, src_h = op.src_image_size_w or w, op.src_image_size_h or h
    b = A.Batch(crop=op.crop, resize=op.resize, padding=op.padding)
    if b.padding:
        b.pad_top, b.pad_bottom = op.top_padding_size, op.bottom_padding_size
        b.pad_left, b.pad_right = op.left_padding_size, op.right_padding_size
    if b.resize:
        b.resize_w = op.resize_output_w or w - b.pad_left - b.pad_right
        b.resize_h = op.resize_output_h or h - b.pad_top - b.pad_bottom
    if b.crop:
        b.crop_x, b.crop_y = op.load_start_pos_w, op.load_start_pos_h
        b.crop_w = op.crop_size_w or (src_w - b.crop_x if b.resize
                                      else w - b.pad_left - b.pad_right)
        b.crop_h = op.crop_size_h or (src_h - b.crop_y if b.resize
                                      else h - b.pad_top - b.pad_bottom)
    b.mean = [getattr(op, f"mean_chn_{k}") for k in range(4)]
    b.min = [getattr(op, f"min_chn_{k}") for k in range(4)]
    b.var_reci = [(getattr(op, f"var_reci_chn_{k}") or [1.0])[0] for k in range(4)]
    b.padding_value = op.padding_value or op.cpadding_value
    yuv = fmt == A.YUV420SP_U8
    default = _YUV2RGB if yuv else _RGB2YUV
    p = A.Params(fmt, op.csc_switch, op.rbuv_swap_switch, op.ax_swap_switch, src_w, src_h,
                 [(getattr(op, m) or [default[i]])[0] for i, m in enumerate(_MATRIX)],
                 [(getattr(op, f"output_bias_{k}") or [_BIAS[k]])[0] for k in range(3)],
                 [(getattr(op, f"input_bias_{k}") or [_BIAS[k]])[0] for k in range(3)],
                 [b] * batch)
    check_geometry(p, b, c, h, w)
    return p


def check_geometry(p: A.Params, b: A.Batch, c: int, h: int, w: int) -> None:
    """Sizes in range, YUV420SP's even sizes, the crop inside the source and the result
    the model's ``c x h x w``; 145000 (as :func:`fail`) otherwise."""
    if not (1 <= p.src_w <= MAX_SIDE and 1 <= p.src_h <= MAX_SIDE):
        raise fail(f"src_image_size {p.src_w}x{p.src_h} outside [1, {MAX_SIDE}]")
    yuv = p.fmt == A.YUV420SP_U8
    if yuv and (p.src_w % 2 or p.src_h % 2):
        raise fail(f"src_image_size {p.src_w}x{p.src_h} of a YUV420SP_U8 image must be even")
    if b.crop:
        if yuv and (b.crop_x % 2 or b.crop_y % 2):
            raise fail("load_start_pos_w / load_start_pos_h of a YUV420SP_U8 image must be "
                       "even")
        if b.crop_w < 1 or b.crop_h < 1 or b.crop_x + b.crop_w > p.src_w or \
                b.crop_y + b.crop_h > p.src_h:
            raise fail(f"the crop {b.crop_w}x{b.crop_h} at ({b.crop_x}, {b.crop_y}) is not "
                       f"inside the {p.src_w}x{p.src_h} source image")
    if b.resize and (b.resize_w < 1 or b.resize_h < 1):
        raise fail(f"resize_output {b.resize_w}x{b.resize_h}")
    want_c = A.CHANNELS[p.fmt]
    if c != want_c and not (p.fmt == A.XRGB8888_U8 and c == 3):
        raise fail(f"{A.FORMAT_NAMES[p.fmt]} gives {want_c} channels, the model input has "
                   f"{c}")
    got = A.out_size(p, b)
    if got != (h, w):
        raise fail(f"after crop, resize and padding the image is {got[1]}x{got[0]} (WxH), "
                   f"the model input is {w}x{h}")


# graph insertion ---------------------------------------------------------------------------
def insert(graph: Graph, configs: list[Config], fp16_nodes: set[str],
           layout: str = "NCHW", batches: dict[str, int] | None = None) -> list[dict]:
    """Put an ``Aipp`` task before each configured input of ``graph`` (which keeps the
    input's name; the model's float input becomes an intermediate). Returns the model
    definition's ``aipp`` entries (one per AIPP input, for the descriptor and
    ``aclmdlGetAIPPType``/``aclmdlGetFirstAippInfo``). ``layout``: the inputs' (NHWC with
    ``--input_format=NHWC``: AIPP writes channels last). ``batches``: each input's
    batch in the largest gear, which sizes its dynamic record (the same in every gear)."""
    entries: list[dict] = []
    new_nodes: list[Node] = []
    originals = list(graph.inputs)
    for k, cfg in enumerate(sorted(configs, key=lambda c: c.rank)):
        if cfg.rank >= len(originals):
            raise fail(f"Can not find the data node by aipp parameter related_input_rank "
                       f"{cfg.rank}")
        name = originals[cfg.rank]
        if name in fp16_nodes:
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"E10034: input [{name}] is linked "
                             "to AIPP and cannot be set to fp16 (--input_fp16_nodes)")
        dyn = sum(1 for e in entries if e["mode"] == "dynamic")
        records = (batches or {}).get(name, graph.tensors[name].shape[0])
        node, entry = _aipp_node(graph, cfg, name, (k, dyn, records), layout == "NHWC")
        from npuemu.host.models import lowering  # onnx: over a second to import, only here

        node.tiling = lowering.check_node(graph, node)
        new_nodes.append(node)
        entries.append(entry)
    graph.nodes[:0] = new_nodes
    return entries


def _aipp_node(graph: Graph, cfg: Config, name: str, numbers: tuple[int, int, int],
               channels_last: bool) -> tuple[Node, dict]:
    """The Aipp node before input ``name``; ``numbers``: this AIPP's, the dynamic ones'
    before it (the parameter inputs are ``ascend_dynamic_aipp_data``, ``..._1``, ...) and
    the images a dynamic record holds (the largest batch)."""
    k, dyn, records = numbers
    model_in = graph.tensors[name]
    if len(model_in.shape) != 4 or model_in.dtype not in ("float32", "float16"):
        raise fail(f"input {name!r} ({model_in.dtype} {list(model_in.shape)}) is not a 4-D "
                   "float image input")
    nchw = model_in.shape
    if channels_last:
        nchw = (nchw[0], nchw[3], nchw[1], nchw[2])
    inner = f"{name}__aipp"
    graph.tensors[inner] = Tensor(inner, model_in.dtype, model_in.shape)
    for n in graph.nodes:
        n.inputs = [inner if i == name else i for i in n.inputs]
    n_img = model_in.shape[0]
    attrs: dict[str, Any] = {"out_shape": list(model_in.shape), "out_dtype": model_in.dtype,
                             "out_layout": "NHWC" if channels_last else "NCHW"}
    entry: dict[str, Any] = {"input": name, "mode": "dynamic" if cfg.dynamic else "static",
                             "model_dims": list(nchw), "model_dtype": model_in.dtype,
                             "channels_last": channels_last}
    ins = [name]
    if cfg.dynamic:
        raw_shape: tuple[int, ...] = (int(cfg.op.max_src_image_size),)
        params = DYNAMIC_AIPP_NAME if dyn == 0 else f"{DYNAMIC_AIPP_NAME}_{dyn}"
        graph.tensors[params] = Tensor(params, "uint8", (A.record_size(records),), "input")
        graph.inputs.append(params)
        ins.append(params)
        attrs["aipp_mode"] = "dynamic"
        entry["params_input"] = params
    else:
        p = to_params(cfg, nchw, n_img)
        raw_shape = raw_dims(p.fmt, n_img, p.src_w, p.src_h)
        attrs.update(aipp_mode="static", **A.as_attrs(p))
        entry["params"] = A.as_attrs(p)
    graph.tensors[name] = Tensor(name, "uint8", raw_shape, "input")
    return Node(f"aipp_node{k}", "Aipp", ins, [inner], attrs, "aipp"), entry


def raw_dims(fmt: int, n: int, w: int, h: int) -> tuple[int, ...]:
    """The raw image input's dims (``aclmdlGetInputDimsV2``'s): YUV420SP ``n, h*3/2, w, 1``,
    else ``n, h, w, channels``."""
    if fmt == A.YUV420SP_U8:
        return (n, h * 3 // 2, w, 1)
    return (n, h, w, A.CHANNELS[fmt])

