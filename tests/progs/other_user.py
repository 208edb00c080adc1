"""Child program of ``tests/integration/test_security.py``: a second user probing a node
started by root.

``python other_user.py SCENARIO [ARG...]`` imports what it needs, then drops to the uid and
gid ``$OTHER_UID`` (after the imports: the interpreter may live where that user cannot
read), runs one scenario and prints ``R`` (see ``childlib``); the assertions are the
test's.
"""

import contextlib
import io
import os
import socket

from childlib import R, main, scenario

from npuemu.shared import control, shm
from npuemu.tools import status


@scenario
def probe(name):
    """The control socket, segments, semaphore and status of node ``name``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(control.address(name))          # the raw socket: no client-side check
    R["refusal"] = list(control.recv(s))
    R["then_closed"] = s.recv(10) == b""
    s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s2.settimeout(20)
    s2.connect(control.address(name))
    with contextlib.suppress(OSError):
        control.send(s2, ["stop", True])
    s2.close()
    try:
        control.connect(name, timeout=20)
    except PermissionError as err:
        R["client_check"] = str(err)
    refused = []
    for part in ("reg", "d0.ctl", "d0.hbm", "d0.ddr", "d0.log"):
        try:
            shm.Segment(shm.name(name, *part.split(".")))
        except PermissionError:
            refused.append(part)
    try:
        shm.semaphore(shm.name(name, "d0", "bell"))
    except PermissionError:
        refused.append("bell")
    R["refused"] = refused
    try:
        os.open(f"/dev/shm/npuemu.{name}.d0.hbm", os.O_RDONLY)
    except PermissionError:
        R["raw_open"] = "refused"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        R["status_all"] = status.main(None, True)
        R["status_one"] = status.main(name, False)
    R["status_out"] = out.getvalue()


if __name__ == "__main__":
    uid = int(os.environ["OTHER_UID"])
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    assert os.geteuid() != 0
    main()
