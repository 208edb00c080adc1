"""The rank-table JSON of ``HcclCommInitClusterInfo`` (the format of HCCL's rank table file).

    {"status": "completed", "version": "1.0", "server_count": "2",
     "server_list": [{"server_id": "node_0",
                      "device": [{"device_id": "0", "device_ip": "192.168.1.8",
                                  "device_port": "16667", "rank_id": "0"}, ...]},
                     {"server_id": "node_1", "device": [... "rank_id": "2" ...]}]}

Checks (every flaw is ``HCCL_E_PARA``; a file that cannot be opened or read as UTF-8 is
``HCCL_E_OPEN_FILE_FAILURE``):

| field | rule |
|---|---|
| (all values) | strings |
| ``status`` | ``"completed"`` (``"initializing"`` means not usable yet) |
| ``version`` | ``"1.0"``, or ``"1.2"`` read the same way (see below); absent = 1.0 |
| ``server_count`` | optional; if given, the number of ``server_list`` entries |
| ``server_id`` | 1..64 characters, unique |
| ``device`` | a non-empty list per server |
| ``device_id`` | digits; unique within its server |
| ``rank_id`` | digits; unique over the table; together 0..N-1 |
| ``device_ip`` | an IP address; **required when there are several servers**, optional on one |
| ``device_port`` | optional; 1..65535 |

Our choices (HCCL's documentation does not say): an absent ``version`` is taken as 1.0 and
any version other than 1.0/1.2 is refused; a 1.2 table's super-pod fields
(``super_pod_list``, ``super_device_id``, ...) are ignored (A3 super-pods are not
modelled), only its ``server_list`` is.

**Servers and nodes.** Server *i* (in ``server_list`` order) is emulated by a node: with one
server every rank is a card of this process's node; with several, each rank is a host
process under MPI (``mpiexec -n N``, MPI rank = HCCL rank) whose process has its own node,
and ``device_id`` is the card of that node the rank drives. ``locate(rank)`` resolves a
rank to its server and card.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import dataclass
from typing import Literal, overload

from npuemu.host.hccl.types import HcclError, HcclResult

VERSIONS = ("1.0", "1.2")


@dataclass(frozen=True)
class RankEntry:
    """One ``device`` entry: a rank and where it runs."""

    rank: int
    server_id: str
    server_index: int  # position of its server in server_list: the node it runs on
    device_id: int
    device_ip: str | None
    device_port: int | None


@dataclass(frozen=True)
class RankTable:
    version: str
    server_ids: tuple[str, ...]
    entries: tuple[RankEntry, ...]  # indexed by rank id
    digest: str

    @property
    def servers(self) -> int:
        return len(self.server_ids)

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def devices(self) -> dict[int, int]:
        """rank id -> device id."""
        return {e.rank: e.device_id for e in self.entries}

    @property
    def server_of(self) -> dict[int, str]:
        """rank id -> server id."""
        return {e.rank: e.server_id for e in self.entries}

    def locate(self, rank: object) -> RankEntry:
        """The entry of ``rank`` (E_PARA if the table has no such rank)."""
        if type(rank) is not int or not 0 <= rank < len(self.entries):
            raise _bad(f"rank {rank!r} is not in the rank table (0..{len(self.entries) - 1})")
        return self.entries[rank]

    def ranks_of(self, server_id: str) -> list[int]:
        """The ranks of one server, in rank order."""
        return [e.rank for e in self.entries if e.server_id == server_id]

    def local_rank(self, rank: int) -> int:
        """Position of ``rank`` among its server's ranks."""
        return self.ranks_of(self.locate(rank).server_id).index(rank)


def _bad(detail: str) -> HcclError:
    return HcclError(HcclResult.HCCL_E_PARA, f"rank table: {detail}")


def _string(entry: dict, key: str, where: str, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _bad(f"{where}: {key} must be a string, got {value!r}")
    return value


@overload
def _number(entry: dict, key: str, where: str, required: Literal[True] = ...) -> int: ...
@overload
def _number(entry: dict, key: str, where: str, required: bool) -> int | None: ...
def _number(entry: dict, key: str, where: str, required: bool = True) -> int | None:
    value = _string(entry, key, where, required)
    if value is None:
        return None
    if not value.isdigit() or not value.isascii():
        raise _bad(f"{where}: {key} must be a string of digits, got {value!r}")
    return int(value)


def _header(doc: object) -> tuple[str, list]:
    if not isinstance(doc, dict):
        raise _bad("the document must be a JSON object")
    if doc.get("status") != "completed":
        raise _bad(f"status must be \"completed\", got {doc.get('status')!r}")
    version = doc.get("version", "1.0")
    if version not in VERSIONS:
        raise _bad(f"version {version!r} is not one of {VERSIONS}")
    servers = doc.get("server_list")
    if not isinstance(servers, list) or not servers:
        raise _bad("server_list must be a non-empty list")
    count = _number(doc, "server_count", "table", required=False)
    if count is not None and count != len(servers):
        raise _bad(f"server_count {count} but {len(servers)} servers listed")
    return version, servers


def _device(dev: object, sid: str, index: int, many: bool) -> RankEntry:
    where = f"server {sid}"
    if not isinstance(dev, dict):
        raise _bad(f"{where}: device entries must be objects")
    rank = _number(dev, "rank_id", where)
    device_id = _number(dev, "device_id", where)
    ip = _string(dev, "device_ip", where, required=many)
    if ip is not None:
        try:
            ipaddress.ip_address(ip)
        except ValueError as err:
            raise _bad(f"{where}: device_ip {ip!r} is not an IP address") from err
    port = _number(dev, "device_port", where, required=False)
    if port is not None and not 1 <= port <= 65535:
        raise _bad(f"{where}: device_port {port} not in 1..65535")
    return RankEntry(rank, sid, index, device_id, ip, port)


def parse(text: str) -> RankTable:
    """Validate a rank table given as JSON text (E_PARA with the first flaw found)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise _bad(f"not JSON: {err}") from err
    version, servers = _header(doc)
    many = len(servers) > 1
    by_rank: dict[int, RankEntry] = {}
    ids: list[str] = []
    for index, server in enumerate(servers):
        sid = server.get("server_id") if isinstance(server, dict) else None
        if not isinstance(sid, str) or not sid or len(sid) > 64 or sid in ids:
            raise _bad(f"server_id {sid!r} must be a unique string of 1..64 characters")
        ids.append(sid)
        devices = server.get("device")
        if not isinstance(devices, list) or not devices:
            raise _bad(f"server {sid}: device must be a non-empty list")
        seen: set[int] = set()
        for dev in devices:
            entry = _device(dev, sid, index, many)
            if entry.device_id in seen:
                raise _bad(f"server {sid}: device_id {entry.device_id} appears twice")
            if entry.rank in by_rank:
                raise _bad(f"rank_id {entry.rank} appears twice")
            seen.add(entry.device_id)
            by_rank[entry.rank] = entry
    if sorted(by_rank) != list(range(len(by_rank))):
        raise _bad(f"rank ids {sorted(by_rank)} must be 0..{len(by_rank) - 1}")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return RankTable(version, tuple(ids), tuple(by_rank[r] for r in range(len(by_rank))),
                     digest)


def load(path: str) -> RankTable:
    """Read and validate the rank table at ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, TypeError, ValueError) as err:
        raise HcclError(HcclResult.HCCL_E_OPEN_FILE_FAILURE,
                        f"cannot read rank table {path!r}: {err}") from err
    return parse(text)
