"""A node belongs to the user who started it; nothing is left behind.

- a second user (a child given another uid; needs root, skipped otherwise) is refused by the
  control socket, the node's segments and semaphores, and a pinned block it plants;
- malformed control messages close only their own connection; a ``hello`` claiming another
  program's pid changes nothing; client slots are limited per connection and per peer;
- a stopped (SIGSTOP) worker shows HUNG in status, smi and msnpureport, and READY again;
- names of dead nodes are cleaned by the next start and by ``status --clean``, never while a
  live process holds them; ``stop`` refuses while programs are attached unless ``--force``;
- kill -9 cycles of hosts, workers and supervisors leave no names.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time

import msgpack
import psutil
import pytest
from childprog import result_of, run_program

from npuemu.shared import control, shm
from npuemu.tools import status as status_tool
from tests.conftest import PROGS, child_env

pytestmark = pytest.mark.integration

NO_PERMISSION = 207006
SOCKET_CLOSE = 507901
LOST_HEARTBEAT = 507010
KILL_CYCLES = 5
SMALL = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "64M", "NPUEMU_DDR": "64M"}


def _other_uid() -> int:
    """A uid with no account here (nothing of it exists on this machine)."""
    for uid in range(61000, 62000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise RuntimeError("no free uid")


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs root")


def as_other_user(scenario: str, *args: str, timeout: float = 60) -> dict:
    """Run the scenario ``scenario`` of ``tests/progs/other_user.py`` in a child that drops
    to another user's uid and gid after its imports; returns the child's ``R``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NPUEMU_", "ASCEND_"))}
    env.update(HOME="/tmp", PYTHONDONTWRITEBYTECODE="1", OTHER_UID=str(_other_uid()))
    res = subprocess.run([sys.executable, os.path.join(PROGS, "other_user.py"), scenario,
                          *args], env=env, cwd="/", capture_output=True, text=True,
                         timeout=timeout)
    return result_of(res)


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s", pytrace=False)
        time.sleep(0.05)


def wait_file(path, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"child exited ({proc.returncode}) early:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.02)


def frame(obj: object) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack("<I", len(body)) + body


def closed_by_peer(sock: socket.socket, timeout: float = 20) -> bool:
    """True once the other end closed (replies before the close are skipped)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


PROG = "security_hosts.py"
"""The host programs (``tests/progs/security_hosts.py``), one scenario each."""


# ----------------------------------------------------------------------------- second user
@needs_root
def test_another_user_is_refused_by_socket_segments_and_semaphores(shared_node, run_prog,
                                                                   status):
    name = shared_node(devices=1, hbm="64M", ddr="64M")
    r = as_other_user("probe", name)
    assert r["refusal"][0] == NO_PERMISSION and "may not use it" in r["refusal"][1], r
    assert r["then_closed"] and "served by uid 0" in r["client_check"], r
    assert r["refused"] == ["reg", "d0.ctl", "d0.hbm", "d0.ddr", "d0.log", "bell"], r
    assert r["raw_open"] == "refused"
    assert r["status_all"] == 0 and r["status_one"] == 1, r  # not listed; not readable
    assert r["status_out"].startswith("[]\n") and "No permission" in r["status_out"], r
    assert status(name)["state"] == "READY"  # the foreign `stop` did nothing
    out = run_program(run_prog, PROG, "copy_back", "back", "y", env={"NPUEMU_NODE": name},
                      timeout=60)
    assert out == {"back": True}


@needs_root
def test_a_pinned_block_planted_by_another_user_is_refused(run_prog):
    uid = _other_uid()
    r = run_program(run_prog, PROG, "planted", uid, env=SMALL, timeout=90)
    assert re.fullmatch(r"/npuemu\..+\.p\d+\.[0-9a-f]{16}", r["own_name"]), r
    assert r["foreign"] == NO_PERMISSION and r["loose_mode"] == NO_PERMISSION, r
    assert r["copied"] is True, r


# -------------------------------------------------------------------- control socket abuse
MALFORMED = [
    b"\x01\x00\x00\x00\xc1",                  # length 1, then 0xc1 (never valid msgpack)
    frame(5), frame("stop"), frame({"stop": True}), frame([]), frame(["nope"]),
    frame(["attach"]), frame(["attach", "0"]), frame(["attach", -1]), frame(["attach", 2**40]),
    frame(["attach", True]), frame(["detach", 0]), frame(["hello", [1], True]),
    frame(["stop", 1, 2]), frame([[["deep"]]]), struct.pack("<I", 1 << 30) + b"x" * 16,
    struct.pack("<I", 3) + b"\x93\xc1\xc1", frame(["stop", "force"]),
]


def test_malformed_control_messages_close_only_their_connection(module_node, spawn_prog,
                                                                 tmp_path, status):
    name = module_node(devices=2, hbm="64M", ddr="64M")
    env = {"NPUEMU_NODE": name, "READY": str(tmp_path / "ready"), "GO": str(tmp_path / "go")}
    host = spawn_prog(PROG, "keeps_its_block", env=env)
    wait_file(tmp_path / "ready", host)
    rng = random.Random(20261201)
    messages = list(MALFORMED)
    for _ in range(200):  # random bodies behind a correct length prefix, and raw noise
        body = rng.randbytes(rng.randrange(1, 48))
        messages.append(struct.pack("<I", len(body)) + body if rng.random() < 0.7 else body)
    closed = 0
    for raw in messages:
        sock = control.connect(name, timeout=20)
        with sock:
            sock.sendall(raw)
            if raw not in MALFORMED:  # random: may be incomplete; the EOF ends it
                sock.shutdown(socket.SHUT_WR)
            closed += closed_by_peer(sock)  # one at a time: each reaches the parser
    assert closed == len(messages)
    assert status(name)["state"] == "READY"
    (tmp_path / "go").touch()
    out, err = host.communicate(timeout=60)
    assert host.returncode == 0 and '"kept": true' in out, err
    print(f"malformed control messages tried: {len(messages)}")


def test_a_hello_claiming_another_pid_changes_nothing(spawn_prog, tmp_path):
    host = spawn_prog(PROG, "pinned_copy",
                      env={**SMALL, "READY": str(tmp_path / "ready"), "GO": str(tmp_path / "go")})
    wait_file(tmp_path / "ready", host)
    node = (tmp_path / "ready").read_text()
    pinned_before = [e for e in shm.leftovers(node) if f".p{host.pid}." in e]
    assert pinned_before
    impostor = control.connect(node, timeout=20)
    reply = control.call(impostor, ["hello", host.pid, True])  # "I am the owner"
    assert reply[0] == 0
    assert control.call(impostor, ["attach", 0])[0] == 0
    impostor.close()  # before: the node stopped and the owner's pinned blocks were unlinked
    time.sleep(1.0)
    assert [e for e in shm.leftovers(node) if f".p{host.pid}." in e] == pinned_before
    (tmp_path / "go").touch()
    out, err = host.communicate(timeout=60)
    assert host.returncode == 0 and '"ok": true' in out, err


def test_client_slots_are_limited_per_connection_and_peer(module_node):
    name = module_node(devices=2, hbm="64M", ddr="64M")
    first = control.connect(name, timeout=20)
    others: list[socket.socket] = []
    try:
        assert control.call(first, ["hello", 1, False])[0] == 0
        assert control.call(first, ["attach", 0])[0] == 0
        second = control.call(first, ["attach", 0])
        assert second[0] != 0 and "holds a client slot" in second[1], second
        for _ in range(8):  # MAX_CONNS_PER_PEER (4) including `first`
            others.append(control.connect(name, timeout=20))
        replies = [_hello(s) for s in others]
        assert replies.count(0) == 3 and replies.count(0) + replies.count(-1) == 8, replies
    finally:
        for s in [first, *others]:
            s.close()
    again = control.connect(name, timeout=20)  # the slot went back with the connection
    with again:
        assert control.call(again, ["attach", 0])[0] == 0


def _hello(sock: socket.socket) -> int:
    """0 if served; -1 if the supervisor refused the connection (207006, then closed)."""
    try:
        reply = control.call(sock, ["hello", 1, False])
    except OSError:
        return -1
    return 0 if reply[0] == 0 else -1 if reply[0] == NO_PERMISSION else reply[0]


# --------------------------------------------------------------------------------- hung card
def _registry_state(name: str, dev: int) -> str:
    from npuemu.shared import layout

    seg = shm.Segment(shm.name(name, "reg"))
    try:
        view = seg.buf.cast("Q")
        value = view[layout.REG_DEVICES + dev * layout.DEVICE_ENTRY.words
                     + layout.DEVICE_ENTRY.STATE]
        view.release()
    finally:
        seg.close()
    return layout.DeviceState(value).name


def test_a_stopped_worker_is_shown_hung_then_ready_again(shared_node, status, npuemu_cli):
    from npuemu.shared.config import DEVICE_LOST_TIMEOUT_S

    name = shared_node(devices=2, hbm="64M", ddr="64M")
    pid = status(name)["devices"][0]["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: _registry_state(name, 0) == "HUNG", DEVICE_LOST_TIMEOUT_S + 30,
                   "the supervisor marks the stopped card HUNG")
        devices = status(name)["devices"]
        assert devices[0]["state"] == "HUNG" and devices[1]["state"] == "READY", devices
        assert devices[0]["heartbeat_age_s"] > DEVICE_LOST_TIMEOUT_S
        smi = npuemu_cli("smi", "info", "--name", name, "-t", "health", "-i", "0")
        assert "Critical" in smi.stdout and "507010" in smi.stdout, smi.stdout + smi.stderr
        report = npuemu_cli("msnpureport", "-s", env={"NPUEMU_NODE": name})
        assert re.search(r"Device ID: 0\s+Health: Critical\s+\(HUNG\)", report.stdout), \
            report.stdout + report.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: _registry_state(name, 0) == "READY", 30, "READY again after SIGCONT")
    assert status(name)["devices"][0]["state"] == "READY"


# ----------------------------------------------------------------------- stop and leftovers
def test_stop_refuses_while_attached_and_force_ends_the_sessions(shared_node, spawn_prog,
                                                                 npuemu_cli, status,
                                                                 tmp_path):
    name = shared_node(devices=1, hbm="64M", ddr="64M")
    env = {"NPUEMU_NODE": name, "READY": str(tmp_path / "ready"), "GO": str(tmp_path / "go")}
    host = spawn_prog(PROG, "stopped_under", env=env)
    wait_file(tmp_path / "ready", host)
    res = npuemu_cli("stop", "--name", name)
    assert res.returncode == 1 and str(host.pid) in res.stderr, res.stderr
    assert "force" in res.stderr and status(name)["state"] == "READY"
    res = npuemu_cli("stop", "--name", name, "--force")
    assert res.returncode == 0, res.stderr
    (tmp_path / "go").touch()
    out, err = host.communicate(timeout=60)
    assert host.returncode == 0, err
    r = json.loads(out.split("RESULT ", 1)[1])
    assert r["free"] == SOCKET_CLOSE and r["malloc"] == SOCKET_CLOSE, r
    assert "was stopped" in r["msg"], r  # (synchronize of an empty stream is still 0)
    assert shm.leftovers(name) == []


@pytest.mark.alone  # stages a dead node that any start elsewhere would clean
def test_dead_node_status_clean_and_logs(npuemu_cli, node_name, tmp_path, status):
    env = {"TMPDIR": str(tmp_path)}
    log = tmp_path / f"npuemu-{os.geteuid()}" / f"{node_name}.log"
    args = ("--name", node_name, "--devices", "2", "--hbm", "64M", "--ddr", "64M")
    assert npuemu_cli("start", *args, env=env).returncode == 0
    assert log.exists() and oct(log.parent.stat().st_mode & 0o777) == "0o700"
    assert npuemu_cli("stop", "--name", node_name, env=env).returncode == 0
    assert not log.exists()  # a clean stop leaves no log behind

    assert npuemu_cli("start", *args, env=env).returncode == 0
    node = status(node_name)
    psutil.Process(node["supervisor_pid"]).kill()
    for d in node["devices"]:
        wait_until(lambda pid=d["pid"]: not psutil.pid_exists(pid)
                   or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 30,
                   "the workers notice their supervisor died")
    dead = status(node_name)
    assert dead["state"] == "DEAD"
    assert [d["state"] for d in dead["devices"]] == ["LOST", "LOST"], dead["devices"]
    assert shm.leftovers(node_name)  # registry and logs stay for the post-mortem ...
    res = npuemu_cli("status", "--clean", env=env)
    assert res.returncode == 0 and f"node {node_name}: removed" in res.stdout, res.stdout
    assert shm.leftovers(node_name) == [] and not log.exists()  # ... until cleaned


@pytest.mark.alone  # stages a dead node that any start elsewhere would clean
def test_embedded_leftovers_are_cleaned_by_the_next_start_not_while_held(spawn_prog, run_prog,
                                                                          npuemu_cli,
                                                                          tmp_path):
    host = spawn_prog(PROG, "embedded_held", env={**SMALL, "READY": str(tmp_path / "ready")})
    wait_file(tmp_path / "ready", host)
    node, sup = (tmp_path / "ready").read_text().split()
    psutil.Process(int(sup)).kill()
    wait_until(lambda: not [e for e in shm.leftovers(node) if ".d0.hbm" in e], 30,
               "the worker of the killed supervisor exits")
    held = [e for e in shm.leftovers(node)
            if f".p{host.pid}." in e or re.search(r"\.d0\.c\d", e)]
    assert held, shm.leftovers(node)
    res = npuemu_cli("status", "--clean")
    assert res.returncode == 0, res.stderr
    assert sorted(shm.leftovers(node)) == sorted(held)  # the live host maps them: kept
    host.kill()
    host.wait(10)
    # the next embedded start removes them
    run_program(run_prog, PROG, "set_and_reset", env=SMALL, timeout=60)
    assert shm.leftovers(node) == []


# ------------------------------------------------------------------------------ kill -9 cycles
HOST_KILLS = 10
"""Hosts the host kill cycles kill. Measured with the worker's former at-once unmapping of a
departed client's pinned blocks: 6 of 7 runs of 5 kills and 4 of 4 runs of 10 lost the card."""


class Forks:
    """The fork server of ``tests/progs/security_hosts.py`` (scenario ``forks``): every host
    of a kill cycle is a process of its own, forked from one interpreter that imported acl
    once. Each reply is awaited for at most ``timeout`` s while the server is alive."""

    def __init__(self, tmp_path, env: dict[str, str] | None = None) -> None:
        self.tmp, self.count, self.pending = tmp_path, 0, b""
        self.proc = subprocess.Popen([sys.executable, os.path.join(PROGS, PROG), "forks"],
                                     env=child_env(env), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     bufsize=0)
        assert self._reply() == "forks ready"

    def _reply(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.proc.stdout], [], [],
                                        max(deadline - time.monotonic(), 0))
            chunk = os.read(self.proc.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                self.close()
                pytest.fail(f"fork server: no reply within {timeout} s or it exited "
                            f"({self.proc.returncode}): {self.proc.stderr.read().decode()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()

    def fork(self, scenario: str, *args: str, **env: str) -> tuple[int, str]:
        """Fork a host running ``scenario``; returns its pid and the path of its log."""
        self.count += 1
        log = str(self.tmp / f"host{self.count}.log")
        words = [scenario, log, *(f"{k}={v}" for k, v in env.items()), *args]
        self.proc.stdin.write((" ".join(words) + "\n").encode())
        return int(self._reply()), log

    def wait(self, pid: int, log: str, timeout: float = 60) -> tuple[int, str]:
        """Reap host ``pid``: its exit code (negative: its signal) and its log."""
        self.proc.stdin.write(f"wait {pid}\n".encode())
        return int(self._reply(timeout)), _text(log)

    def run(self, scenario: str, *args: str, **env: str) -> dict:
        """Fork a host running ``scenario`` to its end; its ``R`` (it must exit 0)."""
        code, out = self.wait(*self.fork(scenario, *args, **env))
        assert code == 0 and "RESULT " in out, out
        return json.loads(out.split("RESULT ", 1)[1])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def forks(tmp_path):
    server = Forks(tmp_path)
    yield server
    server.close()


def card0(name: str) -> dict:
    """Card 0 of node ``name`` as ``npuemu status --json`` shows it (read in this process)."""
    return status_tool.read_node(name)["devices"][0]


@pytest.mark.slow
def test_kill9_cycles_of_hosts_leave_no_names(shared_node, forks):
    """Hosts (``busy_copies``: 32 MiB async copies through a pinned block, forever) killed
    (-9) while the card copies through their pinned blocks: every name of theirs is removed
    and the card's worker lives on (the same process, never restarted). The worker keeps a
    departed client's mappings until its engine tasks have reported; unmapping them at once
    crashed it (SIGSEGV in the DMA engine's memmove)."""
    rng = random.Random(7)
    name = shared_node(devices=1, hbm="64M", ddr="64M")
    card = card0(name)
    assert card["state"] == "READY" and card["starts"] == 1, card
    for i in range(HOST_KILLS):  # hosts killed in the middle of async copies
        ready = forks.tmp / f"host{i}"
        pid, log = forks.fork("busy_copies", NPUEMU_NODE=name, READY=str(ready))
        wait_until(lambda r=ready, p=pid: r.exists() or not _running(p), 60, "host ready")
        time.sleep(rng.uniform(0.05, 0.4))
        assert _running(pid), _text(log)  # still copying when it is killed
        os.kill(pid, signal.SIGKILL)
        assert forks.wait(pid, log)[0] == -signal.SIGKILL
        wait_until(lambda p=pid: not [e for e in shm.leftovers(name) if f".p{p}." in e
                                      or re.search(r"\.d0\.c\d", e)], 30,
                   "the killed host's names are removed")
        now = card0(name)
        assert (now["state"], now["pid"], now["starts"], now["last_exit"]) == (
            "READY", card["pid"], 1, None), f"host kill {i} took the card down: {now}"
    print(f"kill -9 cycles: {HOST_KILLS} hosts; no names left, the card's worker untouched")


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


def _running(pid: int) -> bool:
    """``pid`` lives and is no zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_kill9_cycles_of_workers_leave_no_names(shared_node, forks):
    name = shared_node(devices=1, hbm="64M", ddr="64M")
    for _ in range(KILL_CYCLES):  # workers killed; the next attach starts a fresh one
        psutil.Process(card0(name)["pid"]).kill()
        wait_until(lambda: _registry_state(name, 0) == "LOST" and [  # (read as `status` does)
            e for e in shm.leftovers(name) if ".d0." in e] == [f"npuemu.{name}.d0.log"], 30,
            "card LOST and its names but the log removed")
        assert forks.run("copy_back", "ok", "w", NPUEMU_NODE=name) == {"ok": True}
    assert card0(name)["starts"] == KILL_CYCLES + 1
    print(f"kill -9 cycles: {KILL_CYCLES} workers; no names left")


@pytest.mark.slow
def test_kill9_cycles_of_supervisors_leave_no_names(forks):
    rng = random.Random(8)
    for i in range(KILL_CYCLES):  # supervisors of embedded nodes killed under a busy host
        ready = forks.tmp / f"emb{i}"
        pid, log = forks.fork("busy", READY=str(ready), **SMALL)
        node = wait_until(lambda r=ready, p=pid, lg=log: (r.exists() and r.read_text())
                          or (not _running(p) and _text(lg)), 60, "node name written")
        assert ready.exists(), node  # (else: the host's log)
        sup = [p for p in psutil.Process(pid).children() if "supervisor" in
               " ".join(p.cmdline())]
        assert len(sup) == 1
        time.sleep(rng.uniform(0.05, 0.4))
        sup[0].kill()
        code, out = forks.wait(pid, log)  # its next wait fails: the card is lost
        assert code != 0 and re.search(r"50(7010|7901)", out), out
        wait_until(lambda n=node: not shm.clean_dead().get(n) and not shm.leftovers(n), 30,
                   f"names of dead node {node} cleaned")
    print(f"kill -9 cycles: {KILL_CYCLES} supervisors; no names left")
