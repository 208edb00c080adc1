"""Child program of ``tests/integration/test_ops_atc.py``: the pyACL sample flow of
``acl_execute_add.py`` on single-op models that ``npuemu atc --singleop`` wrote
(``aclopSetModelDir``, then ``aclopExecuteV2`` of Add, ReduceSum with a const input and a
dynamic-shape Relu; no compile in the program).

``python ops_atc.py execute MODEL_DIR`` initializes pyACL itself (and finalizes at the end),
runs the ops and prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import numpy as np
from childlib import R, acl, d2h, h2d, main, malloc, ok, scenario, stream


def tensor(dtype, shape, data=None, size=None):
    """A tensor desc (ND) and a device block of ``size`` bytes (``data`` copied in)."""
    d = acl.create_tensor_desc(dtype, shape, 2)
    p = malloc(size if size is not None else len(data))
    if data is not None:
        h2d(p, data)
    return d, p


@scenario
def execute(model_dir):
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    ctx, ret = acl.rt.create_context(0)
    s = stream()
    attr = acl.op.create_attr()
    R["dir"] = acl.op.set_model_dir(model_dir)
    a = np.arange(128, dtype=np.int32).reshape(8, 16)
    descs, bufs, ptrs = [], [], []
    for arr in (a, a * 3, np.zeros_like(a)):
        d = acl.create_tensor_desc(3, [8, 16], 2)
        size = acl.get_tensor_desc_size(d)
        p, ret = acl.rt.malloc(size, 2)
        h2d(p, arr.tobytes())
        descs.append(d)
        bufs.append(acl.create_data_buffer(p, size))
        ptrs.append(p)
    R["exec"] = acl.op.execute_v2("Add", descs[:2], bufs[:2], descs[2:], bufs[2:], attr, s)
    ok(acl.rt.synchronize_stream(s), "sync")
    got = np.frombuffer(d2h(ptrs[2], a.nbytes), np.int32).reshape(8, 16)
    R["ok"] = bool((got == a * 4).all())
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    dx, px = tensor(0, [4, 6], x.tobytes())
    axes = np.array([1], np.int32)
    dax, pax = tensor(3, [1], axes.tobytes())
    ax_bytes = axes.tobytes()  # kept alive: the pointer must outlive the call
    ok(acl.set_tensor_const(dax, acl.util.bytes_to_ptr(ax_bytes), 4))
    dy, py = tensor(0, [4, 1], size=16)
    at2 = acl.op.create_attr()
    ok(acl.op.set_attr_bool(at2, "keep_dims", 1))
    R["reduce"] = acl.op.execute_v2("ReduceSum", [dx, dax], [acl.create_data_buffer(px, 96),
                                    acl.create_data_buffer(pax, 4)], [dy],
                                    [acl.create_data_buffer(py, 16)], at2, s)
    ok(acl.rt.synchronize_stream(s), "sync")
    R["sum"] = np.frombuffer(d2h(py, 16), np.float32).tolist()
    relu = []
    for n in (3, 50, 65):
        v = np.linspace(-1, 1, n * 8, dtype=np.float32).reshape(n, 8)
        dv, pv = tensor(0, [n, 8], v.tobytes())
        po = malloc(v.nbytes)
        bv = acl.create_data_buffer(pv, v.nbytes)
        bo = acl.create_data_buffer(po, v.nbytes)
        ret = acl.op.execute_v2("Relu", [dv], [bv], [dv], [bo], 0, s)
        ok(acl.rt.synchronize_stream(s), "sync")
        relu.append(ret if ret else bool((np.frombuffer(d2h(po, v.nbytes), np.float32)
                                          == np.maximum(v, 0).ravel()).all()))
    R["relu"] = relu
    f32 = acl.create_tensor_desc(0, [8, 16], 2)
    R["unmatched"] = acl.op.execute_v2("Add", [f32, f32], bufs[:2], [f32], bufs[2:], 0, s)
    for b in bufs:
        ok(acl.destroy_data_buffer(b))
    for p in ptrs:
        ok(acl.rt.free(p))
    for d in descs:
        acl.destroy_tensor_desc(d)
    acl.op.destroy_attr(attr)
    ok(acl.rt.destroy_stream(s))
    ok(acl.rt.destroy_context(ctx))
    ok(acl.rt.reset_device(0))
    ok(acl.finalize())


if __name__ == "__main__":
    main()
