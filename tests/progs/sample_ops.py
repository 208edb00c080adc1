"""Child program of ``tests/integration/test_ops_samples_card.py``: the single-op samples'
ops through ``acl.op.compile_and_execute_v2`` on card 0, with their index inputs const
(``aclSetTensorConst``) as the samples set them.

``python sample_ops.py run IN.npz OUT.npz`` reads the inputs, runs ArgMaxV2 (float16,
int32 indices), TopK (two outputs), GEMM (int8 with int32 accumulation) and
ResizeBilinearV2, writes every output to ``OUT.npz`` and prints ``R`` (each op's return
code, see ``childlib``).
"""

import numpy as np
from childlib import R, acl, d2h, h2d, main, malloc, ok, scenario, stream

from npuemu.host.ops.types import acl_dtype

ND = 2
KEEP: list = []
"""Host bytes whose pointers a const descriptor holds (kept alive until the child exits)."""


def tensor(arr, const=False):
    """(descriptor, data buffer) of a device copy of ``arr`` (also const data if asked)."""
    arr = np.ascontiguousarray(arr)
    p = malloc(max(arr.nbytes, 1))
    h2d(p, arr.tobytes())
    d = acl.create_tensor_desc(acl_dtype(arr.dtype), list(arr.shape), ND)
    if const:
        data = arr.tobytes()
        KEEP.append(data)
        ok(acl.set_tensor_const(d, acl.util.bytes_to_ptr(data), len(data)), "set_tensor_const")
    return d, acl.create_data_buffer(p, arr.nbytes)


def output(shape, dtype):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    p = malloc(max(n, 1))
    d = acl.create_tensor_desc(acl_dtype(np.dtype(dtype)), list(shape), ND)
    return d, acl.create_data_buffer(p, n), p, (shape, dtype)


def run_op(s, op_type, inputs, outputs, attr=0):
    """One op: ``inputs`` as (array, const) pairs, ``outputs`` as (shape, dtype) pairs."""
    ins = [tensor(a, c) for a, c in inputs]
    outs = [output(shape, dtype) for shape, dtype in outputs]
    ret = acl.op.compile_and_execute_v2(op_type, [d for d, _ in ins], [b for _, b in ins],
                                        [o[0] for o in outs], [o[1] for o in outs], attr,
                                        0, 0, None, s)
    R[op_type] = ret
    if ret:
        return []
    ok(acl.rt.synchronize_stream(s), "synchronize")
    return [np.frombuffer(d2h(p, int(np.prod(sh)) * np.dtype(dt).itemsize), dt).reshape(sh)
            for _d, _b, p, (sh, dt) in outs]


def attrs(**values):
    a = acl.op.create_attr()
    for name, v in values.items():
        setter = acl.op.set_attr_bool if isinstance(v, bool) else acl.op.set_attr_int
        ok(setter(a, name, int(v)), name)
    return a


@scenario
def run(src, dst):
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    s = stream()
    x = np.load(src)
    got = {}
    (got["argmax"],) = run_op(s, "ArgMaxV2", [(x["am_x"], False), (np.array(1, np.int32), True)],
                              [((4, 6), "int32")], attrs(dtype=3))
    got["topk_v"], got["topk_i"] = run_op(
        s, "TopK", [(x["tk_x"], False), (np.array([3], np.int32), True)],
        [((5, 3), "float32"), ((5, 3), "int32")], attrs(largest=True))
    (got["gemm"],) = run_op(
        s, "GEMM", [(x["g_a"], False), (x["g_b"], False), (x["g_c"], False),
                    (np.array([2], np.int32), False), (np.array([-1], np.int32), False)],
        [((6, 7), "int32")], attrs(transpose_b=True))
    (got["resize"],) = run_op(
        s, "ResizeBilinearV2", [(x["r_x"], False), (np.array([7, 9], np.int32), True)],
        [((1, 2, 7, 9), "float32")], attrs(half_pixel_centers=True))
    (dx, bx), (dd, bd) = tensor(x["am_x"]), tensor(np.array(1, np.int32))  # not const
    dy, by, _p, _ = output((4, 6), "int32")
    R["missing_const"] = acl.op.compile_and_execute_v2("ArgMaxV2", [dx, dd], [bx, bd], [dy],
                                                       [by], 0, 0, 0, None, s)
    np.savez(dst, **got)
    ok(acl.rt.destroy_stream(s), "destroy_stream")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")


if __name__ == "__main__":
    main()
