"""What ``aclmdlDesc`` answers: inputs and outputs of an OM model, their names, sizes, dims,
dtypes, formats, and the batch gears (``aclmdlGetDesc`` and its getters).

For a dynamic-batch model the batch dim reads -1, sizes are those of the largest gear, and
an extra last input :data:`DYNAMIC_TENSOR_NAME` (int64, one element) carries the gear, as ATC
adds it. ``cur_output_dims`` gives the dims of the gear set last (the largest before any).
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

    def size(self, k: int) -> int:
        return math.prod(self.dims[k]) * _itemsize(self.dtype)  # exact: no int64 wrap

    def shown_dims(self) -> list[int]:
        """Dims as ``aclmdlGetInputDims`` shows them: -1 where the gears differ."""
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
    current: list[int] = field(default_factory=lambda: [0])  # shared with the loaded model

    @property
    def largest(self) -> int:
        return len(self.inputs[0].dims) - 1 if self.inputs else 0

    def cur_program(self) -> int:
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
    if gears:
        inputs.append(IOTensor(DYNAMIC_TENSOR_NAME, ACL_DTYPES["int64"], 2,
                               [[1]] * len(gears)))
    return ModelDesc(inputs, outputs, gears)
