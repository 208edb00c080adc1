"""``acl.mdl``: offline models in pyACL form (pyACL's ``acl.mdl`` module), over ``host/models``.

Load / query / unload, execute (sync) and execute_async, the descriptor queries, datasets
and dynamic batch. Calls return ``ret`` or a tuple ending in ``ret``; handles are ints.
``execute`` runs on the current context's default stream and waits for it (the real runtime
runs it on an internal stream); ``execute_async`` queues on the given stream.

Dynamic image size (``get_dynamic_hw``, ``set_dynamic_hw_size``) is here; the AIPP calls are
``host/acl/mdl_aipp.py``'s, bound at the end of this module.

Not here yet: config-handle loads (``load_with_config``), ``execute_v2``, queue loads,
bundles, dynamic dims, ``get_op_attr``, dump.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from npuemu.host.acl import mdl_aipp as _mdl_aipp
from npuemu.host.acl._wrap import ret_only, with_result
from npuemu.host.acl.mdl_aipp import *  # noqa: F403  (the AIPP calls of acl.mdl)
from npuemu.host.acl.mdl_ri import *  # noqa: F403  (the aclmdlRI* calls of acl.mdl)
from npuemu.host.core import hostread
from npuemu.host.models import modeldesc, omfile
from npuemu.host.models import runtime as models
from npuemu.host.models.codes import ACL_ERROR_GE_PARAM_INVALID, ModelError
from npuemu.host.ops import desc as D
from npuemu.shared import errors

_lock = threading.Lock()
_descs: dict[int, modeldesc.ModelDesc | None] = {}
_datasets: dict[int, _Dataset] = {}
_next = [0x6D000000]


@dataclass(eq=False)
class _Dataset:
    buffers: list[int] = field(default_factory=list)
    tensor_descs: dict[int, int] = field(default_factory=dict)
    batch: int = 0
    hw: list[int] | None = None


def _handle(table: dict, obj: Any) -> int:
    with _lock:
        _next[0] += 1
        table[_next[0]] = obj
        return _next[0]


def _param(detail: str) -> errors.AclError:
    return errors.error_for(errors.ACL_ERROR_INVALID_PARAM, detail)


def _om_from_mem(ptr: int, size: int) -> omfile.OmModel:
    """The OM image at host ``ptr``: 100000 unless ``[ptr, ptr + size)`` is readable host
    memory of this process (checked before any read, ``host/core/hostread.py``)."""
    return omfile.read(hostread.read(ptr, size, "model memory"))


# load / query / unload ---------------------------------------------------------------------
def _load(om: omfile.OmModel, work: tuple[int, int] | None = None,
          weight: tuple[int, int] | None = None) -> int:
    return _described(models.load(om, work, weight))


def _described(model: models.Model) -> int:
    model.desc = modeldesc.describe(model.om)
    return model.model_id


@with_result(0)
def load_from_file(path: str) -> int:
    """``aclmdlLoadFromFile`` -> (model_id, ret) (blocks: weights read from the file into
    device memory, ops compiled)."""
    return _described(models.load_file(path))


@with_result(0)
def load_from_mem(ptr: int, size: int) -> int:
    """``aclmdlLoadFromMem`` -> (model_id, ret); the OM image is in host memory."""
    return _load(_om_from_mem(ptr, size))


@with_result(0)
def load_from_file_with_mem(path: str, work_ptr: int, work_size: int, weight_ptr: int,
                            weight_size: int) -> int:
    """``aclmdlLoadFromFileWithMem``: the caller's device memory for work and weights (a 0
    pointer lets the system allocate that one)."""
    return _described(models.load_file(path, (work_ptr, work_size), (weight_ptr, weight_size)))


@with_result(0)
def load_from_mem_with_mem(ptr: int, size: int, work_ptr: int, work_size: int,
                           weight_ptr: int, weight_size: int) -> int:
    """``aclmdlLoadFromMemWithMem``."""
    return _load(_om_from_mem(ptr, size), (work_ptr, work_size), (weight_ptr, weight_size))


@with_result(0, 0)
def query_size(path: str) -> tuple[int, int]:
    """``aclmdlQuerySize`` -> (work_size, weight_size, ret)."""
    om = omfile.read_file(path)
    return om.work_size, om.weight_size


@with_result(0, 0)
def query_size_from_mem(ptr: int, size: int) -> tuple[int, int]:
    """``aclmdlQuerySizeFromMem`` -> (work_size, weight_size, ret)."""
    om = _om_from_mem(ptr, size)
    return om.work_size, om.weight_size


unload = ret_only(models.unload)
unload.__doc__ = "``aclmdlUnload``: 145003 for an unknown id."


# execute -----------------------------------------------------------------------------------
def _bound(model: models.Model, ds_handle: int, inputs: bool
           ) -> tuple[list, int, list[int] | None]:
    ds = _datasets.get(ds_handle) if type(ds_handle) is int else None
    if ds is None:
        raise _param(f"{ds_handle!r} is not a live dataset")
    bufs = []
    for h in ds.buffers:
        buf = D.buffer_of(h)
        if buf is None:
            raise _param(f"dataset buffer {h!r} was destroyed")
        bufs.append((buf.addr, buf.size))
    desc: modeldesc.ModelDesc = model.desc
    batch, hw = 0, None
    if inputs and (desc.gears or desc.hw):
        if len(bufs) != len(desc.inputs):
            raise ModelError(ACL_ERROR_GE_PARAM_INVALID,
                             f"the model has {len(desc.inputs)} inputs (with "
                             f"{modeldesc.DYNAMIC_TENSOR_NAME}), {len(bufs)} buffers given")
        bufs = bufs[:-1]
        batch = (ds.batch or desc.gears[-1]) if desc.gears else 0
        hw = (ds.hw or desc.hw[-1]) if desc.hw else None
    return bufs, batch, hw


@ret_only
def execute(model_id: int, in_ds: int, out_ds: int) -> None:
    """``aclmdlExecute`` (blocks until the outputs are written)."""
    model = models.get(model_id)
    ins, batch, hw = _bound(model, in_ds, True)
    outs, _, _ = _bound(model, out_ds, False)
    models.execute(model_id, ins, outs, 0, batch, hw=hw)


@ret_only
def execute_async(model_id: int, in_ds: int, out_ds: int, stream: int) -> None:
    """``aclmdlExecuteAsync``: queued on ``stream``; the caller synchronizes."""
    model = models.get(model_id)
    ins, batch, hw = _bound(model, in_ds, True)
    outs, _, _ = _bound(model, out_ds, False)
    models.execute_async(model_id, ins, outs, stream, batch, hw)


# descriptors -------------------------------------------------------------------------------
def create_desc() -> int:
    """``aclmdlCreateDesc`` -> handle."""
    return _handle(_descs, None)


def _desc_slot(desc: int) -> None:
    if type(desc) is not int or desc not in _descs:
        raise _param(f"{desc!r} is not a live model desc")


@ret_only
def get_desc(desc: int, model_id: int) -> None:
    """``aclmdlGetDesc``: fill ``desc`` from a loaded model (145003 if unknown)."""
    _desc_slot(desc)
    model = models.get(model_id)
    _descs[desc] = model.desc


@ret_only
def get_desc_from_file(desc: int, path: str) -> None:
    """``aclmdlGetDescFromFile``."""
    _desc_slot(desc)
    _descs[desc] = modeldesc.describe(omfile.read_file(path))


@ret_only
def get_desc_from_mem(desc: int, ptr: int, size: int) -> None:
    """``aclmdlGetDescFromMem``."""
    _desc_slot(desc)
    _descs[desc] = modeldesc.describe(_om_from_mem(ptr, size))


@ret_only
def destroy_desc(desc: int) -> None:
    """``aclmdlDestroyDesc``."""
    _desc_slot(desc)
    with _lock:
        del _descs[desc]


def _d(desc: int) -> modeldesc.ModelDesc | None:
    return _descs.get(desc) if type(desc) is int else None


def _io(desc: int, i: int, inputs: bool) -> modeldesc.IOTensor | None:
    d = _d(desc)
    if d is None:
        return None
    items = d.inputs if inputs else d.outputs
    return items[i] if type(i) is int and 0 <= i < len(items) else None


def get_num_inputs(desc: int) -> int:
    d = _d(desc)
    return len(d.inputs) if d else 0


def get_num_outputs(desc: int) -> int:
    d = _d(desc)
    return len(d.outputs) if d else 0


def _size(desc: int, i: int, inputs: bool) -> int:
    t = _io(desc, i, inputs)
    return t.size(len(t.dims) - 1) if t else 0


def get_input_size_by_index(desc: int, i: int) -> int:
    """Size of input ``i`` (the largest gear's for a dynamic-batch model); 0 if none."""
    return _size(desc, i, True)


def get_output_size_by_index(desc: int, i: int) -> int:
    return _size(desc, i, False)


def _dims(desc: int, i: int, inputs: bool, current: bool, v2: bool = False
          ) -> tuple[dict, int]:
    t = _io(desc, i, inputs)
    if t is None:
        return {}, errors.ACL_ERROR_INVALID_PARAM
    dims = t.dims[_d(desc).cur_program()] if current else t.shown_dims(v2)  # type: ignore[union-attr]
    return {"name": t.name, "dimCount": len(dims), "dims": list(dims)}, 0


def get_input_dims(desc: int, i: int) -> tuple[dict, int]:
    return _dims(desc, i, True, False)


def get_input_dims_v2(desc: int, i: int) -> tuple[dict, int]:
    """As ``get_input_dims`` but a static AIPP input's dims are its raw layout."""
    return _dims(desc, i, True, False, v2=True)


def get_output_dims(desc: int, i: int) -> tuple[dict, int]:
    return _dims(desc, i, False, False)


def get_cur_output_dims(desc: int, i: int) -> tuple[dict, int]:
    """Output dims of the gear set last on the model (the static dims otherwise)."""
    return _dims(desc, i, False, True)


def get_input_name_by_index(desc: int, i: int) -> str:
    t = _io(desc, i, True)
    return t.name if t else ""


def get_output_name_by_index(desc: int, i: int) -> str:
    t = _io(desc, i, False)
    return t.name if t else ""


def _index(desc: int, name: str, inputs: bool) -> tuple[int, int]:
    d = _d(desc)
    items = (d.inputs if inputs else d.outputs) if d else []
    for k, t in enumerate(items):
        if t.name == name:
            return k, 0
    return 0, errors.ACL_ERROR_INVALID_PARAM


def get_input_index_by_name(desc: int, name: str) -> tuple[int, int]:
    return _index(desc, name, True)


def get_output_index_by_name(desc: int, name: str) -> tuple[int, int]:
    return _index(desc, name, False)


def get_input_format(desc: int, i: int) -> int:
    t = _io(desc, i, True)
    return t.format if t else -1


def get_output_format(desc: int, i: int) -> int:
    t = _io(desc, i, False)
    return t.format if t else -1


def get_input_data_type(desc: int, i: int) -> int:
    t = _io(desc, i, True)
    return t.dtype if t else -1


def get_output_data_type(desc: int, i: int) -> int:
    t = _io(desc, i, False)
    return t.dtype if t else -1


# datasets ----------------------------------------------------------------------------------
def create_dataset() -> int:
    """``aclmdlCreateDataset`` -> handle."""
    return _handle(_datasets, _Dataset())


def _ds(ds: int) -> _Dataset:
    found = _datasets.get(ds) if type(ds) is int else None
    if found is None:
        raise _param(f"{ds!r} is not a live dataset")
    return found


@with_result(0)
def add_dataset_buffer(ds: int, buf: int) -> int:
    """``aclmdlAddDatasetBuffer`` -> (ds, ret)."""
    if D.buffer_of(buf) is None:
        raise _param(f"{buf!r} is not a data buffer")
    _ds(ds).buffers.append(buf)
    return ds


def get_dataset_buffer(ds: int, i: int) -> int:
    d = _datasets.get(ds) if type(ds) is int else None
    return d.buffers[i] if d and type(i) is int and 0 <= i < len(d.buffers) else 0


def get_dataset_num_buffers(ds: int) -> int:
    d = _datasets.get(ds) if type(ds) is int else None
    return len(d.buffers) if d else 0


@ret_only
def destroy_dataset(ds: int) -> None:
    """``aclmdlDestroyDataset``: the data buffers are not destroyed."""
    _ds(ds)
    with _lock:
        del _datasets[ds]


@with_result(0)
def set_dataset_tensor_desc(ds: int, tdesc: int, i: int) -> int:
    """``aclmdlSetDatasetTensorDesc`` -> (ds, ret): recorded (dynamic-shape models, which
    npuemu's ATC does not build, are where it matters). 100000 unless ``i`` is the index of
    a buffer already added, as the real call checks it against the dataset's buffers."""
    D.need_desc(tdesc)
    found = _ds(ds)
    if type(i) is not int or not 0 <= i < len(found.buffers):
        raise _param(f"tensor desc index {i!r} of a dataset of {len(found.buffers)} buffers")
    found.tensor_descs[i] = tdesc
    return ds


def get_dataset_tensor_desc(ds: int, i: int) -> int:
    d = _datasets.get(ds) if type(ds) is int else None
    return d.tensor_descs.get(i, 0) if d else 0


# dynamic batch -----------------------------------------------------------------------------
def get_dynamic_batch(desc: int) -> tuple[dict, int]:
    """``aclmdlGetDynamicBatch`` -> ({"batchCount", "batch"}, ret); 0 gears if static."""
    d = _d(desc)
    if d is None:
        return {}, errors.ACL_ERROR_INVALID_PARAM
    return {"batchCount": len(d.gears), "batch": list(d.gears)}, 0


@ret_only
def set_dynamic_batch_size(model_id: int, ds: int, index: int, batch: int) -> None:
    """``aclmdlSetDynamicBatchSize``: the gear for executes with dataset ``ds``; ``index`` is
    that of ``ascend_mbatch_shape_data``. A static model: 145013 (our choice: the documentation
    leaves 100019 vs 145013 open); a batch that is no gear: 145013."""
    model = models.get(model_id)
    desc: modeldesc.ModelDesc = model.desc
    if not desc.gears or batch not in desc.gears or index != len(desc.inputs) - 1:
        raise ModelError(145013, f"batch {batch} at input {index}: gears {desc.gears}")
    _ds(ds).batch = batch
    desc.current[0] = batch


# dynamic image size ------------------------------------------------------------------------
def get_dynamic_hw(desc: int, i: int) -> tuple[dict, int]:
    """``aclmdlGetDynamicHW`` -> ({"hwCount", "hw": [[h, w], ...]}, ret); 0 gears if the
    model has none (``i`` is not used: the gears are the model's)."""
    d = _d(desc)
    if d is None:
        return {}, errors.ACL_ERROR_INVALID_PARAM
    return {"hwCount": len(d.hw), "hw": [list(g) for g in d.hw]}, 0


@ret_only
def set_dynamic_hw_size(model_id: int, ds: int, index: int, height: int, width: int) -> None:
    """``aclmdlSetDynamicHWSize``: the (h, w) gear for executes with dataset ``ds``;
    ``index`` is that of ``ascend_mbatch_shape_data``. No such gear (or a model without
    image size gears): 145000 (our choice, as the batch case's 145013 names batches)."""
    model = models.get(model_id)
    desc: modeldesc.ModelDesc = model.desc
    if [height, width] not in desc.hw or index != len(desc.inputs) - 1:
        raise ModelError(ACL_ERROR_GE_PARAM_INVALID, f"image size {height}x{width} at input "
                         f"{index}: gears {desc.hw}")
    _ds(ds).hw = [height, width]
    desc.current[1] = desc.hw.index([height, width])


# AIPP (host/acl/mdl_aipp.py) ---------------------------------------------------------------
_mdl_aipp.bind_datasets(get_dataset_buffer)
