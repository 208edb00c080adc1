"""HCCL-style collective communication between emulated cards (HCCL's API and semantics).

- ``types``: HCCL's result codes, data types, reduce ops, ``HcclError``, environment.
- ``comm``: communicators (``comm_init_all``, ``get_root_info``/``comm_init_root_info``,
  ``comm_init_cluster_info``): the communicator segment the cards attach, and the
  host-staged path's buffers and rendezvous.
- ``ranktable``: the rank-table JSON.
- ``collectives``: all_reduce, all_gather, reduce_scatter, broadcast, reduce,
  all_to_all(v), send/recv, barrier, queued on streams: most as one task the cards execute
  (``device/exec/collective.py``: mesh, hier, ring), send/recv and all_to_allv host-staged.
- ``kernels``: the AI Vector reduce kernel of the host-staged path (a kernel binary).

Faces: ``npuemu.host.acl.hccl`` (pyhccl-style C names, ``(ret, value)`` tuples) and
``npuemu.host.api.hccl`` (Pythonic, raising ``HcclError``).
"""

from npuemu.host.hccl.collectives import (
    all_gather,
    all_reduce,
    all_to_all,
    all_to_allv,
    barrier,
    broadcast,
    recv,
    reduce,
    reduce_scatter,
    send,
)
from npuemu.host.hccl.comm import (
    Communicator,
    comm_destroy,
    comm_init_all,
    comm_init_cluster_info,
    comm_init_root_info,
    get_root_info,
)
from npuemu.host.hccl.types import (
    HcclDataType,
    HcclError,
    HcclReduceOp,
    HcclResult,
    error_string,
)

__all__ = ["Communicator", "HcclDataType", "HcclError", "HcclReduceOp", "HcclResult",
           "all_gather", "all_reduce", "all_to_all", "all_to_allv", "barrier", "broadcast",
           "comm_destroy", "comm_init_all", "comm_init_cluster_info", "comm_init_root_info",
           "error_string", "get_root_info", "recv", "reduce", "reduce_scatter", "send"]
