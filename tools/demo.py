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
import sys
import traceback

import numpy as np

from npuemu.shared.errors import AclError, name_of

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
    except AclError as err:  # e.g. a bad NPUEMU_* value: one line naming it, with the code
        print(f"npuemu demo: {err}", file=sys.stderr)
        check.failed += 1
    except Exception:  # the demo reports any other failure and exits non-zero
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
    from npuemu.host.core import runtime as host_runtime
    from npuemu.tools import status
    from npuemu.tools.sizes import format_size

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
    free0, total, ret = acl.rt.get_mem_info(ACL_HBM_MEM)  # an idle card may reserve some
    _line("get_mem_info(ACL_HBM_MEM) on device 0", f"free {format_size(free0)} of "
          f"{format_size(total)} {check(ret == 0 and 0 < free0 <= total)}")

    host = np.arange(MiB, dtype=np.float32)  # 4 MiB
    size = host.nbytes
    a, ret_a = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    b, ret_b = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    _line("malloc 2 x 4 MiB", f"0x{a:x}, 0x{b:x} {check(ret_a == ret_b == 0)}")
    free1, _, _ = acl.rt.get_mem_info(ACL_HBM_MEM)
    _line("get_mem_info after malloc", f"{format_size(free0 - free1)} more in use "
          f"{check(free0 - free1 >= 2 * size)}")

    back = np.zeros_like(host)
    rets = [acl.rt.memcpy(a, size, acl.util.bytes_to_ptr(host), size, ACL_MEMCPY_HOST_TO_DEVICE),
            acl.rt.memcpy(b, size, a, size, ACL_MEMCPY_DEVICE_TO_DEVICE),
            acl.rt.memcpy(acl.util.bytes_to_ptr(back), size, b, size, ACL_MEMCPY_DEVICE_TO_HOST)]
    same = rets == [0, 0, 0] and np.array_equal(host, back)
    _line("memcpy H2D, D2D, D2H of 1 Mi float32", f"{rets}, round trip equal {check(same)}")

    _, ret = acl.rt.malloc(0, ACL_MEM_MALLOC_HUGE_FIRST)
    _line("malloc(0) (a bad size)", f"ret {ret} {name_of(ret)} {check(ret == 100000)}")

    _streams_and_p2p(check, a, b, size)

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

        node = host_runtime.get().node
        assert node is not None  # the device above attached it
        name = node.name
        print(f"\nnpuemu status --name {name}  (while the buffers above are live)")
        print("  " + status.render(status.read_node(name)).replace("\n", "\n  "))
        arr.free()

    print("\ncleaning up")
    rets = [acl.rt.free(a), acl.rt.free(b)]
    free2, _, _ = acl.rt.get_mem_info(ACL_HBM_MEM)
    _line("free both; get_mem_info", f"{rets}, back to {format_size(free2)} free "
          f"{check(rets == [0, 0] and free2 == free0)}")
    rets = [acl.rt.reset_device(0), acl.rt.reset_device(0), acl.rt.reset_device(1),
            acl.finalize()]
    _line("reset_device(0) x2, reset_device(1), finalize", f"{rets} {check(rets == [0] * 4)}")


def _streams_and_p2p(check: _Checks, a: int, b: int, size: int) -> None:
    """A stream with a kernel timed by events, then a P2P copy from card 0 to card 1."""
    from npuemu.host import acl
    from npuemu.host.core.kernel import LIBRARY

    print("\nstreams, events, kernels, P2P  (acl.rt)")
    stream, _ = acl.rt.create_stream()
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    binary, _ = acl.rt.binary_load_from_file(LIBRARY)
    relu, _ = acl.rt.binary_get_function(binary, "relu")
    n = size // 4
    rets = [acl.rt.record_event(start, stream),
            acl.rt.launch_kernel(relu, 4, [a, a, n, "float32"], stream),
            acl.rt.record_event(end, stream), acl.rt.synchronize_stream(stream)]
    ms, ret = acl.rt.event_elapsed_time(start, end)
    _line("relu kernel, 4 blocks, on a stream", f"{rets}, {ms:.2f} ms device time "
          f"{check(rets == [0] * 4 and ret == 0 and ms >= 0)}")
    can, _ = acl.rt.device_can_access_peer(0, 1)
    rets = [acl.rt.device_enable_peer_access(1, 0)]
    acl.rt.set_device(1)
    peer_buf, ret = acl.rt.malloc(size, 3)  # ACL_MEM_MALLOC_HUGE_FIRST_P2P
    acl.rt.reset_device(1)  # back to the tour's one reference on card 1
    acl.rt.set_device(0)
    rets += [ret, acl.rt.memcpy(peer_buf, size, a, size, 3)]  # card 0's DMA engine copies
    host = np.empty(n, np.float32)
    rets.append(acl.rt.memcpy(host.ctypes.data, size, peer_buf, size, 2))
    _line("P2P copy card 0 -> card 1 (peer access)", f"can_access={can} {rets}, relu applied "
          f"{check(rets == [0] * 4 and bool((host >= 0).all()))}")
    rets = [acl.rt.free(peer_buf), acl.rt.device_disable_peer_access(1),
            acl.rt.destroy_event(start), acl.rt.destroy_event(end),
            acl.rt.destroy_stream(stream), acl.rt.binary_unload(binary)]
    _line("free, disable peer access, destroy", f"{rets} {check(rets == [0] * 6)}")
