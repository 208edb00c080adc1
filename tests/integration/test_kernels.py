"""pyACL kernels and async copies against real device workers: the ready kernel library,
loading binaries, launch errors, kernel failures (engine codes, last error), async copies
with pinned and pageable host memory, and the device utilization rate.

Each test runs one pyACL program in a fresh interpreter (``run_py``); the child records what it
saw in a dict ``R`` printed as JSON and the assertions are made here.
"""

from __future__ import annotations

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

INVALID_PARAM = 100000
RT_PARAM_INVALID = 107000
STREAM_CONTEXT = 107003
FEATURE_NOT_SUPPORT = 207000
AICORE_EXCEPTION = 507015
AICPU_EXCEPTION = 507018
VECTOR_CORE_EXCEPTION = 507035
DEVICE_MEM_ERROR = 507053

PRELUDE = CHILD_HELPERS + """
from npuemu.host.core.kernel import LIBRARY


def to_dev(arr):
    arr = np.ascontiguousarray(arr)
    p = malloc(max(arr.nbytes, 1))
    h2d(p, arr.tobytes())
    return p

def from_dev(p, dtype, count):
    dt = np.dtype(dtype)
    return np.frombuffer(d2h(p, count * dt.itemsize), dt, count)

def functions(binary, names):
    out = {}
    for name in names:
        out[name], ret = acl.rt.binary_get_function(binary, name)
        ok(ret, f"binary_get_function {name}")
    return out

ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
"""

def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 30) -> dict:
    """Run ``body`` after PRELUDE in a child with ENV (+ ``env``); returns its ``R``."""
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


# ------------------------------------------------------------------------------ library
LIBRARY_KERNELS = ("add", "mul", "relu", "fill", "cast", "softmax", "reduce_sum", "matmul")
BLOCKS = (1, 3, 16)


def test_library_kernels_match_numpy_for_several_block_counts(run_py):
    r = scenario(run_py, f"""
        b, ret = acl.rt.binary_load_from_file(LIBRARY)
        ok(ret, "binary_load_from_file(LIBRARY)")
        F = functions(b, {list(LIBRARY_KERNELS)!r})
        s = stream()
        rng = np.random.default_rng(11)
        n, rows, cols, m, k, nn = 1001, 13, 17, 9, 11, 5  # uneven shares for every block count
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        xi = rng.integers(-1000, 1000, n).astype(np.int32)
        yi = rng.integers(-1000, 1000, n).astype(np.int32)
        sm = rng.standard_normal((rows, cols)).astype(np.float32) * 4
        a = rng.standard_normal((m, k)).astype(np.float32)
        bm = rng.standard_normal((k, nn)).astype(np.float32)
        px, py, pxi, pyi = to_dev(x), to_dev(y), to_dev(xi), to_dev(yi)
        psm, pa, pb = to_dev(sm), to_dev(a), to_dev(bm)
        for nb in {list(BLOCKS)!r}:
            out = {{name: zeroed(4 * n + 64) for name in
                   ("add", "addi", "mul", "relu", "fill", "cast", "softmax", "sum", "matmul")}}
            launches = [
                ("add", [px, py, out["add"], n, "float32"]),
                ("add", [pxi, pyi, out["addi"], n, "int32"]),
                ("mul", [px, py, out["mul"], n, "float32"]),
                ("relu", [px, out["relu"], n, "float32"]),
                ("fill", [out["fill"], n, 2.5, "float32"]),
                ("cast", [px, out["cast"], n, "float32", "float16"]),
                ("softmax", [psm, out["softmax"], rows, cols, "float32"]),
                ("reduce_sum", [px, out["sum"], n, "float32"]),
                ("matmul", [pa, pb, out["matmul"], m, k, nn, "float32"]),
            ]
            rets = [acl.rt.launch_kernel(F[name], nb, args, s) for name, args in launches]
            sync = acl.rt.synchronize_stream(s)
            sm_ref = np.exp(sm - sm.max(axis=1, keepdims=True))
            sm_ref /= sm_ref.sum(axis=1, keepdims=True)
            R[str(nb)] = {{
                "rets": rets, "sync": sync,
                "add": bool(np.array_equal(from_dev(out["add"], np.float32, n), x + y)),
                "add_int32": bool(np.array_equal(from_dev(out["addi"], np.int32, n), xi + yi)),
                "mul": bool(np.array_equal(from_dev(out["mul"], np.float32, n), x * y)),
                "relu": bool(np.array_equal(from_dev(out["relu"], np.float32, n),
                                            np.maximum(x, 0))),
                "fill": bool(np.array_equal(from_dev(out["fill"], np.float32, n),
                                            np.full(n, 2.5, np.float32))),
                "cast": bool(np.array_equal(from_dev(out["cast"], np.float16, n),
                                            x.astype(np.float16))),
                "softmax": bool(np.allclose(
                    from_dev(out["softmax"], np.float32, rows * cols).reshape(rows, cols),
                    sm_ref, rtol=1e-5, atol=1e-7)),
                "reduce_sum": bool(np.allclose(from_dev(out["sum"], np.float32, 1)[0],
                                               x.sum(dtype=np.float64), rtol=1e-4, atol=1e-4)),
                "matmul": bool(np.allclose(
                    from_dev(out["matmul"], np.float32, m * nn).reshape(m, nn), a @ bm,
                    rtol=1e-5, atol=1e-5)),
                # nothing is written past the end of an output
                "no_overrun": d2h(out["fill"], 4 * n + 64)[4 * n:] == bytes(64),
            }}
            for p in out.values():
                ok(acl.rt.free(p))
    """)
    for nb in BLOCKS:
        got = r[str(nb)]
        assert got.pop("rets") == [0] * 9, (nb, got)
        assert got.pop("sync") == 0, (nb, got)
        assert got == {name: True for name in got}, (nb, got)
        assert set(got) >= {*LIBRARY_KERNELS, "add_int32"}


# ---------------------------------------------------------------------------- binaries
KERNEL_FILE = '''
from npuemu.shared.kernel import kernel


def helper(x):  # not a kernel: not visible to binary_get_function
    return x


@kernel("aivector")
def scale(ctx, x, y, n, factor):
    lo, hi = ctx.split(n)
    ctx.tensor(y, "float32", n)[lo:hi] = ctx.tensor(x, "float32", n)[lo:hi] * factor
'''


def test_binary_load_lookup_and_launch_errors(run_py, tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text(KERNEL_FILE)
    r = scenario(run_py, """
        path = os.environ["KERNEL_FILE"]
        s = stream()
        b, ret = acl.rt.binary_load_from_file(path)
        R["load"] = ret
        fn, ret = acl.rt.binary_get_function(b, "scale")
        R["get"] = ret
        n = 100
        x = np.arange(n, dtype=np.float32)
        px, py = to_dev(x), zeroed(4 * n)
        R["launch"] = acl.rt.launch_kernel(fn, 4, [px, py, n, 3.0], s)
        R["sync"] = acl.rt.synchronize_stream(s)
        R["scaled"] = bool(np.array_equal(from_dev(py, np.float32, n), x * 3))

        R["missing_fn"] = ints(acl.rt.binary_get_function(b, "nope"))
        R["not_a_kernel"] = acl.rt.binary_get_function(b, "helper")[1]
        R["zero_blocks"] = acl.rt.launch_kernel(fn, 0, [px, py, n, 3.0], s)
        R["negative_blocks"] = acl.rt.launch_kernel(fn, -1, [px, py, n, 3.0], s)
        R["bad_arg"] = acl.rt.launch_kernel(fn, 1, [px, py, [n], 3.0], s)
        R["broken_source"] = ints(acl.rt.binary_load_from_data("def broken(:\\n    pass\\n"))
        R["raising_source"] = acl.rt.binary_load_from_data("raise ValueError('no')\\n")[1]
        R["missing_file"] = acl.rt.binary_load_from_file(path + ".missing")[1]
        R["bad_stream"] = acl.rt.launch_kernel(fn, 1, [px, py, n, 3.0], 123456789)

        # a binary belongs to the device it was loaded on
        ok(acl.rt.set_device(1))
        s1 = stream()
        R["other_device"] = acl.rt.launch_kernel(fn, 1, [px, py, n, 3.0], s1)
        ok(acl.rt.set_device(0))
        R["foreign_stream"] = acl.rt.launch_kernel(fn, 1, [px, py, n, 3.0], s1)

        R["unload"] = acl.rt.binary_unload(b)
        R["after_unload"] = [acl.rt.launch_kernel(fn, 1, [px, py, n, 3.0], s),
                             acl.rt.binary_get_function(b, "scale")[1],
                             acl.rt.binary_unload(b)]
        R["stream_ok"] = acl.rt.synchronize_stream(s)
        # loading the same file again gives a fresh, working binary
        b2, ret = acl.rt.binary_load_from_file(path)
        fn2, ret2 = acl.rt.binary_get_function(b2, "scale")
        ok(acl.rt.launch_kernel(fn2, 2, [px, py, n, -1.0], s))
        R["reload"] = [ret, ret2, acl.rt.synchronize_stream(s),
                       bool(np.array_equal(from_dev(py, np.float32, n), -x))]
    """, env={"KERNEL_FILE": str(path)})
    assert r["load"] == 0 and r["get"] == 0 and r["launch"] == 0 and r["sync"] == 0
    assert r["scaled"]
    assert r["missing_fn"] == [0, RT_PARAM_INVALID]
    assert r["not_a_kernel"] == RT_PARAM_INVALID
    assert r["zero_blocks"] == INVALID_PARAM
    assert r["negative_blocks"] == INVALID_PARAM
    assert r["bad_arg"] == INVALID_PARAM
    assert r["broken_source"] == [0, RT_PARAM_INVALID]
    assert r["raising_source"] == RT_PARAM_INVALID
    assert r["missing_file"] != 0
    assert r["bad_stream"] == RT_PARAM_INVALID
    assert r["other_device"] == STREAM_CONTEXT
    assert r["foreign_stream"] == STREAM_CONTEXT
    assert r["unload"] == 0
    assert r["after_unload"] == [RT_PARAM_INVALID] * 3
    assert r["stream_ok"] == 0
    assert r["reload"] == [0, 0, 0, True]


def test_binary_unload_keeps_already_queued_launches(run_py):
    r = scenario(run_py, """
        b, ret = acl.rt.binary_load_from_file(LIBRARY)
        ok(ret)
        F = functions(b, ["fill"])
        s = stream()
        p = zeroed(64)
        gate = hold(s)
        ok(acl.rt.launch_kernel(F["fill"], 2, [p, 16, 3.0, "float32"], s))
        R["unload"] = acl.rt.binary_unload(b)
        gate.set()
        R["sync"] = acl.rt.synchronize_stream(s)
        R["data"] = from_dev(p, np.float32, 16).tolist()
    """)
    assert r["unload"] == 0
    assert r["sync"] == 0
    assert r["data"] == [3.0] * 16


# ---------------------------------------------------------------------------- failures
FAILING = '''
from npuemu.shared.kernel import kernel

@kernel("aicore")
def boom_core(ctx):
    raise RuntimeError("aicore fails on purpose")

@kernel("aivector")
def boom_vec(ctx):
    raise RuntimeError("aivector fails on purpose")

@kernel("aicpu")
def boom_cpu(ctx):
    raise RuntimeError("aicpu fails on purpose")

@kernel("aivector")
def touch(ctx, ptr, n):
    ctx.tensor(ptr, "uint8", n)[:] = 7
'''


def test_kernel_failures_report_engine_codes_once_and_the_worker_survives(run_py):
    r = scenario(run_py, f"""
        b, ret = acl.rt.binary_load_from_data({FAILING!r})
        ok(ret)
        F = functions(b, ["boom_core", "boom_vec", "boom_cpu", "touch"])
        s, other = stream(), stream()
        small = zeroed(4096)
        gone = malloc(4096)
        ok(acl.rt.free(gone))
        used = malloc(4096)
        ok(acl.rt.launch_kernel(F["touch"], 1, [used, 16], s))  # its view is kept, then
        ok(acl.rt.synchronize_stream(s))
        ok(acl.rt.free(used))                                   # the block is freed
        cases = [("boom_core", []), ("boom_vec", []), ("boom_cpu", []),
                 ("touch", [small, 64 << 20]),    # runs far past its allocation
                 ("touch", [gone, 16]),           # a freed block
                 ("touch", [used, 16]),           # freed after a kernel used it: no stale view
                 ("touch", [small, 4096])]        # in bounds: fine
        for name, args in cases:
            launched = acl.rt.launch_kernel(F[name], 2, args, s)
            R.setdefault("runs", []).append([launched, acl.rt.synchronize_stream(s),
                                             acl.rt.synchronize_stream(s)])
        R["touched"] = d2h(small, 4096) == b"\\x07" * 4096

        # last error: per thread, peek keeps it, get clears it
        ok(acl.rt.launch_kernel(F["boom_core"], 1, [], s))
        R["fail"] = acl.rt.synchronize_stream(s)
        other_thread = []
        th = threading.Thread(target=lambda: other_thread.append(acl.rt.peek_at_last_error(0)))
        th.start(); th.join()
        R["last"] = [acl.rt.peek_at_last_error(0), acl.rt.peek_at_last_error(0),
                     acl.rt.get_last_error(0), acl.rt.peek_at_last_error(0),
                     acl.rt.get_last_error(0)]
        R["other_thread"] = other_thread
        # another stream never saw the failures
        R["other_stream"] = acl.rt.synchronize_stream(other)

        # the worker still serves: malloc, copies, a good kernel
        p = malloc(1 << 20)
        data = os.urandom(1 << 20)
        h2d(p, data)
        ok(acl.rt.launch_kernel(F["touch"], 3, [small, 100], s))
        R["alive"] = [d2h(p, 1 << 20) == data, acl.rt.synchronize_stream(s),
                      ints(acl.rt.query_device_status(0))]
    """)
    codes = [AICORE_EXCEPTION, VECTOR_CORE_EXCEPTION, AICPU_EXCEPTION, DEVICE_MEM_ERROR,
             DEVICE_MEM_ERROR, DEVICE_MEM_ERROR, 0]
    assert r["runs"] == [[0, code, 0] for code in codes]
    assert r["touched"]
    assert r["fail"] == AICORE_EXCEPTION
    assert r["last"] == [AICORE_EXCEPTION, AICORE_EXCEPTION, AICORE_EXCEPTION, 0, 0]
    assert r["other_thread"] == [0]
    assert r["other_stream"] == 0
    assert r["alive"] == [True, 0, [0, 0]]


# --------------------------------------------------------------------------- async copies
def test_async_copies_with_pinned_and_pageable_host_memory(run_py):
    r = scenario(run_py, """
        s = stream()
        for n in (100, (1 << 20) + 100):  # inline and DMA-engine sizes
            key = str(n)
            data = os.urandom(n)
            src, ret = acl.rt.malloc_host(n)
            ok(ret)
            dst, ret = acl.rt.malloc_host(n)
            ok(ret)
            ctypes.memmove(src, data, n)
            d1, d2 = zeroed(n), zeroed(n)
            # pinned: queued behind a held stream, nothing moves until it is released
            gate = hold(s)
            rets = [acl.rt.memcpy_async(d1, n, src, n, 1, s),
                    acl.rt.memcpy_async(d2, n, d1, n, 3, s),
                    acl.rt.memcpy_async(dst, n, d2, n, 2, s)]
            before = d2h(d2, n) == bytes(n)
            gate.set()
            rets.append(acl.rt.synchronize_stream(s))
            pinned_ok = acl.util.ptr_to_bytes(dst, n) == data

            # pageable numpy buffers; H2D stages the source at the call
            arr = np.frombuffer(os.urandom(n), np.uint8).copy()
            want = arr.copy()
            back = np.zeros(n, np.uint8)
            gate = hold(s)
            rets.append(acl.rt.memcpy_async(d1, n, acl.util.bytes_to_ptr(arr), n, 1, s))
            arr[:] = 0xEE  # after the call: must not reach the device
            threading.Timer(0.1, gate.set).start()
            # a pageable D2H returns only once the copy is done
            rets.append(acl.rt.memcpy_async(acl.util.bytes_to_ptr(back), n, d1, n, 2, s))
            released = gate.is_set()
            rets.append(acl.rt.synchronize_stream(s))
            # ACL_MEMCPY_DEFAULT (4) infers the direction; pinned -> device -> pageable
            back2 = bytearray(n)
            rets += [acl.rt.memcpy_async(d2, n, src, n, 4, s),
                     acl.rt.memcpy_async(acl.util.bytes_to_ptr(back2), n, d2, n, 4, s),
                     acl.rt.synchronize_stream(s)]
            R[key] = {"rets": rets, "before": before, "pinned": pinned_ok,
                      "pageable": bool(np.array_equal(back, want)), "released": released,
                      "mixed": bytes(back2) == data}
            ok(acl.rt.free_host(src)); ok(acl.rt.free_host(dst))
        h1, _ = acl.rt.malloc_host(64)
        h2, _ = acl.rt.malloc_host(64)
        p = zeroed(64)
        R["errors"] = [acl.rt.memcpy_async(h2, 64, h1, 64, 0, s),     # async H2H
                       acl.rt.memcpy_async(p, 32, h1, 64, 1, s),      # count > dst_max
                       acl.rt.memcpy_async(p, 64, h1, 0, 1, s),       # count 0
                       acl.rt.memcpy_async(p, 64, h1, 64, 2, s),      # kind mismatch
                       acl.rt.memset_async(h1, 64, 0, 64, s)]  # pinned host memory: allowed
        R["after_errors"] = acl.rt.synchronize_stream(s)
    """)
    for n in ("100", str((1 << 20) + 100)):
        got = r[n]
        assert got["rets"] == [0] * 10, (n, got)
        assert got == {**got, "before": True, "pinned": True, "pageable": True,
                       "released": True, "mixed": True}, (n, got)
    assert r["errors"] == [FEATURE_NOT_SUPPORT, RT_PARAM_INVALID, INVALID_PARAM,
                           RT_PARAM_INVALID, 0]
    assert r["after_errors"] == 0


# ---------------------------------------------------------------------------- utilization
BUSY = '''
import time
from npuemu.shared.kernel import kernel

@kernel("aivector")
def busy(ctx, seconds):
    time.sleep(seconds / ctx.block_num)
'''


def test_device_utilization_rate_after_a_long_vector_kernel(run_py):
    r = scenario(run_py, f"""
        b, ret = acl.rt.binary_load_from_data({BUSY!r})
        ok(ret)
        F = functions(b, ["busy"])
        s = stream()
        first = acl.rt.get_device_utilization_rate(0)
        ok(acl.rt.launch_kernel(F["busy"], 2, [0.3], s))
        ok(acl.rt.synchronize_stream(s))
        polls = []
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            rates, ret = acl.rt.get_device_utilization_rate(0)
            polls.append([rates, ret])
            if ret or rates.get("vectorUtilization", 0) > 0:
                break
            time.sleep(0.01)
        R["first"] = list(first)
        R["polls"] = polls
        R["bad_device"] = acl.rt.get_device_utilization_rate(9)[1]
    """)
    keys = {"cubeUtilization", "vectorUtilization", "aicpuUtilization", "memoryUtilization"}
    for rates, ret in [r["first"], *r["polls"]]:
        assert ret == 0
        assert set(rates) == keys, rates
        assert all(type(v) is int and 0 <= v <= 100 for v in rates.values()), rates
    assert r["polls"][-1][0]["vectorUtilization"] > 0, r["polls"]
    assert r["bad_device"] != 0


def test_overflow_and_nan_are_silent_as_on_a_card(run_py):
    """A kernel that overflows to inf or makes NaN says nothing: numpy's floating-point
    warnings in the worker would land on the user's terminal."""
    proc = run_py("""
        import numpy as np
        from npuemu.host.api import Device, DeviceArray, Stream, load_kernels
        with Device(0) as dev:
            x = DeviceArray.from_numpy(np.array([3e38, np.inf, -1.0], np.float32))
            y = dev.array(3, np.float32)
            k = load_kernels()
            with Stream() as s:
                s.launch(k["add"], 1, x.ptr, x.ptr, y.ptr, 3, "float32")
                s.launch(k["mul"], 1, y.ptr, x.ptr, y.ptr, 3, "float32")
                s.synchronize()
            print(y.to_numpy().tolist())
    """, env={**ENV, "NPUEMU_DEVICES": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[inf, inf, 2.0]"
    assert "Warning" not in proc.stderr, proc.stderr
