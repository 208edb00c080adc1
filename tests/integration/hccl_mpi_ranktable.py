"""Child program of test_hccl_mpi.py: ``HcclCommInitClusterInfo`` with a rank table of two
servers under ``mpiexec -n 2``: each MPI rank is one server's process with its own node and
drives the card the table names (rank 0: device 1 of node_0; rank 1: device 0 of node_1).
Checks rank/size, an all_reduce in float32 and bfloat16, and a broadcast; prints
``RESULT {...}`` on rank 0. argv[1] is the table's path."""

import json
import sys

import numpy as np
from mpi4py import MPI

from npuemu.host.api import Device, DeviceArray, Stream, hccl
from npuemu.host.core import device as _device
from npuemu.host.hccl import ranktable
from npuemu.shared.bf16 import from_float32, to_float32

world = MPI.COMM_WORLD
R = world.Get_rank()
table = ranktable.load(sys.argv[1])
card = table.locate(R).device_id
dev = Device(card)
dev._open()
_device.set_device(card)
comm = hccl.init_cluster_info(sys.argv[1], R)
s = Stream(dev)
out = {"rank": comm.rank, "size": comm.size, "card": comm.device.id,
       "server": table.locate(R).server_id}
x = DeviceArray.from_numpy(np.arange(1000, dtype=np.float32) * (R + 1), dev)

def result(arr):
    s.synchronize()
    return arr.to_numpy()


out["f32"] = bool(np.array_equal(result(comm.all_reduce(x, stream=s)),
                                 np.arange(1000, dtype=np.float32) * 3))
vals = np.linspace(-5, 5, 777, dtype=np.float32) * (R + 1)
b = DeviceArray.from_numpy(from_float32(vals).view(hccl.bfloat16), dev)
got = result(comm.all_reduce(b, op="sum", stream=s)).view(np.uint16)
a0 = to_float32(from_float32(np.linspace(-5, 5, 777, dtype=np.float32)))
a1 = to_float32(from_float32(np.linspace(-5, 5, 777, dtype=np.float32) * 2))
out["bf16"] = bool(np.array_equal(got, from_float32(a0 + a1)))
y = DeviceArray.from_numpy(np.full(10, R + 7, np.int32), dev)
out["bcast"] = result(comm.broadcast(y, root=1, stream=s)).tolist() == [8] * 10
out["async"] = comm.async_error
comm.destroy()
everything = world.gather(out, root=0)
if R == 0:
    print("RESULT " + json.dumps(everything))
