"""A pyACL program as written for hardware (``tests/integration/test_node.py`` runs it with
``npuemu run``): devices, a copy to card 1 and back, the SoC name, its arguments and
``__name__``; it exits with its first argument when that is a number."""

import sys

import acl
import numpy as np

ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 0, 1, 2


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed: {ret}")


check(acl.init(), "init")
count, ret = acl.rt.get_device_count()
check(ret, "get_device_count")
print("devices", count)
check(acl.rt.set_device(1), "set_device")
print("device", acl.rt.get_device()[0])
arr = np.arange(1024, dtype=np.int32) * 3
dev_ptr, ret = acl.rt.malloc(arr.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
check(ret, "malloc")
check(acl.rt.memcpy(dev_ptr, arr.nbytes, acl.util.bytes_to_ptr(arr), arr.nbytes,
                    ACL_MEMCPY_HOST_TO_DEVICE), "h2d")
host_ptr, ret = acl.rt.malloc_host(arr.nbytes)
check(ret, "malloc_host")
check(acl.rt.memcpy(host_ptr, arr.nbytes, dev_ptr, arr.nbytes, ACL_MEMCPY_DEVICE_TO_HOST), "d2h")
back = np.frombuffer(acl.util.ptr_to_bytes(host_ptr, arr.nbytes), dtype=np.int32)
print("sum", int(back.sum()), "equal", bool((back == arr).all()))
print("soc", acl.get_soc_name())
print("args", sys.argv[1:])
print("name", __name__)
check(acl.rt.free_host(host_ptr), "free_host")
check(acl.rt.free(dev_ptr), "free")
check(acl.rt.reset_device(1), "reset_device")
check(acl.finalize(), "finalize")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
