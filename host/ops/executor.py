"""Compile and execute single operators on a card (``aclopCompile``, ``aclopExecuteV2``,
``aclopCompileAndExecuteV2``, handles), raising AclError.

Compile (host work, blocks): resolve the signature (op definition, dtypes, formats, shape
inference) and look it up in the card's op map (``cache.py``). On a miss, in order: a
dynamic-shape compile whose ranges hold the shapes (tile only), a cached compile differing
only along linear dims (re-tile only; ``INCREMENTAL``), the on-disk cache (load only), and
finally a real build (``compiler.build``). A built or disk-read binary (Python source, see
``compiler.py``) is placed in the card's HBM (``OP_LOAD``, one round trip; the card compiles
it) and inserted in the map (which may evict). A model's load builds the binaries of all its
fresh ops first and places them in one pipelined batch (``preload``). A card that already holds
``opbin.MAX_OP_BINARIES`` op binaries of this process refuses one more with 207012: the
oldest compiled entries are then evicted and the load tried once more.

Execute (async, never compiles): the match and checked launch arguments for the tuple of
(op type, descriptor, buffer and attr handles) are remembered per card, stamped with
``desc.GENERATION``, so a steady-state call is a few dict reads and one ``LAUNCH`` frame on
the stream's ring; the worker runs the kernel on the op's engine in stream order. An output
descriptor with -1 dims (a max shape) makes the call synchronous and gets the real shape
written back, as ``aclopExecuteV2`` does for dynamic ops. Without a compiled, loaded or
dynamic match: ``ACL_ERROR_OP_NOT_FOUND`` (100024), as the real runtime.

Codes (where the real runtime is silent, our choice): compiling an unknown op type 100020
(executing one, or creating its handle, 100024 as above);
wrong number of inputs 100021 / outputs 100022; a dtype the op does not take 100026; a
format it does not take 100027; descriptor and buffer lists of different lengths, a
buffer smaller than its descriptor, an output descriptor that contradicts shape inference,
a dead handle: 100000; a host-placement descriptor in compile or create_handle 200001.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from npuemu.host.core import device, runtime
from npuemu.host.core.stream import resolve, submit, synchronize_stream
from npuemu.host.ops import binaries, compiler, models, registry
from npuemu.host.ops import desc as D
from npuemu.host.ops import signature as S
from npuemu.host.ops import types as T
from npuemu.host.ops.cache import DeviceOpCache, Entry, Loaded, cache_for
from npuemu.host.ops.compiler import KernelBinary
from npuemu.host.ops.registry import OpDef, Spec
from npuemu.shared import config, errors
from npuemu.shared.protocol import Op

INCREMENTAL = [config.op_incremental()]
"""Re-tile instead of compiling when only linear dims differ (``NPUEMU_OP_INCREMENTAL``)."""
_GEN = D.GENERATION
_LAUNCH = Op.LAUNCH


# requests --------------------------------------------------------------------------------------
@dataclass
class Request:
    """Descriptors of one compile or execute, resolved once."""

    op_type: str
    ins: list[D.TensorDesc]
    outs: list[D.TensorDesc]
    attr: D.OpAttr | None

    @property
    def used(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.ins) if not d.unused)

    @property
    def present(self) -> list[D.TensorDesc]:
        return [d for d in self.ins if not d.unused]


def request(op_type: object, in_descs: Sequence[object], out_descs: Sequence[object],
            attr: object) -> Request:
    """Resolve handles (or objects) into a Request; 100000 for anything dead or null."""
    if not isinstance(op_type, str) or not op_type:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"op type {op_type!r}")
    if not isinstance(in_descs, list | tuple) or not isinstance(out_descs, list | tuple):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "descriptor lists must be lists")
    return Request(op_type, [_desc(d) for d in in_descs], [_desc(d) for d in out_descs],
                   attr if isinstance(attr, D.OpAttr) else D.attr_of(attr))


def _desc(d: object) -> D.TensorDesc:
    return d if isinstance(d, D.TensorDesc) else D.need_desc(d)


# compile ---------------------------------------------------------------------------------------
def _hit(cache: Any, key: Any) -> Entry | None:
    """The map entry of ``key`` (counted as a hit), or None; the caller holds ``cache.lock``."""
    entry = cache.get(key)
    if entry is not None:
        cache.stats.hits += 1
    return entry


Specs = tuple[dict[str, Any], list[Spec], list[Spec], tuple | None]
"""A static request's attributes, input and output specs and linear key (``_specs``)."""
Ready = dict[tuple, tuple[KernelBinary, bool, Loaded, Specs]]
"""Binaries ``preload`` built and placed on the card, by map key: (binary, from disk, loaded,
the request's specs, so that ``compile_request`` does not infer them again)."""


def compile_request(req: Request, link: Any, *, static: bool = False,
                    ready: Ready | None = None) -> Entry:
    """``aclopCompile``: the map entry for this request on ``link``'s card, compiling,
    re-tiling or loading as needed (blocks). A fresh compile takes its binary from ``ready``
    (``preload``) when it is there."""
    op = registry.lookup(req.op_type)
    if any(d.memtype != T.ACL_MEMTYPE_DEVICE for d in (*req.ins, *req.outs)):
        raise T.fail(T.ACL_ERROR_API_NOT_SUPPORT, "host-placement descriptors cannot be "
                                                  "compiled (aclSetTensorPlaceMent)")
    cache = cache_for(link)
    key = S.full_key(req.op_type, req.present, req.outs, req.attr)
    with cache.lock:
        entry = _hit(cache, key)
        if entry is not None:
            return entry
        found = _dynamic_match(cache, op, req, key)
        if found is not None:
            return found
        cache.stats.misses += 1
        if any(d.dtype == T.ACL_BF16 for d in (*req.present, *req.outs)):
            _check_bf16(req.op_type)
        if any(d.dynamic for d in (*req.present, *req.outs)):
            return _compile_dynamic(cache, op, req, key)
        built = ready.pop(key, None) if ready else None
        attrs, ins, outs, lkey = built[3] if built else _specs(op, req)
        base = cache.linear.get(lkey) if lkey is not None and INCREMENTAL[0] else None
        if base is not None and base.alive:
            if built and ready is not None:
                ready[key] = built  # not taken: ``discard`` frees it
            return _retile(cache, op, req, key, base, ins, outs, attrs)
        binary, from_disk, loaded = built[:3] if built else (
            *binaries.build(op, ins, outs, attrs, key), None)
        entry = Entry(key, op, ins, outs, attrs, loaded or cache.load_binary(binary),
                      binary.tiling, static=static, used=req.used)
        if from_disk:
            cache.stats.disk_hits += 1
        else:
            cache.stats.compiles += 1
            cache.stats.compile_ns += binary.compile_ns
        cache.insert(entry)
        if lkey is not None:
            cache.linear[lkey] = entry
        return entry


def _specs(op: OpDef, req: Request) -> Specs:
    """A static request's attributes, input and output specs (checked, outputs inferred:
    raises their codes) and its linear key (``S.linear_key``)."""
    attrs = registry.attrs_of(op, S.attr_values(req.attr))
    ins = [S.spec(d) for d in req.present]
    outs = S.outputs(op, ins, [S.spec(d) for d in req.outs], attrs)
    return attrs, ins, outs, S.linear_key(op, ins, outs, attrs, S.attr_digest(req.attr))


def preload(reqs: Sequence[Request], link: Any) -> Ready:
    """Build the binaries of the requests that ``compile_request`` would compile fresh (no
    map entry, no dynamic or re-tile base, static shapes) and place them on the card in one
    pipelined batch of ``OP_LOAD``s (blocks: one wait instead of one round trip each). Any
    request it cannot settle (a refused build or load, a bfloat16 op) is left to
    ``compile_request``, which raises or loads it alone; what ``compile_request`` does not
    take back is freed by ``discard``. For a model's load."""
    cache = cache_for(link)
    todo: dict[tuple, tuple[KernelBinary, bool, Specs]] = {}

    def built() -> Iterator[KernelBinary]:
        """Each new binary as it is built (the card compiles one while the next builds)."""
        bases: set[tuple] = set()
        for req in reqs:
            key = S.full_key(req.op_type, req.present, req.outs, req.attr)
            if key in todo or cache.get(key) is not None or _special(cache, req):
                continue
            try:
                op = registry.lookup(req.op_type)
                specs = attrs, ins, outs, lkey = _specs(op, req)
                if lkey is not None and INCREMENTAL[0] and (lkey in bases
                                                            or lkey in cache.linear):
                    continue  # compile_request re-tiles it from the base
                todo[key] = (*binaries.build(op, ins, outs, attrs, key), specs)
            except Exception:  # compile_request raises it, with its code
                continue
            if lkey is not None:
                bases.add(lkey)
            yield todo[key][0]

    with cache.lock:
        placed = cache.load_binaries(built())
    return {key: (binary, from_disk, loaded, specs)
            for (key, (binary, from_disk, specs)), loaded in zip(todo.items(), placed,
                                                                 strict=True)
            if loaded is not None}


def _special(cache: DeviceOpCache, req: Request) -> bool:
    """A request ``preload`` leaves to ``compile_request``: host placement, bfloat16,
    dynamic shapes, or a dynamic compile on the card that may match it."""
    descs = (*req.present, *req.outs)
    return bool(cache.dynamic) or any(d.memtype != T.ACL_MEMTYPE_DEVICE or d.dynamic
                                      or d.dtype == T.ACL_BF16 for d in descs)


def discard(ready: Ready, link: Any) -> None:
    """Free the binaries ``preload`` placed that no entry took."""
    cache = cache_for(link)
    with cache.lock:
        for _binary, _disk, loaded, _specs in ready.values():
            cache.unload_unused(loaded)
    ready.clear()


def _check_bf16(op_type: str) -> None:
    """100026 unless the node's SoC has bfloat16 kernels (``SocProfile.support_bf16``: not the
    310 SoCs)."""
    profile = device.soc_profile()
    if not profile.support_bf16:
        raise T.fail(T.ACL_ERROR_UNSUPPORTED_DATA_TYPE,
                     f"{op_type}: {profile.name}'s op library has no bfloat16 kernels")


def _retile(cache: DeviceOpCache, op: OpDef, req: Request, key: tuple, base: Entry,
            ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Entry:
    start = time.perf_counter_ns()
    tiling = compiler.retile(op, ins, outs, attrs)
    shapes = tuple(s.shape for s in (*ins, *outs))
    entry = Entry(key, op, ins, outs, attrs, base.loaded, tiling,
                  extra=(shapes, *tiling.args()), used=req.used)
    cache.stats.retiles += 1
    cache.stats.retile_ns += time.perf_counter_ns() - start
    cache.insert(entry)
    return entry


def _compile_dynamic(cache: DeviceOpCache, op: OpDef, req: Request, key: tuple) -> Entry:
    """A dynamic-shape compile: one binary for every shape inside the descriptors' ranges;
    tiled at execute time."""
    attrs = registry.attrs_of(op, S.attr_values(req.attr))
    ins = [S.spec(S.representative(d)) for d in req.present]
    outs = S.outputs(op, ins, [], attrs)
    binary, from_disk = binaries.build(op, ins, outs, attrs, key)
    entry = Entry(key, op, ins, outs, attrs, cache.load_binary(binary), binary.tiling,
                  used=req.used)
    entry.pattern = [(d.dims, d.shape_range) for d in req.present]  # type: ignore[attr-defined]
    if from_disk:
        cache.stats.disk_hits += 1
    else:
        cache.stats.compiles += 1
        cache.stats.compile_ns += binary.compile_ns
    cache.insert(entry)
    cache.dynamic.setdefault(S.shapeless_key(req.op_type, req.present, req.outs, req.attr),
                             []).append(entry)
    return entry


def _fits(dims: tuple[int, ...], pattern: tuple[tuple[int, ...], tuple]) -> bool:
    want, ranges = pattern
    if want == (-2,):
        return True
    if len(dims) != len(want):
        return False
    for i, (d, w) in enumerate(zip(dims, want, strict=True)):
        if w >= 0:
            if d != w:
                return False
        elif i < len(ranges):
            lo, hi = ranges[i]
            if d < lo or (hi != -1 and d > hi):
                return False
    return True


def _dynamic_match(cache: DeviceOpCache, op: OpDef, req: Request, key: tuple) -> Entry | None:
    """An entry tiled now from a dynamic compile whose ranges hold these shapes."""
    if not cache.dynamic or any(d.dynamic for d in req.present):
        return None
    shapeless = S.shapeless_key(req.op_type, req.present, req.outs, req.attr)
    for base in cache.dynamic.get(shapeless, ()):
        if all(_fits(d.dims, p) for d, p in zip(req.present, base.pattern, strict=True)):
            ins = [S.spec(d) for d in req.present]
            hint = [S.spec(d) for d in req.outs if not d.dynamic]
            outs = S.outputs(op, ins, hint if len(hint) == len(req.outs) else [], base.attrs)
            tiling = compiler.retile(op, ins, outs, base.attrs)
            entry = Entry(key, op, ins, outs, base.attrs, base.loaded, tiling,
                          extra=(tuple(s.shape for s in (*ins, *outs)), *tiling.args()),
                          used=req.used)
            cache.stats.dynamic_tiles += 1
            cache.insert(entry)
            return entry
    return None


# execute ---------------------------------------------------------------------------------------
def find(req: Request, link: Any) -> Entry:
    """A compiled, loaded or dynamic match on the card, never compiling (100024 if none)."""
    cache = cache_for(link)
    key = S.full_key(req.op_type, req.present, req.outs, req.attr)
    with cache.lock:
        entry = _hit(cache, key)
        if entry is not None:
            return entry
        entry = models.load_static(cache, key)
        if entry is not None:
            return entry
        if models.STATIC_DYNAMIC and not any(d.dynamic for d in req.present):
            models.load_static_dynamic(cache, S.shapeless_key(req.op_type, req.present,
                                                              req.outs, req.attr))
        # an op type with no compiled model is a missing model (100024), as in CANN's
        # model map; only compiling needs the op's definition (100020 when it has none)
        try:
            op = registry.lookup(req.op_type)
        except errors.AclError:
            op = None
        entry = None if op is None else _dynamic_match(cache, op, req, key)
    if entry is None:
        raise T.fail(T.ACL_ERROR_OP_NOT_FOUND,
                     f"no compiled or loaded {req.op_type} matches these descriptors: "
                     "please make sure the op executed and the op compiled are matched "
                     "(op type, inputs and outputs number, format, data type, attr, "
                     "dim range)")
    return entry


def pointers(entry: Entry, in_bufs: Sequence[object], out_bufs: Sequence[object]) -> list:
    """The launch arguments: checked buffer addresses (inputs, outputs), then the entry's
    shapes and tiling if it carries its own (100000 for a dead or too small buffer)."""
    # handles are ints; any other object simply finds no buffer
    get: Callable[[object], D.DataBuffer | None] = D.BUFFERS.get  # type: ignore[assignment]
    ptrs: list[int] = []
    append = ptrs.append
    for i, need in entry.in_checks:
        buf = get(in_bufs[i])
        if buf is None or buf.size < need:
            _bad_buffer("input", i, buf, need)
        append(buf.addr)
    for j, need in enumerate(entry.out_sizes):
        buf = get(out_bufs[j])
        if buf is None or buf.size < need:
            _bad_buffer("output", j, buf, need)
        append(buf.addr)
    if entry.extra:
        ptrs += entry.extra
    return ptrs


def launch(entry: Entry, stream: Any, in_bufs: Sequence[object],
           out_bufs: Sequence[object]) -> None:
    """Queue the kernel on ``stream`` (async): check the buffers and post one frame."""
    _submit(entry, stream, pointers(entry, in_bufs, out_bufs))


def _submit(entry: Entry, stream: Any, args: list) -> None:
    if entry.empty:
        return  # every output is empty: nothing to run, as the real runtime does
    loaded = entry.loaded
    submit(stream, _LAUNCH, loaded.bin_id, loaded.binary.name, entry.tiling.block_dim, args)


def _bad_buffer(kind: str, i: int, buf: D.DataBuffer | None, need: int) -> NoReturn:
    if buf is None:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"{kind} {i}: not a live data buffer")
    raise T.fail(T.ACL_ERROR_INVALID_PARAM,
                 f"{kind} {i}: buffer of {buf.size} bytes, the tensor needs {need}")


FAST_MAX = 4096
"""Remembered (handles -> match, pointers) per card; the map is emptied when it is full."""


def execute(op_type: object, in_descs: Sequence[object], in_bufs: Sequence[object],
            out_descs: Sequence[object], out_bufs: Sequence[object], attr: object,
            stream_handle: object, *, compile: bool = False, remember: bool = True) -> None:
    """``aclopExecuteV2`` (``compile=False``: never compiles) or
    ``aclopCompileAndExecuteV2`` (``compile=True``). Async.

    The hit path: the tuple of (op type, descriptor, buffer and attr handles) maps to the
    match and its checked launch arguments, valid while ``desc.GENERATION`` (bumped by any
    change of a descriptor, attribute or buffer) is unchanged. ``remember=False`` keeps the
    call out of that map (for callers whose descriptors are temporary)."""
    stream = resolve(stream_handle, for_submit=True)
    cache = cache_for(stream.link)
    fast = None
    if remember:
        try:
            fast = (op_type, tuple(in_descs), tuple(in_bufs), tuple(out_descs),
                    tuple(out_bufs), attr)
            hit = cache.fast.get(fast)
        except TypeError:  # unhashable arguments: the slow path reports them
            fast = hit = None
        if hit is not None and hit[1] == _GEN[0] and hit[0].alive:
            entry = hit[0]
            cache.stats.hits += 1
            if not entry.static:
                try:  # noqa: SIM105  (cheaper than contextlib.suppress on the hot path)
                    cache.lru.move_to_end(entry.key)
                except KeyError:
                    pass
            _submit(entry, stream, hit[2])
            return
    if len(in_descs) != len(in_bufs) or len(out_descs) != len(out_bufs):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM,
                     f"{len(in_descs)} input descs / {len(in_bufs)} buffers, "
                     f"{len(out_descs)} output descs / {len(out_bufs)} buffers")
    req = request(op_type, in_descs, out_descs, attr)
    entry = compile_request(req, stream.link) if compile else find(req, stream.link)
    if len(out_bufs) != len(entry.out_sizes):
        raise T.fail(T.ACL_ERROR_OP_OUTPUT_NOT_MATCH, "output count differs from the op's")
    args = pointers(entry, in_bufs, out_bufs)
    dynamic_out = [d for d in req.outs if d.dynamic]
    if fast is not None and not dynamic_out:
        if len(cache.fast) >= FAST_MAX:
            cache.fast.clear()
        cache.fast[fast] = (entry, _GEN[0], args)
    _submit(entry, stream, args)
    if dynamic_out:
        _write_back_shapes(stream, req, entry)


def _write_back_shapes(stream: Any, req: Request, entry: Entry) -> None:
    """``aclopExecuteV2`` with dynamic (max-shape) output descriptors: synchronous, and the
    real output shapes are written back into them."""
    synchronize_stream(stream.handle)
    for d, spec in zip(req.outs, entry.outs, strict=True):
        d.dims = spec.shape
        d.changed()


# handles ---------------------------------------------------------------------------------------
@dataclass(eq=False)
class OpHandle:
    """An ``aclopHandle``: a request matched once; static shapes only."""

    req: Request
    key: tuple
    n_in: int
    n_out: int
    handle: int = 0


HANDLES: dict[int, OpHandle] = {}


def create_handle(op_type: object, in_descs: Sequence[object], out_descs: Sequence[object],
                  attr: object) -> OpHandle:
    """``aclopCreateHandle``: matches on the current device now (100024 if nothing is
    compiled or loaded for it)."""
    req = request(op_type, in_descs, out_descs, attr)
    if any(d.memtype != T.ACL_MEMTYPE_DEVICE for d in (*req.ins, *req.outs)):
        raise T.fail(T.ACL_ERROR_API_NOT_SUPPORT, "host-placement descriptors in a handle")
    entry = find(req, runtime.get().current_link())
    handle = OpHandle(req, entry.key, len(req.ins), len(req.outs))
    handle.handle = D._new_handle(HANDLES, handle)
    return handle


def handle_of(h: object) -> OpHandle:
    found = HANDLES.get(h) if type(h) is int else None
    if found is None:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"{h!r} is not a live op handle")
    return found


def exec_with_handle(h: object, in_bufs: Sequence[object], out_bufs: Sequence[object],
                     stream_handle: object) -> None:
    """``aclopExecWithHandle`` (async): 100021 / 100022 for wrong buffer counts."""
    handle = handle_of(h)
    if len(in_bufs) != handle.n_in:
        raise T.fail(T.ACL_ERROR_OP_INPUT_NOT_MATCH,
                     f"handle has {handle.n_in} inputs, {len(in_bufs)} buffers given")
    if len(out_bufs) != handle.n_out:
        raise T.fail(T.ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                     f"handle has {handle.n_out} outputs, {len(out_bufs)} buffers given")
    stream = resolve(stream_handle, for_submit=True)
    cache = cache_for(stream.link)
    entry = cache.get(handle.key)
    if entry is None:
        entry = find(handle.req, stream.link)
    launch(entry, stream, in_bufs, out_bufs)


def destroy_handle(h: object) -> None:
    HANDLES.pop(h, None)  # type: ignore[call-overload]
