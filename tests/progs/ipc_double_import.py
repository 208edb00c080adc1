"""Child of ``tests/integration/test_trust_misc.py``: one IPC share key imported twice by one
process. ``exporter``: allocates 2 MiB of physical memory, writes a pattern, exports it, allows
the importer's pid, and frees its own handle once the importer holds both imports (the block
lives on for them). ``importer``: imports the key twice, closes one import and reads the
pattern through the other, then closes that one too. Prints one ``RESULT`` JSON line.

Usage: ``python ipc_double_import.py exporter|importer`` with ``NPUEMU_NODE`` and ``SYNC`` set.
"""

from __future__ import annotations

import json
import os
import sys

from rendezvous import get, put

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

SIZE = 2 << 20
PATTERN = bytes(range(256)) * (SIZE // 256)
PROP = {"handleType": 0, "allocationType": 0, "memAttr": 13, "location": {"type": 1, "id": 0}}


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def mapped(handle: int) -> int:
    va, ret = acl.rt.reserve_mem_address(SIZE, 0, 0, 0)
    ok(ret, "reserve")
    ok(acl.rt.map_mem(va, SIZE, 0, handle, 0), "map")
    return va


def read(va: int) -> bool:
    out = bytearray(SIZE)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), SIZE, va, SIZE, 2), "D2H")
    return bytes(out) == PATTERN


def card_empty() -> bool:
    free, total, ret = acl.rt.get_mem_info(1)
    ok(ret, "get_mem_info")
    return free == total


def exporter() -> dict:
    h, ret = acl.rt.malloc_physical(SIZE, PROP, 0)
    ok(ret, "malloc_physical")
    va = mapped(h)
    ok(acl.rt.memcpy(va, SIZE, acl.util.bytes_to_ptr(PATTERN), SIZE, 1), "H2D")
    key, ret = acl.rt.mem_export_to_shareable_handle(h, 1, 0)
    ok(ret, "export")
    ok(acl.rt.mem_set_pid_to_shareable_handle(key, [get("importer")["pid"]]), "set_pid")
    put("key", {"key": key})
    get("imported")
    ok(acl.rt.unmap_mem(va), "unmap")
    ok(acl.rt.free_physical(h), "free_physical")  # the importer's two imports keep the block
    put("freed", {})
    get("done")
    return {}


def importer() -> dict:
    put("importer", {"pid": os.getpid()})
    key = get("key")["key"]
    h1, ret1 = acl.rt.mem_import_from_shareable_handle(key, 0)
    h2, ret2 = acl.rt.mem_import_from_shareable_handle(key, 0)
    r = {"imports": [ret1, ret2], "distinct": h1 != h2}
    ok(ret1 or ret2, "import")
    put("imported", {})
    get("freed")
    va2 = mapped(h2)
    ok(acl.rt.free_physical(h1), "close the first import")
    r["read_after_one_close"] = read(va2)
    r["held_after_one_close"] = not card_empty()
    ok(acl.rt.unmap_mem(va2), "unmap")
    ok(acl.rt.free_physical(h2), "close the second import")
    r["card_empty_after_both"] = card_empty()
    r["close_again"] = acl.rt.free_physical(h2)
    r["import_again"] = acl.rt.mem_import_from_shareable_handle(key, 0)[1]
    put("done", {})
    return r


if __name__ == "__main__":
    ok(acl.rt.set_device(0), "set_device")
    print("RESULT " + json.dumps(exporter() if sys.argv[1] == "exporter" else importer()),
          flush=True)
