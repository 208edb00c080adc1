"""Child of ``test_kill9_cycles_of_hosts_leave_no_names`` (``tests/integration/
test_security.py``): a host that keeps the DMA engine of card 0 busy with async copies
between a pinned host block and device memory until it is killed.

It attaches to the node the environment names (``NPUEMU_NODE``), creates the file ``$READY``
once its buffers and stream exist, then loops H2D + D2H (``aclrtMemcpyAsync``) and a stream
synchronize forever. The copies are ``COPY_BYTES`` long, so that a copy takes milliseconds:
a kill then very likely lands while the card is still copying through the pinned block,
after the host is gone.
"""

from __future__ import annotations

import os

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

COPY_BYTES = 32 << 20
H2D, D2H = 1, 2


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def main() -> None:
    ok(acl.rt.set_device(0), "set_device")
    pinned, ret = acl.rt.malloc_host(COPY_BYTES)
    ok(ret, "malloc_host")
    dev, ret = acl.rt.malloc(COPY_BYTES, 0)
    ok(ret, "malloc")
    stream, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    with open(os.environ["READY"], "w"):
        pass
    while True:
        ok(acl.rt.memcpy_async(dev, COPY_BYTES, pinned, COPY_BYTES, H2D, stream), "H2D async")
        ok(acl.rt.memcpy_async(pinned, COPY_BYTES, dev, COPY_BYTES, D2H, stream), "D2H async")
        ok(acl.rt.synchronize_stream(stream), "synchronize_stream")


if __name__ == "__main__":
    main()
