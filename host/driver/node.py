"""Finding, starting and talking to a node (driver layer, control side).

- ``Node.embedded(config)`` spawns a private supervisor (``python -m
  npuemu.device.supervisor --owner <our pid>``, a fresh interpreter: never a fork of the
  user's process) and connects to it. The node lives exactly as long as this process's
  connection: normal exit, an exception, SIGTERM or ``kill -9`` all close the socket, and the
  supervisor then stops the workers and unlinks every segment.
- ``Node.connect(name)`` attaches to a shared node started by ``npuemu start``.

Only the user who started a node may use it: the supervisor serves its own uid only and
``control.connect`` refuses a socket served by another uid (both give
``ACL_ERROR_RT_NO_PERMISSION``, 207006). Before an embedded node starts, the names of this
user's dead nodes are removed (``shm.clean_dead``: only names no live process holds).
Shared nodes write their log to ``log_path(name)``, in a directory of this user's only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time

from npuemu.host.driver.interface import Link
from npuemu.host.driver.link import DeviceLink
from npuemu.shared import control, errors, protocol, shm
from npuemu.shared.config import ATTACH_TIMEOUT_S, NodeConfig
from npuemu.shared.layout import DEVICE_ENTRY, REG_DEVICES


class Node:
    """A live connection to one node's supervisor."""

    def __init__(self, name: str, sock: socket.socket,
                 proc: subprocess.Popen[bytes] | None = None) -> None:
        self.name = name
        self.sock = sock
        self.proc = proc
        self.lock = threading.Lock()
        reply = self.request("hello", os.getpid(), proc is not None)
        if reply[0]:
            raise errors.error_for(reply[0], reply[1] if len(reply) > 1 else "")
        _, self.devices, self.hbm_bytes, self.ddr_bytes, self.soc, version = reply
        if version != protocol.PROTOCOL_VERSION:
            raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                   f"node {name!r} speaks protocol {version}, "
                                   f"this host {protocol.PROTOCOL_VERSION}")
        self.groups = self._read_groups()

    def _read_groups(self) -> list[int]:
        """HCCS group of each card, from the registry (see shared/topology.py)."""
        seg = shm.Segment(shm.name(self.name, "reg"))
        try:
            reg = seg.buf.cast("Q")
            groups = [reg[REG_DEVICES + d * DEVICE_ENTRY.words + DEVICE_ENTRY.HCCS_GROUP]
                      for d in range(self.devices)]
            reg.release()
        finally:
            seg.close()
        return groups

    @classmethod
    def embedded(cls, config: NodeConfig) -> Node:
        """Start a private node owned by this process (workers start on first use)."""
        name = f"e{os.getpid()}-{secrets.token_hex(3)}"
        shm.clean_dead()
        proc = spawn_supervisor(name, config, owner=os.getpid())
        return cls(name, wait_for_node(name, proc), proc)

    @classmethod
    def connect(cls, name: str) -> Node:
        try:
            sock = control.connect(name, timeout=ATTACH_TIMEOUT_S)
        except PermissionError as err:
            raise errors.error_for(errors.ACL_ERROR_RT_NO_PERMISSION, str(err)) from err
        except OSError as err:
            raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                                   f"no npuemu node named {name!r} is running "
                                   f"(start one with `npuemu start --name {name}`)") from err
        return cls(name, sock)

    def request(self, *message: object) -> control.Message:
        """One control round trip; a closed connection means the node is gone (507901)."""
        with self.lock:
            try:
                return control.call(self.sock, message)
            except OSError as err:
                raise errors.error_for(errors.ACL_ERROR_RT_SOCKET_CLOSE,
                                       f"node {self.name!r} is gone: {err}") from err

    def open_link(self, dev: int) -> DeviceLink:
        """Attach this process to device ``dev`` (starting its worker if needed)."""
        reply = self.request("attach", dev)
        if reply[0]:
            raise errors.error_for(reply[0], reply[1])
        try:
            return DeviceLink(self.name, dev, reply[1])
        except BaseException as err:
            with contextlib.suppress(errors.AclError):  # give the slot back
                self.request("detach", dev, reply[1])
            if isinstance(err, FileNotFoundError):
                raise errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT,
                                       f"device {dev} vanished during attach: {err}") from err
            if isinstance(err, PermissionError):
                raise errors.error_for(errors.ACL_ERROR_RT_NO_PERMISSION, str(err)) from err
            raise

    def close_link(self, link: Link) -> None:
        link.close()
        with contextlib.suppress(errors.AclError):  # node already gone: nothing to detach
            self.request("detach", link.dev, link.slot)

    def close(self) -> None:
        """Drop the connection; an embedded node then stops (bounded wait for it)."""
        self.sock.close()
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def log_path(name: str) -> str:
    """Log file of shared node ``name``: ``$TMPDIR/npuemu-<uid>/<name>.log``. The directory is
    created 0700 and must belong to this user (PermissionError otherwise); one file per node
    name, truncated at each start and removed by a clean stop."""
    base = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"npuemu-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o700)
    st = os.lstat(base)
    if st.st_uid != os.geteuid() or not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o077:
        raise PermissionError(f"{base} is not a private directory of this user: refused")
    return os.path.join(base, f"{name}.log")


def spawn_supervisor(name: str, config: NodeConfig, *, owner: int = 0, eager: bool = False,
                     log: int | None = None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "npuemu.device.supervisor", "--node", name,
           "--devices", str(config.devices), "--hbm", str(config.hbm_bytes),
           "--ddr", str(config.ddr_bytes), "--soc", config.soc.name]
    if owner:
        cmd += ["--owner", str(owner)]
    if eager:
        cmd.append("--eager")
    env = {**os.environ, **config.worker_env()}  # validated values, given explicitly
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True, env=env)


def wait_for_node(name: str, proc: subprocess.Popen[bytes],
                  timeout: float = ATTACH_TIMEOUT_S) -> socket.socket:
    """Connect to a supervisor that is starting; raises AclError if it exits or times out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return control.connect(name, timeout=timeout)
        except OSError:
            if proc.poll() is not None:
                raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                                       f"node {name!r} failed to start "
                                       f"(exit {proc.returncode})") from None
            if time.monotonic() > deadline:
                proc.kill()
                raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                                       f"node {name!r} did not start in time") from None
            time.sleep(0.005)
