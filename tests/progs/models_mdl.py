"""Child program of ``tests/integration/test_models_mdl.py``: ``.om`` models through
``acl.mdl`` (``aclmdlLoadFromFile``/``FromFileWithMem``/``FromMem``, ``aclmdlQuerySize``,
the descriptor queries, datasets, ``aclmdlExecute``/``ExecuteAsync``, dynamic batch,
``aclmdlUnload``), the Pythonic ``Model``, and faults injected during a model.

``python models_mdl.py SCENARIO [ARG...]`` initializes pyACL, sets device 0, runs one
scenario and prints ``R`` (see ``childlib``); the assertions are the test's. Inputs and
outputs pass through ``.npy`` files the test names; lists of jobs pass as JSON.
"""

import json
import time

import numpy as np
from childlib import R, acl, main, malloc, ok, scenario, stream

from npuemu.host.core import stream as _streams
from npuemu.host.models import runtime as _models


def sample_flow(om_path, x, batch=0):
    """The resnet50 sample's steps (load, describe, bind, execute twice, read back,
    unload), returning output 0 as float32."""
    model_id, ret = acl.mdl.load_from_file(om_path)
    ok(ret, "load")
    desc = acl.mdl.create_desc()
    ok(acl.mdl.get_desc(desc, model_id), "get_desc")
    n_in, n_out = acl.mdl.get_num_inputs(desc), acl.mdl.get_num_outputs(desc)
    ins, outs = [], []
    in_ds, out_ds = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    for i in range(n_in):
        size = acl.mdl.get_input_size_by_index(desc, i)
        ptr = malloc(size)
        if i == 0:
            data = np.ascontiguousarray(x, np.float32).tobytes()
            ok(acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(data), len(data), 1), "h2d")
        ins.append((ptr, size))
        _, ret = acl.mdl.add_dataset_buffer(in_ds, acl.create_data_buffer(ptr, size))
        ok(ret)
    for i in range(n_out):
        size = acl.mdl.get_output_size_by_index(desc, i)
        ptr = malloc(size)
        outs.append((ptr, size))
        _, ret = acl.mdl.add_dataset_buffer(out_ds, acl.create_data_buffer(ptr, size))
        ok(ret)
    if batch:
        idx, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
        ok(ret)
        ok(acl.mdl.set_dynamic_batch_size(model_id, in_ds, idx, batch), "set batch")
    model = _models.get(model_id)
    allocs = model.device_allocations
    free0, _total, ret = acl.rt.get_mem_info(0)
    ok(ret)
    tasks0 = _streams.resolve(0).submitted
    ok(acl.mdl.execute(model_id, in_ds, out_ds), "execute")
    ok(acl.mdl.execute(model_id, in_ds, out_ds), "execute again")
    R["stream_tasks"] = _streams.resolve(0).submitted - tasks0
    free1, _total, ret = acl.rt.get_mem_info(0)
    ok(ret)
    R["no_alloc_in_execute"] = [model.device_allocations == allocs, free0 == free1,
                                model.executions]
    R["streams"] = model.programs[-1].n_streams
    R["submissions"] = model.submissions
    R["ops"] = sum(1 for t in model.programs[-1].tasks if t.kernel)
    blocks = {b[0]: b[1] for b in model.om.memory_plan["blocks"]}
    R["scratch"] = [t.args[-1] == model.work_ptr + blocks[ws] for t, ws in
                    zip(model.programs[-1].tasks, model.om.programs[-1]["workspaces"],
                        strict=False) if ws]
    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    ok(ret)
    host, ret = acl.rt.malloc_host(outs[0][1])
    ok(ret)
    ok(acl.rt.memcpy(host, outs[0][1], outs[0][0], outs[0][1], 2), "d2h")
    y = np.frombuffer(acl.util.ptr_to_bytes(host, outs[0][1]), np.float32).copy()
    R["in_dims"] = acl.mdl.get_input_dims(desc, 0)[0]
    R["names"] = [acl.mdl.get_input_name_by_index(desc, 0),
                  acl.mdl.get_output_name_by_index(desc, 0)]
    for ds in (in_ds, out_ds):
        for i in range(acl.mdl.get_dataset_num_buffers(ds)):
            ok(acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i)))
        ok(acl.mdl.destroy_dataset(ds))
    ok(acl.mdl.unload(model_id), "unload")
    ok(acl.mdl.destroy_desc(desc))
    for p, _ in ins + outs:
        ok(acl.rt.free(p))
    ok(acl.rt.free_host(host))
    return y[:int(np.prod(dims["dims"]))].reshape(dims["dims"])  # a gear fills the front


def run_om(om_path, inputs):
    """Load, bind every input and output, execute, read every output back, unload."""
    model_id, ret = acl.mdl.load_from_file(om_path)
    ok(ret, "load")
    desc = acl.mdl.create_desc()
    ok(acl.mdl.get_desc(desc, model_id))
    in_ds, out_ds, ptrs, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset(), [], []
    for i, x in enumerate(inputs):
        size = acl.mdl.get_input_size_by_index(desc, i)
        ptr = malloc(max(size, 1))
        ptrs.append(ptr)
        data = np.ascontiguousarray(x).tobytes()
        if data:
            ok(acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(data), len(data), 1), "h2d")
        acl.mdl.add_dataset_buffer(in_ds, acl.create_data_buffer(ptr, size))
    for i in range(acl.mdl.get_num_outputs(desc)):
        size = acl.mdl.get_output_size_by_index(desc, i)
        ptr = malloc(max(size, 1))
        ptrs.append(ptr)
        outs.append((ptr, size))
        acl.mdl.add_dataset_buffer(out_ds, acl.create_data_buffer(ptr, size))
    ok(acl.mdl.execute(model_id, in_ds, out_ds), "execute")
    got = []
    for ptr, size in outs:
        buf = np.empty(size, np.uint8)
        if size:
            ok(acl.rt.memcpy(buf.ctypes.data, size, ptr, size, 2), "d2h")
        got.append(buf)
    ok(acl.mdl.unload(model_id))
    for p in ptrs:
        ok(acl.rt.free(p))
    return got


@scenario
def flow(om, x_npy, y_npy):
    """``sample_flow`` of the ``.om`` at ``om`` on the input in ``x_npy``; output to
    ``y_npy``."""
    np.save(y_npy, sample_flow(om, np.load(x_npy)))


@scenario
def dynamic_batch(om, x_npy, y_npy):
    """The gears of a dynamic-batch ``.om`` read from its file, then ``sample_flow`` at
    batch 2."""
    desc = acl.mdl.create_desc()
    ok(acl.mdl.get_desc_from_file(desc, om))
    R["gears"] = acl.mdl.get_dynamic_batch(desc)
    R["n_in"] = acl.mdl.get_num_inputs(desc)
    R["size0"] = acl.mdl.get_input_size_by_index(desc, 0)
    np.save(y_npy, sample_flow(om, np.load(x_npy), batch=2))


@scenario
def with_mem_and_errors(om, bad_om, missing_om):
    work, weight, ret = acl.mdl.query_size(om)
    ok(ret)
    R["sizes"] = [work > 0, weight > 0]
    wptr, gptr = malloc(work), malloc(weight)
    mid, ret = acl.mdl.load_from_file_with_mem(om, wptr, work, gptr, weight)
    ok(ret)
    R["with_mem_allocs"] = _models.get(mid).device_allocations
    _, ret = acl.mdl.load_from_file_with_mem(om, wptr, work - 64, gptr, weight)
    R["small_work"] = ret
    R["bad_file"] = acl.mdl.load_from_file(bad_om)[1]
    R["missing"] = acl.mdl.load_from_file(missing_om)[1]
    with open(om, "rb") as f:
        data = f.read()
    mid2, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), len(data))
    ok(ret)
    in_ds, out_ds = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    x, y = malloc(3 * 8 * 8 * 4), malloc(5 * 4)
    acl.mdl.add_dataset_buffer(out_ds, acl.create_data_buffer(y, 5 * 4))
    R["no_inputs"] = acl.mdl.execute(mid, in_ds, out_ds)
    acl.mdl.add_dataset_buffer(in_ds, acl.create_data_buffer(x, 3 * 8 * 8 * 4 - 4))
    R["small_input"] = acl.mdl.execute(mid, in_ds, out_ds)
    ok(acl.mdl.unload(mid))
    R["after_unload"] = acl.mdl.execute(mid, in_ds, out_ds)
    R["unload_twice"] = acl.mdl.unload(mid)
    ok(acl.mdl.unload(mid2))
    desc = acl.mdl.create_desc()
    R["get_desc_unloaded"] = acl.mdl.get_desc(desc, mid2)
    R["static_batch"] = acl.mdl.get_dynamic_batch(desc)[1]
    for p in (wptr, gptr, x, y):
        ok(acl.rt.free(p))


@scenario
def run_many(folder, oms):
    """``run_om`` of each ``.om`` of the JSON list ``oms`` on ``folder/x<k>.npy``; its
    output 0 to ``folder/y<k>.npy``."""
    for k, om in enumerate(json.loads(oms)):
        (y,) = run_om(om, [np.load(f"{folder}/x{k}.npy")])
        np.save(f"{folder}/y{k}.npy", y)


@scenario
def run_cases(jobs):
    """``run_om`` of each job of the JSON object ``jobs`` (name: [om, inputs, folder]) on
    ``folder/in<k>.npy``; its outputs to ``folder/out<k>.npy``."""
    for om, n_in, folder in json.loads(jobs).values():
        xs = [np.load(f"{folder}/in{k}.npy") for k in range(n_in)]
        for k, y in enumerate(run_om(om, xs)):
            np.save(f"{folder}/out{k}.npy", y)


@scenario
def fault_and_hang(om, x_npy, y_npy):
    """An AI Core fault in a model execute, a hung model task, abort, unload, reload."""
    from npuemu.host.core.faults import inject
    codes = []

    def on_exception(info):
        codes.append(acl.rt.get_error_code_from_exception_info(info))
    ok(acl.rt.set_exception_info_callback(on_exception))
    mid, ret = acl.mdl.load_from_file(om)
    ok(ret)
    desc = acl.mdl.create_desc()
    ok(acl.mdl.get_desc(desc, mid))
    xin, xs = malloc(acl.mdl.get_input_size_by_index(desc, 0)), 3 * 8 * 8 * 4
    data = np.load(x_npy).tobytes()
    ok(acl.rt.memcpy(xin, xs, acl.util.bytes_to_ptr(data), xs, 1))
    yout = malloc(5 * 4)
    in_ds, out_ds = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(in_ds, acl.create_data_buffer(xin, xs))
    acl.mdl.add_dataset_buffer(out_ds, acl.create_data_buffer(yout, 20))
    inject(0, "aicore", nth=1)
    R["fault"] = acl.mdl.execute(mid, in_ds, out_ds)
    deadline = time.monotonic() + 5
    while not codes and time.monotonic() < deadline:
        time.sleep(0.01)
    R["callback"] = codes[:1]
    s = stream()
    inject(0, "hang")
    ok(acl.mdl.execute_async(mid, in_ds, out_ds, s))
    R["timeout"] = acl.rt.synchronize_stream_with_timeout(s, 200)
    R["abort"] = acl.rt.stream_abort(s)
    ok(acl.rt.synchronize_stream_with_timeout(s, 5000))
    ok(acl.mdl.unload(mid))
    mid, ret = acl.mdl.load_from_file(om)
    ok(ret)
    ok(acl.mdl.execute_async(mid, in_ds, out_ds, s))
    R["again"] = acl.rt.synchronize_stream_with_timeout(s, 60000)
    y = np.empty(5, np.float32)
    ok(acl.rt.memcpy(y.ctypes.data, 20, yout, 20, 2))
    np.save(y_npy, y)
    ok(acl.mdl.unload(mid))


if __name__ == "__main__":
    ok(acl.init())
    ok(acl.rt.set_device(0))
    main()
