"""Child program of ``tests/integration/test_kernels.py``: library kernels (through the
Pythonic API's ``Stream.launch``, i.e. ``aclrtLaunchKernel``) that overflow to inf; prints
the result as a list. The test checks that no floating-point warning reached stderr."""

import numpy as np

from npuemu.host.api import Device, DeviceArray, Stream, load_kernels

with Device(0) as dev:
    x = DeviceArray.from_numpy(np.array([3e38, np.inf, -1.0], np.float32))
    y = dev.array(3, np.float32)
    k = load_kernels()
    with Stream() as s:
        s.launch(k["add"], 1, x.ptr, x.ptr, y.ptr, 3, "float32")
        s.launch(k["mul"], 1, y.ptr, x.ptr, y.ptr, 3, "float32")
        s.synchronize()
    print(y.to_numpy().tolist())
