"""Fuzzing host of ``tests/integration/test_frame_fuzz.py``: hypothesis-made frames of every
op of ``shared/protocol.py``'s ``Op`` (but ``INJECT``, the fault-injection op, which by
design can kill the card or hang every later task) pushed raw into this host's own
submission ring of card 0 of the node ``NPUEMU_NODE``.

Each frame starts from the op's shape (its argument list with values near the real ones:
this host's buffer, streams, binary, model, a communicator segment of this card, reserved
addresses) and is then mutated one way: ``shaped`` (as drawn), ``wrong_type`` (one argument
of another type), ``huge`` (one argument a huge or negative integer), ``truncated`` (the
last arguments dropped), ``extra`` (one argument too many) or ``counts`` (a list argument,
or a new one, of thousands of elements). Undecodable bytes, cut frames and large frames are
mixed in. ``EXAMPLES`` sets hypothesis's example count. Prints ``RESULT <json>``: frames
sent, how many of each op and mutation, the worker's bad-frame count, its threads and RSS
before and after, and whether the card still serves this host.
"""

import json
import os
import sys

import psutil
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402

from npuemu.host.core import kernel as core_kernel  # noqa: E402
from npuemu.host.core import runtime  # noqa: E402
from npuemu.host.core import stream as core_stream  # noqa: E402
from npuemu.host.driver.commseg import CommSegment  # noqa: E402
from npuemu.shared import address, errors, layout, protocol, shm  # noqa: E402
from npuemu.shared.protocol import Op  # noqa: E402

R: dict = {}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "touch_kernel.py")) as _f:
    KERNELS = _f.read()
"""The text of ``touch_kernel.py`` (its one kernel, ``touch``)."""
MUTATIONS = ("shaped", "wrong_type", "huge", "truncated", "extra", "counts")
HUGE = (2**64 - 1, 2**63, 2**63 - 1, -1, -2**63, 2**32, 10**19)
EMPTY_STEP = [0, 0, "", 0, [], [], [], []]


def ok(ret, what=""):
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret}")


def call(lk, op, *args):
    try:
        return lk.call(op, *args)
    except errors.AclError as err:
        raise SystemExit(f"setup {op.name} failed: {err.code}") from None


class Card:
    """What the shapes draw near-real values from."""

    def __init__(self) -> None:
        ok(acl.init(), "init")
        ok(acl.rt.set_device(0), "set_device")
        self.link = lk = runtime.get().current_link()
        self.streams = [acl.rt.create_stream()[0] for _ in range(2)]
        self.slots = [core_stream.resolve(s).slot for s in self.streams]
        self.p, ret = acl.rt.malloc(1 << 16, 0)
        ok(ret, "malloc")
        self.bin = core_kernel.binary_load_from_data(KERNELS).bin_id
        self.mid = call(lk, Op.MODEL_LOAD, 0, 1, 0,
                        [[0, self.bin, "touch", 1, [0], [[0, 0, 0]], [], []]])[0]
        self.seg = CommSegment.create(lk.node)
        self.seg.join(0, 1, 0, 0)
        self.cid = call(lk, Op.COMM_ATTACH, self.seg.name, 0)[0]
        self.key = call(lk, Op.IPC_EXPORT, self.p)[0]
        self.va = address.VIRT_BASE + (1 << 42)


def strategies(card: Card) -> dict:
    """The argument shape of every op: a tuple of strategies, one per argument."""
    p = card.p
    u64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**31, 2**64 - 1]))
    small = st.one_of(st.integers(0, 70000), st.sampled_from([0, 1, 2, 7, 65535, 65536]))
    ptrs = st.sampled_from([p, p + 4096, p + (1 << 16) - 1, p + (1 << 16), 0, 1, 2**63,
                            card.va, address.VIRT_BASE])
    sizes = st.one_of(st.integers(0, 1 << 20),
                      st.sampled_from([4096, 1 << 16, 2 << 20, 1 << 30, 2**63, 2**64 - 1]))
    mallocs = st.one_of(st.integers(0, 4096), st.sampled_from([2**63, 2**64 - 1, 1 << 40]))
    slots = st.one_of(st.sampled_from(card.slots), st.integers(0, 2048))
    text = st.text(max_size=16)
    names = st.one_of(st.sampled_from(["touch", "", "nope"]), text)
    bins = st.one_of(st.sampled_from([card.bin, 0, 2**64 - 1]), small)
    mids = st.one_of(st.sampled_from([card.mid, 0, 2**64 - 1]), small)
    prefix = shm.name(card.link.node, "hccl") + "."
    segs = st.one_of(st.sampled_from([card.seg.name, prefix + "nothing", "", prefix[:-1],
                                      prefix + "../../etc", "/etc/passwd"]), text)
    vas = st.sampled_from([card.va, card.va + (2 << 20), address.VIRT_BASE, 0,
                           address.VIRT_END - 4096, 2**64 - 4096])
    args = st.lists(st.one_of(ptrs, small, text, st.floats(), st.booleans()), max_size=5)
    addrs = st.lists(ptrs, max_size=4)
    events = st.lists(st.integers(0, 70000), max_size=4)
    step = st.builds(lambda *a: list(a), st.integers(0, 70), bins, names,
                     st.sampled_from([0, 1, 64, 65, 65535, 65536]), args,
                     st.lists(st.lists(small, min_size=3, max_size=3), max_size=3),
                     events, events)
    steps = st.one_of(st.lists(step, max_size=6),
                      st.integers(0, 5000).map(lambda n: [EMPTY_STEP] * n))
    counts = st.lists(small, max_size=260)
    kinds = st.sampled_from(["all_reduce", "broadcast", "send", "recv", "barrier",
                             "all_to_allv", "nope"])
    return {
        Op.PING: (), Op.MALLOC: (mallocs, st.integers(0, 16)), Op.FREE: (ptrs,),
        Op.MEM_INFO: (st.integers(0, 8),), Op.COPY: (ptrs, ptrs, sizes),
        Op.MEMSET: (ptrs, small, sizes), Op.SNAPSHOT: (),
        Op.STREAM_CREATE: (slots, st.integers(0, 8), u64), Op.STREAM_DESTROY: (slots,),
        Op.STREAM_MODE: (slots, st.integers(0, 3)), Op.STREAM_ABORT: (slots,),
        Op.PIN: (u64, sizes, segs), Op.UNPIN: (u64,),
        Op.BINARY_LOAD: (st.sampled_from([KERNELS, "x = (", ""]), text),
        Op.BINARY_UNLOAD: (bins,), Op.CALLBACK_DONE: (slots, u64), Op.SET_TIMEOUT: (u64,),
        Op.OP_LOAD: (st.one_of(st.binary(max_size=64), text), text), Op.OP_UNLOAD: (bins, ptrs),
        Op.MEM_POOLS: (), Op.IPC_EXPORT: (ptrs,),
        Op.IPC_SET_PID: (st.one_of(st.just(card.key), u64), u64),
        Op.IPC_IMPORT: (st.one_of(st.just(card.key), u64),), Op.IPC_CLOSE: (ptrs,),
        Op.MEM_MERGE: (), Op.MODEL_LOAD: (mids, st.integers(0, 4), st.integers(0, 4), steps),
        Op.MODEL_UNLOAD: (mids,), Op.COMM_ATTACH: (segs, st.one_of(small, u64)),
        Op.VMM_MAP: (vas, sizes, sizes, ptrs, sizes), Op.VMM_UNMAP: (vas, sizes),
        # stream tasks: the fields after [op, submit, stream slot, task seq]
        Op.COPY_ASYNC: (ptrs, ptrs, sizes), Op.MEMSET_ASYNC: (ptrs, small, sizes),
        Op.RECORD: (small, u64), Op.RESET_EVENT: (small,),
        Op.WAIT_EVENT: (small, u64, st.sampled_from([1, 5, 2**32])),
        Op.LAUNCH: (bins, names, st.sampled_from([1, 2, 65535, 65536, 0]), args),
        Op.CALLBACK: (u64, st.sampled_from([0, 1])),
        Op.MODEL_EXECUTE: (mids, addrs, addrs),
        Op.COLLECTIVE: (st.one_of(st.just(card.cid), small), kinds,
                        st.sampled_from(["mesh", "ring", "x"]),
                        st.sampled_from(["float32", "int8", "bfloat16", "x"]),
                        st.sampled_from(["sum", "max", "x"]), small, sizes, ptrs, ptrs,
                        st.sampled_from([0, 10, 1000, 2**32]), counts),
        Op.DVPP: (st.sampled_from(["jpegd", "pngd", "jpege", "vpc", "vdec", "venc", "x"]),
                  addrs, st.lists(st.one_of(small, sizes, ptrs), max_size=16)),
    }


PACKABLE = st.integers(-2**63, 2**64 - 1)
"""Integers msgpack can carry."""
OTHER_TYPES = st.one_of(st.text(max_size=8), st.floats(), st.none(), st.booleans(),
                        st.binary(max_size=16), st.lists(PACKABLE, max_size=3),
                        st.dictionaries(st.text(max_size=3), PACKABLE, max_size=2))


@st.composite
def mutated(draw, shapes, card, op, kind):
    """``(mutation, frame)``: a frame of ``op`` built from its shape and mutated by
    ``kind`` (``extra`` for an op without arguments asked for a mutation of one)."""
    args = [draw(s) for s in shapes[op]]
    if kind in ("wrong_type", "huge", "truncated") and not args:
        kind = "extra"
    if kind == "wrong_type":
        args[draw(st.integers(0, len(args) - 1))] = draw(OTHER_TYPES)
    elif kind == "huge":
        args[draw(st.integers(0, len(args) - 1))] = draw(st.sampled_from(HUGE))
    elif kind == "truncated":
        args = args[:draw(st.integers(0, len(args) - 1))]
    elif kind == "extra":
        args.append(draw(st.one_of(st.integers(0, 9), OTHER_TYPES)))
    elif kind == "counts":
        lists = [i for i, a in enumerate(args) if isinstance(a, list)]
        n = draw(st.sampled_from([300, 5000, 20000]))
        at = draw(st.sampled_from(lists)) if lists else draw(st.integers(0, len(args)))
        long = [draw(st.integers(0, 2**64 - 1))] * n
        args[at:at + bool(lists)] = [long]
    if op >= Op.COPY_ASYNC:
        frame = [op, 0, draw(st.sampled_from(card.slots)), draw(st.integers(1, 2**40)), *args]
    else:
        frame = [op, draw(st.one_of(st.just(0), st.integers(2**40, 2**64 - 1))), *args]
    return kind, frame


def main() -> None:
    card = Card()
    lk = card.link
    worker = psutil.Process(int(lk.ctl[layout.DEVICE_CTL.PID]))
    threads0, rss0 = worker.num_threads(), worker.memory_info().rss
    before = int(lk.ctl[layout.DEVICE_CTL.BAD_FRAMES])
    shapes = strategies(card)
    coverage = {op.name: dict.fromkeys(MUTATIONS, 0) for op in shapes}
    raw = st.one_of(st.binary(max_size=64),
                    st.builds(lambda n, op: protocol.pack([op, 0, card.slots[0], 7, os.urandom(n)]),
                              st.integers(64 << 10, 200 << 10), st.sampled_from(sorted(shapes))))
    count = [0]
    combos = [(op, kind) for op in sorted(shapes) for kind in MUTATIONS]

    def push(payload: bytes) -> None:
        with lk.lock:
            lk._push(payload)
        count[0] += 1

    @settings(max_examples=int(os.environ["EXAMPLES"]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data(), st.integers(1, 10), st.lists(raw, max_size=2), st.integers(0, 64))
    def fuzz(data, n, junk, cut):
        for _ in range(n):
            op, kind = data.draw(st.sampled_from(combos))
            kind, frame = data.draw(mutated(shapes, card, op, kind))
            push(protocol.pack(frame))
            coverage[op.name][kind] += 1
        for payload in junk:
            push(payload)
        if cut:  # a frame cut short
            push(protocol.pack(frame)[:cut])
        while lk.cpl.pop() is not None:  # replies to frames that carried a seq
            pass

    fuzz()
    for op in sorted(shapes):  # then every op with every mutation, a few frames each
        sweep(shapes, card, op, push, coverage[op.name])
    R["frames"] = count[0]
    R["coverage"] = coverage
    R["bad_frames"] = int(lk.ctl[layout.DEVICE_CTL.BAD_FRAMES]) - before
    R["ping"] = bool(lk.call(Op.PING))
    R["serves"] = serves()
    R["same_worker"] = int(lk.ctl[layout.DEVICE_CTL.PID]) == worker.pid
    R["threads"] = [threads0, worker.num_threads()]
    R["rss_mib"] = [rss0 >> 20, worker.memory_info().rss >> 20]
    card.seg.close()


def sweep(shapes: dict, card: Card, op: Op, push, counts: dict) -> None:
    """Up to two examples of ``op``, each a frame of every mutation (counted in ``counts``):
    one hypothesis run per op, not per op and mutation (its set-up is most of the cost)."""
    @settings(max_examples=2, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.tuples(*(mutated(shapes, card, op, kind) for kind in MUTATIONS)))
    def two(drawn):
        for done, frame in drawn:
            counts[done] += 1
            push(protocol.pack(frame))
            while card.link.cpl.pop() is not None:
                pass

    two()


def serves() -> bool:
    """The card still answers this host: a malloc, copies and a stream task."""
    p, ret = acl.rt.malloc(4096, 0)
    ok(ret, "malloc")
    data = b"ok" * 2048
    ok(acl.rt.memcpy(p, 4096, acl.util.bytes_to_ptr(data), 4096, 1), "H2D")
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    ok(acl.rt.memset_async(p, 4096, 7, 16, s), "memset_async")
    ret = acl.rt.synchronize_stream_with_timeout(s, 10000)
    out = bytearray(32)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), 32, p, 32, 2), "D2H")
    return ret == 0 and bytes(out) == bytes([7]) * 16 + b"ok" * 8


if __name__ == "__main__":
    main()
    print("RESULT " + json.dumps(R), flush=True)
    sys.stdout.flush()
