"""A Python program that drives npuemu through its C libraries with ctypes, as serving
engines' HCCL wrappers do: libascendcl.so and libhccl.so loaded by path, every symbol
resolved up front, HcclRootInfo as a 4108-byte ctypes struct, two ranks from two threads of
this process (HcclCommInitRootInfo blocks until both joined). $NPUEMU_SDK_LIB: lib64/."""

import ctypes
import os
import sys
import threading

LIB = os.environ["NPUEMU_SDK_LIB"]
acl = ctypes.CDLL(os.path.join(LIB, "libascendcl.so"))
hccl = ctypes.CDLL(os.path.join(LIB, "libhccl.so"))

HCCL_SYMBOLS = ["HcclGetRootInfo", "HcclCommInitRootInfo", "HcclCommInitRootInfoConfig",
                "HcclAllReduce", "HcclAllGather", "HcclBroadcast", "HcclReduceScatter",
                "HcclScatter",
                "HcclSend", "HcclRecv", "HcclBarrier", "HcclAlltoAll", "HcclAlltoAllV",
                "HcclReduce", "HcclCommDestroy", "HcclGetErrorString", "HcclGetRankId",
                "HcclGetRankSize"]
ACL_SYMBOLS = ["aclInit", "aclrtSetDevice", "aclrtMalloc", "aclrtFree", "aclrtMemcpy",
               "aclrtCreateStream", "aclrtSynchronizeStream", "aclrtDestroyStream",
               "aclrtResetDevice", "aclFinalize"]


class HcclRootInfo(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 4108)]


def resolve_all() -> None:
    for lib, names in ((hccl, HCCL_SYMBOLS), (acl, ACL_SYMBOLS)):
        for name in names:
            getattr(lib, name)  # AttributeError if missing, as the bindings fail
    hccl.HcclGetErrorString.restype = ctypes.c_char_p
    print("every symbol resolved")


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret}")


N = 256
results: dict[int, list[float]] = {}


def rank_main(rank: int, root: HcclRootInfo) -> None:
    ok(acl.aclrtSetDevice(rank), "aclrtSetDevice")
    stream = ctypes.c_void_p()
    ok(acl.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
    comm = ctypes.c_void_p()
    ok(hccl.HcclCommInitRootInfo(2, ctypes.byref(root), rank, ctypes.byref(comm)), "init")
    host = (ctypes.c_float * N)(*[float(rank + 1)] * N)
    send, recv = ctypes.c_void_p(), ctypes.c_void_p()
    for p in (send, recv):
        ok(acl.aclrtMalloc(ctypes.byref(p), ctypes.c_size_t(4 * N), 0), "aclrtMalloc")
    ok(acl.aclrtMemcpy(send, ctypes.c_size_t(4 * N), host, ctypes.c_size_t(4 * N), 1), "H2D")
    ok(hccl.HcclAllReduce(send, recv, ctypes.c_uint64(N), 4, 0, comm, stream), "all_reduce")
    ok(acl.aclrtSynchronizeStream(stream), "sync")
    out = (ctypes.c_float * N)()
    ok(acl.aclrtMemcpy(out, ctypes.c_size_t(4 * N), recv, ctypes.c_size_t(4 * N), 2), "D2H")
    results[rank] = list(out)
    ok(hccl.HcclCommDestroy(comm), "destroy")
    for p in (send, recv):
        ok(acl.aclrtFree(p), "aclrtFree")
    ok(acl.aclrtDestroyStream(stream), "aclrtDestroyStream")
    ok(acl.aclrtResetDevice(rank), "aclrtResetDevice")


def main() -> int:
    resolve_all()
    ok(acl.aclInit(None), "aclInit")
    ok(acl.aclrtSetDevice(0), "aclrtSetDevice")
    root = HcclRootInfo()
    ok(hccl.HcclGetRootInfo(ctypes.byref(root)), "HcclGetRootInfo")
    assert hccl.HcclGetErrorString(2)
    threads = [threading.Thread(target=rank_main, args=(r, root)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if sorted(results) != [0, 1] or any(v != [3.0] * N for v in results.values()):
        print("wrong results", {k: v[:4] for k, v in results.items()})
        return 1
    ok(acl.aclrtResetDevice(0), "aclrtResetDevice")
    ok(acl.aclFinalize(), "aclFinalize")
    print("all_reduce over 2 ranks ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
