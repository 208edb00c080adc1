"""The in-memory op map of one card (the real runtime's op map and its LRU aging).

Key: op type + every input's and output's dtype, format, storage format, dims, shape range,
const flag and bytes, memtype + the attribute digest (``TensorDesc.key``, ``OpAttr.digest``).
Each entry points at a loaded kernel binary (``Loaded``: bin id and HBM block on the card of
the binary's Python source, which the card compiled; ``compiler.py``).
Several entries may share one binary: a *re-tiled* entry (a signature differing from a
compiled one only along linear dims) and a *dynamic* entry (a concrete shape matched by a
dynamic-shape compile) carry their own shapes and tiling as launch arguments. A binary's HBM
is freed when its last entry goes.

Aging: compiled entries are kept in LRU order (a hit moves the entry to the young end); when
an insert makes the count exceed the capacity, the oldest compiled entries are evicted.
Static entries (``set_model_dir``, ``load``) never age and are not counted against the
capacity. Capacity: ``acl.op.set_max_op_queue_num``, the ``aclInit`` JSON key
``max_opqueue_num``, or npuemu's ``ASCEND_OP_CACHE_MAX_SIZE`` environment variable (entries);
default 20000 (``DEFAULT_MAX_OPQUEUE_NUM``).

Threading model: each ``DeviceOpCache`` has a ``lock`` guarding its maps and stats; the
executor takes it for lookups that change LRU order, inserts and evictions. Stats counters
are plain ints updated under that lock (the fast hit path bumps ``hits`` without it: a lost
increment under a race is acceptable for a statistic, an extra lock per op is not).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from npuemu.host.core import plog, runtime
from npuemu.host.ops import diskcache
from npuemu.host.ops import types as T
from npuemu.host.ops.compiler import KernelBinary
from npuemu.host.ops.registry import OpDef, Spec
from npuemu.host.ops.tiling import Tiling
from npuemu.shared import config, errors, logring
from npuemu.shared.protocol import Op

DEFAULT_MAX_OPQUEUE_NUM = 20000
_capacity: list[int] = []


def capacity() -> int:
    """The LRU capacity in entries (API / aclInit JSON, else the env var, else 20000)."""
    if _capacity:
        return _capacity[0]
    value, problem = config.op_map_capacity()
    if problem:
        plog.log(logring.WARNING, problem)
    return DEFAULT_MAX_OPQUEUE_NUM if value is None else value


def set_capacity(n: object, code: int = T.ACL_ERROR_INVALID_PARAM) -> None:
    """``aclopSetMaxOpQueueNum(n)``: ``n`` must be a positive int (else ``code``). Shrinking
    evicts at once from every card's map."""
    if type(n) is not int or n <= 0:
        raise T.fail(code, f"max op queue num {n!r} must be a positive integer")
    _capacity[:] = [n]
    for cache in list(CACHES.values()):
        with cache.lock:
            cache.age()


@dataclass(eq=False)
class Loaded:
    """A kernel binary loaded on the card: its bin id, HBM block and users."""

    binary: KernelBinary
    bin_id: int
    ptr: int
    span: int
    refs: int = 0


@dataclass(eq=False)
class Entry:
    """One match in the op map: what a launch needs."""

    key: tuple
    op: OpDef
    ins: list[Spec]
    outs: list[Spec]
    attrs: dict[str, Any]
    loaded: Loaded
    tiling: Tiling
    extra: tuple = ()
    """Launch arguments after the pointers: () for the compiled shapes, else
    ``(shapes, rows, tile)``."""
    static: bool = False
    alive: bool = True
    in_sizes: tuple[int, ...] = ()
    out_sizes: tuple[int, ...] = ()
    used: tuple[int, ...] = ()
    """Indexes of the given input descriptors that are present (absent optionals skipped)."""

    in_checks: tuple[tuple[int, int], ...] = ()
    """(given input index, bytes needed) for each present input"""
    empty: bool = False
    """every output has no elements: execution returns at once"""

    def __post_init__(self) -> None:
        self.in_sizes = tuple(s.nbytes for s in self.ins)
        self.out_sizes = tuple(s.nbytes for s in self.outs)
        self.in_checks = tuple(zip(self.used or range(len(self.ins)), self.in_sizes,
                                   strict=True))
        self.empty = not any(s.size for s in self.outs)


@dataclass
class Stats:
    hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    retiles: int = 0
    dynamic_tiles: int = 0
    evictions: int = 0
    compiles: int = 0
    compile_ns: int = 0
    retile_ns: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(eq=False)
class DeviceOpCache:
    """The op map of one card in this process."""

    link: Any
    lock: threading.RLock = field(default_factory=threading.RLock)
    lru: collections.OrderedDict = field(default_factory=collections.OrderedDict)
    static: dict = field(default_factory=dict)
    linear: dict = field(default_factory=dict)
    """retile key -> Entry compiled for it (the base a re-tile reuses)"""
    dynamic: dict = field(default_factory=dict)
    """shapeless key -> [Entry compiled with -1 dims]"""
    fast: dict = field(default_factory=dict)
    """(op type, in desc handles, out desc handles, attr handle) -> (Entry, generation)"""
    stats: Stats = field(default_factory=Stats)
    models_loaded: set = field(default_factory=set)
    """ids of dynamic single-op model records already put on this card"""
    hbm_bytes: int = 0
    hbm_peak: int = 0

    def get(self, key: tuple) -> Entry | None:
        """A match, refreshing its LRU position (static entries first)."""
        entry = self.static.get(key)
        if entry is not None:
            return entry
        entry = self.lru.get(key)
        if entry is not None:
            self.lru.move_to_end(key)
        return entry

    def insert(self, entry: Entry) -> None:
        """Add a match; a duplicate key only refreshes. May evict the oldest entries."""
        entry.loaded.refs += 1
        if entry.static:
            old = self.static.pop(entry.key, None)
            self.static[entry.key] = entry
            if old is not None:
                self._drop(old)
            return
        old = self.lru.pop(entry.key, None)
        self.lru[entry.key] = entry
        if old is not None:
            self._drop(old)
        self.age()

    def age(self) -> None:
        cap = capacity()
        while len(self.lru) > cap:
            _key, victim = self.lru.popitem(last=False)
            self.stats.evictions += 1
            if plog.debug:
                plog.log(logring.DEBUG, f"op cache evict {victim.op.type} "
                                        f"{[s.shape for s in victim.ins]} device "
                                        f"{getattr(self.link, 'logical', '?')}")
            self._drop(victim)

    def shed(self) -> bool:
        """Evict the oldest compiled entries until a binary loses its last user (its
        ``OP_UNLOAD`` is posted, ahead of any later request on the link); False when no
        compiled entry is left. For a card that refused one more op binary of this process
        (207012, ``device/exec/opbin.py``)."""
        while self.lru:
            _key, victim = self.lru.popitem(last=False)
            self.stats.evictions += 1
            last = victim.loaded.refs == 1
            self._drop(victim)
            if last:
                return True
        return False

    def _drop(self, entry: Entry) -> None:
        entry.alive = False
        for table in (self.linear, ):
            for k in [k for k, e in table.items() if e is entry]:
                del table[k]
        for k, lst in list(self.dynamic.items()):
            if entry in lst:
                lst.remove(entry)
                if not lst:
                    del self.dynamic[k]
        entry.loaded.refs -= 1
        self.unload_unused(entry.loaded)

    def load_binary(self, binary: KernelBinary) -> Loaded:
        """Place the binary's source in the card's HBM and load it there (``OP_LOAD``, one
        round trip: blocks). A card that holds as many op binaries of this process as it
        takes (207012) gets room by evicting the oldest compiled entries, then one more try.
        The caller holds ``lock``."""
        name = f"{binary.op_type}-{binary.digest}"
        try:
            bin_id, ptr, span, _kernels = self.link.call(Op.OP_LOAD, binary.source, name)
        except errors.AclError as err:
            if err.code != errors.ACL_ERROR_RT_OVER_LIMIT or not self.shed():
                raise
            bin_id, ptr, span, _kernels = self.link.call(Op.OP_LOAD, binary.source, name)
        return self._placed(binary, bin_id, ptr, span)

    def load_binaries(self, binaries: Iterable[KernelBinary]) -> list[Loaded | None]:
        """``load_binary`` of several binaries in one pipelined batch of ``OP_LOAD``s (each
        sent as ``binaries`` yields it, so building the next overlaps the card compiling
        the last; one wait for all the replies: blocks); a binary the card refused is None
        (the caller loads it alone, where ``load_binary``'s error handling applies). The
        caller holds ``lock``; ``binaries`` must not use the link."""
        sent: list[KernelBinary] = []

        def requests() -> Iterator[tuple[Any, ...]]:
            for b in binaries:
                sent.append(b)
                yield Op.OP_LOAD, b.source, f"{b.op_type}-{b.digest}"

        replies = self.link.call_many(requests())
        return [None if isinstance(r, errors.AclError) else self._placed(b, *r[:3])
                for b, r in zip(sent, replies, strict=True)]

    def _placed(self, binary: KernelBinary, bin_id: int, ptr: int, span: int) -> Loaded:
        loaded = Loaded(binary, bin_id, ptr, span)
        self.hbm_bytes += loaded.span
        self.hbm_peak = max(self.hbm_peak, self.hbm_bytes)
        return loaded

    def unload_unused(self, loaded: Loaded) -> None:
        """Free a binary that no entry took (its ``OP_UNLOAD`` posted)."""
        if loaded.refs == 0:
            self.hbm_bytes -= loaded.span
            if self.link.alive():
                self.link.post(Op.OP_UNLOAD, loaded.bin_id, loaded.ptr)

    def clear(self) -> None:
        """Drop every compiled entry (static ones too): frees all binaries' HBM."""
        for entry in [*self.lru.values(), *self.static.values()]:
            self._drop(entry)
        self.lru.clear()
        self.static.clear()
        self.fast.clear()
        self.models_loaded.clear()

    def entries(self) -> int:
        return len(self.lru) + len(self.static)


CACHES: dict[Any, DeviceOpCache] = {}
"""link -> its card's op map (links of reset devices are purged)."""
_caches_lock = threading.Lock()


def cache_for(link: Any) -> DeviceOpCache:
    cache = CACHES.get(link)
    if cache is None:
        with _caches_lock:
            purge()
            cache = CACHES.setdefault(link, DeviceOpCache(link))
    return cache


def purge() -> None:
    """Forget the maps of links that are closed (their card reclaimed the binaries' HBM)."""
    live = {od.link for od in list(runtime.get().devices.values())}
    for link in [k for k in CACHES if k not in live]:
        del CACHES[link]


def usage_component(link: Any) -> dict | None:
    """``get_mem_usage_info`` entry for the op kernels of this process on ``link``'s card."""
    cache = CACHES.get(link)
    if cache is None:
        return None
    return {"name": "op kernels", "curMemSize": cache.hbm_bytes, "memPeakSize": cache.hbm_peak}


def stats(device: int | None = None) -> dict[str, int]:
    """Op cache statistics of this process: every card, or one logical device."""
    purge()
    total = Stats().as_dict()
    total.update(entries=0, static_entries=0, hbm_bytes=0, capacity=capacity())
    for link, cache in list(CACHES.items()):
        if device is not None and getattr(link, "logical", None) != device:
            continue
        for k, v in cache.stats.as_dict().items():
            total[k] += v
        total["entries"] += cache.entries()
        total["static_entries"] += len(cache.static)
        total["hbm_bytes"] += cache.hbm_bytes
    total.update({f"disk_{k}": v for k, v in diskcache.STATS.items()})
    return total


def configure(config_path: str | None) -> int:
    """The ``aclInit`` JSON key ``max_opqueue_num`` (quotes stripped, then read as an
    integer): a value <= 0 or not a number is ``ACL_ERROR_INVALID_PARAM`` (100000) as
    ``HandleMaxOpQueueConfig`` returns; below 20000 only a warning is logged. A file that
    does not parse as JSON is left to ``aclInit``'s own checks (returns 0 here)."""
    import json

    if not config_path:
        return 0
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return 0
    if not isinstance(config, dict) or "max_opqueue_num" not in config:
        return 0
    text = str(config["max_opqueue_num"]).strip().strip('"')
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        return T.ACL_ERROR_INVALID_PARAM
    if value < DEFAULT_MAX_OPQUEUE_NUM:
        plog.log(logring.WARNING, f"max_opqueue_num {value} is below the default "
                                  f"{DEFAULT_MAX_OPQUEUE_NUM}")
    _capacity[:] = [value]
    return 0
