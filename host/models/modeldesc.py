"""What ``aclmdlDesc`` answers: inputs and outputs of an OM model, their names, sizes, dims,
dtypes, formats, and the batch gears (``aclmdlGetDesc`` and its getters).

For a dynamic-batch model the batch dim reads -1, sizes are those of the largest gear, and
an extra last input :data:`DYNAMIC_TENSOR_NAME` (int64, one element) carries the gear, as ATC
adds it. ``cur_output_dims`` gives the dims of the gear set last (the largest before any).
A dynamic image size model (``--dynamic_image_size``) reads -1 for H and W, lists its (H, W)
gears in ``hw`` and has the same extra input with two elements (h, w).

An input with static AIPP is the raw image: uint8, NHWC, ``aclmdlGetInputDims`` shows
``N, H, W, C`` (the source size, the model's channels), ``aclmdlGetInputDimsV2`` the raw
layout (YUV420SP ``N, H*3/2, W, 1``) whose product is the size. A dynamic AIPP image input is
``max_src_image_size`` uint8 bytes (ND, our choice of dims: that one dim), and the
``ascend_dynamic_aipp_data`` input its parameter record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from npuemu.host.models import omfile
from npuemu.host.models.graph import ACL_DTYPES, ACL_FORMATS

DYNAMIC_TENSOR_NAME = "ascend_mbatch_shape_data"


@dataclass
class IOTensor:
    name: str
    dtype: int
    format: int
    dims: list[list[int]]  # per program (gear)
    shown: list[int] | None = None  # aclmdlGetInputDims's dims when not those (static AIPP)

    def size(self, k: int) -> int:
        return math.prod(self.dims[k]) * _itemsize(self.dtype)  # exact: no int64 wrap

    def shown_dims(self, v2: bool = False) -> list[int]:
        """Dims as ``aclmdlGetInputDims`` shows them: -1 where the gears differ (V2: the
        raw layout of a static AIPP input)."""
        if self.shown is not None and not v2:
            return list(self.shown)
        first = self.dims[0]
        return [d if all(p[i] == d for p in self.dims) else -1 for i, d in enumerate(first)]


def _itemsize(dtype: int) -> int:
    inverse = {v: k for k, v in ACL_DTYPES.items()}
    return np.dtype(inverse[dtype]).itemsize


@dataclass
class ModelDesc:
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    gears: list[int]
    model_id: int = 0
    current: list[int] = field(default_factory=lambda: [0, -1])  # batch, hw gear index
    hw: list[list[int]] = field(default_factory=list)
    aipp: dict[str, dict] = field(default_factory=dict)  # input name -> its model_def entry

    @property
    def largest(self) -> int:
        return len(self.inputs[0].dims) - 1 if self.inputs else 0

    def cur_program(self) -> int:
        if self.hw:
            return self.current[1] if self.current[1] >= 0 else self.largest
        batch = self.current[0]
        return self.gears.index(batch) if batch in self.gears else self.largest


def describe(om: omfile.OmModel) -> ModelDesc:
    """The descriptor of ``om`` (no device needed)."""
    fmt = ACL_FORMATS.get(om.model_def.get("input_format", "NCHW"), 0)
    def io(kind: str) -> list[IOTensor]:
        rows = sorted((t for t in om.tensors if t[2] == kind), key=lambda t: t[4])
        return [IOTensor(t[0], ACL_DTYPES[t[1]], fmt if len(t[3][0]) == 4 else 2,
                         [list(s) for s in t[3]]) for t in rows]
    inputs, outputs = io("input"), io("output")
    gears = list(om.model_def.get("dynamic_batch") or [])
    hw = [list(g) for g in om.model_def.get("dynamic_hw") or []]
    aipp = {e["input"]: e for e in om.model_def.get("aipp") or [] if isinstance(e, dict)}
    for t in inputs:
        entry = aipp.get(t.name)
        if entry is not None:
            t.format = ACL_FORMATS["NHWC"] if entry.get("mode") == "static" else 2
        if entry is not None and entry.get("mode") == "static":
            n, c = entry["model_dims"][:2]
            w, h = entry["params"]["src_image_size"]
            t.shown = [n, h, w, c]
        elif t.name in {e.get("params_input") for e in aipp.values()}:
            t.format = 2
    if gears or hw:
        inputs.append(IOTensor(DYNAMIC_TENSOR_NAME, ACL_DTYPES["int64"], 2,
                               [[2 if hw else 1]] * len(gears or hw)))
    return ModelDesc(inputs, outputs, gears, hw=hw, aipp=aipp)
