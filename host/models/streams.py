"""Task order and stream assignment: independent branches run on their own streams.

The graph's nodes are already in a topological order; that order is the task order. A node
continues the stream of its first producer when that producer is the last task on its stream
(a chain stays on one stream); otherwise it takes an idle stream (one whose last task is among
its ancestors), or opens a new stream while fewer than ``max_streams`` exist, or else joins the
stream of its latest producer. Every edge between tasks on different streams becomes an
event: the producer's stream records it after the producer, the consumer's stream waits on it
before the consumer.

:func:`happens_before` gives, for every task, the set of tasks guaranteed complete before it
starts, from stream order plus events; the MemoryPlanner uses it so two tensors share memory
only when the hardware's ordering guarantees their lifetimes are disjoint.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from npuemu.host.models.graph import Graph


@dataclass
class Schedule:
    """Tasks (node indices) per stream and the events between streams."""

    stream_of: list[int]
    streams: list[list[int]]
    # (event id, producer task, consumer task): recorded after producer, waited before consumer
    events: list[tuple[int, int, int]] = field(default_factory=list)


def producers(graph: Graph) -> list[list[int]]:
    """For each task, the indices of the tasks producing its inputs (in input order)."""
    made_by = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs}
    return [[made_by[x] for x in n.inputs if x in made_by] for n in graph.nodes]


def assign_streams(graph: Graph, max_streams: int = 1) -> Schedule:
    """Spread the tasks over at most ``max_streams`` streams (see module doc)."""
    deps = producers(graph)
    ancestors: list[int] = []
    for preds in deps:
        acc = 0
        for p in preds:
            acc |= (1 << p) | ancestors[p]
        ancestors.append(acc)
    stream_of: list[int] = []
    streams: list[list[int]] = []
    for i, preds in enumerate(deps):
        s = _pick(preds, ancestors[i], stream_of, streams, max_streams)
        if s == len(streams):
            streams.append([])
        streams[s].append(i)
        stream_of.append(s)
    events: list[tuple[int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    for i, preds in enumerate(deps):
        for p in preds:
            if stream_of[p] != stream_of[i] and (p, stream_of[i]) not in seen:
                seen.add((p, stream_of[i]))
                events.append((len(events), p, i))
    return Schedule(stream_of, streams, events)


def _pick(preds: list[int], ancestors: int, stream_of: list[int], streams: list[list[int]],
          limit: int) -> int:
    """Continue the first producer's chain; else an idle stream (its last task is one of
    ours' ancestors, so joining it serializes nothing new); else a new one; else the latest
    producer's stream."""
    if preds and streams[stream_of[preds[0]]][-1] == preds[0]:
        return stream_of[preds[0]]
    for s, tasks in enumerate(streams):
        if (ancestors >> tasks[-1]) & 1:
            return s
    if len(streams) < limit or not streams:
        return len(streams)
    return stream_of[max(preds)] if preds else 0


def happens_before(graph: Graph, sched: Schedule) -> list[int]:
    """``before[i]``: bit mask of every task guaranteed complete when task ``i`` starts."""
    pred_edges: list[set[int]] = [set() for _ in graph.nodes]
    for tasks in sched.streams:
        for a, b in itertools.pairwise(tasks):
            pred_edges[b].add(a)
    for _, p, c in sched.events:
        pred_edges[c].add(p)
    # Same-stream data edges are implied by stream order, cross-stream ones by events (a data
    # edge whose event was deduplicated is covered by the earlier wait on the same stream).
    before: list[int] = []
    for i in range(len(graph.nodes)):  # node order is topological: preds are already done
        acc = 0
        for p in pred_edges[i]:
            acc |= (1 << p) | before[p]
        before.append(acc)
    return before
