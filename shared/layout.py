"""Byte layout of every shared-memory region, written down once.

All header fields are little-endian unsigned 64-bit words, read and written through a
``memoryview.cast("Q")`` of the region (one aligned 8-byte store each, which x86-64 keeps in
program order: see ``ring.py`` for the ordering argument). Fields that two processes write
sit on separate 64-byte cache lines. Times are ``time.monotonic_ns()`` (heartbeats) or
microseconds since the epoch (process create times, as psutil reports them). Strings are
NUL-padded UTF-8 in whole words.

``python -m npuemu.shared.layout`` prints the tables below from the definitions themselves.

Registry ``/npuemu.<node>.reg`` (written by the supervisor, read by everyone):
  REGISTRY header, then ``MAX_DEVICES`` entries of DEVICE_ENTRY at word ``REG_DEVICES``.
Device control ``/npuemu.<node>.d<id>.ctl`` (written by the worker; ``state``/``client.state``
  also by the supervisor and the host as noted):
  DEVICE_CTL, then ``MAX_CLIENTS`` entries of CLIENT_ENTRY at word ``CTL_CLIENTS``, then one
  LINK_ENTRY per possible peer card (P2P traffic counters) at word ``CTL_LINKS``, the
  POISON table (``MAX_POISON`` x POISON_ENTRY, pages isolated by multi-bit ECC errors, which
  the host also checks before its own copies) at ``CTL_POISON``, and the per-module log
  levels at ``CTL_MODULE_LEVELS``.
Client segment ``/npuemu.<node>.d<id>.c<slot>`` (created by the host):
  CLIENT_HEADER (one page), then the submission ring (host -> device), the completion ring
  (replies), the report ring (exceptions and host callbacks, device -> host), the stream table
  (MAX_STREAMS x STREAM_ENTRY) and the event table (MAX_EVENTS x EVENT_ENTRY); offsets from
  ``client_regions``. Each ring region starts with RING_HEADER followed by its data bytes.
  The tables are written by the worker only and read by the host without a round trip.

Communicator segment ``/npuemu.<node>.hccl.<token>`` (created ``O_EXCL`` 0600 by the host
  process that makes the communicator: ``comm_init_all``, or ``get_root_info`` on the root;
  opened by the other ranks' host processes and attached by their workers, ``COMM_ATTACH``):
  COMM_HEADER, then ``COMM_MAX_RANKS`` entries of COMM_RANK at word ``COMM_RANKS``, then one
  ``COMM_SMALL_BYTES`` slot pair per rank at byte ``comm_small_offset(rank, parity)`` (small
  all_reduce inputs, double-buffered by the parity of the collective's number), then
  ``COMM_MAX_RANKS`` x ``COMM_MAX_RANKS`` entries of COMM_PAIR at word ``comm_pair(rank,
  peer)`` (what rank says to peer: its sends and all_to_allv counts; what it took of peer's
  sends). A rank's
  first line is written by its host at join; its second line only by its card's worker
  while it runs collectives (``device/exec/collective.py``), as are its pair entries; each
  rank has a semaphore (``shm.comm_semaphore``: under its host's pid; created and unlinked
  by that host, or by the supervisor when the process goes) that peers post after they
  advance ``step``.

Segment and semaphore names: see ``npuemu.shared.shm``.
"""

from __future__ import annotations

import dataclasses
import enum

MAGIC_REGISTRY = 0x4E50_5545_5245_4731  # "NPUEREG1"
MAGIC_DEVICE = 0x4E50_5545_4445_5631  # "NPUEDEV1"
MAGIC_CLIENT = 0x4E50_5545_434C_4931  # "NPUECLI1"
PAGE = 4096
MAX_CLIENTS = 32


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    words: int
    doc: str


class Layout:
    """Named word offsets of one region: ``layout.NAME`` is the word index of field NAME."""

    def __init__(self, title: str, fields: list[Field], stride: int | None = None) -> None:
        self.title = title
        self.fields = fields
        index = 0
        for f in fields:
            setattr(self, f.name.upper(), index)
            index += f.words
        self.words = stride or index
        if self.words < index:
            raise ValueError(f"{title}: fields need {index} words, stride is {stride}")
        self.size = self.words * 8

    def table(self) -> str:
        rows = [f"{self.title} ({self.size} bytes)", "| field | byte offset | size | meaning |",
                "|---|---|---|---|"]
        for f in self.fields:
            offset = getattr(self, f.name.upper()) * 8
            rows.append(f"| {f.name} | {offset} | {f.words * 8} | {f.doc} |")
        return "\n".join(rows)


def _pad(name: str, words: int) -> Field:
    return Field(name, words, "(padding to the next cache line)")


REGISTRY = Layout("REGISTRY", [
    Field("magic", 1, "MAGIC_REGISTRY"),
    Field("version", 1, "PROTOCOL_VERSION of the supervisor"),
    Field("state", 1, "NodeState"),
    Field("devices", 1, "number of devices in the node"),
    Field("sup_pid", 1, "supervisor pid"),
    Field("sup_ctime", 1, "supervisor create time, us since epoch"),
    Field("owner_pid", 1, "embedded node: the host pid that owns it; 0 for a shared node"),
    Field("hbm_bytes", 1, "HBM arena size per device"),
    Field("ddr_bytes", 1, "DDR arena size per device"),
    Field("soc", 4, "SoC name, e.g. Ascend910B1"),
    Field("node", 4, "node name"),
    Field("started_ns", 1, "monotonic time the node became ready"),
], stride=64)
REG_DEVICES = REGISTRY.words

DEVICE_ENTRY = Layout("DEVICE_ENTRY", [
    Field("state", 1, "DeviceState as the supervisor sees it"),
    Field("pid", 1, "worker pid (0 if not started)"),
    Field("ctime", 1, "worker create time, us since epoch"),
    Field("starts", 1, "how many times a worker was started for this device"),
    Field("exit_status", 1, "last worker exit: returncode + 1024 (signal n gives 1024 - n)"),
    Field("lost_ns", 1, "monotonic time the supervisor saw the worker die"),
    Field("hccs_group", 1, "HCCS group of the card (shared/topology.py)"),
], stride=8)
REGISTRY_SIZE = 2 * PAGE  # header + MAX_DEVICES (64) entries

DEVICE_CTL = Layout("DEVICE_CTL", [
    Field("magic", 1, "MAGIC_DEVICE"),
    Field("version", 1, "PROTOCOL_VERSION of the worker"),
    Field("dev", 1, "device id"),
    Field("state", 1, "DeviceState (worker; LOST written by the supervisor)"),
    Field("health", 1, "Health"),
    Field("pid", 1, "worker pid"),
    Field("ctime", 1, "worker create time, us since epoch"),
    Field("heartbeat", 1, "monotonic ns of the worker's last loop pass"),
    Field("sleeping", 1, "1 while the worker is (about to be) blocked on its doorbell; "
          "the host that rings the doorbell clears it (one post per sleep)"),
    Field("hbm_free_blocks", 1, "free blocks of the HBM heap (after every malloc/free)"),
    Field("hbm_largest_free", 1, "largest HBM block a malloc could get (free pages joined); "
          "1 - it / free = fragmentation"),
    Field("hbm_normal_pool", 1, "HBM bytes of the normal-page pool (2 MiB chunks holding "
          "normal-page blocks; the rest is the huge-page pool, device/memory/pools.py)"),
    _pad("_pad0", 4),
    Field("hbm_total", 1, "HBM arena bytes"),
    Field("hbm_used", 1, "HBM bytes in live allocations (spans)"),
    Field("hbm_peak", 1, "HBM high-water mark"),
    Field("ddr_total", 1, "DDR arena bytes"),
    Field("ddr_used", 1, "DDR bytes in live allocations"),
    Field("ddr_peak", 1, "DDR high-water mark"),
    Field("used_normal", 1, "bytes in normal-page allocations (both arenas)"),
    Field("used_huge", 1, "bytes in 2 MiB-page allocations"),
    Field("used_huge1g", 1, "bytes in 1 GiB-page allocations"),
    Field("used_p2p", 1, "bytes allocated with a *_P2P policy"),
    Field("live_allocs", 1, "number of live allocations"),
    Field("committed", 1, "arena bytes backed by real pages (posix_fallocate)"),
    Field("requests", 1, "frames served"),
    Field("clients", 1, "attached host clients"),
    Field("bad_frames", 1, "malformed frames dropped"),
    Field("boot_ns", 1, "monotonic ns the worker started (device timestamps count from here)"),
    Field("busy_dma", 1, "ns the DMA engine spent on tasks"),
    Field("busy_aicore", 1, "ns the AI Core engine spent on tasks"),
    Field("busy_aivector", 1, "ns the AI Vector engine spent on tasks"),
    Field("busy_aicpu", 1, "ns the AI CPU engine spent on tasks"),
    Field("tasks", 1, "stream tasks completed"),
    Field("ecc_sbe", 1, "HBM single-bit (corrected) ECC errors since the last clear"),
    Field("ecc_dbe", 1, "HBM multi-bit (uncorrectable) ECC errors since the last clear"),
    Field("ecc_sbe_total", 1, "single-bit ECC errors ever (aggregate)"),
    Field("ecc_dbe_total", 1, "multi-bit ECC errors ever (aggregate)"),
    Field("poisoned", 1, "entries used in the POISON table (isolated pages)"),
    Field("faults", 1, "faults injected so far"),
    Field("last_error", 1, "ACL code of the last device-side failure (npu-smi Error Code)"),
    Field("log_level", 1, "device log level 0..4 (tools may write it: msnpureport config)"),
    Field("event_enable", 1, "1: EVENT log lines are written (tools may write it)"),
    Field("link_faults", 1, "bit n set: the link to card n is faulty (injected)"),
], stride=64)
CTL_CLIENTS = DEVICE_CTL.words

CLIENT_ENTRY = Layout("CLIENT_ENTRY", [
    Field("state", 1, "ClientState (see its docstring for who writes which value)"),
    Field("pid", 1, "host pid"),
    Field("ctime", 1, "host create time, us since epoch"),
    Field("used", 1, "bytes this client has allocated on the device"),
    Field("peak", 1, "high-water mark of used"),
    Field("allocs", 1, "live allocations of this client"),
], stride=8)
CTL_LINKS = CTL_CLIENTS + MAX_CLIENTS * CLIENT_ENTRY.words

LINK_ENTRY = Layout("LINK_ENTRY", [
    Field("tx_bytes", 1, "bytes this card's DMA engine copied to peer card <index>"),
    Field("tx_copies", 1, "copies to that peer"),
    Field("rx_bytes", 1, "bytes this card's DMA engine copied from that peer"),
    Field("rx_copies", 1, "copies from that peer"),
])
CTL_POISON = CTL_LINKS + 64 * LINK_ENTRY.words
MAX_POISON = 64
POISON_ENTRY = Layout("POISON_ENTRY", [
    Field("start", 1, "device pointer of the first byte of an isolated (poisoned) page"),
    Field("length", 1, "bytes isolated"),
])
CTL_MODULE_LEVELS = CTL_POISON + MAX_POISON * POISON_ENTRY.words
"""One word per module of ``logring.MODULES``: its log level, or 0xFF to follow log_level."""
DEVICE_CTL_SIZE = 2 * PAGE  # header, clients, links, poison table, module levels

CLIENT_HEADER = Layout("CLIENT_HEADER", [
    Field("magic", 1, "MAGIC_CLIENT"),
    Field("version", 1, "PROTOCOL_VERSION of the host"),
    Field("pid", 1, "host pid"),
    Field("slot", 1, "client slot index"),
    Field("sub_bytes", 1, "submission ring region size"),
    Field("cpl_bytes", 1, "completion ring region size"),
    Field("rep_bytes", 1, "report ring region size"),
    Field("tables", 1, "byte offset of the stream table (the event table follows it)"),
    Field("host_sleeping", 1, "1 while a host thread waits for a reply on .wake"),
    _pad("_pad0", 7),
    Field("sync_waiters", 1, "host threads sleeping on .sync (stream/event synchronize)"),
    _pad("_pad1", 7),
], stride=32)
CLIENT_SUB_OFFSET = PAGE
MAX_STREAMS = 1024
"""Streams per client (host process) and device: the size of its stream table."""
MAX_EVENTS = 8192
"""Events per client and device: the size of its event table."""

STREAM_ENTRY = Layout("STREAM_ENTRY", [
    Field("completed", 1, "sequence number of the stream's last completed task"),
    Field("err_count", 1, "failures so far (the host reports each new one once)"),
    Field("err_code", 1, "ACL code of the latest failure"),
    Field("err_task", 1, "sequence number of the task that failed"),
    Field("hung", 1, "1 while the head task hangs (an injected fault) until an abort"),
])

EVENT_ENTRY = Layout("EVENT_ENTRY", [
    Field("done_gen", 1, "generation of the last record that completed (0: none)"),
    Field("timestamp", 1, "device ns since worker boot when that record completed"),
    Field("error", 1, "failure code carried by that record (work before it failed)"),
    _pad("_pad0", 1),
])


def client_regions(sub: int, cpl: int, rep: int) -> tuple[int, int, int, int, int]:
    """Byte offsets in a client segment: sub ring, cpl ring, report ring, stream table,
    event table; plus the total size is ``event table + MAX_EVENTS * EVENT_ENTRY.size``."""
    sub_off = CLIENT_SUB_OFFSET
    streams = sub_off + sub + cpl + rep
    return sub_off, sub_off + sub, sub_off + sub + cpl, streams, \
        streams + MAX_STREAMS * STREAM_ENTRY.size


def client_size(sub: int, cpl: int, rep: int) -> int:
    return client_regions(sub, cpl, rep)[4] + MAX_EVENTS * EVENT_ENTRY.size


RING_HEADER = Layout("RING_HEADER", [
    Field("head", 1, "bytes ever published by the producer"),
    _pad("_pad0", 7),
    Field("tail", 1, "bytes ever consumed by the consumer"),
    _pad("_pad1", 7),
    Field("capacity", 1, "data bytes (a power of two)"),
], stride=24)


class NodeState(enum.IntEnum):
    STARTING = 0
    READY = 1
    STOPPING = 2


class DeviceState(enum.IntEnum):
    ABSENT = 0  # worker not started yet (lazy start)
    BOOTING = 1
    READY = 2
    STOPPING = 3
    STOPPED = 4
    LOST = 5  # worker died; written by the supervisor
    HUNG = 6  # registry only: heartbeat older than DEVICE_LOST_TIMEOUT_S (supervisor)


class ClientState(enum.IntEnum):
    """Client slot life: FREE -supervisor-> RESERVED -host-> REQUEST -worker-> ACTIVE;
    ACTIVE -host detach or supervisor on host death-> CLOSING -worker reclaims-> FREE."""

    FREE = 0
    RESERVED = 1
    REQUEST = 2
    ACTIVE = 3
    CLOSING = 4
    REJECTED = 5


class Health(enum.IntEnum):
    """npu-smi health levels."""

    OK = 0
    WARNING = 1
    ALARM = 2
    CRITICAL = 3


def pack_str(text: str, words: int) -> list[int]:
    raw = text.encode()[: words * 8].ljust(words * 8, b"\0")
    return [int.from_bytes(raw[i : i + 8], "little") for i in range(0, len(raw), 8)]


def unpack_str(values: list[int] | memoryview) -> str:
    raw = b"".join(int(v).to_bytes(8, "little") for v in values)
    return raw.rstrip(b"\0").decode(errors="replace")


def encode_exit(returncode: int) -> int:
    return returncode + 1024


def decode_exit(value: int) -> int | None:
    return None if value == 0 else value - 1024


MAGIC_COMM = 0x4E50_5545_4343_4C31  # "NPUECCL1"
COMM_MAX_RANKS = 64
"""Ranks of one node in one communicator (a node has at most 64 cards)."""
COMM_SMALL_BYTES = 4096
"""An all_reduce of at most this many bytes runs one-shot through the segment's slots."""

COMM_HEADER = Layout("COMM_HEADER", [
    Field("magic", 1, "MAGIC_COMM (written last by the creator)"),
    Field("version", 1, "PROTOCOL_VERSION of the creator"),
    Field("max_ranks", 1, "COMM_MAX_RANKS"),
], stride=8)
COMM_RANKS = COMM_HEADER.words

COMM_RANK = Layout("COMM_RANK", [
    Field("state", 1, "CommRankState, written by the rank's host"),
    Field("n_ranks", 1, "rank count this rank was initialised with (all must agree)"),
    Field("dev", 1, "the rank's card (node device id)"),
    Field("pid", 1, "host pid of the rank"),
    Field("error", 1, "HcclResult of the rank's first failed collective (its worker)"),
    Field("group", 1, "HCCS group of the rank's card (the hierarchical algorithm)"),
    _pad("_pad0", 2),
    Field("step", 1, "phases of collectives this rank's card has completed (monotonic)"),
    Field("send", 1, "device pointer of the rank's input of the running collective"),
    Field("recv", 1, "device pointer of the rank's output of the running collective"),
    Field("desc", 2, "kind | dtype << 8 | op << 16 | algo << 24 | root << 32 of its collective "
                     "number 2k (word 0) or 2k+1 (word 1): a rank one call ahead writes the other"),
    Field("count", 2, "element count of that collective (the same two words)"),
    Field("waiting", 1, "2 * step it sleeps for (+1: on its ring neighbours only); 0 awake"),
])


class CommRankState(enum.IntEnum):
    FREE = 0
    JOINED = 1  # the rank's host wrote its entry and created its semaphore
    LEFT = 2  # comm_destroy, or the join gave up
    ATTACHED = 3  # and its card attached the segment (init returns once all are)


def comm_small_offset(rank: int, parity: int) -> int:
    """Byte offset of rank's small-message slot ``parity`` (0/1) in a communicator segment."""
    return (COMM_RANKS + COMM_MAX_RANKS * COMM_RANK.words) * 8 + \
        (2 * rank + parity) * COMM_SMALL_BYTES


COMM_PAIR = Layout("COMM_PAIR", [
    Field("sent", 1, "sends of rank to peer published (monotonic; HcclSend)"),
    Field("ptr", 1, "device pointer of the newest send to peer"),
    Field("count", 1, "its element count"),
    Field("dtype", 1, "its dtype (index in the card's dtype list)"),
    Field("taken", 1, "sends of peer to rank that rank's recv completed (HcclRecv)"),
    Field("status", 1, "0, or the HcclResult of rank's newest recv from peer (E_PARA)"),
    Field("v_displ", 1, "all_to_allv: sdispls[peer] of rank (elements)"),
    Field("v_send", 1, "all_to_allv: send_counts[peer] of rank"),
    Field("v_recv", 1, "all_to_allv: recv_counts[peer] of rank"),
    _pad("_pad0", 7),
])


def comm_pair(rank: int, peer: int) -> int:
    """Word index of the COMM_PAIR entry (rank, peer) in a communicator segment."""
    return comm_small_offset(COMM_MAX_RANKS, 0) // 8 + \
        (rank * COMM_MAX_RANKS + peer) * COMM_PAIR.words


COMM_SIZE = comm_pair(COMM_MAX_RANKS, 0) * 8


PAGE_TABLE = Layout("PAGE_TABLE", [
    Field("generation", 1, "bumped by the card after it set entries (shared/pages.py)"),
    Field("pages", 1, "n = far pages of the arena (far_size / 2 MiB); then n words: the "
                      "physical page (file offset / 2 MiB) shown at far page i, or -1"),
])
"""Header of an arena's far page table (``/npuemu.<node>.d<id>.<arena>.pages``)."""

ALL = (REGISTRY, DEVICE_ENTRY, DEVICE_CTL, CLIENT_ENTRY, LINK_ENTRY, POISON_ENTRY,
       CLIENT_HEADER, RING_HEADER, STREAM_ENTRY, EVENT_ENTRY, COMM_HEADER, COMM_RANK, COMM_PAIR,
       PAGE_TABLE)

if __name__ == "__main__":
    print("\n\n".join(layout.table() for layout in ALL))


def poisoned_overlap(ctl: memoryview, ptr: int, count: int) -> int:
    """The isolated page start overlapping ``[ptr, ptr+count)``, or 0 (reads the POISON
    table of a device control block)."""
    for i in range(ctl[DEVICE_CTL.POISONED]):
        base = CTL_POISON + i * POISON_ENTRY.words
        start = ctl[base + POISON_ENTRY.START]
        if start < ptr + count and ptr < start + ctl[base + POISON_ENTRY.LENGTH]:
            return start
    return 0
