"""Offline models, Pythonic face: ``Model(path)`` loads an OM file made by ``npuemu atc``
on a device; ``model(x, ...)`` runs it and returns its outputs as ``DeviceArray``.

The same runtime as ``acl.mdl`` (``host/models/runtime.py``): weights and workspace are
allocated at load, an execute allocates nothing on the device except the output arrays this
convenience call creates when none are given (pass ``out=`` to avoid even that). Errors
raise ``AclError`` subclasses carrying ``.code`` (145002 unreadable file, 145000 bad
content or wrong inputs, 145003 after unload).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from npuemu.host.api.arrays import DeviceArray
from npuemu.host.api.devices import device_or_current
from npuemu.host.api.streams import Stream
from npuemu.host.core import stream as _stream
from npuemu.host.models import modeldesc, omfile
from npuemu.host.models import runtime as _runtime
from npuemu.host.models.graph import NUMPY_DTYPES


class Model:
    """A loaded offline model (``aclmdlLoadFromFile`` / ``FromMem``); a context manager that
    unloads on exit."""

    def __init__(self, source: str | os.PathLike | bytes, device: Any = None) -> None:
        om = omfile.read(source) if isinstance(source, bytes) else None
        self.device = device_or_current(device)
        with self.device._current():  # a file's weights are read into device memory
            self._model = _runtime.load(om) if om is not None else _runtime.load_file(source)
        self.desc = self._model.desc = modeldesc.describe(self._model.om)

    @property
    def model_id(self) -> int:
        return self._model.model_id

    @property
    def gears(self) -> list[int]:
        """Batch sizes of a ``--dynamic_batch_size`` model ([] if static)."""
        return list(self.desc.gears)

    def output_shapes(self, batch: int = 0) -> list[tuple[int, ...]]:
        prog = self._model.program(batch)
        return [tuple(d) for d in prog.output_dims]

    def __call__(self, *inputs: DeviceArray | np.ndarray, batch: int = 0,
                 out: list[DeviceArray] | None = None, stream: Stream | None = None,
                 sync: bool = True) -> list[DeviceArray]:
        """Run the model (``aclmdlExecuteAsync`` + synchronize unless ``sync=False``)."""
        prog = self._model.program(batch)
        with self.device._current():
            arrays = [x if isinstance(x, DeviceArray) else
                      DeviceArray.from_numpy(np.ascontiguousarray(x), self.device)
                      for x in inputs]
            if out is None:
                outs = self.desc.outputs
                out = [DeviceArray(tuple(dims), np.dtype(NUMPY_DTYPES[t.dtype]), self.device)
                       for dims, t in zip(prog.output_dims, outs, strict=True)]
            handle = stream.handle if stream is not None else 0
            _runtime.execute_async(self._model.model_id, [(a.ptr, a.nbytes) for a in arrays],
                                   [(o.ptr, o.nbytes) for o in out], handle, batch)
            if sync:
                _stream.synchronize_stream(handle)
        return out

    def unload(self) -> None:
        """``aclmdlUnload`` (145003 if already unloaded)."""
        with self.device._current():
            _runtime.unload(self._model.model_id)

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unload()
