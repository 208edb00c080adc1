"""acl.op against real workers: the pyACL single-op sample flow, cache keying, LRU capacity
(API, aclInit-style setter, env var, bad values), HBM accounting of kernel binaries through
eviction and reset, re-tile and dynamic shapes against full compiles, single-op models,
the disk cache across two processes (incl. a corrupted file), and bad input codes."""

from __future__ import annotations

import os

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

PRELUDE = CHILD_HELPERS + '''
from npuemu.host.api import op_cache_stats
F32, ND = 0, 2
ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
S = stream()

def tensor(arr):
    arr = np.ascontiguousarray(arr)
    p = malloc(max(arr.nbytes, 1)); h2d(p, arr.tobytes())
    d = acl.create_tensor_desc(F32, list(arr.shape), ND)
    return d, acl.create_data_buffer(p, arr.nbytes), p

def out(shape):
    n = int(np.prod(shape)) * 4
    p = malloc(max(n, 1))
    return acl.create_tensor_desc(F32, list(shape), ND), acl.create_data_buffer(p, n), p

def fetch(p, shape):
    n = int(np.prod(shape))
    return np.frombuffer(d2h(p, n * 4), np.float32).reshape(shape)

def add(x, y, compile=True, attr=0):
    shape = np.broadcast_shapes(x.shape, y.shape)
    dx, bx, _ = tensor(x); dy, by, _ = tensor(y); dz, bz, pz = out(shape)
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
    info, ret = acl.rt.get_mem_usage_info(0)
    return {e["name"]: e["curMemSize"] for e in info}.get("op kernels", 0)
'''


def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 60) -> dict:
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


def test_pyacl_sample_flow_compile_then_execute_v2(run_py):
    r = scenario(run_py, """
        x = np.arange(128, dtype=np.float32).reshape(8, 16)
        dx, bx, _ = tensor(x); dy, by, _ = tensor(x); dz, bz, pz = out((8, 16))
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
        p16 = malloc(256); b16 = acl.create_data_buffer(p16, 256)
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
    """)
    assert r["before"] == 100024 and r["compile"] == 0 and r["exec"] == 0 and r["ok"]
    assert r["handle"] == [0, 0, 100021, 100022]
    assert r["cast"] == 0 and r["cast_ok"] and r["cast_handle"] == [0, 0]
    assert r["infer"] == [0, 2, 3]
    assert r["stats"]["compiles"] == 2 and r["stats"]["hits"] >= 3  # Add, Cast


def test_keying_attr_change_is_a_miss_and_lru_capacity(run_py, tmp_path):
    r = scenario(run_py, """
        x = np.ones((4, 4), np.float32)
        a1 = acl.op.create_attr(); ok(acl.op.set_attr_int(a1, "n", 1))
        a2 = acl.op.create_attr(); ok(acl.op.set_attr_int(a2, "n", 2))
        add(x, x, attr=a1); add(x, x, attr=a1); add(x, x, attr=a2)
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
    """, env={"NPUEMU_OP_INCREMENTAL": "0", "ASCEND_GLOBAL_LOG_LEVEL": "0",
              "ASCEND_PROCESS_LOG_PATH": str(tmp_path)})
    assert r["keyed"]["compiles"] == 2 and r["keyed"]["hits"] == 1
    assert r["bad"] == [100000, 100000]
    assert r["shrunk"]["entries"] == 2
    assert r["evicting"]["entries"] == 2 and r["evicting"]["evictions"] >= 2
    assert r["lru_hit"] == [2.0, 2.0, 2.0] and r["evicted"] == 100024
    assert r["hbm"] > 0 and "op kernels" in r["usage_names"]
    assert r["null_attr"] == 100000 and r["bad_attr"] == 100000
    with open(r["plog"]) as f:  # at DEBUG every compile and eviction is logged
        log = f.read()
    assert log.count("op compile Add") == r["evicting"]["compiles"]
    assert log.count("op cache evict Add") == r["evicting"]["evictions"]


def test_env_capacity_and_hbm_back_to_zero_after_eviction_and_reset(run_py):
    r = scenario(run_py, """
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
    """, env={"ASCEND_OP_CACHE_MAX_SIZE": "1", "NPUEMU_OP_INCREMENTAL": "0"})
    assert r["cap"] == 1
    assert r["one_entry"] == [1, True]
    assert r["after_clear"] == 0 and r["again"]
    freed, base = r["mem_info_back"]
    assert freed == base > 0  # the card's free HBM grows by exactly the kernels' bytes
    assert r["after_reset"] == [0, 0]


def test_retile_and_dynamic_shapes_give_the_numbers_of_a_full_compile(run_py):
    r = scenario(run_py, """
        rng = np.random.default_rng(1)
        y = rng.standard_normal(7).astype(np.float32)
        outs = {}
        for n in (3, 40, 5000):
            x = rng.standard_normal((n, 7)).astype(np.float32)
            outs[n] = bool(np.array_equal(add(x, y), x + y))
        R["retile"] = outs
        R["stats"] = op_cache_stats()
        # dynamic: compile once with -1 and a range, execute several concrete shapes
        dd = acl.create_tensor_desc(F32, [-1, 7], ND)
        ok(acl.set_tensor_shape_range(dd, [[1, 100], [7, 7]]))
        dy = acl.create_tensor_desc(F32, [7], ND)
        dz = acl.create_tensor_desc(F32, [-1, 7], ND)
        ok(acl.set_tensor_shape_range(dz, [[1, 100], [7, 7]]))
        R["dyn_compile"] = acl.op.compile("Add", [dd, dy], [dz], 0, 0, 0, None)
        good = []
        for n in (2, 9, 100):
            x = rng.standard_normal((n, 7)).astype(np.float32)
            good.append(bool(np.array_equal(add(x, y, compile=False), x + y)))
        R["dyn"] = good
        R["out_of_range"] = add(np.ones((101, 7), np.float32), y, compile=False)
        # a max-shape (dynamic) output desc: execute_v2 waits and writes the real shape back
        x = rng.standard_normal((5, 7)).astype(np.float32)
        dx, bx, _ = tensor(x); _, byy, _ = tensor(y)
        pmax = malloc(100 * 7 * 4); bmax = acl.create_data_buffer(pmax, 100 * 7 * 4)
        R["writeback"] = [acl.op.execute_v2("Add", [dx, dy], [bx, byy], [dz], [bmax], 0, S),
                          acl.get_tensor_desc_dim_v2(dz, 0)[0],
                          bool(np.array_equal(fetch(pmax, (5, 7)), x + y))]
        R["dyn_stats"] = op_cache_stats()
        # unknown rank ({-2}): one compile serves every rank
        du = acl.create_tensor_desc(F32, [-2], ND)
        ok(acl.op.compile("Relu", [du], [du], 0, 0, 0, None))
        ranks = []
        for shape in ((3,), (2, 5), (2, 3, 4)):
            v = rng.standard_normal(shape).astype(np.float32)
            dv, bv, _ = tensor(v); do, bo, po = out(shape)
            ok(acl.op.execute_v2("Relu", [dv], [bv], [do], [bo], 0, S))
            ok(acl.rt.synchronize_stream(S))
            ranks.append(bool(np.array_equal(fetch(po, shape), np.maximum(v, 0))))
        R["unknown_rank"] = ranks
    """)
    assert r["retile"] == {"3": True, "40": True, "5000": True}
    assert r["stats"]["compiles"] == 1 and r["stats"]["retiles"] == 2
    assert r["dyn_compile"] == 0 and r["dyn"] == [True, True, True]
    assert r["out_of_range"] == 100024
    assert r["dyn_stats"]["dynamic_tiles"] == 4
    assert r["writeback"] == [0, 5, True]
    assert r["unknown_rank"] == [True, True, True]


def test_bad_input_codes_and_nothing_left_behind(run_py):
    r = scenario(run_py, """
        x = np.ones((4, 4), np.float32)
        dx, bx, px = tensor(x); dz, bz, pz = out((4, 4))
        small = acl.create_data_buffer(pz, 8)
        di = acl.create_tensor_desc(3, [4, 4], ND)       # int32
        dnchw = acl.create_tensor_desc(F32, [4, 4], 29)  # FRACTAL_NZ
        cae = lambda op, ins, bins, outs, bouts: acl.op.compile_and_execute_v2(
            op, ins, bins, outs, bouts, 0, 0, 0, None, S)
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
        import ctypes
        from npuemu.host.api import DeviceArray, run_op
        try:
            run_op("Gather", [DeviceArray.from_numpy(x),
                              DeviceArray.from_numpy(np.array([9], np.int32))])
            R["gather"] = 0
        except Exception as err:
            R["gather"] = err.code
        R["still_ok"] = add(x, x).tolist()[0]
        R["stats"] = op_cache_stats()
    """)
    c = r["codes"]
    assert c == {"unknown_type": 100020, "too_many_inputs": 100021, "desc_buf_mismatch": 100000,
                 "buffer_too_small": 100000, "dtype": 100026, "format": 100027,
                 "dead_desc": 100000, "engine": 100000, "compile_type": 200001,
                 "bad_out_desc": 100000}
    assert r["bad_desc"] == 0 and r["gather"] == 507018 and r["still_ok"] == [2.0] * 4


def test_single_op_models_round_trip_and_static_entries_never_age(run_py, tmp_path):
    r = scenario(run_py, f"""
        from npuemu.host.ops import compiler, models, registry, executor
        from npuemu.host.ops import desc as D
        ins = [D.create_tensor_desc(F32, [8, 16], ND), D.create_tensor_desc(F32, [8, 16], ND)]
        outs = [D.create_tensor_desc(F32, [8, 16], ND)]
        op = registry.lookup("Add")
        specs = [executor._spec(d) for d in ins]
        binary = compiler.build(op, specs, executor.signature(op, specs, [], {{}}), {{}})
        os.makedirs({str(tmp_path)!r} + "/a/b", exist_ok=True)
        with open({str(tmp_path)!r} + "/a/b/0_Add.om", "wb") as f:
            f.write(models.encode("Add", ins, outs, None, binary))
        with open({str(tmp_path)!r} + "/junk.om", "wb") as f:
            f.write(b"not a model")
        R["dir"] = [acl.op.set_model_dir({str(tmp_path)!r}),
                    acl.op.set_model_dir({str(tmp_path)!r})]
        R["missing"] = acl.op.load(b"")
        ok(acl.op.set_max_op_queue_num(1))
        x = np.full((8, 16), 3, np.float32)
        R["first"] = add(x, x, compile=False).tolist()[0][:2]
        for n in (1, 2, 3):
            add(np.ones((n, 2), np.float32), np.ones((n, 2), np.float32))
        R["still"] = add(x, x, compile=False).tolist()[0][:2]
        R["stats"] = op_cache_stats()
    """, env={"NPUEMU_OP_INCREMENTAL": "0"})
    assert r["dir"] == [0, 100002] and r["missing"] == 100000
    assert r["first"] == [6.0, 6.0] and r["still"] == [6.0, 6.0]
    assert r["stats"]["static_entries"] == 1 and r["stats"]["compiles"] == 3


def test_disk_cache_across_two_processes_and_a_corrupted_file(run_py, tmp_path):
    body = """
        t0 = time.perf_counter()
        add(np.ones((4, 9), np.float32), np.ones(9, np.float32))
        R["first_ms"] = (time.perf_counter() - t0) * 1e3
        add(np.ones((3, 3), np.float32), np.ones(3, np.float32))
        R["stats"] = op_cache_stats()
    """
    env = {"ASCEND_CACHE_PATH": str(tmp_path), "NPUEMU_OP_INCREMENTAL": "0"}
    one = scenario(run_py, body, env=env)
    assert one["stats"]["compiles"] == 2 and one["stats"]["disk_writes"] == 2
    two = scenario(run_py, body, env=env)
    assert two["stats"]["compiles"] == 0 and two["stats"]["disk_hits"] == 2
    files = sorted((tmp_path / "npuemu_kernels").iterdir())
    assert len(files) == 2
    data = files[0].read_bytes()
    files[0].write_bytes(data[:-40] + bytes(40))
    three = scenario(run_py, body, env=env)
    assert three["stats"]["disk_corrupt"] == 1 and three["stats"]["compiles"] == 1
    assert three["stats"]["disk_hits"] == 1
    assert len(list((tmp_path / "npuemu_kernels").iterdir())) == 2
    assert not [f for f in os.listdir(tmp_path / "npuemu_kernels") if f.startswith(".tmp")]


def test_op_failure_reaches_sync_exception_callbacks_and_stop_mode(run_py):
    r = scenario(run_py, """
        got = []
        ok(acl.rt.set_exception_info_callback(
            lambda info: got.append(acl.rt.get_error_code_from_exception_info(info))))
        x = np.ones((4, 4), np.float32)
        dx, bx, _ = tensor(x)
        di = acl.create_tensor_desc(3, [1], ND)
        pi = malloc(4); h2d(pi, np.array([9], np.int32).tobytes())
        bi = acl.create_data_buffer(pi, 4)
        dz, bz, pz = out((1, 4))
        at = acl.op.create_attr(); ok(acl.op.set_attr_int(at, "axis", 0))
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
    """)
    assert r["sync"] == 507018 and r["callback"] == [507018]
    assert r["dropped"] == [0.0] * 4          # stop-on-failure dropped the Add behind it
    assert r["after"] == [2.0] * 4
