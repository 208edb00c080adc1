"""Runtime core: process-wide state of the host runtime (devices, contexts, allocations).

Both API faces (``acl`` and the Pythonic one) call into the one ``Runtime`` instance from
``get()``. Everything here raises ``AclError``; the ``acl`` face turns that into return codes.

- Lazy start: the first call that needs a device attaches to ``NPUEMU_NODE`` if set, else
  starts an embedded node (``host/driver/node.py``), behind a lock. Tests may hand a node in
  instead (``attach``; ``host/driver/fake.py`` ``FakeNode`` runs the core in-process).
- Fork guard (the only one): a child forked from a process whose runtime exists cannot use
  its parent's rings, nor objects made by it; it gets a clear error (``check_fork``).
- Current device and context are per thread (``aclrtSetDevice`` binds the calling thread).
- ``ASCEND_RT_VISIBLE_DEVICES`` re-indexes the node's cards from 0, as on hardware.
- Handles (contexts, streams, events, binaries, functions) are pointer-like ints; ``lookup``
  is the one place that turns a handle back into its live object (107000 otherwise).

Threading model: every user thread calls in. ``Runtime.lock`` (re-entrant) guards ``node``,
``devices``, ``contexts``, ``allocations``/``starts``, ``handles`` and the handle counter
whenever they change; lookups read the dicts without it (a dict read is atomic under the
GIL, and an object is published in its table only once fully built). ``ensure_node``
publishes ``node`` last, after the pinned and staging pools it needs, so a thread that sees
a node without taking the lock also sees its pools. ``local`` holds each thread's current
context. The pools and links have their own locks (``host/driver/``).
"""

from __future__ import annotations

import atexit
import contextlib
import operator
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from npuemu.host.core import plog
from npuemu.host.driver.hostmem import HostMaps, PinnedPool, StagingPool
from npuemu.host.driver.interface import Link, NodeHandle
from npuemu.host.driver.node import Node
from npuemu.shared import errors, logring
from npuemu.shared.config import NodeConfig, parse_visible_devices
from npuemu.shared.protocol import Op

if TYPE_CHECKING:  # stream.py imports this module
    from npuemu.host.core.stream import Stream


class Handled(Protocol):
    """What ``Runtime.handles`` holds: a stream, event, memory pool, physical memory handle,
    kernel binary or function (each a dataclass of its module)."""

    handle: int  # set by ``Runtime.register``
    destroyed: bool

    @property
    def link(self) -> Link: ...


class _Destroyable(Protocol):
    destroyed: bool


_Obj = TypeVar("_Obj", bound=_Destroyable)
_Reg = TypeVar("_Reg", bound=Handled)


@dataclass
class Allocation:
    """One live device allocation of this process (the host's mirror of the worker's)."""

    ptr: int
    size: int
    span: int
    page_class: int
    policy: int
    link: Link
    stack: str = ""  # where it was allocated, when NPUEMU_TRACK_ALLOC=1
    mapped: int = 0
    """Where ``ptr`` is in this process's mapping of the arena, set by the first short copy
    (``memory.small_copy``, which maps a block's far pages first); -1 when they could not
    be mapped (such copies take ``memory._mapped``)."""
    view: memoryview | None = None
    """The block's ``span`` bytes at ``mapped`` as a memoryview (made with ``mapped``)."""


@dataclass(eq=False)
class Context:
    """An ``aclrtContext``: a device binding; the primary one is made by ``set_device``."""

    handle: int
    device: int
    primary: bool
    destroyed: bool = False
    default_stream: Stream | None = None  # made on first use of stream 0


@dataclass(eq=False)
class OpenDevice:
    """A device this process has set: its link and reference count."""

    logical: int
    link: Link
    primary: Context
    refs: int = 0
    contexts: list[Context] = field(default_factory=list)
    util_mark: tuple[int, list[int]] | None = None  # last utilization query (ns, busy ns)


class Runtime:
    """All host-side runtime state of this process."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pid = os.getpid()
        try:
            self.config = NodeConfig.from_env()
            self.config_problem = ""
        except (ValueError, TypeError) as err:  # reported by init / set_device, not here
            self.config = NodeConfig()
            self.config_problem = str(err).splitlines()[0]
            print(f"npuemu: invalid configuration: {self.config_problem}", file=sys.stderr)
        self.node: NodeHandle | None = None
        self.told_no_node = False  # the missing NPUEMU_NODE went to stderr (``_connect``)
        self.devices: dict[int, OpenDevice] = {}
        self.contexts: dict[int, Context] = {}
        self.allocations: dict[int, Allocation] = {}
        self.starts: list[int] = []  # sorted keys of allocations (containment lookups)
        self.host_maps = HostMaps()
        self.pinned: PinnedPool | None = None
        self.staging: StagingPool | None = None
        self.local = threading.local()
        self._next_handle = 0x5A000000
        self.handles: dict[int, Handled] = {}  # stream and event handles -> objects
        self.handles_gen = 0  # bumped by every register (the caching allocator's stream list)
        self.peer_access: set[tuple[int, int]] = set()  # (device, peer), logical ids
        self.op_timeout_us = 0  # aclrtSetOpExecuteTimeOut*, sent to every card opened (kernel.py)
        self.initialized = False
        self.link_hooks: list[Any] = []  # profilers: hook.opened(link) / hook.closing(link)
        self.forked = False  # set in a forked child (os.register_at_fork): no per-call getpid

    # node and devices ----------------------------------------------------------------------
    def check_fork(self, what: str = "npuemu") -> None:
        """The one fork guard: AclError(207000) in a child forked from this runtime's
        process (its rings, mappings and objects belong to the parent)."""
        if self.forked:
            raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                   f"{what} cannot be used in a forked child of process "
                                   f"{self.pid}, which started npuemu; use multiprocessing's "
                                   "'spawn' method")

    def check_config(self) -> None:
        """207004 (no usable device) with one line naming the bad ``NPUEMU_*`` variable,
        if the environment was invalid: no node is started with it."""
        if self.config_problem:
            raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                                   f"invalid configuration: {self.config_problem}")

    def ensure_node(self) -> NodeHandle:
        self.check_fork()
        self.check_config()
        node = self.node
        if node is None:
            with self.lock:
                node = self.node
                if node is None:
                    name = self.config.name
                    node = self._connect(name) if name else Node.embedded(self.config)
                    self.attach(node)
                    _install_exit_hooks()
        return node

    def _connect(self, name: str) -> Node:
        """Attach to the shared node ``NPUEMU_NODE`` names. If it is not running, the reason
        goes to stderr (once per process: a program that ignores return codes still learns
        why every call fails) and to the plog, and the AclError (207004) is raised."""
        try:
            return Node.connect(name)
        except errors.AclError as err:
            if not self.told_no_node:
                self.told_no_node = True
                print(f"npuemu: NPUEMU_NODE={name}: {err}", file=sys.stderr, flush=True)
                plog.log(logring.ERROR, f"NPUEMU_NODE={name}: {err}")
            raise

    def attach(self, node: NodeHandle) -> None:
        """Use ``node`` (a ``Node``, or a ``FakeNode`` in tests). Its pools are built before
        ``node`` is published (see the threading model)."""
        with self.lock:
            pinned = PinnedPool(node.name, self.pid)
            self.pinned, self.staging = pinned, StagingPool(pinned)
            self.node = node

    def pools(self) -> tuple[PinnedPool, StagingPool]:
        """The pinned and staging pools: built by ``attach``, so there once a device is open."""
        pinned, staging = self.pinned, self.staging
        assert pinned is not None and staging is not None, "no node attached"
        return pinned, staging

    def visible(self) -> list[int]:
        """Node device ids visible to this process, indexed by logical id."""
        self.check_config()
        if self.config.name:  # a shared node: its size is only known once attached
            self.ensure_node()
        total = self.node.devices if self.node else self.config.devices
        return parse_visible_devices(os.environ.get("ASCEND_RT_VISIBLE_DEVICES"), total)

    def check_device_id(self, dev: object) -> int:
        dev = index(dev, errors.ACL_ERROR_RT_INVALID_DEVICEID, "device id")
        if not 0 <= dev < len(self.visible()):
            raise errors.error_for(errors.ACL_ERROR_RT_INVALID_DEVICEID,
                                   f"device id {dev!r} not in [0, {len(self.visible())})")
        return dev

    def open_device(self, dev: int) -> OpenDevice:
        """The device's link, attaching this process to it first if needed (blocks)."""
        self.check_device_id(dev)
        with self.lock:
            od = self.devices.get(dev)
            if od is None:
                link = self.ensure_node().open_link(self.visible()[dev])
                link.logical = dev
                if self.op_timeout_us:
                    link.post(Op.SET_TIMEOUT, self.op_timeout_us)
                od = OpenDevice(dev, link, self._new_context(dev, primary=True))
                self.devices[dev] = od
                for hook in self.link_hooks:
                    hook.opened(link)
            return od

    def close_device(self, od: OpenDevice) -> None:
        """Release everything this process has on the device (aclrtResetDevice at 0). Device
        memory still allocated then is reported as leaked in the host log."""
        with self.lock:
            for hook in _close_hooks:  # e.g. the caching allocator drops its cached blocks
                hook(od.link)
            for ptr in [p for p, a in self.allocations.items() if a.link is od.link]:
                _report_leak(self.allocations.pop(ptr), od.logical)
            self.starts[:] = sorted(self.allocations)
            for ctx in [od.primary, *od.contexts]:
                ctx.destroyed = True
                self.contexts.pop(ctx.handle, None)
            for handle in [h for h, obj in self.handles.items() if obj.link is od.link]:
                self.handles.pop(handle).destroyed = True
            for hook in self.link_hooks:
                hook.closing(od.link)
            del self.devices[od.logical]
            # peer access enabled from this device goes with its context (re-enable it after
            # set_device); access other devices enabled towards it stays (our choice)
            self.peer_access = {pair for pair in self.peer_access if pair[0] != od.logical}
            assert self.node is not None
            self.node.close_link(od.link)

    # handles -------------------------------------------------------------------------------
    def new_handle(self) -> int:
        """A fresh pointer-like int for a context, stream or event."""
        with self.lock:
            self._next_handle += 0x40
            return self._next_handle

    def register(self, obj: _Reg) -> _Reg:
        """Give ``obj`` (fully built) a handle and publish it in ``handles``."""
        with self.lock:
            self._next_handle += 0x40
            obj.handle = self._next_handle
            self.handles[obj.handle] = obj
            self.handles_gen += 1  # after the insert: a reader that sees it sees the handle
        return obj

    # contexts ------------------------------------------------------------------------------
    def _new_context(self, dev: int, primary: bool) -> Context:
        ctx = Context(self.new_handle(), dev, primary)
        self.contexts[ctx.handle] = ctx
        return ctx

    def create_context(self, dev: int) -> Context:
        od = self.open_device(dev)
        with self.lock:
            ctx = self._new_context(dev, primary=False)
            od.contexts.append(ctx)
        self.local.ctx = ctx
        return ctx

    def destroy_context(self, handle: int) -> None:
        ctx = self.context_of(handle)
        if ctx.primary:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   "the primary context is released by reset_device")
        with self.lock:
            ctx.destroyed = True
            del self.contexts[handle]
            self.devices[ctx.device].contexts.remove(ctx)
        if getattr(self.local, "ctx", None) is ctx:
            self.local.ctx = None

    def context_of(self, handle: object) -> Context:
        return lookup(self.contexts, handle, Context, "context")

    def current(self) -> Context:
        """The calling thread's context, or ACL_ERROR_RT_CONTEXT_NULL (107002)."""
        ctx: Context | None = getattr(self.local, "ctx", None)
        self.check_fork()
        if ctx is None or ctx.destroyed:
            raise errors.error_for(errors.ACL_ERROR_RT_CONTEXT_NULL,
                                   "no current context in this thread: call set_device first")
        return ctx

    def current_link(self) -> Link:
        return self.devices[self.current().device].link

    # teardown ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Detach from every device and drop the node connection (atexit)."""
        with self.lock:
            for od in list(self.devices.values()):
                with contextlib.suppress(Exception):  # teardown must go on for the rest
                    self.close_device(od)
            if self.pinned is not None:
                self.pinned.close()
            if self.node is not None and os.getpid() == self.pid:
                self.node.close()
            self.node = None


def _report_leak(alloc: Allocation, logical: int) -> None:
    where = f"; allocated at\n{alloc.stack}" if alloc.stack else ""
    plog.log(logring.WARNING, f"leak: device {logical} ptr 0x{alloc.ptr:x} size {alloc.size} "
                              f"policy {alloc.policy:#x} still allocated at reset/exit{where}")


def lookup(table: Mapping[int, object], handle: object, kind: type[_Obj], what: str) -> _Obj:
    """The live object of type ``kind`` behind ``handle`` in ``table``; AclError(107000)
    for anything else (not an int, unknown, another kind, destroyed). Non-blocking."""
    found = table.get(handle) if type(handle) is int else None
    if not isinstance(found, kind) or found.destroyed:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"{handle!r} is not a live {what}")
    return found


def index(value: object, code: int, what: str) -> int:
    """``value`` as an int (ints, IntEnum members, numpy integers), else AclError(code)."""
    try:
        # any object on purpose: operator.index is the check (TypeError without __index__)
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise errors.error_for(code, f"{what} {value!r} is not an integer") from None


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()
_close_hooks: list[Callable[[Link], object]] = []


def on_close_device(hook: Callable[[Link], object]) -> None:
    """Call ``hook(link)`` (under ``Runtime.lock``) when this process releases a device,
    before its remaining allocations are reported as leaks (the caching allocator uses it)."""
    _close_hooks.append(hook)



def _mark_forked() -> None:
    global _runtime, _runtime_lock
    _runtime_lock = threading.Lock()  # another thread may have held it at the fork
    if _runtime is not None and _runtime.node is None:
        _runtime = None  # nothing was attached yet: the child starts afresh
    elif _runtime is not None:
        _runtime.forked = True


os.register_at_fork(after_in_child=_mark_forked)


def get() -> Runtime:
    """The process-wide runtime (created on first use). A child forked before the parent
    made one gets its own."""
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = Runtime()
    return _runtime


def _shutdown() -> None:
    if _runtime is not None:
        _runtime.shutdown()


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


_hooks_installed = False


def without_exit_hooks() -> None:
    """Never install the exit hooks below: for a runtime embedded in a C program
    (``host/capi``), whose interpreter is never finalized (atexit never runs) and whose
    signals are the program's own."""
    global _hooks_installed
    _hooks_installed = True


def _install_exit_hooks() -> None:
    """atexit teardown; SIGTERM becomes SystemExit so atexit runs (unless the program set
    its own handler)."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_shutdown)
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _on_sigterm)
