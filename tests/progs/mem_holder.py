"""Child program of ``tests/integration/test_mem_cli.py``: a pyACL program holding memory
on card 0 of the node ``NPUEMU_NODE`` names (five normal-page blocks and one huge-page
block), so the memory tools have something to show. It prints ``{"ptrs": [...]}`` once they
are allocated, then waits (60 s at most) for the file ``$GO``."""

import json
import os
import time

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

if __name__ == "__main__":
    assert acl.rt.set_device(0) == 0
    ptrs = [acl.rt.malloc(100_000, 2)[0] for _ in range(5)] + [acl.rt.malloc(3 << 20, 1)[0]]
    print(json.dumps({"ptrs": ptrs}), flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["GO"]) and time.monotonic() < deadline:
        time.sleep(0.01)
