"""Fixtures shared by the whole suite: leak checking, child interpreters, shared nodes.

Leak check (autouse, every test): after the test, nothing of npuemu may be left that the test
made, neither a name in /dev/shm (``npuemu.*`` / ``sem.npuemu.*``) nor a worker or supervisor
process (cmdline contains ``npuemu.device``). Teardown is asynchronous (a supervisor notices
its owner's EOF, stops its workers, unlinks), so the check polls for up to ``LEAK_GRACE_S``
before it fails; then it kills and unlinks what it found, so one failure does not cascade.

What counts as ours (other people may run npuemu on this machine at the same time; their
nodes are neither reported nor touched):

- processes: descendants of the pytest process, which is made a child subreaper so that
  orphaned supervisors (``start_new_session``) and workers stay in its tree; also any
  process whose environment carries this session's tag (``NPUEMU_TEST_SESSION``, set here
  and inherited by every child);
- /dev/shm names: every new name except those of a node that evidently belongs to someone
  else (one of its processes, or the live owner ``<pid>`` of an embedded node
  ``e<pid>-*`` or of a bench's bare-primitive names ``bench-raw<pid>.*``, is neither ours by
  the rule above nor started by ``run_py``/``spawn_py``).

Under pytest-xdist (``-n auto`` in pyproject's addopts) every worker is a session of its
own (tag ``<run><worker>``, e.g. ``1a2b3cgw0``; nodes ``pt<run><worker>-*``) and checks only
what its own tests made: another worker's processes carry another tag, its shared nodes
another prefix, and its embedded nodes a live owner that is not ours. The process that
started the run (the xdist controller, or the only process without xdist) checks once more
at the end that nothing of any session of the run is left (``pytest_sessionfinish``). Tests
marked ``alone`` run with no other test of the run beside them (a file lock of the run):
they stage dead-node names that a node start or stop elsewhere would clean.

Shared nodes started by the module-scoped ``module_node`` factory live across tests: their
boot-time names and processes are excluded from the per-test check, and the factory's own
teardown checks that ``npuemu stop`` removed every one of them.

Paths (autouse, every test): nothing is written into ``$HOME`` or piles up in the system's
temporary directory. Each test gets its own host-log root (``ASCEND_PROCESS_LOG_PATH``, set
in this process and so in every child's environment; ``ASCEND_WORK_PATH`` is removed), and
``TMPDIR`` points into this session's pytest base directory (node logs of ``npuemu start``
and anything a child puts in its temporary directory), which pytest rotates away.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import secrets
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psutil
import pytest

from npuemu.shared import shm

LEAK_GRACE_S = 5.0
STOP_TIMEOUT_S = 20.0
TAG_VAR = "NPUEMU_TEST_SESSION"
RUN_VAR = "NPUEMU_TEST_RUN"
RUN = os.environ.get(RUN_VAR) or secrets.token_hex(3)
"""This pytest run: the controller's id, inherited by its xdist workers."""
os.environ[RUN_VAR] = RUN
SESSION = RUN + os.environ.get("PYTEST_XDIST_WORKER", "")
"""This process's session (``<run>`` alone, or ``<run>gw<N>`` in an xdist worker); the same
whichever way this module is imported (``conftest`` or ``tests.conftest``)."""
NODE_PREFIX = f"pt{SESSION}-"
"""Names of shared nodes started by this test session begin with this."""
_SESSION_NODE = re.compile(r"pt([0-9a-f]{6}(?:gw\d+)?)-")
_OWNER_PID = re.compile(r"(?:e|fake|bench-raw|bench-|pytest-)(\d+)(?:-|$)")
"""Node names that carry the pid of their owner: embedded (``e<pid>-*``), fake links,
``npuemu bench`` nodes and rings, the pytest plugin's session node."""

# Variables a developer's shell may have set that would change what a child attaches to.
_SCRUBBED = ("NPUEMU_NODE", "NPUEMU_DEVICES", "NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC",
             "ASCEND_RT_VISIBLE_DEVICES")

os.environ[TAG_VAR] = SESSION
_PATH_VARS = ("TMPDIR", "ASCEND_PROCESS_LOG_PATH", "ASCEND_WORK_PATH")
_OUR_PIDS: set[int] = {os.getpid()}
"""Host processes of this session (embedded node names carry their owner's pid)."""
_PERSISTENT: dict[str, set[str]] = {}
"""Module-scoped shared nodes: name -> their /dev/shm names right after boot."""


def _become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


_become_subreaper()


# ------------------------------------------------------------------------------- leak check
def _reap_zombies() -> None:
    """Reap exited npuemu orphans that were reparented to us (we are their subreaper)."""
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
            if child.status() == psutil.STATUS_ZOMBIE and child.pid not in _OUR_PIDS:
                os.waitpid(child.pid, os.WNOHANG)


def _node_arg(cmdline: list[str]) -> str | None:
    for i, arg in enumerate(cmdline[:-1]):
        if arg == "--node":
            return cmdline[i + 1]
    return None


@dataclass(frozen=True)
class Proc:
    pid: int
    ctime: float
    node: str | None
    cmd: str
    descendant: bool  # in our process tree (we are a subreaper: orphans stay in it)
    tagged: bool  # carries this session's tag in its environment


def _ours(tag: str | None, whole_run: bool = False) -> bool:
    """A session tag (or the session part of a node name) is ours: this session's, or with
    ``whole_run`` any session of this run (the controller and every xdist worker)."""
    return tag == SESSION or (whole_run and tag is not None and tag.startswith(RUN))


def _npuemu_procs(whole_run: bool = False) -> dict[tuple[int, float], Proc]:
    """Live (not zombie) npuemu worker and supervisor processes, keyed by (pid, ctime)."""
    me = os.getpid()
    candidates: list[int] = []
    for entry in os.listdir("/proc"):  # cheap first pass: the raw cmdline only
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        if b"npuemu.device" in raw:
            candidates.append(int(entry))
    if not candidates:
        return {}
    descendants = _descendants()
    found = {}
    for pid in candidates:
        try:
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            # a forked worker's title is one string (device/start.py): split it as argv
            cmdline, ctime = " ".join(p.cmdline()).split(), p.create_time()
        except psutil.Error:
            continue
        tagged = False
        with contextlib.suppress(psutil.Error):
            tagged = _ours(p.environ().get(TAG_VAR), whole_run)
        found[(pid, ctime)] = Proc(pid, ctime, _node_arg(cmdline), " ".join(cmdline),
                                   pid in descendants, tagged)
    return found


def _node_of(entry: str) -> str:
    rest = entry[4:] if entry.startswith("sem.") else entry
    return rest[len(shm.PREFIX):].split(".", 1)[0]


def _foreign_node(node: str, procs: dict[tuple[int, float], Proc],
                  whole_run: bool = False) -> bool:
    """True if ``node`` evidently belongs to someone else: a shared node of another session
    (``pt<session>-*``: another pytest run, or another xdist worker of this one, which checks
    it itself), or one of its processes, or the live owner whose pid the name carries
    (``e<pid>-*``, ``bench-raw<pid>``, ...), is neither in our tree nor tagged as ours. A
    node whose processes and owner are all dead counts as ours (its names are a leak)."""
    if m := _SESSION_NODE.match(node):
        return not _ours(m.group(1), whole_run)
    if any(p.node == node and not (p.descendant or p.tagged) for p in procs.values()):
        return True
    m = _OWNER_PID.match(node)
    if not m or int(m.group(1)) in _OUR_PIDS:
        return False
    try:
        owner = psutil.Process(int(m.group(1)))
        if owner.status() == psutil.STATUS_ZOMBIE:
            return False
        return (not _ours(owner.environ().get(TAG_VAR), whole_run)
                and owner.pid not in _descendants())
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # alive but unreadable: not ours
        return True


def _descendants() -> set[int]:
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def _persistent_entry(entry: str) -> bool:
    node = _node_of(entry)
    return node in _PERSISTENT and entry in _PERSISTENT[node]


def _leaks(before_shm: set[str], before_procs: set[tuple[int, float]],
           whole_run: bool = False) -> tuple[list[str], list[Proc]]:
    """What is there now that the test (or, with ``whole_run``, the run) made: (shm names,
    processes)."""
    procs = _npuemu_procs(whole_run)
    leaked_procs = [p for key, p in procs.items()
                    if p.node not in _PERSISTENT
                    and (p.descendant or (p.tagged and key not in before_procs))]
    leaked_shm = [e for e in shm.leftovers()
                  if e not in before_shm and not _persistent_entry(e)
                  and not _foreign_node(_node_of(e), procs, whole_run)]
    return leaked_shm, leaked_procs


def _kill(procs: list[Proc]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(p.pid)
            if proc.create_time() == p.ctime:
                proc.kill()
    for p in procs:
        with contextlib.suppress(psutil.Error):
            psutil.Process(p.pid).wait(3)
    _reap_zombies()


def _unlink(entries: list[str]) -> None:
    for entry in entries:
        if entry.startswith("sem."):
            shm.unlink_semaphore("/" + entry[4:])
        else:
            shm.unlink_segment("/" + entry)


def wait_for_no_leaks(before_shm: set[str], before_procs: set[tuple[int, float]],
                      grace: float = LEAK_GRACE_S, whole_run: bool = False
                      ) -> tuple[list[str], list[Proc]]:
    """Poll until nothing leaks or ``grace`` passes; returns what is still there."""
    deadline = time.monotonic() + grace
    while True:
        _reap_zombies()
        leaked_shm, leaked_procs = _leaks(before_shm, before_procs, whole_run)
        if not (leaked_shm or leaked_procs) or time.monotonic() > deadline:
            return leaked_shm, leaked_procs
        time.sleep(0.05)


# ---------------------------------------------------------------------------- xdist: alone
ALONE = "alone"
"""Marker of a test that must not run beside another test of the run (xdist workers): it
stages dead-node names that any node start or stop elsewhere would clean (``shm.clean_dead``)
or calls ``clean_dead`` itself and checks what it removed."""


@contextlib.contextmanager
def _turn(factory: pytest.TempPathFactory, alone: bool) -> Iterator[None]:
    """Under xdist: a shared lock of the run for an ordinary test (or a module's node stop),
    an exclusive one for a test marked ``alone``. A gate lock taken first makes a waiting
    ``alone`` test block the next ordinary ones, so it is never starved."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    run_dir = factory.getbasetemp().parent  # the workers' base temp dirs are in the run's
    with open(run_dir / "alone.gate", "a") as gate, open(run_dir / "alone.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _xdist_turn(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Set up before (and torn down after) the leak check below: see :func:`_turn`."""
    with _turn(tmp_path_factory, request.node.get_closest_marker(ALONE) is not None):
        yield


@pytest.fixture(autouse=True)
def no_npuemu_leaks(_xdist_turn: None, request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if it leaves npuemu shared memory or processes behind."""
    before_shm = set(shm.leftovers())
    before_procs = set(_npuemu_procs())
    yield
    leaked_shm, leaked_procs = wait_for_no_leaks(before_shm, before_procs)
    if leaked_procs:
        _kill(leaked_procs)
        # killed workers/supervisors cannot unlink: what they held is part of the failure
        leaked_shm = sorted(set(leaked_shm) | set(_leaks(before_shm, before_procs)[0]))
    _unlink(leaked_shm)
    if leaked_shm or leaked_procs:
        pytest.fail(_leak_report(leaked_shm, leaked_procs), pytrace=False)


def _leak_report(leaked_shm: list[str], leaked_procs: list[Proc]) -> str:
    lines = [f"npuemu leak after {LEAK_GRACE_S:.0f} s grace (now cleaned up):"]
    lines += [f"  /dev/shm/{e}" for e in leaked_shm]
    lines += [f"  process {p.pid}: {p.cmd}" for p in leaked_procs]
    return "\n".join(lines)


# The whole run, checked once by the process that started it (the xdist controller, or the
# only process without xdist): at its end nothing of any of its sessions is left, whatever
# the per-test checks of its workers saw.
_RUN_START = pytest.StashKey[tuple[set[str], set[tuple[int, float]]]]()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        session.config.stash[_RUN_START] = (set(shm.leftovers()), set(_npuemu_procs(True)))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    start = session.config.stash.get(_RUN_START, None)
    if start is None:
        return
    leaked_shm, leaked_procs = wait_for_no_leaks(*start, whole_run=True)
    if leaked_procs:
        _kill(leaked_procs)
        leaked_shm = sorted(set(leaked_shm) | set(_leaks(*start, whole_run=True)[0]))
    _unlink(leaked_shm)
    if leaked_shm or leaked_procs:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("end of run: " + _leak_report(leaked_shm, leaked_procs),
                                red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# ------------------------------------------------------------------------------------ paths
@pytest.fixture(scope="session", autouse=True)
def _session_paths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Session defaults of the paths below, for fixtures wider than one test."""
    saved = {k: os.environ.get(k) for k in _PATH_VARS}
    base = tmp_path_factory.getbasetemp()
    (base / "tmp").mkdir(exist_ok=True)
    os.environ.update(TMPDIR=str(base / "tmp"), ASCEND_PROCESS_LOG_PATH=str(base / "plog"))
    os.environ.pop("ASCEND_WORK_PATH", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def _log_paths(_session_paths: None, tmp_path_factory: pytest.TempPathFactory,
               monkeypatch: pytest.MonkeyPatch) -> None:
    """A host-log root of this test (see the module docstring)."""
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path_factory.mktemp("plog")))


# ---------------------------------------------------------------------------- child python
def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child: ours minus npuemu/ascend settings, plus ``env``."""
    out = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    out[TAG_VAR] = SESSION
    out["PYTHONUNBUFFERED"] = "1"
    out.update(env or {})
    return out


def _run(cmd: list[str], env: dict[str, str] | None, timeout: float,
         cwd: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(cmd, env=child_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd,
                            stdin=subprocess.DEVNULL)
    _OUR_PIDS.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{cmd[:4]} did not finish within {timeout} s (killed)\n"
                    f"--- stdout\n{out}\n--- stderr\n{err}", pytrace=False)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture
def run_py() -> Callable[..., subprocess.CompletedProcess]:
    """``run_py(code, env=None, timeout=60)``: run ``code`` (dedented) in a fresh interpreter
    (``sys.executable -c``) with ``env`` added to a scrubbed copy of our environment; returns
    the CompletedProcess with text stdout/stderr. A child that outlives ``timeout`` is killed
    and fails the test."""

    def run(code: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        return _run([sys.executable, "-c", textwrap.dedent(code)], env, timeout)

    return run


@pytest.fixture
def spawn_py() -> Iterator[Callable[..., subprocess.Popen]]:
    """``spawn_py(code, env=None)``: like ``run_py`` but returns the running Popen (stdout and
    stderr piped, text). Every child still running at teardown is killed."""
    procs: list[subprocess.Popen] = []

    def spawn(code: str | None, env: dict[str, str] | None = None,
              argv: list[str] | None = None) -> subprocess.Popen:
        cmd = argv if code is None else ["-c", textwrap.dedent(code)]
        proc = subprocess.Popen([sys.executable, *cmd],
                                env=child_env(env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        _OUR_PIDS.add(proc.pid)
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
            proc.communicate(timeout=10)


PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
"""The child programs of the tests (``tests/progs/<name>.py``, see ``progs/childlib.py``)."""


@pytest.fixture
def run_prog() -> Callable[..., subprocess.CompletedProcess]:
    """``run_prog(prog, *args, env=None, timeout=60)``: run the child program
    ``tests/progs/<prog>`` with the string arguments ``args``, as ``run_py`` runs code (same
    scrubbed environment plus ``env``, killed and failing the test past ``timeout``)."""

    def run(prog: str, *args: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        return _run([sys.executable, os.path.join(PROGS, prog), *args], env, timeout)

    return run


@pytest.fixture
def spawn_prog(spawn_py: Callable[..., subprocess.Popen]) -> Callable[..., subprocess.Popen]:
    """``spawn_prog(prog, *args, env=None)``: like ``run_prog`` but returns the running Popen
    (``spawn_py``'s: stdout and stderr piped, text; killed at teardown if still running)."""

    def spawn(prog: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return spawn_py(None, env, argv=[os.path.join(PROGS, prog), *args])

    return spawn


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
         cwd: str | None = None) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "npuemu.tools.cli", *args], env, timeout, cwd)


@pytest.fixture
def run_pytest() -> Callable[..., subprocess.CompletedProcess]:
    """``run_pytest(*args, cwd, env=None, timeout=180)``: a separate ``pytest`` run (a user's
    suite, as a user would run it: every installed plugin loads) in a child."""

    def run(*args: str, cwd: str, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess:
        return _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], env,
                    timeout, cwd)

    return run


@pytest.fixture
def npuemu_cli() -> Callable[..., subprocess.CompletedProcess]:
    """``npuemu_cli(*args, env=None, timeout=60, cwd=None)``: the ``npuemu`` command in a
    child (``sys.executable -m npuemu.tools.cli``)."""
    return _cli


def node_status(name: str) -> dict:
    """``npuemu status --name NAME --json`` parsed: the node's dict."""
    res = _cli("status", "--name", name, "--json", timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    nodes = json.loads(res.stdout)
    assert [n["name"] for n in nodes] == [name]
    return nodes[0]


@pytest.fixture
def status() -> Callable[[str], dict]:
    """``status(name)``: ``npuemu status --name NAME --json`` of one node, parsed."""
    return node_status


# ------------------------------------------------------------------------------ shared node
@dataclass
class _NodeFactory:
    persistent: bool
    log_dir: str
    started: list[str] = field(default_factory=list)
    reuse: dict[tuple, str] = field(default_factory=dict)

    def new_name(self) -> str:
        """A fresh node name of this session, stopped and checked at teardown."""
        name = f"{NODE_PREFIX}{secrets.token_hex(3)}"
        self.started.append(name)
        return name

    def start(self, devices: int = 4, hbm: str = "1G", ddr: str = "256M") -> str:
        key = (devices, hbm, ddr)
        if self.persistent and key in self.reuse:  # one boot per module and configuration
            name = self.reuse[key]
            if f"{shm.PREFIX}{name}.reg" in shm.leftovers(name):
                return name
        name = self.new_name()
        res = _cli("start", "--name", name, "--devices", str(devices), "--hbm", hbm,
                   "--ddr", ddr, env={"TMPDIR": self.log_dir}, timeout=60)
        assert res.returncode == 0, f"npuemu start failed:\n{res.stdout}\n{res.stderr}"
        if self.persistent:
            _PERSISTENT[name] = set(shm.leftovers(name))
            self.reuse[key] = name
        return name

    def stop_all(self) -> list[str]:
        """Stop every node started here (bounded); returns the problems found."""
        problems = []
        for name in self.started:
            try:
                res = _cli("stop", "--name", name, "--force", timeout=STOP_TIMEOUT_S)
                if res.returncode not in (0, 1):  # 1: not running (the test stopped it)
                    problems.append(f"npuemu stop --name {name}: rc {res.returncode}\n"
                                    f"{res.stdout}{res.stderr}")
            except pytest.fail.Exception as err:
                problems.append(str(err))
            left_shm, left_procs = _wait_node_gone(name)
            _PERSISTENT.pop(name, None)
            if left_procs:
                _kill(left_procs)
            _unlink(shm.leftovers(name))
            if left_shm or left_procs:
                problems.append(f"node {name} left after stop: {left_shm} "
                                f"{[p.cmd for p in left_procs]}")
        self.started.clear()
        return problems


def _wait_node_gone(name: str, grace: float = LEAK_GRACE_S) -> tuple[list[str], list[Proc]]:
    """Poll until node ``name`` has no name in /dev/shm and no live process."""
    deadline = time.monotonic() + grace
    while True:
        _reap_zombies()
        left_shm = shm.leftovers(name)
        left_procs = [p for p in _npuemu_procs().values() if p.node == name]
        if not (left_shm or left_procs) or time.monotonic() > deadline:
            return left_shm, left_procs
        time.sleep(0.05)


@pytest.fixture
def shared_node(tmp_path) -> Iterator[Callable[..., str]]:
    """Factory ``shared_node(devices=4, hbm="1G", ddr="256M") -> name``: starts a uniquely
    named shared node with ``npuemu start`` (log in ``tmp_path``) and stops it after the
    test, failing if anything of it is left."""
    factory = _NodeFactory(persistent=False, log_dir=str(tmp_path))
    yield factory.start
    problems = factory.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def node_name(tmp_path) -> Iterator[str]:
    """A fresh node name of this session for a test that runs ``npuemu start`` itself; the
    node is stopped (and checked for leftovers) after the test if it is still running."""
    factory = _NodeFactory(persistent=False, log_dir=str(tmp_path))
    yield factory.new_name()
    problems = factory.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def module_node(tmp_path_factory) -> Iterator[Callable[..., str]]:
    """Like ``shared_node`` but a node lives until the end of the module and is handed out
    again for the same arguments (one boot shared by several tests); at the end ``npuemu
    stop`` must remove every name and process it had."""
    factory = _NodeFactory(persistent=True, log_dir=str(tmp_path_factory.mktemp("nodes")))
    yield factory.start
    with _turn(tmp_path_factory, alone=False):  # a stop cleans dead nodes: not beside `alone`
        problems = factory.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
