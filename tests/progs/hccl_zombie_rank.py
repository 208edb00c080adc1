"""Child of ``tests/integration/test_trust_misc.py``: one rank of a two-rank communicator
(card-executed collectives, one process per rank). Both ranks run one all_reduce; rank 1
then says so and sleeps until the test kills it (the test, its parent, does not reap it: a
zombie); rank 0 waits for the kill, calls the next all_reduce and reports its stream's
code, the time it took, and the communicator's async error.

Usage: ``python hccl_zombie_rank.py`` with ``NPUEMU_NODE``, ``SYNC`` and ``RANK`` set.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
from rendezvous import get, put

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)
import pyhccl  # noqa: E402

RANK = int(os.environ["RANK"])
FP32, SUM, N = 4, 0, 65536


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def dev_array(values: np.ndarray) -> int:
    data = np.ascontiguousarray(values, dtype=np.float32).tobytes()
    ptr, ret = acl.rt.malloc(len(data), 0)
    ok(ret, "malloc")
    ok(acl.rt.memcpy(ptr, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")
    return ptr


def main() -> dict:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(RANK), "set_device")
    if RANK == 0:
        ret, root = pyhccl.HcclGetRootInfo()
        ok(ret, "root info")
        put("root", root.internal.hex())
    root = pyhccl.HcclRootInfo(bytes.fromhex(get("root")))
    ret, comm = pyhccl.HcclCommInitRootInfo(2, root, RANK)
    ok(ret, "init")
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    x, y = dev_array(np.ones(N)), dev_array(np.zeros(N))
    ok(pyhccl.HcclAllReduce(x, y, N, FP32, SUM, comm, s), "all_reduce")
    ok(acl.rt.synchronize_stream(s), "synchronize")
    if RANK == 1:
        put("ready1", {"pid": os.getpid()})
        time.sleep(600)  # killed here by the test
    get("killed")
    t0 = time.monotonic()
    ok(pyhccl.HcclAllReduce(x, y, N, FP32, SUM, comm, s), "queued all_reduce")
    r = {"sync": acl.rt.synchronize_stream(s), "seconds": time.monotonic() - t0,
         "async": pyhccl.HcclGetCommAsyncError(comm)[1]}
    r["destroy"] = pyhccl.HcclCommDestroy(comm)
    return r


if __name__ == "__main__":
    print("RESULT " + json.dumps(main()), flush=True)
