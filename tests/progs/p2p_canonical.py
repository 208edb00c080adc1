"""The canonical pyACL P2P flow (two cards, peer access both ways, an 8 MiB D2D copy
checked by sha256), as a user writes it; ``test_p2p.py`` runs it unmodified through
``npuemu run``."""

import hashlib
import sys

import acl
import numpy as np

ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3
SIZE = 8 * 1024 * 1024


def check(ret, what):
    if ret != 0:
        print(f"{what} failed: {ret}")
        sys.exit(1)


check(acl.init(), "acl.init")
can, ret = acl.rt.device_can_access_peer(0, 1)
check(ret, "device_can_access_peer")
print("can access peer", can)
if not can:
    sys.exit(2)

check(acl.rt.set_device(0), "set_device(0)")
check(acl.rt.device_enable_peer_access(1, 0), "device_enable_peer_access(1)")
src, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST_P2P)
check(ret, "malloc on device 0")
host = np.frombuffer(np.random.default_rng(2024).bytes(SIZE), dtype=np.uint8).copy()
check(acl.rt.memcpy(src, SIZE, acl.util.numpy_to_ptr(host), SIZE,
                    ACL_MEMCPY_HOST_TO_DEVICE), "memcpy H2D")

check(acl.rt.set_device(1), "set_device(1)")
check(acl.rt.device_enable_peer_access(0, 0), "device_enable_peer_access(0)")
dst, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST_P2P)
check(ret, "malloc on device 1")
status, ret = acl.rt.device_peer_access_status(1, 0)
check(ret, "device_peer_access_status")
print("peer access 1 -> 0", status)

check(acl.rt.memcpy(dst, SIZE, src, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE), "memcpy D2D")

back = np.zeros(SIZE, dtype=np.uint8)
check(acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, dst, SIZE,
                    ACL_MEMCPY_DEVICE_TO_HOST), "memcpy D2H")
same = hashlib.sha256(back.tobytes()).digest() == hashlib.sha256(host.tobytes()).digest()
print("verify", "OK" if same else "MISMATCH")

check(acl.rt.device_disable_peer_access(0), "device_disable_peer_access(0)")
check(acl.rt.free(dst), "free dst")
check(acl.rt.set_device(0), "set_device(0)")
check(acl.rt.device_disable_peer_access(1), "device_disable_peer_access(1)")
check(acl.rt.free(src), "free src")
status, ret = acl.rt.device_peer_access_status(0, 1)
print("peer access 0 -> 1 after disable", status)
check(acl.rt.reset_device(1), "reset_device(1)")
check(acl.rt.reset_device(0), "reset_device(0)")
check(acl.finalize(), "acl.finalize")
print("done")
