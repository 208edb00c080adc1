"""A Python program that calls libascendcl.so's hot calls (aclrtMalloc, aclrtFree,
aclrtLaunchKernel, aclrtSynchronizeStream: written in C, native.c) through ctypes, and checks
what they call: with the GIL released (CDLL) and held (PyDLL), a replaced ``acl.rt`` function
(as the profiler's API timer replaces them), and a Python body that raises (an internal error:
500000 and its traceback on stderr). $NPUEMU_SDK_LIB: lib64/."""

import ctypes
import os
import sys

LIB = os.path.join(os.environ["NPUEMU_SDK_LIB"], "libascendcl.so")
released, held = ctypes.CDLL(LIB), ctypes.PyDLL(LIB)
for lib in (released, held):
    lib.aclrtLaunchKernel.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_void_p]
    lib.aclrtFree.argtypes = [ctypes.c_void_p]
    lib.aclrtSynchronizeStream.argtypes = [ctypes.c_void_p]
    lib.aclrtMalloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
released.aclGetRecentErrMsg.restype = ctypes.c_char_p
INTERNAL, INVALID = 500000, 100000
KERNEL = b"""from npuemu.shared.kernel import kernel

@kernel("aivector")
def store(ctx, out, value):
    ctx.tensor(out, "uint64", 1)[0] = value
"""


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {released.aclGetRecentErrMsg()}")


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAIL {what}")


ok(released.aclInit(None), "aclInit")
ok(released.aclrtSetDevice(0), "aclrtSetDevice")
stream = ctypes.c_void_p()
ok(released.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
for lib, how in ((released, "GIL released"), (held, "GIL held")):
    p = ctypes.c_void_p()
    ok(lib.aclrtMalloc(ctypes.byref(p), 256, 0), f"aclrtMalloc ({how})")
    expect(bool(p.value), f"aclrtMalloc ({how}) wrote the address")
    ok(lib.aclrtSynchronizeStream(stream), f"aclrtSynchronizeStream ({how})")
    ok(lib.aclrtFree(p), f"aclrtFree ({how})")
    expect(lib.aclrtFree(p) != 0, f"a second aclrtFree ({how}) fails")
    expect(lib.aclrtMalloc(None, 256, 0) == INVALID, f"aclrtMalloc(NULL) ({how})")
    expect(b"devPtr is NULL" in released.aclGetRecentErrMsg(), "aclrtMalloc(NULL)'s message")
print("hot calls ok with the GIL released and held")

# the launch: argument words reach the kernel; a malformed size is refused
binary, func = ctypes.c_void_p(), ctypes.c_void_p()
ok(released.aclrtBinaryLoadFromData(KERNEL, len(KERNEL), None, ctypes.byref(binary)), "load")
ok(released.aclrtBinaryGetFunction(binary, b"store", ctypes.byref(func)), "get function")
out, host = ctypes.c_void_p(), ctypes.c_uint64(0)
ok(released.aclrtMalloc(ctypes.byref(out), 8, 0), "aclrtMalloc")
words = (ctypes.c_uint64 * 2)(out.value, 0xFEEDFACE)
ok(released.aclrtLaunchKernel(func, 1, words, 16, stream), "aclrtLaunchKernel")
ok(released.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
ok(released.aclrtMemcpy(ctypes.byref(host), 8, out, 8, 2), "aclrtMemcpy D2H")
expect(host.value == 0xFEEDFACE, f"the kernel got its words ({host.value:#x})")
expect(released.aclrtLaunchKernel(func, 1, words, 12, stream) == INVALID, "argsSize 12")
expect(released.aclrtLaunchKernel(func, 1, None, 8, stream) == INVALID, "argsData NULL")
print("launch ok")

# the hot calls look their Python functions up on each call
from npuemu.host.acl import rt  # noqa: E402
from npuemu.host.capi import mem  # noqa: E402

seen = []
face_sync, face_malloc = rt.synchronize_stream, rt.malloc
rt.synchronize_stream = lambda s: seen.append("sync") or face_sync(s)
rt.malloc = lambda size, policy: seen.append("malloc") or face_malloc(size, policy)
p = ctypes.c_void_p()
ok(released.aclrtSynchronizeStream(stream), "replaced aclrtSynchronizeStream")
ok(released.aclrtMalloc(ctypes.byref(p), 64, 0), "replaced aclrtMalloc")
expect(seen == ["sync", "malloc"], f"the replaced functions ran ({seen})")
rt.synchronize_stream, rt.malloc = face_sync, face_malloc
ok(released.aclrtFree(p), "aclrtFree")
print("replacements seen")


def boom(size: int, policy: int) -> int:
    raise ZeroDivisionError("npuemu test: a body that raises")


face_hot = mem.hot_malloc
mem.hot_malloc = boom
expect(released.aclrtMalloc(ctypes.byref(p), 64, 0) == INTERNAL, "an internal error's code")
mem.hot_malloc = face_hot
sys.stderr.flush()
ok(released.aclrtFree(out), "aclrtFree")
ok(released.aclrtBinaryUnLoad(binary), "unload")
ok(released.aclrtDestroyStream(stream), "aclrtDestroyStream")
ok(released.aclrtResetDevice(0), "aclrtResetDevice")
ok(released.aclFinalize(), "aclFinalize")
print("all ok")
