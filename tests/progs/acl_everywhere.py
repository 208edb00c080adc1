"""Child program of ``tests/integration/test_pyacl_compat.py``: ``import acl`` resolves to
npuemu's module in this program (run as a plain script, no ``install_acl``), in a spawned
multiprocessing child and in a ``python -c`` subprocess; prints the three module names on
one line."""

import multiprocessing as mp
import subprocess
import sys

import acl
import acl.rt  # the submodules import as on hardware
import acl.util


def child(q):
    import acl
    q.put(acl.__name__)


if __name__ == "__main__":
    q = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=child, args=(q,))
    p.start()
    name = q.get(timeout=60)
    p.join(60)
    sub = subprocess.run([sys.executable, "-c", "import acl; print(acl.__name__)"],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    print(acl.__name__, name, sub)
