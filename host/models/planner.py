"""MemoryPlanner (reuse by lifetime, as CANN plans a model at load): one workspace block,
every intermediate at an offset in it.

Each intermediate tensor and each op workspace is a *block* with a producer task and a set
of user tasks (its consumers; a workspace's only user is its own task). Block ``A`` is
*before* block ``B`` when every user of ``A`` is guaranteed complete when ``B``'s producer
starts — on one stream by the stream's order, across streams by the events
(:func:`~.streams.happens_before`). Two blocks may share memory only if one is before the
other; every other pair *conflicts* and must not overlap.

Offsets come from greedy placement: blocks in some order, each at the lowest offset that
overlaps no conflicting block placed so far. Two starting orders are tried (decreasing size;
task order), each refined by "peak first": the blocks that reach the top of a plan move to
the front of the order and the placement is redone (:data:`REFINE_ROUNDS` times); the
smallest plan wins. The report gives the naive size (sum of all blocks), the planned
size, the lower bound (the largest total of bytes live at one step of the task order) and the
saving against naive. Block sizes are rounded up to :data:`ALIGN` (the AI Core's 64-byte
access granule) and every figure uses the rounded sizes.

A ``Reshape`` from an intermediate to an intermediate moves no data: its output is an
*alias* of its input's block (:func:`aliases`; chains resolve to the first block), whose
users include the alias's users, so the block lives until the last of them. The model
runtime gives such a Reshape no kernel (an empty step: its events still order the streams),
as CANN's graph engine turns a Reshape into no task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from npuemu.host.models.graph import Graph, Node
from npuemu.host.models.streams import Schedule, happens_before, producers

ALIGN = 64


def align(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to


@dataclass
class Block:
    """One planned piece of workspace: a tensor or ``<task>::workspace``."""

    name: str
    size: int
    producer: int
    users: list[int]
    offset: int = -1


@dataclass
class MemoryPlan:
    """Offsets of every block in one workspace region, and the figures the report shows."""

    blocks: dict[str, Block]
    size: int
    naive: int
    lower_bound: int
    conflicts: list[tuple[str, str]] = field(default_factory=list, repr=False)
    aliases: dict[str, str] = field(default_factory=dict)
    """Reshape outputs -> the block they share (see module doc)."""

    @property
    def savings(self) -> float:
        """Saving against the naive sum, in percent."""
        return 100.0 * (1 - self.size / self.naive) if self.naive else 0.0

    def report(self) -> dict:
        return {"naive_bytes": self.naive, "planned_bytes": self.size,
                "lower_bound_bytes": self.lower_bound, "savings_pct": round(self.savings, 2),
                "vs_lower_bound": round(self.size / self.lower_bound, 4)
                if self.lower_bound else 1.0}


def aliases(graph: Graph) -> dict[str, str]:
    """Each Reshape output that shares its input's block -> that block's tensor: a
    one-input Reshape from an intermediate to an intermediate of the same byte size."""
    out: dict[str, str] = {}
    for n in graph.nodes:
        if n.op != "Reshape" or len([x for x in n.inputs if x]) != 1 or len(n.outputs) != 1:
            continue
        src, dst = graph.tensors[n.inputs[0]], graph.tensors[n.outputs[0]]
        if src.kind == dst.kind == "intermediate" and src.nbytes == dst.nbytes:
            out[dst.name] = out.get(src.name, src.name)
    return out


def collect_blocks(graph: Graph,
                   workspace: Callable[[Node], int] | None = None) -> list[Block]:
    """Blocks of ``graph``: its intermediates (not the Reshape aliases: their users count
    as users of the block they share), then one per task with a workspace need."""
    made_by = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs}
    alias = aliases(graph)
    users: dict[str, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        for x in n.inputs:
            users.setdefault(alias.get(x, x), []).append(i)
    blocks = []
    for name in graph.intermediates():
        if name in alias:
            continue
        p = made_by[name]
        blocks.append(Block(name, align(graph.tensors[name].nbytes), p, users.get(name, [p])))
    for i, n in enumerate(graph.nodes):
        need = workspace(n) if workspace else 0
        if need:
            blocks.append(Block(f"{n.name}::workspace", align(need), i, [i]))
    return blocks


def plan(graph: Graph, sched: Schedule,
         workspace: Callable[[Node], int] | None = None) -> MemoryPlan:
    """Plan the workspace of ``graph`` under the ordering of ``sched`` (see module doc)."""
    blocks = collect_blocks(graph, workspace)
    before = happens_before(graph, sched)
    conflicts = _conflicts(blocks, before)
    best = _search(blocks, conflicts)
    size, offsets = best if best else (0, [])
    for b, off in zip(blocks, offsets, strict=True):
        b.offset = off
    pairs = [(blocks[i].name, blocks[j].name) for i, cs in enumerate(conflicts) for j in cs
             if i < j]
    return MemoryPlan({b.name: b for b in blocks}, size, sum(b.size for b in blocks),
                      lower_bound(graph, blocks), pairs, aliases(graph))


def _conflicts(blocks: list[Block], before: list[int]) -> list[list[int]]:
    umask = [sum(1 << u for u in set(b.users) | {b.producer}) for b in blocks]
    out: list[list[int]] = [[] for _ in blocks]
    for i, a in enumerate(blocks):
        for j in range(i + 1, len(blocks)):
            b = blocks[j]
            a_first = umask[i] & ~before[b.producer] == 0
            b_first = umask[j] & ~before[a.producer] == 0
            if not (a_first or b_first):
                out[i].append(j)
                out[j].append(i)
    return out


REFINE_ROUNDS = 30
_ORDERS: tuple[Callable[[Block], tuple], ...] = (
    lambda b: (-b.size, b.producer),
    lambda b: (b.producer, -b.size),
)


def _search(blocks: list[Block], conflicts: list[list[int]]) -> tuple[int, list[int]] | None:
    """The smallest plan over the starting orders and their peak-first refinements."""
    best = None
    for key in _ORDERS:
        order = sorted(range(len(blocks)), key=lambda i: key(blocks[i]))
        for _ in range(REFINE_ROUNDS):
            offsets = _place(blocks, conflicts, order)
            size = max((offsets[i] + b.size for i, b in enumerate(blocks)), default=0)
            if best is None or size < best[0]:
                best = (size, offsets)
            peak = [i for i in order if offsets[i] + blocks[i].size == size]
            if peak == order[:len(peak)]:
                break  # already first: refining again changes nothing
            rest = set(peak)
            order = peak + [i for i in order if i not in rest]
    return best


def _place(blocks: list[Block], conflicts: list[list[int]], order: list[int]) -> list[int]:
    offsets = [-1] * len(blocks)
    for i in order:
        size = blocks[i].size
        busy = sorted((offsets[j], offsets[j] + blocks[j].size) for j in conflicts[i]
                      if offsets[j] >= 0 and blocks[j].size)
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
    return offsets


def lower_bound(graph: Graph, blocks: list[Block]) -> int:
    """The largest total of block bytes live at one step of the task order."""
    delta = [0] * (len(graph.nodes) + 1)
    for b in blocks:
        delta[b.producer] += b.size
        delta[max(b.users) + 1] -= b.size
    live = peak = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def verify(plan_: MemoryPlan, graph: Graph, sched: Schedule) -> None:
    """Raise AssertionError if two blocks that may be live at once overlap in memory.

    Independent of :func:`plan`'s bit masks: it recomputes the ordering from explicit sets.
    """
    deps = producers(graph)
    done_before: list[set[int]] = []
    position = {t: (s, k) for s, tasks in enumerate(sched.streams) for k, t in enumerate(tasks)}
    waits: dict[int, list[int]] = {}
    for _, p, c in sched.events:
        waits.setdefault(c, []).append(p)
    for i in range(len(graph.nodes)):
        s, k = position[i]
        acc: set[int] = set()
        if k:
            prev = sched.streams[s][k - 1]
            acc |= {prev} | done_before[prev]
        for p in waits.get(i, []):
            acc |= {p} | done_before[p]
        assert all(p in acc for p in deps[i]), f"task {i} may start before its inputs exist"
        done_before.append(acc)
    readers: dict[str, set[int]] = {}
    for i, n in enumerate(graph.nodes):
        for x in n.inputs:
            root = x
            while root in plan_.aliases:
                root = plan_.aliases[root]
            readers.setdefault(root, set()).add(i)
    for name, alias_of in plan_.aliases.items():
        assert alias_of in plan_.blocks and name not in plan_.blocks, f"alias {name} -> {alias_of}"
        assert plan_.blocks[alias_of].size >= graph.tensors[name].nbytes, f"alias {name} too big"
    blocks = list(plan_.blocks.values())
    for a in blocks:
        assert readers.get(a.name, set()) <= set(a.users), f"{a.name} lives too short"
    for i, a in enumerate(blocks):
        assert a.offset >= 0 and a.offset % ALIGN == 0 and a.offset + a.size <= plan_.size
        for b in blocks[i + 1:]:
            ordered = (set(a.users) | {a.producer}) <= done_before[b.producer] or \
                      (set(b.users) | {b.producer}) <= done_before[a.producer]
            overlap = a.offset < b.offset + b.size and b.offset < a.offset + a.size
            assert ordered or not overlap or not (a.size and b.size), \
                f"{a.name} and {b.name} may be live at once and overlap"
