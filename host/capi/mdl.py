"""C bodies of ``acl_mdl.h``: load (from a file or memory, with or without the caller's
memory), describe, datasets, execute (``aclmdlExecute`` blocks; ``...Async`` queues on the
stream), dynamic batch, unload.

Each mirrors the C call of its name through ``acl.mdl`` (``npuemu.host.acl.mdl``): the same
OM reader, model runtime and codes as a Python program. Description, dataset and buffer
pointers are the face's int handles; model ids are the face's ids. Loading blocks (weights
are copied, ops compiled).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import mdl
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export


def _id_out(func: str, out: Any, result: tuple) -> int:
    if out == X.ffi.NULL:
        return X.invalid(func, "modelId is NULL")
    model_id, ret = result
    if ret == 0:
        out[0] = model_id
    return ret


@export
def aclmdlLoadFromFile(path: Any, out: Any) -> int:
    if path == X.ffi.NULL or out == X.ffi.NULL:
        return X.invalid("aclmdlLoadFromFile", "modelPath or modelId is NULL")
    return _id_out("aclmdlLoadFromFile", out, mdl.load_from_file(X.text(path)))


@export
def aclmdlLoadFromMem(model: Any, size: int, out: Any) -> int:
    if model == X.ffi.NULL or out == X.ffi.NULL:
        return X.invalid("aclmdlLoadFromMem", "model or modelId is NULL")
    return _id_out("aclmdlLoadFromMem", out, mdl.load_from_mem(X.addr(model), size))


@export
def aclmdlLoadFromFileWithMem(path: Any, out: Any, work: Any, work_size: int, weight: Any,
                              weight_size: int) -> int:
    if path == X.ffi.NULL or out == X.ffi.NULL:
        return X.invalid("aclmdlLoadFromFileWithMem", "modelPath or modelId is NULL")
    return _id_out("aclmdlLoadFromFileWithMem", out, mdl.load_from_file_with_mem(
        X.text(path), X.addr(work), work_size, X.addr(weight), weight_size))


@export
def aclmdlLoadFromMemWithMem(model: Any, size: int, out: Any, work: Any, work_size: int,
                             weight: Any, weight_size: int) -> int:
    if model == X.ffi.NULL or out == X.ffi.NULL:
        return X.invalid("aclmdlLoadFromMemWithMem", "model or modelId is NULL")
    return _id_out("aclmdlLoadFromMemWithMem", out, mdl.load_from_mem_with_mem(
        X.addr(model), size, X.addr(work), work_size, X.addr(weight), weight_size))


def _sizes_out(func: str, work: Any, weight: Any, result: tuple) -> int:
    if work == X.ffi.NULL or weight == X.ffi.NULL:
        return X.invalid(func, "workSize or weightSize is NULL")
    work_b, weight_b, ret = result
    if ret == 0:
        work[0], weight[0] = work_b, weight_b
    return ret


@export
def aclmdlQuerySize(path: Any, work: Any, weight: Any) -> int:
    if path == X.ffi.NULL:
        return X.invalid("aclmdlQuerySize", "fileName is NULL")
    return _sizes_out("aclmdlQuerySize", work, weight, mdl.query_size(X.text(path)))


@export
def aclmdlQuerySizeFromMem(model: Any, size: int, work: Any, weight: Any) -> int:
    return _sizes_out("aclmdlQuerySizeFromMem", work, weight,
                      mdl.query_size_from_mem(X.addr(model), size))


@export
def aclmdlUnload(model_id: int) -> int:
    return mdl.unload(model_id)


@export
def aclmdlExecute(model_id: int, inputs: Any, outputs: Any) -> int:
    """Mirrors ``aclmdlExecute`` (blocks until the outputs are written)."""
    return mdl.execute(model_id, X.addr(inputs), X.addr(outputs))


@export
def aclmdlExecuteAsync(model_id: int, inputs: Any, outputs: Any, s: Any) -> int:
    return mdl.execute_async(model_id, X.addr(inputs), X.addr(outputs), X.addr(s))


@export
def aclmdlSetDynamicBatchSize(model_id: int, ds: Any, index: int, batch: int) -> int:
    return mdl.set_dynamic_batch_size(model_id, X.addr(ds), index, batch)


# descriptions -------------------------------------------------------------------------------
@export
def aclmdlCreateDesc() -> Any:
    return X.ffi.cast("aclmdlDesc *", mdl.create_desc())


X.forward("aclmdlDestroyDesc", mdl.destroy_desc)
X.forward("aclmdlGetDesc", mdl.get_desc)


@export
def aclmdlGetDescFromFile(desc: Any, path: Any) -> int:
    if path == X.ffi.NULL:
        return X.invalid("aclmdlGetDescFromFile", "modelPath is NULL")
    return mdl.get_desc_from_file(X.addr(desc), X.text(path))


@export
def aclmdlGetDescFromMem(desc: Any, model: Any, size: int) -> int:
    return mdl.get_desc_from_mem(X.addr(desc), X.addr(model), size)


def _by_desc(face: Any) -> Any:
    return lambda desc: face(X.addr(desc))


def _by_index(face: Any) -> Any:
    return lambda desc, i: face(X.addr(desc), i)


for _name, _fn in (
        ("aclmdlGetNumInputs", _by_desc(mdl.get_num_inputs)),
        ("aclmdlGetNumOutputs", _by_desc(mdl.get_num_outputs)),
        ("aclmdlGetInputSizeByIndex", _by_index(mdl.get_input_size_by_index)),
        ("aclmdlGetOutputSizeByIndex", _by_index(mdl.get_output_size_by_index)),
        ("aclmdlGetInputFormat", _by_index(mdl.get_input_format)),
        ("aclmdlGetOutputFormat", _by_index(mdl.get_output_format)),
        ("aclmdlGetInputDataType", _by_index(mdl.get_input_data_type)),
        ("aclmdlGetOutputDataType", _by_index(mdl.get_output_data_type))):
    _fn.__name__ = _name
    export(_fn)


def _dims_writer(func: str, face: Any) -> Any:
    def get_dims(desc: Any, i: int, out: Any) -> int:
        if out == X.ffi.NULL:
            return X.invalid(func, "dims is NULL")
        found, ret = face(X.addr(desc), i)
        if ret == 0:
            dims = found["dims"][:128]
            out.name = found["name"].encode()[:127]
            out.dimCount = len(dims)
            for k, d in enumerate(dims):
                out.dims[k] = d
        return ret

    get_dims.__name__ = func
    return get_dims


export(_dims_writer("aclmdlGetInputDims", mdl.get_input_dims))
export(_dims_writer("aclmdlGetInputDimsV2", mdl.get_input_dims_v2))
export(_dims_writer("aclmdlGetOutputDims", mdl.get_output_dims))
export(_dims_writer("aclmdlGetCurOutputDims", mdl.get_cur_output_dims))


@export
def aclmdlGetInputNameByIndex(desc: Any, i: int) -> Any:
    name = mdl.get_input_name_by_index(X.addr(desc), i)
    return X.kept_string("aclmdlGetInputNameByIndex", name or None)


@export
def aclmdlGetOutputNameByIndex(desc: Any, i: int) -> Any:
    name = mdl.get_output_name_by_index(X.addr(desc), i)
    return X.kept_string("aclmdlGetOutputNameByIndex", name or None)


def _index_writer(func: str, face: Any) -> Any:
    def get_index(desc: Any, name: Any, out: Any) -> int:
        if name == X.ffi.NULL or out == X.ffi.NULL:
            return X.invalid(func, "name or index is NULL")
        index, ret = face(X.addr(desc), X.text(name))
        if ret == 0:
            out[0] = index
        return ret

    get_index.__name__ = func
    return get_index


export(_index_writer("aclmdlGetInputIndexByName", mdl.get_input_index_by_name))
export(_index_writer("aclmdlGetOutputIndexByName", mdl.get_output_index_by_name))


@export
def aclmdlGetDynamicBatch(desc: Any, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclmdlGetDynamicBatch", "batch is NULL")
    found, ret = mdl.get_dynamic_batch(X.addr(desc))
    if ret == 0:
        gears = found["batch"][:128]
        out.batchCount = len(gears)
        for k, g in enumerate(gears):
            out.batch[k] = g
    return ret


# datasets ------------------------------------------------------------------------------------
@export
def aclmdlCreateDataset() -> Any:
    return X.ffi.cast("aclmdlDataset *", mdl.create_dataset())


X.forward("aclmdlDestroyDataset", mdl.destroy_dataset)


@export
def aclmdlAddDatasetBuffer(ds: Any, buf: Any) -> int:
    return mdl.add_dataset_buffer(X.addr(ds), X.addr(buf))[1]


X.forward("aclmdlGetDatasetNumBuffers", mdl.get_dataset_num_buffers)


@export
def aclmdlGetDatasetBuffer(ds: Any, i: int) -> Any:
    return X.ffi.cast("aclDataBuffer *", mdl.get_dataset_buffer(X.addr(ds), i))


@export
def aclmdlSetDatasetTensorDesc(ds: Any, desc: Any, i: int) -> int:
    return mdl.set_dataset_tensor_desc(X.addr(ds), X.addr(desc), i)[1]


@export
def aclmdlGetDatasetTensorDesc(ds: Any, i: int) -> Any:
    return X.ffi.cast("aclTensorDesc *", mdl.get_dataset_tensor_desc(X.addr(ds), i))
