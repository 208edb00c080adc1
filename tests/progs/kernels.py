"""Child program of ``tests/integration/test_kernels.py``: kernels and async copies
(``aclrtBinaryLoadFromFile``/``FromData``, ``aclrtBinaryGetFunction``, ``aclrtLaunchKernel``,
``aclrtBinaryUnload``, ``aclrtPeekAtLastError``/``GetLastError``, ``aclrtMemcpyAsync``,
``aclrtGetDeviceUtilizationRate``).

``python kernels.py SCENARIO [ARG...]`` initializes pyACL, sets device 0, runs one scenario
and prints ``R`` (see ``childlib``); the assertions are the test's. The kernel files are
``kernels_failing.py`` and ``kernels_busy.py`` (loaded from their text) and the ready
library (``LIBRARY``).
"""

import ctypes
import json
import os
import threading
import time

import numpy as np
from childlib import (
    R,
    acl,
    d2h,
    h2d,
    hold,
    ints,
    main,
    malloc,
    ok,
    scenario,
    source,
    stream,
    zeroed,
)

from npuemu.host.core.kernel import LIBRARY


def to_dev(arr):
    """A device copy of the numpy array ``arr`` (at least one byte)."""
    arr = np.ascontiguousarray(arr)
    p = malloc(max(arr.nbytes, 1))
    h2d(p, arr.tobytes())
    return p


def from_dev(p, dtype, count):
    """``count`` items of ``dtype`` read back from ``p``."""
    dt = np.dtype(dtype)
    return np.frombuffer(d2h(p, count * dt.itemsize), dt, count)


def functions(binary, names):
    """The functions ``names`` of ``binary``; exits the child if one is missing."""
    out = {}
    for name in names:
        out[name], ret = acl.rt.binary_get_function(binary, name)
        ok(ret, f"binary_get_function {name}")
    return out


# ------------------------------------------------------------------------------ library
class LibraryInputs:
    """Random inputs of the library kernels on the device, sized unevenly for every block
    count."""

    def __init__(self):
        rng = np.random.default_rng(11)
        self.n, self.rows, self.cols, self.m, self.k, self.nn = 1001, 13, 17, 9, 11, 5
        n = self.n
        self.x = rng.standard_normal(n).astype(np.float32)
        self.y = rng.standard_normal(n).astype(np.float32)
        self.xi = rng.integers(-1000, 1000, n).astype(np.int32)
        self.yi = rng.integers(-1000, 1000, n).astype(np.int32)
        self.sm = rng.standard_normal((self.rows, self.cols)).astype(np.float32) * 4
        self.a = rng.standard_normal((self.m, self.k)).astype(np.float32)
        self.bm = rng.standard_normal((self.k, self.nn)).astype(np.float32)
        self.px, self.py, self.pxi, self.pyi = (to_dev(self.x), to_dev(self.y),
                                                to_dev(self.xi), to_dev(self.yi))
        self.psm, self.pa, self.pb = to_dev(self.sm), to_dev(self.a), to_dev(self.bm)

    def launches(self, out):
        """(kernel name, arguments) of every library kernel writing into ``out``."""
        n, rows, cols, m, k, nn = self.n, self.rows, self.cols, self.m, self.k, self.nn
        return [
            ("add", [self.px, self.py, out["add"], n, "float32"]),
            ("add", [self.pxi, self.pyi, out["addi"], n, "int32"]),
            ("mul", [self.px, self.py, out["mul"], n, "float32"]),
            ("relu", [self.px, out["relu"], n, "float32"]),
            ("fill", [out["fill"], n, 2.5, "float32"]),
            ("cast", [self.px, out["cast"], n, "float32", "float16"]),
            ("softmax", [self.psm, out["softmax"], rows, cols, "float32"]),
            ("reduce_sum", [self.px, out["sum"], n, "float32"]),
            ("matmul", [self.pa, self.pb, out["matmul"], m, k, nn, "float32"]),
        ]

    def checks(self, out):
        """Each output compared with numpy, and the bytes past the end of one output."""
        n, rows, cols, m, nn = self.n, self.rows, self.cols, self.m, self.nn
        x, y, xi, yi, sm = self.x, self.y, self.xi, self.yi, self.sm
        sm_ref = np.exp(sm - sm.max(axis=1, keepdims=True))
        sm_ref /= sm_ref.sum(axis=1, keepdims=True)
        return {
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
                from_dev(out["matmul"], np.float32, m * nn).reshape(m, nn), self.a @ self.bm,
                rtol=1e-5, atol=1e-5)),
            # nothing is written past the end of an output
            "no_overrun": d2h(out["fill"], 4 * n + 64)[4 * n:] == bytes(64),
        }


@scenario
def library(names, blocks):
    """Every library kernel (``names``, JSON) at each block count (``blocks``, JSON)."""
    b, ret = acl.rt.binary_load_from_file(LIBRARY)
    ok(ret, "binary_load_from_file(LIBRARY)")
    F = functions(b, json.loads(names))
    s = stream()
    inputs = LibraryInputs()
    for nb in json.loads(blocks):
        out = {name: zeroed(4 * inputs.n + 64) for name in
               ("add", "addi", "mul", "relu", "fill", "cast", "softmax", "sum", "matmul")}
        rets = [acl.rt.launch_kernel(F[name], nb, args, s)
                for name, args in inputs.launches(out)]
        sync = acl.rt.synchronize_stream(s)
        R[str(nb)] = {"rets": rets, "sync": sync, **inputs.checks(out)}
        for p in out.values():
            ok(acl.rt.free(p))


# ---------------------------------------------------------------------------- binaries
@scenario
def binary_errors(path):
    """The kernel file ``path`` loaded, looked up and launched; bad lookups and launches."""
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
    R["broken_source"] = ints(acl.rt.binary_load_from_data("def broken(:\n    pass\n"))
    R["raising_source"] = acl.rt.binary_load_from_data("raise ValueError('no')\n")[1]
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


@scenario
def unload_queued():
    """A library binary unloaded while its launch waits behind a held stream."""
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


# ---------------------------------------------------------------------------- failures
@scenario
def failures():
    """Failing kernels on each engine and out of bounds; the last error; afterwards."""
    b, ret = acl.rt.binary_load_from_data(source("kernels_failing.py"))
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
    R["touched"] = d2h(small, 4096) == b"\x07" * 4096
    last_error(F, s)
    # another stream never saw the failures
    R["other_stream"] = acl.rt.synchronize_stream(other)

    # the worker still serves: malloc, copies, a good kernel
    p = malloc(1 << 20)
    data = os.urandom(1 << 20)
    h2d(p, data)
    ok(acl.rt.launch_kernel(F["touch"], 3, [small, 100], s))
    R["alive"] = [d2h(p, 1 << 20) == data, acl.rt.synchronize_stream(s),
                  ints(acl.rt.query_device_status(0))]


def last_error(F, s):
    """The last error: per thread, peek keeps it, get clears it."""
    ok(acl.rt.launch_kernel(F["boom_core"], 1, [], s))
    R["fail"] = acl.rt.synchronize_stream(s)
    other_thread = []
    th = threading.Thread(target=lambda: other_thread.append(acl.rt.peek_at_last_error(0)))
    th.start()
    th.join()
    R["last"] = [acl.rt.peek_at_last_error(0), acl.rt.peek_at_last_error(0),
                 acl.rt.get_last_error(0), acl.rt.peek_at_last_error(0),
                 acl.rt.get_last_error(0)]
    R["other_thread"] = other_thread


# --------------------------------------------------------------------------- async copies
def pinned_copies(s, n, src, dst, d1, d2, data):
    """Pinned: queued behind a held stream, nothing moves until it is released."""
    gate = hold(s)
    rets = [acl.rt.memcpy_async(d1, n, src, n, 1, s),
            acl.rt.memcpy_async(d2, n, d1, n, 3, s),
            acl.rt.memcpy_async(dst, n, d2, n, 2, s)]
    before = d2h(d2, n) == bytes(n)
    gate.set()
    rets.append(acl.rt.synchronize_stream(s))
    return rets, before, acl.util.ptr_to_bytes(dst, n) == data


def pageable_copies(s, n, d1):
    """Pageable numpy buffers; H2D stages the source at the call, D2H returns when done."""
    arr = np.frombuffer(os.urandom(n), np.uint8).copy()
    want = arr.copy()
    back = np.zeros(n, np.uint8)
    gate = hold(s)
    rets = [acl.rt.memcpy_async(d1, n, acl.util.bytes_to_ptr(arr), n, 1, s)]
    arr[:] = 0xEE  # after the call: must not reach the device
    threading.Timer(0.1, gate.set).start()
    # a pageable D2H returns only once the copy is done
    rets.append(acl.rt.memcpy_async(acl.util.bytes_to_ptr(back), n, d1, n, 2, s))
    released = gate.is_set()
    rets.append(acl.rt.synchronize_stream(s))
    return rets, bool(np.array_equal(back, want)), released


@scenario
def async_copies():
    """Async copies of inline and DMA sizes with pinned and pageable memory; bad ones."""
    s = stream()
    for n in (100, (1 << 20) + 100):  # inline and DMA-engine sizes
        data = os.urandom(n)
        src, ret = acl.rt.malloc_host(n)
        ok(ret)
        dst, ret = acl.rt.malloc_host(n)
        ok(ret)
        ctypes.memmove(src, data, n)
        d1, d2 = zeroed(n), zeroed(n)
        rets, before, pinned_ok = pinned_copies(s, n, src, dst, d1, d2, data)
        more, pageable_ok, released = pageable_copies(s, n, d1)
        rets += more
        # ACL_MEMCPY_DEFAULT (4) infers the direction; pinned -> device -> pageable
        back2 = bytearray(n)
        rets += [acl.rt.memcpy_async(d2, n, src, n, 4, s),
                 acl.rt.memcpy_async(acl.util.bytes_to_ptr(back2), n, d2, n, 4, s),
                 acl.rt.synchronize_stream(s)]
        R[str(n)] = {"rets": rets, "before": before, "pinned": pinned_ok,
                     "pageable": pageable_ok, "released": released,
                     "mixed": bytes(back2) == data}
        ok(acl.rt.free_host(src))
        ok(acl.rt.free_host(dst))
    h1, _ = acl.rt.malloc_host(64)
    h2, _ = acl.rt.malloc_host(64)
    p = zeroed(64)
    R["errors"] = [acl.rt.memcpy_async(h2, 64, h1, 64, 0, s),     # async H2H
                   acl.rt.memcpy_async(p, 32, h1, 64, 1, s),      # count > dst_max
                   acl.rt.memcpy_async(p, 64, h1, 0, 1, s),       # count 0
                   acl.rt.memcpy_async(p, 64, h1, 64, 2, s),      # kind mismatch
                   acl.rt.memset_async(h1, 64, 0, 64, s)]  # pinned host memory: allowed
    R["after_errors"] = acl.rt.synchronize_stream(s)


# ---------------------------------------------------------------------------- utilization
@scenario
def utilization():
    """The utilization rates before and after a 0.3 s vector kernel; a bad device."""
    b, ret = acl.rt.binary_load_from_data(source("kernels_busy.py"))
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
        if ret or rates.get("vector_utilization", 0) > 0:
            break
        time.sleep(0.01)
    R["first"] = list(first)
    R["polls"] = polls
    R["bad_device"] = acl.rt.get_device_utilization_rate(9)[1]


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    main()
