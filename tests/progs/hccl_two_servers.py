"""Child program of ``tests/integration/test_hccl_mpi.py``: ``HcclCommInitClusterInfo`` of
the rank table file ``argv[1]`` (two servers) as rank 0 and as rank 5, in one process
without MPI. Prints one ``RET <code>`` line per call."""

import sys

from npuemu.host import acl
from npuemu.host.acl import hccl as pyhccl

if __name__ == "__main__":
    acl.init()
    acl.rt.set_device(1)
    print("RET", pyhccl.HcclCommInitClusterInfo(sys.argv[1], 0)[0])
    print("RET", pyhccl.HcclCommInitClusterInfo(sys.argv[1], 5)[0])
