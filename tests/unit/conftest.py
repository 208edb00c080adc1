"""Fixtures of the unit tests: the runtime core on an in-process fake link.

``fake_runtime`` gives a fresh process-wide ``Runtime`` attached to a ``FakeNode``
(``host/driver/fake.py``): the ``acl`` face and the Pythonic API run on it unchanged, without
worker processes or a node. Use it for host logic that does not cross the driver seam;
whatever needs a real worker belongs in ``tests/integration/``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from npuemu.host.core import plog, runtime
from npuemu.host.driver.fake import FakeNode


@pytest.fixture
def fake_runtime(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[runtime.Runtime]:
    """The runtime on a 4-card fake node (64 MiB HBM, 16 MiB DDR per card); torn down after
    the test (every fake link closed, pinned host blocks unlinked)."""
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path))  # no plog in $HOME
    for var in ("NPUEMU_NODE", "ASCEND_RT_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    rt = runtime.Runtime()
    rt.attach(FakeNode(devices=4))
    monkeypatch.setattr(runtime, "_runtime", rt)
    monkeypatch.setattr(plog, "_file", None)  # this test's plog goes under tmp_path
    try:
        yield rt
    finally:
        rt.shutdown()
        if plog._file is not None:
            plog._file.close()
