"""The rank-table JSON of ``HcclCommInitClusterInfo`` (CANN_OPS_MODELS_REFERENCE §5.4).

All values are strings; ``status`` must be ``completed``; ``server_id`` is unique and at most
64 characters; ``rank_id`` values are 0..N-1 and unique; ``device_id`` is the card.
``device_ip`` and ``device_port`` are read but not used (one host). A file that cannot be
opened is ``HCCL_E_OPEN_FILE_FAILURE``; any other flaw is ``HCCL_E_PARA``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from npuemu.host.hccl.types import HcclError, HcclResult


@dataclass(frozen=True)
class RankTable:
    servers: int
    devices: dict[int, int]  # rank id -> device id
    server_of: dict[int, str]  # rank id -> server id
    digest: str


def _bad(detail: str) -> HcclError:
    return HcclError(HcclResult.HCCL_E_PARA, f"rank table: {detail}")


def _number(entry: dict, key: str, where: str) -> int:
    value = entry.get(key)
    if not isinstance(value, str) or not value.isdigit():
        raise _bad(f"{where}: {key} must be a string of digits, got {value!r}")
    return int(value)


def parse(text: str) -> RankTable:
    """Validate a rank table given as JSON text."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise _bad(f"not JSON: {err}") from err
    if not isinstance(doc, dict) or doc.get("status") != "completed":
        raise _bad("status must be \"completed\"")
    servers = doc.get("server_list")
    if not isinstance(servers, list) or not servers:
        raise _bad("server_list must be a non-empty list")
    devices: dict[int, int] = {}
    server_of: dict[int, str] = {}
    for server in servers:
        sid = server.get("server_id") if isinstance(server, dict) else None
        if not isinstance(sid, str) or not sid or len(sid) > 64 or sid in server_of.values():
            raise _bad(f"server_id {sid!r} must be a unique string of 1..64 characters")
        for dev in server.get("device") or []:
            if not isinstance(dev, dict):
                raise _bad(f"server {sid}: device entries must be objects")
            rank = _number(dev, "rank_id", f"server {sid}")
            if rank in devices:
                raise _bad(f"rank_id {rank} appears twice")
            devices[rank] = _number(dev, "device_id", f"server {sid}")
            server_of[rank] = sid
    if sorted(devices) != list(range(len(devices))):
        raise _bad(f"rank ids {sorted(devices)} must be 0..{len(devices) - 1}")
    count = doc.get("server_count")
    if count is not None and count != str(len(servers)):
        raise _bad(f"server_count {count!r} but {len(servers)} servers listed")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return RankTable(len(servers), devices, server_of, digest)


def load(path: str) -> RankTable:
    """Read and validate the rank table at ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, TypeError, UnicodeDecodeError) as err:
        raise HcclError(HcclResult.HCCL_E_OPEN_FILE_FAILURE,
                        f"cannot read rank table {path!r}: {err}") from err
    return parse(text)
