"""Child program of test_hccl_mpi.py: one MPI rank = one host process with its own embedded
node (its card 0). Root info travels over MPI as in hccl_test; every collective x dtype (int8,
int32, int64, float16, bfloat16, float32) x reduce op is checked against numpy (bfloat16 as
float32 with bf16 rounding), in place too; prints ``RESULT {...}`` on rank 0."""

import json

import numpy as np
from mpi4py import MPI

from npuemu.host.api import Device, DeviceArray, Stream, hccl
from npuemu.host.hccl import all_to_allv
from npuemu.shared.bf16 import from_float32, to_float32

world = MPI.COMM_WORLD
R, P = world.Get_rank(), world.Get_size()
dev = Device(0)
dev._open()
from npuemu.host.core import device as _device  # noqa: E402

_device.set_device(0)
root = hccl.get_root_info() if R == 0 else None
root = world.bcast(root, root=0)
comm = hccl.init_root_info(P, root, R)
s = Stream(dev)
OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
failures, cases = [], 0


def data(n, dtype, rank):
    vals = np.random.default_rng(rank * 7 + n).integers(-3, 4, n)
    if dtype == "bfloat16":  # small integers: exact in bf16, whatever the order of steps
        return from_float32(vals.astype(np.float32)).view(hccl.bfloat16)
    return vals.astype(dtype)


def red(n, dtype, op):
    if dtype == "bfloat16":
        acc = to_float32(data(n, dtype, 0))
        for r in range(1, P):
            OPS[op](acc, to_float32(data(n, dtype, r)), out=acc)
        return from_float32(acc)
    acc = data(n, dtype, 0)
    for r in range(1, P):
        OPS[op](acc, data(n, dtype, r), out=acc)
    return acc


def check(arr, want, what):
    global cases
    cases += 1
    s.synchronize()
    got = arr.to_numpy()
    if not np.array_equal(got.view(np.uint16) if got.dtype == hccl.bfloat16 else got,
                          want.view(np.uint16) if want.dtype == hccl.bfloat16 else want):
        failures.append(f"{what} rank {R}: {got[:5]} != {want[:5]}")


def upload(n, dtype, rank=None):
    return DeviceArray.from_numpy(data(n, dtype, R if rank is None else rank), dev)


for dtype in ("int8", "int32", "int64", "float16", "bfloat16", "float32"):
    for n in (7, 300001):
        if n == 300001 and dtype not in ("float32", "bfloat16", "float16"):
            continue
        for op in OPS:
            check(comm.all_reduce(upload(n, dtype), op=op, stream=s), red(n, dtype, op),
                  f"all_reduce {dtype} {n} {op}")
            x = upload(n * P, dtype)
            check(comm.reduce_scatter(x, op=op, stream=s),
                  red(n * P, dtype, op)[R * n:(R + 1) * n], f"reduce_scatter {dtype} {n} {op}")
            x = upload(n, dtype)
            y = DeviceArray.from_numpy(np.zeros(n, x.dtype), dev)
            comm.reduce(x, y, op=op, root=P - 1, stream=s)
            check(y, red(n, dtype, op) if R == P - 1 else np.zeros(n, x.dtype),
                  f"reduce {dtype} {n} {op}")
        x = upload(n, dtype)  # in place: MPI_IN_PLACE
        check(comm.all_reduce(x, x, op="sum", stream=s), red(n, dtype, "sum"),
              f"all_reduce in place {dtype} {n}")
        x = upload(n, dtype)
        comm.reduce(x, x, op="max", root=0, stream=s)
        check(x, red(n, dtype, "max") if R == 0 else data(n, dtype, R),
              f"reduce in place {dtype} {n}")
        check(comm.all_gather(upload(n, dtype), stream=s),
              np.concatenate([data(n, dtype, r) for r in range(P)]), f"all_gather {dtype} {n}")
        check(comm.broadcast(upload(n, dtype), root=P - 1, stream=s), data(n, dtype, P - 1),
              f"broadcast {dtype} {n}")
        check(comm.all_to_all(upload(n * P, dtype), stream=s),
              np.concatenate([data(n * P, dtype, j)[R * n:(R + 1) * n] for j in range(P)]),
              f"all_to_all {dtype} {n}")
# send/recv: rank 0 -> every other rank
x = DeviceArray.from_numpy(data(100, "int32", 0), dev)
if R == 0:
    for j in range(1, P):
        comm.send(x, j, stream=s)
    s.synchronize()
else:
    y = DeviceArray(100, np.int32, dev)
    check(comm.recv(y, 0, stream=s), data(100, "int32", 0), "send/recv")
# all_to_allv: rank r sends r + j + 1 elements to rank j
sc = [R + j + 1 for j in range(P)]
sd = np.cumsum([0, *sc[:-1]]).tolist()
rc = [j + R + 1 for j in range(P)]
rd = np.cumsum([0, *rc[:-1]]).tolist()


def v_data(r):
    return np.arange(sum(r + j + 1 for j in range(P)), dtype=np.float32) + 100 * r


x = DeviceArray.from_numpy(v_data(R), dev)
y = DeviceArray(sum(rc), np.float32, dev)
all_to_allv(x.ptr, sc, sd, 4, y.ptr, rc, rd, 4, comm.handle, s.handle)
want = []
for j in range(P):
    scj = [j + k + 1 for k in range(P)]
    sdj = np.cumsum([0, *scj[:-1]]).tolist()
    want.append(v_data(j)[sdj[R]:sdj[R] + scj[R]])
check(y, np.concatenate(want), "all_to_allv")
comm.barrier(stream=s)
s.synchronize()
err = comm.async_error
comm.destroy()
s.destroy() if hasattr(s, "destroy") else None
everything = world.gather({"cases": cases, "failures": failures, "async": err}, root=0)
if R == 0:
    print("RESULT " + json.dumps({"ranks": everything}))
