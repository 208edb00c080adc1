"""Child program of ``tests/integration/test_api.py``: what importing ``npuemu.host`` loads.

``python api_import.py`` imports the package, checks its lazy attributes and prints one JSON
line: the npuemu.host and numpy modules loaded by the import, ``__all__``, the pid, the device
count (``aclrtGetDeviceCount``) and the runtime's node (none: counting starts no node).
"""

import json
import os
import sys

import npuemu.host as pkg

loaded = sorted(m for m in sys.modules if m.startswith("npuemu.host") or m == "numpy")
from npuemu.shared import errors  # noqa: E402  (after the modules of the import are listed)

assert pkg.AclError is errors.AclError and pkg.OutOfMemoryError is errors.OutOfMemoryError
from npuemu.host import acl  # noqa: E402  (the submodule, not an AttributeError)

assert acl.__name__ == "npuemu.host.acl"  # imported before any lazy attribute is resolved
from npuemu.host import Device  # noqa: E402  (lazy attribute)

assert Device is sys.modules["npuemu.host.api"].Device and "Device" in dir(pkg)
try:
    pkg.no_such_name  # noqa: B018  (the attribute access is the check)
except AttributeError:
    pass
else:
    raise AssertionError("no AttributeError")
print(json.dumps({"loaded": loaded, "all": pkg.__all__, "pid": os.getpid(),
                  "count": acl.rt.get_device_count(),
                  "node": str(sys.modules["npuemu.host.core.runtime"].get().node)}))
