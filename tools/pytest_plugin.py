"""A pytest plugin for users' own suites: emulated NPUs as fixtures.

Installed with npuemu (entry point ``pytest11``: ``npuemu``), so any pytest run in an
environment where npuemu is installed has it; ``-p no:npuemu`` turns it off. Nothing starts
until a test asks for it.

Fixtures and marker::

    def test_copy(npu_card):                     # card 0 set for the test, reset after it
        x = DeviceArray.from_numpy(np.ones(4, np.float32))

    @pytest.mark.npu(cards=4)                     # this test needs 4 cards
    def test_ring(npu_node, npu_cards):           # npu_cards: Device 0..3, each set
        assert npu_node.cards >= 4

    def test_ecc(npu_card):                       # a fault, undone when the block ends
        buf = npu_card.malloc(4096)
        with inject_fault(npu_card, "ecc_multi", ptr=buf.ptr):   # a Device or a card id
            with pytest.raises(AclError) as info:    # npuemu.shared.errors.AclError
                buf.copy_to_host()
            assert info.value.code == 507054     # ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR

``npu_node`` (session scope): a shared node started for the session with ``npuemu start``
(name ``pytest-<pid>-<hex>``, log in pytest's temporary directory), with as many cards as
the largest ``npu(cards=N)`` among the collected tests (1 if none), ``npu_hbm``/``npu_ddr``
per card (ini options, default 1G and 256M). ``NPUEMU_NODE`` is set in ``os.environ`` for
the session, so this process and every program a test starts attach to it; the node is
stopped when the session ends. If ``NPUEMU_NODE`` is already set, that running node is used
as it is (never stopped) and a test that needs more cards than it has is skipped. The value
is a :class:`NodeInfo` (``name``, ``cards``, ``env`` to pass to a subprocess).

``npu_card``: ``Device(0)`` entered for the test (``aclrtSetDevice(0)`` ... ``aclrtResetDevice(0)``
on exit, which releases what the test left allocated on it). ``npu_cards``: the same for
cards ``0..N-1`` of the test's marker (default 1). A test marked ``npu`` gets ``npu_node``
even if it names no fixture.

:func:`inject_fault` (also the fixture ``npu_fault``): ``with inject_fault(dev, kind,
**params):`` checks the fault as ``npuemu inject`` does (a fault that can never fire, such as
a kernel on the wrong engine or a peer outside the HCCS group, or a missing parameter:
ValueError), injects it into card ``dev`` of this process's node on entry, and restores the
card on exit, whatever the block did: ``link`` is repaired (``clear=True``), ``ecc_single``
counters are cleared (``clear_ecc``), ``clear_ecc`` needs nothing; every other kind (an
isolated ECC page, a pending or fired engine, DMA or hang fault, a lost card) can only be
undone by a fresh card, so the card's worker is restarted (``lost``, then a forced reset and
as many ``aclrtSetDevice`` as this process had on the card): memory, streams and events
this process had on that card are gone afterwards, as after a real card reset. The restart
waits at most ``RESTART_WAIT_S`` for the card to be seen lost.

Limits: the in-process runtime attaches to one node per process, so ``npu_node`` must be
set up before the test process first attaches to a card (a test that used a card without
the fixture or the marker, run earlier, makes it fail with a message saying so; a runtime
that was made but never attached, e.g. by ``Device(0)`` at import time, is replaced). Under
pytest-xdist every worker is a session of its own and so starts (and stops) a node of its
own; an ``NPUEMU_NODE`` given is shared by every worker.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

MARKER = "npu"
RESTART_WAIT_S = 10.0
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
_LIGHT_RESTORE = {"link", "ecc_single", "clear_ecc"}
"""Fault kinds undone without restarting the card (see the module docstring)."""


@dataclass(frozen=True)
class NodeInfo:
    """The session's node: its name, its number of cards, and the environment a subprocess
    needs to attach to it (``NPUEMU_NODE``)."""

    name: str
    cards: int
    started: bool = False
    env: dict[str, str] = field(default_factory=dict)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("npu_hbm", "HBM per card of the session's npuemu node", default="1G")
    parser.addini("npu_ddr", "DDR per card of the session's npuemu node", default="256M")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(cards=1): the test runs on an emulated NPU node (npuemu) with at "
                   "least `cards` cards")


def _cards_of(item: pytest.Item) -> int:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return 0
    cards = marker.kwargs.get("cards", marker.args[0] if marker.args else 1)
    if type(cards) is not int or cards < 1:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.npu(cards=N) needs an int >= 1, "
                                f"not {cards!r}")
    return cards


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[_CARDS] = max([1, *(_cards_of(item) for item in items)])


_CARDS = pytest.StashKey[int]()


# ------------------------------------------------------------------------------- the node
def _npuemu(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npuemu", *args], env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)


def _cards_of_node(name: str) -> int:
    from npuemu.tools import status

    try:
        return len(status.read_node(name)["devices"])
    except FileNotFoundError:
        raise pytest.UsageError(f"NPUEMU_NODE={name!r}: no such node is running") from None


def _check_runtime_free(name: str) -> None:
    """Fail if this process's runtime already belongs to another node (see Limits)."""
    from npuemu.host.core import runtime

    rt = runtime._runtime
    if rt is None or rt.config.name == name:
        return
    if rt.node is None and not rt.devices:  # made but never attached: start it afresh
        runtime._runtime = None
    else:
        pytest.fail(f"npuemu was used in this process before the npu_node fixture (attached "
                    f"to {rt.config.name or 'an embedded node'!r}); give every test that uses "
                    "a card the npu_card/npu_node fixture or the npu marker", pytrace=False)


@pytest.fixture(scope="session")
def npu_node(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeInfo]:
    """The session's npuemu node (see the module docstring)."""
    given = os.environ.get("NPUEMU_NODE")
    if given:
        _check_runtime_free(given)
        yield NodeInfo(given, _cards_of_node(given), False, {"NPUEMU_NODE": given})
        return
    cards = request.config.stash.get(_CARDS, 1)
    name = f"pytest-{os.getpid()}-{secrets.token_hex(3)}"
    _check_runtime_free(name)
    env = {**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("npuemu-node"))}
    res = _npuemu("start", "--name", name, "--devices", str(cards),
                  "--hbm", request.config.getini("npu_hbm"),
                  "--ddr", request.config.getini("npu_ddr"), env=env, timeout=START_TIMEOUT_S)
    if res.returncode:
        pytest.fail(f"npuemu start failed ({res.returncode}):\n{res.stdout}{res.stderr}",
                    pytrace=False)
    os.environ["NPUEMU_NODE"] = name
    try:
        yield NodeInfo(name, cards, True, {"NPUEMU_NODE": name})
    finally:
        os.environ.pop("NPUEMU_NODE", None)
        _detach_this_process()
        res = _npuemu("stop", "--name", name, env=env, timeout=STOP_TIMEOUT_S)
        if res.returncode:
            pytest.fail(f"npuemu stop --name {name} failed ({res.returncode}):\n"
                        f"{res.stdout}{res.stderr}", pytrace=False)


def _detach_this_process() -> None:
    """Release every card this process holds (as at exit) so the node can stop cleanly."""
    from npuemu.host.core import runtime

    if runtime._runtime is not None:
        runtime._runtime.shutdown()


@pytest.fixture(autouse=True)
def _npu_marker(request: pytest.FixtureRequest) -> None:
    """A test marked ``npu`` gets the node; it is skipped if the node has too few cards."""
    cards = _cards_of(request.node)
    if not cards:
        return
    node: NodeInfo = request.getfixturevalue("npu_node")
    if node.cards < cards:
        pytest.skip(f"needs {cards} NPUs; node {node.name!r} has {node.cards}")


@pytest.fixture
def npu_cards(request: pytest.FixtureRequest, npu_node: NodeInfo) -> Iterator[list[Any]]:
    """``Device(0..N-1)`` (N from the test's ``npu`` marker, default 1), each set for the
    test and reset after it; the calling thread's current device is card 0."""
    from npuemu.host import Device

    count = max(1, _cards_of(request.node))
    with contextlib.ExitStack() as stack:
        devices = [stack.enter_context(Device(dev)) for dev in reversed(range(count))]
        yield devices[::-1]


@pytest.fixture
def npu_card(npu_node: NodeInfo) -> Iterator[Any]:
    """``Device(0)`` set for the test (``aclrtSetDevice``) and reset after it."""
    from npuemu.host import Device

    with Device(0) as dev:
        yield dev


# ------------------------------------------------------------------------------- faults
def card_id(dev: Any) -> int:
    """The card id of ``dev``: an int, or a ``Device`` (the ``npu_card`` fixture's)."""
    from npuemu.host import Device

    if isinstance(dev, Device):
        return dev.id
    if isinstance(dev, bool) or not isinstance(dev, int):
        raise TypeError(f"inject_fault: the card must be an int or a Device, got "
                        f"{type(dev).__name__}")
    return dev


@contextlib.contextmanager
def inject_fault(dev: Any, kind: str, **params: Any) -> Iterator[None]:
    """Inject fault ``kind`` into card ``dev`` (an id or a ``Device``, e.g. ``npu_card``) for
    the duration of the block, then restore the card (see the module docstring). Blocks for
    one round trip on entry; a restart on exit blocks until the fresh worker is up."""
    from npuemu.host.core import faults
    from npuemu.tools import inject

    dev = card_id(dev)
    inject.check(kind, params)
    node = os.environ.get("NPUEMU_NODE")
    if kind == "link" and node:
        from npuemu.tools import status

        inject.check_on_node(status.read_node(node), dev, kind, params)
    faults.inject(dev, kind, **params)
    try:
        yield
    finally:
        _restore(dev, kind, params)


def _restore(dev: int, kind: str, params: dict[str, Any]) -> None:
    from npuemu.host.core import faults

    if kind == "link":
        faults.inject(dev, "link", peer=params["peer"], clear=True)
    elif kind == "ecc_single":
        faults.inject(dev, "clear_ecc")
    elif kind not in _LIGHT_RESTORE:
        restart_card(dev)


def restart_card(dev: int) -> None:
    """Replace card ``dev``'s worker with a fresh one and give this process back as many
    references to it as it had (the card's memory, streams and events are gone)."""
    from npuemu.host.core import device, faults, runtime

    rt = runtime.get()
    od = rt.devices.get(dev)
    refs = od.refs if od is not None else 0
    if od is None:  # not attached here: attach only to kill it, then leave it as it was
        od = rt.open_device(dev)
    if od.link.alive():
        faults.inject(dev, "lost")
        deadline = time.monotonic() + RESTART_WAIT_S
        while od.link.alive():
            if time.monotonic() > deadline:
                raise TimeoutError(f"card {dev} not seen lost within {RESTART_WAIT_S} s")
            time.sleep(0.01)
    od.refs = max(od.refs, 1)
    device.reset_device(dev, force=True)
    for _ in range(refs):
        device.set_device(dev)


@pytest.fixture
def npu_fault(npu_node: NodeInfo) -> Callable[..., contextlib.AbstractContextManager[None]]:
    """:func:`inject_fault` as a fixture: ``with npu_fault(0, "hang"): ...``."""
    return inject_fault
