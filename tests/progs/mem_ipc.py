"""Child program of ``tests/integration/test_mem_ipc.py``: IPC shareable handles between two
host processes of one shared node (``aclrtMemExportToShareableHandle``,
``aclrtMemSetPidToShareableHandle``, ``aclrtMemImportFromShareableHandle``, mapped with
``aclrtReserveMemAddress``/``aclrtMapMem``).

``python mem_ipc.py export|import_`` runs one side (no ``aclInit``; device 0 of the node
``NPUEMU_NODE`` names); the two meet through files in ``$SYNC`` (``childlib.put``/``get``).
The importer prints ``R``; the exporter sleeps until the test kills it.
"""

import os
import time

from childlib import R, acl, get, main, ok, put, scenario

PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}
PATTERN = bytes(range(256)) * 8192  # 2 MiB


def mapped(handle, size):
    """``handle`` mapped into a freshly reserved range of ``size`` bytes; its address."""
    va, ret = acl.rt.reserve_mem_address(size, 0, 0, 0)
    ok(ret, "reserve")
    ok(acl.rt.map_mem(va, size, 0, handle, 0), "map")
    return va


@scenario
def export():
    sync = os.environ["SYNC"]
    ok(acl.rt.set_device(0))
    h, ret = acl.rt.malloc_physical(2 << 20, PROP, 0)
    ok(ret, "malloc_physical")
    va = mapped(h, 2 << 20)
    ok(acl.rt.memcpy(va, len(PATTERN), acl.util.bytes_to_ptr(PATTERN), len(PATTERN), 1),
       "H2D")
    key, ret = acl.rt.mem_export_to_shareable_handle(h, 1, 0)
    ok(ret, "export")
    R.update({"bad_pid_key": acl.rt.mem_set_pid_to_shareable_handle(key + 2, [1]),
              "bad_type": acl.rt.mem_export_to_shareable_handle(h, 7, 0)[1]})
    put(sync, "key", {"key": key, "pid": os.getpid()})
    b = get(sync, "refused")                         # B tried before it was allowed
    ok(acl.rt.mem_set_pid_to_shareable_handle(key, [b["pid"]]), "set_pid")
    put(sync, "allowed", R)
    get(sync, "read")                                # B has mapped and read it
    ok(acl.rt.unmap_mem(va), "unmap")
    ok(acl.rt.free_physical(h), "free_physical")    # freed while B still maps it
    put(sync, "freed", {})
    time.sleep(600)                                  # killed by the test (exporter death)


@scenario
def import_():
    sync = os.environ["SYNC"]
    ok(acl.rt.set_device(0))
    a = get(sync, "key")
    R["refused"] = acl.rt.mem_import_from_shareable_handle(a["key"], 0)[1]
    put(sync, "refused", {"pid": os.getpid()})
    R.update(get(sync, "allowed"))
    h, ret = acl.rt.mem_import_from_shareable_handle(a["key"], 0)
    ok(ret, "import")
    R["unknown_key"] = acl.rt.mem_import_from_shareable_handle(a["key"] ^ 0x10, 0)[1]
    va = mapped(h, 2 << 20)
    out = bytearray(len(PATTERN))
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), len(out), va, len(out), 2), "D2H")
    R["read_ok"] = bytes(out) == PATTERN
    put(sync, "read", {})
    get(sync, "freed")
    get(sync, "dead")                                # the exporter is gone now
    out2 = bytearray(len(PATTERN))
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out2), len(out2), va, len(out2), 2), "D2H after")
    R["still_ok"] = bytes(out2) == PATTERN
    ok(acl.rt.memset(va, 16, 0x42, 16), "memset")   # writable by the importer
    ok(acl.rt.unmap_mem(va))
    ok(acl.rt.free_physical(h), "close import")
    R["closed_twice"] = acl.rt.free_physical(h)
    free, total, ret = acl.rt.get_mem_info(1)
    R["all_free"] = free == total


if __name__ == "__main__":
    main()
