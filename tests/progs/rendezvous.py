"""Child programs meeting through files in the directory ``$SYNC``: ``put`` publishes a JSON
value under a name (an atomic rename), ``get`` waits for one (a bounded wait: past it the
child exits, so a lost peer fails the test instead of hanging it)."""

from __future__ import annotations

import json
import os
import time

SYNC = os.environ.get("SYNC", "")


def put(name: str, value: object) -> None:
    tmp = os.path.join(SYNC, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.rename(tmp, os.path.join(SYNC, name))


def get(name: str, timeout: float = 120) -> object:
    path = os.path.join(SYNC, name)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {name}")
        time.sleep(0.01)
    with open(path) as f:
        return json.load(f)
