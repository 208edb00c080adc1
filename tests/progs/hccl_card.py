"""Child program of ``tests/integration/test_hccl_card.py``: while rank 0's all_reduce waits
for rank 1, card 0 runs a large copy on another stream and a whole all_reduce of a second
communicator over the same two cards; then rank 1 calls (the Pythonic face).

``python hccl_card.py waiting`` runs the scenario (no ``aclInit``: the Pythonic face needs
none) and prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import numpy as np
from childlib import R, main, scenario

from npuemu.host.api import Device, DeviceArray, Stream, hccl


@scenario
def waiting():
    _devs = [Device(0), Device(1)]  # kept: both devices stay open
    first, second = hccl.init_all([0, 1]), hccl.init_all([0, 1])
    n = 1 << 18
    xs = [DeviceArray.from_numpy(np.full(n, d + 1.0, np.float32), d) for d in range(2)]
    ys = [DeviceArray(n, np.float32, d) for d in range(2)]
    coll = [Stream(d) for d in range(2)]
    other = [Stream(d) for d in range(2)]
    first[0].all_reduce(xs[0], ys[0], stream=coll[0])  # waits on card 0 for rank 1
    big = DeviceArray.from_numpy(np.arange(4 << 20, dtype=np.uint8), 0)
    copy = DeviceArray(4 << 20, np.uint8, 0)
    other[0].copy(copy, big)
    other[0].synchronize()
    R["copy_while_waiting"] = bool(np.array_equal(copy.to_numpy(), big.to_numpy()))
    zs = [second[d].all_reduce(xs[d], stream=other[d]) for d in range(2)]
    for s in other:
        s.synchronize()
    R["second_comm"] = [float(z.to_numpy().max()) for z in zs]
    R["first_pending"] = not coll[0].done()
    first[1].all_reduce(xs[1], ys[1], stream=coll[1])
    for s in coll:
        s.synchronize()
    R["first"] = [float(y.to_numpy().min()) for y in ys]
    for c in (*first, *second):
        c.destroy()


if __name__ == "__main__":
    main()
