"""Child of ``tests/integration/test_trust_misc.py``: with umask 0, write a host log (a failed
``acl`` call logs an ERROR line), profile one memset on card 0 (``profile()`` exports on exit;
then ``npuemu msprof --export=on`` and ``--plot``) and export the device logs
(``npuemu msnpureport report``), all under ``ROOT``, which does not exist yet. Prints one
``RESULT`` JSON line: the mode of everything under ``ROOT`` (relative path -> octal string,
directories ending in ``/``, ``ROOT`` itself ``./``), the plog path, and the mode of a file
made by plain ``open`` (0666 under umask 0: what the helpers must not give).

Usage: ``python private_files.py ROOT`` with ``NPUEMU_NODE`` set.
"""

from __future__ import annotations

import json
import os
import stat
import sys

ROOT = sys.argv[1]
os.umask(0)
os.environ["ASCEND_PROCESS_LOG_PATH"] = os.path.join(ROOT, "plog_root")

from npuemu.tools.cli import install_acl  # noqa: E402  (after the log root is set)

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

from npuemu.host.api import profile  # noqa: E402
from npuemu.host.core import plog  # noqa: E402
from npuemu.tools import msnpureport, msprof  # noqa: E402


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def one_copy() -> None:
    """One memset task on a stream (a task the card records)."""
    ptr, ret = acl.rt.malloc(4096, 0)
    ok(ret, "malloc")
    stream, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    ok(acl.rt.memset_async(ptr, 4096, 0, 4096, stream), "memset_async")
    ok(acl.rt.synchronize_stream(stream), "synchronize")
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    ok(acl.rt.free(ptr), "free")


def modes(root: str) -> dict[str, str]:
    def mode(path: str) -> str:
        return oct(stat.S_IMODE(os.stat(path).st_mode))

    out = {"./": mode(root)}
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        for d in dirs:
            out[os.path.normpath(os.path.join(rel, d)) + "/"] = mode(os.path.join(folder, d))
        for f in files:
            out[os.path.normpath(os.path.join(rel, f))] = mode(os.path.join(folder, f))
    return out


def main() -> dict:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    bad = acl.rt.free(0x1234)  # a failed call: an ERROR line in the plog
    prof_root = os.path.join(ROOT, "prof")
    with profile(prof_root, devices=[0]):
        one_copy()
    codes = [msprof.main(["--export=on", f"--output={prof_root}"]),
             msprof.main([f"--plot={os.path.join(prof_root, 'timeline.png')}",
                          f"--output={prof_root}"]),
             msnpureport.main(["report", "-o", os.path.join(ROOT, "logs")])]
    control = os.path.join(os.path.dirname(ROOT), "plain_open.txt")
    with open(control, "w") as f:
        f.write("made by open() under umask 0\n")
    return {"bad_free": bad, "codes": codes, "plog": os.path.relpath(plog.path(), ROOT),
            "modes": modes(ROOT), "plain_open": oct(stat.S_IMODE(os.stat(control).st_mode))}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main()), flush=True)
