"""Turn order of a card's streams: the fair-sharing structure of the scheduler.

A card serves several host processes (clients), each with its streams. ``Rotation`` holds
the streams that have queued tasks and hands out turns so that equal loads get equal
shares: the clients take turns, and within one client its streams take turns; a stream
served in a turn goes to the back of its client's order, and that client to the back of
the clients' order. What a turn does (how many of the stream's head tasks it starts) is
the scheduler's business (``scheduler.py``: at most ``QUANTUM`` a turn); the order of
tasks within one stream is never touched here, since only a stream's head task is ever
started.

A stream is added when a task is queued on it (adding it again keeps its place) and leaves
when its queue is found empty or it is destroyed; a client leaves with its last stream.

Threading model: the worker's loop thread only (no lock).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

S = TypeVar("S")


class Rotation(Generic[S]):
    """Streams with queued work, grouped by client, in turn order (dicts keep insertion
    order; a served entry is moved to the end)."""

    __slots__ = ("_clients",)

    def __init__(self) -> None:
        self._clients: dict[Hashable, dict[Hashable, S]] = {}

    def __bool__(self) -> bool:
        """Some stream has queued work."""
        return bool(self._clients)

    def __len__(self) -> int:
        """How many streams have a place."""
        return sum(len(streams) for streams in self._clients.values())

    def add(self, client: Hashable, key: Hashable, stream: S) -> None:
        """``stream`` (``key`` within ``client``) has queued work; a stream already in the
        rotation keeps its place."""
        streams = self._clients.get(client)
        if streams is None:
            self._clients[client] = {key: stream}
        elif key not in streams:
            streams[key] = stream

    def remove(self, client: Hashable, key: Hashable) -> None:
        """The stream has nothing queued (or is gone): it leaves, and its client goes to
        the back of the clients' order (or leaves too, with its last stream)."""
        streams = self._clients.pop(client, None)
        if streams is not None:
            streams.pop(key, None)
            if streams:
                self._clients[client] = streams

    def drop_client(self, client: Hashable) -> None:
        """Forget every stream of ``client`` (it detached)."""
        self._clients.pop(client, None)

    def clients(self) -> list[Hashable]:
        """The clients with queued work, in turn order (a copy: turns may reorder)."""
        return list(self._clients)

    def streams(self, client: Hashable) -> list[S]:
        """``client``'s streams with queued work, in turn order (a copy)."""
        streams = self._clients.get(client)
        return list(streams.values()) if streams is not None else []

    def served(self, client: Hashable, key: Hashable) -> None:
        """``key`` of ``client`` had its turn: both go to the back of their orders."""
        streams = self._clients.pop(client, None)
        if streams is None:
            return
        self._clients[client] = streams
        stream = streams.pop(key, None)
        if stream is not None:
            streams[key] = stream
        elif not streams:
            del self._clients[client]
