"""Child program of ``tests/integration/test_hccl_bf16.py``: ``HcclAllReduce`` of four
bfloat16 values (``HCCL_DATA_TYPE_BFP16``, raw pointers) on two cards, one thread a rank,
through npuemu's acl and pyhccl modules imported directly. Prints ``OUT {rank: values}``
(the sums read back as float32)."""

import json
import threading

import numpy as np

from npuemu.host import acl
from npuemu.host.acl import hccl as pyhccl
from npuemu.shared.bf16 import from_float32, to_float32

if __name__ == "__main__":
    acl.init()
    out = {}
    a = from_float32(np.array([1.5, -2.0, 3.25, 1e30], np.float32))

    def rank(r):
        acl.rt.set_device(r)
        s, _ = acl.rt.create_stream()
        x, _ = acl.rt.malloc(8, 0)
        acl.rt.memcpy(x, 8, a.ctypes.data, 8, 1)
        ret = pyhccl.HcclAllReduce(x, x, 4, pyhccl.HCCL_DATA_TYPE_BFP16,
                                   pyhccl.HCCL_REDUCE_SUM, comms[r], s)
        assert ret == 0, ret
        acl.rt.synchronize_stream(s)
        got = np.empty(4, np.uint16)
        acl.rt.memcpy(got.ctypes.data, 8, x, 8, 2)
        out[r] = to_float32(got).tolist()
    for d in (0, 1):
        acl.rt.set_device(d)
    ret, comms = pyhccl.HcclCommInitAll([0, 1])
    assert ret == 0, ret
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    for c in comms:
        pyhccl.HcclCommDestroy(c)
    print("OUT", json.dumps(out))
