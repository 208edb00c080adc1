"""Child program of ``tests/integration/test_ops_cache.py``: single operators through
``acl.op`` (``aclopCompile``, ``aclopExecuteV2``, ``aclopCompileAndExecuteV2``, handles,
``aclopCast``, ``aclopInferShape``, ``aclopSetMaxOpQueueNum``, ``aclopSetModelDir``/``Load``)
and the operator cache's statistics.

``python ops_cache.py SCENARIO [ARG...]`` initializes pyACL, sets device 0, creates the
stream ``S`` the helpers run on, runs one scenario and prints ``R`` (see ``childlib``); the
assertions are the test's.
"""

import os
import time

import numpy as np
from childlib import R, acl, d2h, h2d, main, malloc, ok, scenario, stream

from npuemu.host.api import op_cache_stats

F32, ND = 0, 2
S = None
"""The stream the helpers run on (set before the scenario runs)."""


def tensor(arr):
    """(desc, data buffer, device pointer) of a float32 copy of ``arr`` on the device."""
    arr = np.ascontiguousarray(arr)
    p = malloc(max(arr.nbytes, 1))
    h2d(p, arr.tobytes())
    d = acl.create_tensor_desc(F32, list(arr.shape), ND)
    return d, acl.create_data_buffer(p, arr.nbytes), p


def out(shape):
    """(desc, data buffer, device pointer) of a float32 output of ``shape``."""
    n = int(np.prod(shape)) * 4
    p = malloc(max(n, 1))
    return acl.create_tensor_desc(F32, list(shape), ND), acl.create_data_buffer(p, n), p


def fetch(p, shape):
    """The float32 array of ``shape`` at ``p``."""
    n = int(np.prod(shape))
    return np.frombuffer(d2h(p, n * 4), np.float32).reshape(shape)


def add(x, y, compile=True, attr=0):
    """Add of ``x`` and ``y`` (compiled and executed, or executed only): the result or the
    code."""
    shape = np.broadcast_shapes(x.shape, y.shape)
    dx, bx, _ = tensor(x)
    dy, by, _ = tensor(y)
    dz, bz, pz = out(shape)
    if compile:
        ret = acl.op.compile_and_execute_v2("Add", [dx, dy], [bx, by], [dz], [bz], attr, 0, 0,
                                            None, S)
    else:
        ret = acl.op.execute_v2("Add", [dx, dy], [bx, by], [dz], [bz], attr, S)
    if ret == 0:
        ok(acl.rt.synchronize_stream(S), "sync")
        return fetch(pz, np.broadcast_shapes(x.shape, y.shape))
    return ret


def hbm_used():
    """The bytes of the card's HBM that op kernels use (``aclrtGetMemUsageInfo``)."""
    info, _ret = acl.rt.get_mem_usage_info(0)
    return {e["name"]: e["curMemSize"] for e in info}.get("op kernels", 0)


@scenario
def sample_flow():
    """The pyACL single-op sample: compile then execute; handles; Cast; InferShape."""
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    dx, bx, _ = tensor(x)
    dy, by, _ = tensor(x)
    dz, bz, pz = out((8, 16))
    attr = acl.op.create_attr()
    R["before"] = acl.op.execute_v2("Add", [dx, dy], [bx, by], [dz], [bz], attr, S)
    R["compile"] = acl.op.compile("Add", [dx, dy], [dz], attr, 0, 0, None)
    R["exec"] = acl.op.execute_v2("Add", [dx, dy], [bx, by], [dz], [bz], attr, S)
    ok(acl.rt.synchronize_stream(S))
    R["ok"] = bool((fetch(pz, (8, 16)) == 2 * x).all())
    h, ret = acl.op.create_handle("Add", [dx, dy], [dz], attr)
    R["handle"] = [ret, acl.op.execute_with_handle(h, [bx, by], [bz], S),
                   acl.op.execute_with_handle(h, [bx], [bz], S),
                   acl.op.execute_with_handle(h, [bx, by], [], S)]
    acl.op.destroy_handle(h)
    # the built-in Cast (aclopCast) and a Cast handle
    d16 = acl.create_tensor_desc(1, [8, 16], ND)
    p16 = malloc(256)
    b16 = acl.create_data_buffer(p16, 256)
    R["cast"] = acl.op.cast(dx, bx, d16, b16, 0, S)
    ok(acl.rt.synchronize_stream(S))
    R["cast_ok"] = bool((np.frombuffer(d2h(p16, 256), np.float16) == x.ravel()).all())
    hc, ret = acl.op.create_handle_for_cast(dx, d16, 0)
    R["cast_handle"] = [ret, acl.op.execute_with_handle(hc, [bx], [b16], S)]
    # aclopInferShape writes the output dims
    dout = acl.create_tensor_desc(F32, [], ND)
    dm = acl.create_tensor_desc(F32, [16, 3], ND)
    R["infer"] = [acl.op.infer_shape("MatMul", [dx, dm], [bx, bx], 1, [dout], 0),
                  acl.get_tensor_desc_num_dims(dout), acl.get_tensor_desc_dim(dout, 1)]
    R["stats"] = op_cache_stats()


@scenario
def keying_lru():
    """Attributes in the key; the LRU capacity (bad values, 2 entries, eviction); attrs."""
    x = np.ones((4, 4), np.float32)
    a1 = acl.op.create_attr()
    ok(acl.op.set_attr_int(a1, "n", 1))
    a2 = acl.op.create_attr()
    ok(acl.op.set_attr_int(a2, "n", 2))
    add(x, x, attr=a1)
    add(x, x, attr=a1)
    add(x, x, attr=a2)
    R["keyed"] = op_cache_stats()
    R["bad"] = [acl.op.set_max_op_queue_num(0), acl.op.set_max_op_queue_num(-3)]
    ok(acl.op.set_max_op_queue_num(2))
    R["shrunk"] = op_cache_stats()
    for n in (1, 2, 3, 4):           # 4 new shapes through a 2-entry map
        add(np.ones((n, 3), np.float32), np.ones(3, np.float32))
    R["evicting"] = op_cache_stats()
    R["lru_hit"] = add(np.ones((4, 3), np.float32), np.ones(3, np.float32),
                       compile=False).tolist()[0]
    R["evicted"] = add(np.ones((1, 3), np.float32), np.ones(3, np.float32), compile=False)
    R["hbm"] = hbm_used()
    R["usage_names"] = [e["name"] for e in acl.rt.get_mem_usage_info(0)[0]]
    R["null_attr"] = acl.op.set_attr_int(0, "n", 1)
    R["bad_attr"] = acl.op.set_attr_string(a1, "s", None)
    from npuemu.host.core import plog

    R["plog"] = plog.path()


@scenario
def env_capacity():
    """ASCEND_OP_CACHE_MAX_SIZE=1; HBM of kernels back to 0 after clearing and a reset."""
    from npuemu.host.ops import cache

    R["cap"] = op_cache_stats()["capacity"]
    for n in (1, 2, 3):
        add(np.ones((n, 5), np.float32), np.ones(5, np.float32))
    R["one_entry"] = [op_cache_stats()["entries"], hbm_used() > 0]
    ok(acl.op.set_max_op_queue_num(1))
    base = hbm_used()
    free_a = acl.rt.get_mem_info(1)[0]
    for c in cache.CACHES.values():
        with c.lock:
            c.clear()
    R["after_clear"] = hbm_used()
    R["mem_info_back"] = [acl.rt.get_mem_info(1)[0] - free_a, base]
    add(np.ones((2, 5), np.float32), np.ones(5, np.float32))
    R["again"] = hbm_used() > 0
    ok(acl.rt.destroy_stream(S))
    ok(acl.rt.reset_device(0))
    ok(acl.rt.set_device(0))
    R["after_reset"] = [hbm_used(), op_cache_stats()["entries"]]


def dynamic_descs():
    """Descs of a [-1, 7] input and output (range 1..100) and a [7] input."""
    dd = acl.create_tensor_desc(F32, [-1, 7], ND)
    ok(acl.set_tensor_shape_range(dd, [[1, 100], [7, 7]]))
    dy = acl.create_tensor_desc(F32, [7], ND)
    dz = acl.create_tensor_desc(F32, [-1, 7], ND)
    ok(acl.set_tensor_shape_range(dz, [[1, 100], [7, 7]]))
    return dd, dy, dz


@scenario
def retile_dynamic():
    """Re-tiled shapes, a dynamic compile executed at several shapes, an unknown rank."""
    rng = np.random.default_rng(1)
    y = rng.standard_normal(7).astype(np.float32)
    outs = {}
    for n in (3, 40, 5000):
        x = rng.standard_normal((n, 7)).astype(np.float32)
        outs[n] = bool(np.array_equal(add(x, y), x + y))
    R["retile"] = outs
    R["stats"] = op_cache_stats()
    # dynamic: compile once with -1 and a range, execute several concrete shapes
    dd, dy, dz = dynamic_descs()
    R["dyn_compile"] = acl.op.compile("Add", [dd, dy], [dz], 0, 0, 0, None)
    good = []
    for n in (2, 9, 100):
        x = rng.standard_normal((n, 7)).astype(np.float32)
        good.append(bool(np.array_equal(add(x, y, compile=False), x + y)))
    R["dyn"] = good
    R["out_of_range"] = add(np.ones((101, 7), np.float32), y, compile=False)
    # a max-shape (dynamic) output desc: execute_v2 waits and writes the real shape back
    x = rng.standard_normal((5, 7)).astype(np.float32)
    dx, bx, _ = tensor(x)
    _, byy, _ = tensor(y)
    pmax = malloc(100 * 7 * 4)
    bmax = acl.create_data_buffer(pmax, 100 * 7 * 4)
    R["writeback"] = [acl.op.execute_v2("Add", [dx, dy], [bx, byy], [dz], [bmax], 0, S),
                      acl.get_tensor_desc_dim_v2(dz, 0)[0],
                      bool(np.array_equal(fetch(pmax, (5, 7)), x + y))]
    R["dyn_stats"] = op_cache_stats()
    R["unknown_rank"] = unknown_rank(rng)


def unknown_rank(rng):
    """Unknown rank ({-2}): one Relu compile serves every rank."""
    du = acl.create_tensor_desc(F32, [-2], ND)
    ok(acl.op.compile("Relu", [du], [du], 0, 0, 0, None))
    ranks = []
    for shape in ((3,), (2, 5), (2, 3, 4)):
        v = rng.standard_normal(shape).astype(np.float32)
        dv, bv, _ = tensor(v)
        do, bo, po = out(shape)
        ok(acl.op.execute_v2("Relu", [dv], [bv], [do], [bo], 0, S))
        ok(acl.rt.synchronize_stream(S))
        ranks.append(bool(np.array_equal(fetch(po, shape), np.maximum(v, 0))))
    return ranks


@scenario
def bad_inputs():
    """Bad types, counts, buffers, dtypes, formats, descs, engines; a failing Gather."""
    x = np.ones((4, 4), np.float32)
    dx, bx, _px = tensor(x)
    dz, bz, pz = out((4, 4))
    small = acl.create_data_buffer(pz, 8)
    di = acl.create_tensor_desc(3, [4, 4], ND)       # int32
    dnchw = acl.create_tensor_desc(F32, [4, 4], 29)  # FRACTAL_NZ

    def cae(op, ins, bins, outs, bouts):
        return acl.op.compile_and_execute_v2(op, ins, bins, outs, bouts, 0, 0, 0, None, S)

    R["codes"] = {
        "unknown_type": cae("NoSuchOp", [dx], [bx], [dz], [bz]),
        "too_many_inputs": cae("Relu", [dx, dx], [bx, bx], [dz], [bz]),
        "desc_buf_mismatch": cae("Add", [dx, dx], [bx], [dz], [bz]),
        "buffer_too_small": cae("Add", [dx, dx], [bx, bx], [dz], [small]),
        "dtype": cae("Sqrt", [di], [bx], [di], [bz]),
        "format": cae("Add", [dnchw, dnchw], [bx, bx], [dnchw], [bz]),
        "dead_desc": cae("Add", [123, dx], [bx, bx], [dz], [bz]),
        "engine": acl.op.compile("Add", [dx, dx], [dz], 0, 7, 0, None),
        "compile_type": acl.op.compile("Add", [dx, dx], [dz], 0, 0, 5, None),
        "bad_out_desc": acl.op.compile("Add", [dx, dx], [acl.create_tensor_desc(F32, [2], ND)],
                                       0, 0, 0, None),
    }
    R["bad_desc"] = acl.create_tensor_desc(F32, [-3], ND)
    # a kernel failure (Gather index out of range) is an AI CPU exception at sync
    from npuemu.host.api import DeviceArray, run_op

    try:
        run_op("Gather", [DeviceArray.from_numpy(x),
                          DeviceArray.from_numpy(np.array([9], np.int32))])
        R["gather"] = 0
    except Exception as err:
        R["gather"] = err.code
    R["still_ok"] = add(x, x).tolist()[0]
    R["stats"] = op_cache_stats()


@scenario
def single_op_models(model_dir):
    """A single-op model of Add written to ``model_dir`` and loaded; static entries stay."""
    from npuemu.host.ops import compiler, models, registry, signature
    from npuemu.host.ops import desc as D

    ins = [D.create_tensor_desc(F32, [8, 16], ND), D.create_tensor_desc(F32, [8, 16], ND)]
    outs = [D.create_tensor_desc(F32, [8, 16], ND)]
    op = registry.lookup("Add")
    specs = [signature.spec(d) for d in ins]
    binary = compiler.build(op, specs, signature.outputs(op, specs, [], {}), {})
    os.makedirs(model_dir + "/a/b", exist_ok=True)
    with open(model_dir + "/a/b/0_Add.om", "wb") as f:
        f.write(models.encode("Add", ins, outs, None, binary))
    with open(model_dir + "/junk.om", "wb") as f:
        f.write(b"not a model")
    R["dir"] = [acl.op.set_model_dir(model_dir), acl.op.set_model_dir(model_dir)]
    R["missing"] = acl.op.load(b"")
    ok(acl.op.set_max_op_queue_num(1))
    x = np.full((8, 16), 3, np.float32)
    R["first"] = add(x, x, compile=False).tolist()[0][:2]
    for n in (1, 2, 3):
        add(np.ones((n, 2), np.float32), np.ones((n, 2), np.float32))
    R["still"] = add(x, x, compile=False).tolist()[0][:2]
    R["stats"] = op_cache_stats()


@scenario
def disk_cache():
    """Two Adds (timing the first) with whatever disk cache ASCEND_CACHE_PATH holds."""
    t0 = time.perf_counter()
    add(np.ones((4, 9), np.float32), np.ones(9, np.float32))
    R["first_ms"] = (time.perf_counter() - t0) * 1e3
    add(np.ones((3, 3), np.float32), np.ones(3, np.float32))
    R["stats"] = op_cache_stats()


@scenario
def op_failure():
    """A failing Gather on a stop-on-failure stream: sync code, callback, dropped Add."""
    global S
    got = []
    ok(acl.rt.set_exception_info_callback(
        lambda info: got.append(acl.rt.get_error_code_from_exception_info(info))))
    x = np.ones((4, 4), np.float32)
    dx, bx, _ = tensor(x)
    di = acl.create_tensor_desc(3, [1], ND)
    pi = malloc(4)
    h2d(pi, np.array([9], np.int32).tobytes())
    bi = acl.create_data_buffer(pi, 4)
    dz, bz, _pz = out((1, 4))
    at = acl.op.create_attr()
    ok(acl.op.set_attr_int(at, "axis", 0))
    ok(acl.rt.set_stream_failure_mode(S, 1))           # ACL_STOP_ON_FAILURE
    ok(acl.op.compile_and_execute_v2("Gather", [dx, di], [bx, bi], [dz], [bz], at, 0, 0,
                                     None, S))
    dy, by, py = out((4, 4))
    ok(acl.rt.memset(py, 64, 0, 64))
    ok(acl.op.compile_and_execute_v2("Add", [dx, dx], [bx, bx], [dy], [by], 0, 0, 0, None,
                                     S))
    R["sync"] = acl.rt.synchronize_stream(S)
    R["dropped"] = fetch(py, (4, 4)).tolist()[0]
    t0 = time.time()
    while not got and time.time() - t0 < 10:
        time.sleep(0.01)
    R["callback"] = got
    S = stream()                               # a fresh stream: the card still serves
    R["after"] = add(x, x).tolist()[0]


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    S = stream()
    main()
