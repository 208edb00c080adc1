"""Card-executed collectives do not hold up their card: while rank 0's all_reduce waits for
rank 1 (not called yet), card 0 still runs a large copy on another stream and a whole
all_reduce of a second communicator over the same two cards; then rank 1 calls, and the
first all_reduce completes with the right sum. (One shared engine thread for collectives
would deadlock here; each communicator has its own.)"""

from __future__ import annotations

import pytest

from tests.childprog import run_scenario

pytestmark = pytest.mark.integration

BODY = '''
import numpy as np
from npuemu.host.api import Device, DeviceArray, Stream, hccl

devs = [Device(0), Device(1)]
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
'''
PRELUDE = "import json\nR = {}\n"


def test_waiting_collective_leaves_the_card_free(run_py) -> None:
    env = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "16M",
           "HCCL_BUFFSIZE": "1", "HCCL_EXEC_TIMEOUT": "120"}
    r = run_scenario(run_py, PRELUDE, BODY, env, timeout=240)
    assert r == {"copy_while_waiting": True, "second_comm": [3.0, 3.0],
                 "first_pending": True, "first": [3.0, 3.0]}
