"""``npuemu demo``: a short narrated tour of both host faces on an embedded node.

It starts a private node (it never attaches to a shared one: ``NPUEMU_NODE`` is ignored),
drives it through the pyACL face (``from npuemu.host import acl``) and the Pythonic one
(``npuemu.host.Device``/``DeviceArray``), shows ``npuemu status`` for that node and checks
every result on the way. Exit status 0 only if every check passed.

``NPUEMU_DEVICES`` defaults to 8; when it is unset the demo uses 2 so that the node starts
faster (and says so). ``NPUEMU_HBM``, ``NPUEMU_DDR`` and ``NPUEMU_SOC`` are honoured.
"""

from __future__ import annotations

import os
import traceback

import numpy as np

from npuemu.shared.errors import name_of

MiB = 1 << 20


class _Checks:
    """Counts the checks; prints ``ok`` / ``FAILED`` next to each."""

    def __init__(self) -> None:
        self.passed = self.failed = 0

    def __call__(self, ok: bool) -> str:
        if ok:
            self.passed += 1
            return "ok"
        self.failed += 1
        return "FAILED"


def _line(what: str, result: object) -> None:
    print(f"  {what:<40} -> {result}")


def main() -> int:
    print("npuemu demo: a short tour on an embedded node")
    os.environ.pop("NPUEMU_NODE", None)  # always a private node, never a shared one
    if not os.environ.get("NPUEMU_DEVICES", "").strip():
        os.environ["NPUEMU_DEVICES"] = "2"
        print("(NPUEMU_DEVICES is unset: using 2 devices instead of 8 so the node starts "
              "faster)")
    check = _Checks()
    try:
        _tour(check)
    except Exception:  # the demo reports any failure and exits non-zero
        traceback.print_exc()
        check.failed += 1
    total = check.passed + check.failed
    if check.failed:
        print(f"\n{check.failed} of {total} checks FAILED")
        return 1
    print(f"\nall {total} checks passed")
    return 0


def _tour(check: _Checks) -> None:
    from npuemu.host import DeviceArray, OutOfMemoryError, acl, device_count
    from npuemu.host import runtime as host_runtime
    from npuemu.tools import status

    # Plain ints, as the pyACL samples define them.
    ACL_HBM_MEM, ACL_MEM_MALLOC_HUGE_FIRST = 1, 0
    ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3

    count = device_count()
    print(f"\n{count} devices visible, SoC {acl.get_soc_name()}")

    print("\npyACL face  (from npuemu.host import acl)")
    ret = acl.init()
    _line("acl.init()", ret)
    rets = [acl.rt.set_device(0), acl.rt.set_device(1)]
    _line("acl.rt.set_device(0), set_device(1)", f"{rets} {check(rets == [0, 0])}")
    acl.rt.set_device(0)  # device 0 current again (its count is now 2) for the copies below
    free0, total, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
    _line("get_mem_info(ACL_HBM_MEM) on device 0", f"free {status.fmt_bytes(free0)} of "
          f"{status.fmt_bytes(total)} {check(ret == 0 and free0 == total)}")

    host = np.arange(MiB, dtype=np.float32)  # 4 MiB
    size = host.nbytes
    a, ret_a = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    b, ret_b = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    _line("malloc 2 x 4 MiB", f"0x{a:x}, 0x{b:x} {check(ret_a == ret_b == 0)}")
    free1, _, _ = acl.rt.get_mem_info(ACL_HBM_MEM)
    _line("get_mem_info after malloc", f"{status.fmt_bytes(free0 - free1)} more in use "
          f"{check(free0 - free1 >= 2 * size)}")

    back = np.zeros_like(host)
    rets = [acl.rt.memcpy(a, size, acl.util.bytes_to_ptr(host), size, ACL_MEMCPY_HOST_TO_DEVICE),
            acl.rt.memcpy(b, size, a, size, ACL_MEMCPY_DEVICE_TO_DEVICE),
            acl.rt.memcpy(acl.util.bytes_to_ptr(back), size, b, size, ACL_MEMCPY_DEVICE_TO_HOST)]
    same = rets == [0, 0, 0] and np.array_equal(host, back)
    _line("memcpy H2D, D2D, D2H of 1 Mi float32", f"{rets}, round trip equal {check(same)}")

    _, ret = acl.rt.malloc(0, ACL_MEM_MALLOC_HUGE_FIRST)
    _line("malloc(0) (a bad size)", f"ret {ret} {name_of(ret)} {check(ret == 100000)}")

    print("\nPythonic face  (from npuemu.host import Device, DeviceArray)")
    from npuemu.host import Device

    x = np.linspace(0.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    with Device(1) as dev:
        print(f"  with Device(1) as dev: {dev!r}")
        arr = DeviceArray.from_numpy(x)
        print(f"  DeviceArray.from_numpy(x) -> {arr!r}")
        _line("arr.to_numpy() equals x", check(np.array_equal(arr.to_numpy(), x)))
        try:
            dev.malloc(2 * dev.mem_info().total)
            _line("dev.malloc(2 x HBM)", f"no error {check(False)}")
        except OutOfMemoryError as err:
            _line("dev.malloc(2 x HBM)", f"{type(err).__name__} {err.code} {err.name} "
                  f"{check(err.code == 207001)}")

        name = host_runtime.get().node.name
        print(f"\nnpuemu status --name {name}  (while the buffers above are live)")
        print("  " + status.render(status.read_node(name)).replace("\n", "\n  "))
        arr.free()

    print("\ncleaning up")
    rets = [acl.rt.free(a), acl.rt.free(b)]
    free2, _, _ = acl.rt.get_mem_info(ACL_HBM_MEM)
    _line("free both; get_mem_info", f"{rets}, back to {status.fmt_bytes(free2)} free "
          f"{check(rets == [0, 0] and free2 == free0)}")
    rets = [acl.rt.reset_device(0), acl.rt.reset_device(0), acl.rt.reset_device(1),
            acl.finalize()]
    _line("reset_device(0) x2, reset_device(1), finalize", f"{rets} {check(rets == [0] * 4)}")
