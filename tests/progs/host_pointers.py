"""Child of ``tests/integration/test_host_pointers.py``: every pyACL call that reads
``(ptr, size)`` of host memory, given bad pointers and sizes; prints one ``RESULT`` JSON line
``{"codes": {call: {case: ret}}, "after": {...}}``.

A segfault kills this process (the test sees its signal); a Python exception does too (the
test sees its traceback). ``after`` shows the process and its card still work: a good OM
image loads from memory, a device malloc and a copy succeed.

Usage: ``python host_pointers.py OM_PATH`` (a small OM file made by ``atc.convert``).
"""

from __future__ import annotations

import ctypes
import gc
import json
import mmap
import os
import sys
import tempfile

import numpy as np

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

PAGE = 4096


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def freed_pinned() -> int:
    """An ``aclrtMallocHost`` block already freed (its segment is unmapped)."""
    ptr, ret = acl.rt.malloc_host(PAGE)
    ok(ret, "malloc_host")
    ok(acl.rt.free_host(ptr), "free_host")
    return ptr


def freed_array() -> int:
    """The data of a 64 MiB NumPy array already released (glibc unmaps so large a block)."""
    arr = np.ones(64 << 20, np.uint8)
    ptr = int(arr.ctypes.data)
    del arr
    gc.collect()
    return ptr


def vvar_page() -> int:
    """The second page of the kernel's ``[vvar]`` mapping: listed readable, SIGBUS on a read."""
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("[vvar]"):
                return int(line.split("-")[0], 16) + PAGE
    return 0x20  # no such mapping on this kernel: an unmapped address instead


_KEEP: list[object] = []


def truncated_file_mapping() -> int:
    """A shared mapping of two pages of a file since truncated to 0: SIGBUS on a read."""
    f = tempfile.TemporaryFile()  # noqa: SIM115  (kept open in _KEEP, with its mapping)
    f.write(b"\1" * 2 * PAGE)
    f.flush()
    m = mmap.mmap(f.fileno(), 2 * PAGE)
    view = ctypes.c_char.from_buffer(m)
    os.ftruncate(f.fileno(), 0)
    _KEEP.extend([f, m, view])
    return ctypes.addressof(view)


def cases(image: bytes, device_ptr: int) -> dict[str, tuple[object, object]]:
    """Bad ``(ptr, size)`` pairs by name; ``image`` is a live OM image (mapped)."""
    good = acl.util.bytes_to_ptr(image)
    return {
        "null": (0, len(image)), "one": (1, len(image)), "minus_one": (-1, len(image)),
        "low_unmapped": (0x10, 64), "page_zero_end": (PAGE - 8, 64),
        "freed_pinned": (freed_pinned(), PAGE), "freed_array": (freed_array(), PAGE),
        "device": (device_ptr, 4096), "beyond_mapping": (good, 1 << 40),
        "negative_size": (good, -1), "zero_size": (good, 0), "past_2_64": (good, 1 << 64),
        "huge_ptr": ((1 << 64) - 16, 64), "kernel_half": (0xFFFF_8000_0000_0000, 64),
        "str_ptr": ("0x1000", 64), "float_size": (good, 64.0), "none_size": (good, None),
        "vvar": (vvar_page(), 64), "truncated_file": (truncated_file_mapping(), 64),
    }


def calls(desc: int, tdesc: int) -> dict[str, object]:
    """Each call under test as ``f(ptr, size) -> ret``."""
    return {
        "mdl.load_from_mem": lambda p, s: acl.mdl.load_from_mem(p, s)[-1],
        "mdl.load_from_mem_with_mem": lambda p, s: acl.mdl.load_from_mem_with_mem(
            p, s, 0, 0, 0, 0)[-1],
        "mdl.query_size_from_mem": lambda p, s: acl.mdl.query_size_from_mem(p, s)[-1],
        "mdl.get_desc_from_mem": lambda p, s: acl.mdl.get_desc_from_mem(desc, p, s),
        "op.load": lambda p, s: acl.op.load(p, s),
        "set_tensor_const": lambda p, s: acl.set_tensor_const(tdesc, p, s),
    }


def main(om_path: str) -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    with open(om_path, "rb") as f:
        image = f.read()
    device_ptr, ret = acl.rt.malloc(1 << 16, 0)
    ok(ret, "malloc")
    desc = acl.mdl.create_desc()
    tdesc = acl.create_tensor_desc(0, [16], 2)
    codes: dict[str, dict[str, int]] = {}
    bad = cases(image, device_ptr)
    for name, call in calls(desc, tdesc).items():
        codes[name] = {case: call(p, s) for case, (p, s) in bad.items()}  # type: ignore[operator]
    model_id, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(image), len(image))
    after = {"load_from_mem": ret, "unload": acl.mdl.unload(model_id) if ret == 0 else -1,
             "const_zero_size": acl.set_tensor_const(tdesc, 0, 0)}
    try:  # the runtime's cached mappings (acl.util, copies) know [vvar] too
        acl.util.ptr_to_bytes(vvar_page(), 64)
        after["ptr_to_bytes_vvar"] = "read"
    except ValueError:
        after["ptr_to_bytes_vvar"] = "ValueError"
    after["h2d_from_vvar"] = acl.rt.memcpy(device_ptr, 64, vvar_page(), 64, 1)
    out = bytearray(16)
    after["d2h"] = acl.rt.memcpy(acl.util.bytes_to_ptr(out), 16, device_ptr, 16, 2)
    after["free"] = acl.rt.free(device_ptr)
    print("RESULT " + json.dumps({"codes": codes, "after": after}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
