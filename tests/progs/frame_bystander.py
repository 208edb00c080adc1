"""Bystander host of ``tests/integration/test_frame_fuzz.py``: real work on card 0 of the
node ``NPUEMU_NODE`` while another host fuzzes the same card, each round checked.

Each round fills a buffer from the host, overwrites its head with ``memset_async``, copies
it with ``memcpy_async``, launches a kernel of two blocks that writes the round's value
into a second buffer, synchronizes and reads both back. Touches ``$READY`` once set up and
stops when ``$STOP`` exists. Prints ``RESULT <json>``: rounds, failed rounds, and whether
the worker stayed the same process.
"""

import json
import os

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402

from npuemu.host.core import runtime  # noqa: E402
from npuemu.shared import layout  # noqa: E402

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fill_kernel.py")) as _f:
    KERNELS = _f.read()
"""The text of ``fill_kernel.py`` (its one kernel, ``fill``)."""
R: dict = {}


def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def h2d(dst, data):
    ok(acl.rt.memcpy(dst, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")


def d2h(src, n):
    out = bytearray(n)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), n, src, n, 2), "D2H")
    return bytes(out)


def main() -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    link = runtime.get().current_link()
    pid = int(link.ctl[layout.DEVICE_CTL.PID])
    n = 256 << 10
    (src, r1), (dst, r2), (out, r3) = (acl.rt.malloc(n, 0) for _ in range(3))
    ok(r1 or r2 or r3, "malloc")
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    b, ret = acl.rt.binary_load_from_data(KERNELS)
    ok(ret, "binary_load_from_data")
    fill, ret = acl.rt.binary_get_function(b, "fill")
    ok(ret, "binary_get_function")
    open(os.environ["READY"], "w").close()
    R["rounds"] = R["failures"] = 0
    while not os.path.exists(os.environ["STOP"]):
        value = R["rounds"] % 251
        h2d(src, bytes([value]) * n)
        ok(acl.rt.memset_async(src, n, value + 1, 4096, s), "memset_async")
        ok(acl.rt.memcpy_async(dst, n, src, n, 3, s), "memcpy_async")
        ok(acl.rt.launch_kernel(fill, 2, [out, n, value + 2], s), "launch_kernel")
        ret = acl.rt.synchronize_stream_with_timeout(s, 20000)
        copied = d2h(dst, n) == bytes([value + 1]) * 4096 + bytes([value]) * (n - 4096)
        filled = d2h(out, n) == bytes([value + 2]) * n
        R["failures"] += not (ret == 0 and copied and filled)
        R["rounds"] += 1
    R["same_worker"] = int(link.ctl[layout.DEVICE_CTL.PID]) == pid


if __name__ == "__main__":
    main()
    print("RESULT " + json.dumps(R), flush=True)
