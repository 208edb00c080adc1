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

import enum
from typing import Any, ClassVar

MAGIC_REGISTRY = 0x4E50_5545_5245_4731  # "NPUEREG1"
MAGIC_DEVICE = 0x4E50_5545_4445_5631  # "NPUEDEV1"
MAGIC_CLIENT = 0x4E50_5545_434C_4931  # "NPUECLI1"
PAGE = 4096
MAX_CLIENTS = 32


class Field:
    """A run of ``words`` words of a region, ``doc`` its meaning in the printed table.

    Written once, as a capitalised class attribute of a ``Layout`` subclass, in byte order:
    ``HEARTBEAT = Field(1, "...")``. The class then holds the field's word offset under that
    name, a plain ``int`` at run time (set by ``Layout.__init_subclass__``: a descriptor call
    on every ring access would cost); to a type checker the attribute is this descriptor,
    whose ``__get__`` gives that same ``int``. ``name`` is the lower-case name of the table.
    """

    __slots__ = ("doc", "name", "offset", "words")

    def __init__(self, words: int, doc: str) -> None:
        self.words = words
        self.doc = doc
        self.name = ""
        self.offset = -1

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> int:
        return self.offset


def pad(words: int) -> Field:
    return Field(words, "(padding to the next cache line)")


class Layout:
    """Named word offsets of one region; each region is a subclass, never instantiated.

    ``DEVICE_CTL.HEARTBEAT`` is the word index of field heartbeat; ``fields`` lists the fields
    in order, ``words`` and ``size`` are an entry's length (``stride=`` in the class line pads
    it to that many words) and ``table()`` is the markdown table printed by
    ``python -m npuemu.shared.layout``.
    """

    title: ClassVar[str] = ""
    fields: ClassVar[tuple[Field, ...]] = ()
    words: ClassVar[int] = 0
    size: ClassVar[int] = 0

    def __init_subclass__(cls, stride: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.title = cls.__name__
        cls.fields = tuple(v for v in vars(cls).values() if isinstance(v, Field))
        index = 0
        for f in cls.fields:
            if f.name != f.name.upper():
                raise ValueError(f"{cls.title}.{f.name}: a layout field is named in capitals")
            setattr(cls, f.name, index)
            f.name, f.offset = f.name.lower(), index
            index += f.words
        cls.words = stride or index
        if cls.words < index:
            raise ValueError(f"{cls.title}: fields need {index} words, stride is {stride}")
        cls.size = cls.words * 8

    @classmethod
    def table(cls) -> str:
        rows = [f"{cls.title} ({cls.size} bytes)", "| field | byte offset | size | meaning |",
                "|---|---|---|---|"]
        for f in cls.fields:
            rows.append(f"| {f.name} | {f.offset * 8} | {f.words * 8} | {f.doc} |")
        return "\n".join(rows)


class REGISTRY(Layout, stride=64):
    MAGIC = Field(1, "MAGIC_REGISTRY")
    VERSION = Field(1, "PROTOCOL_VERSION of the supervisor")
    STATE = Field(1, "NodeState")
    DEVICES = Field(1, "number of devices in the node")
    SUP_PID = Field(1, "supervisor pid")
    SUP_CTIME = Field(1, "supervisor create time, us since epoch")
    OWNER_PID = Field(1, "embedded node: the host pid that owns it; 0 for a shared node")
    HBM_BYTES = Field(1, "HBM arena size per device")
    DDR_BYTES = Field(1, "DDR arena size per device")
    SOC = Field(4, "SoC name, e.g. Ascend910B1")
    NODE = Field(4, "node name")
    STARTED_NS = Field(1, "monotonic time the node became ready")


REG_DEVICES = REGISTRY.words


class DEVICE_ENTRY(Layout, stride=8):
    STATE = Field(1, "DeviceState as the supervisor sees it")
    PID = Field(1, "worker pid (0 if not started)")
    CTIME = Field(1, "worker create time, us since epoch")
    STARTS = Field(1, "how many times a worker was started for this device")
    EXIT_STATUS = Field(1, "last worker exit: returncode + 1024 (signal n gives 1024 - n)")
    LOST_NS = Field(1, "monotonic time the supervisor saw the worker die")
    HCCS_GROUP = Field(1, "HCCS group of the card (shared/topology.py)")


REGISTRY_SIZE = 2 * PAGE  # header + MAX_DEVICES (64) entries


class DEVICE_CTL(Layout, stride=64):
    MAGIC = Field(1, "MAGIC_DEVICE")
    VERSION = Field(1, "PROTOCOL_VERSION of the worker")
    DEV = Field(1, "device id")
    STATE = Field(1, "DeviceState (worker; LOST written by the supervisor)")
    HEALTH = Field(1, "Health")
    PID = Field(1, "worker pid")
    CTIME = Field(1, "worker create time, us since epoch")
    HEARTBEAT = Field(1, "monotonic ns of the worker's last loop pass")
    SLEEPING = Field(1, "1 while the worker is (about to be) blocked on its doorbell; "
                     "the host that rings the doorbell clears it (one post per sleep)")
    HBM_FREE_BLOCKS = Field(1, "free blocks of the HBM heap (after every malloc/free)")
    HBM_LARGEST_FREE = Field(1, "largest HBM block a malloc could get (free pages joined); "
                             "1 - it / free = fragmentation")
    HBM_NORMAL_POOL = Field(1, "HBM bytes of the normal-page pool (2 MiB chunks holding "
                            "normal-page blocks; the rest is the huge-page pool, "
                            "device/memory/pools.py)")
    _PAD0 = pad(4)
    HBM_TOTAL = Field(1, "HBM arena bytes")
    HBM_USED = Field(1, "HBM bytes in live allocations (spans)")
    HBM_PEAK = Field(1, "HBM high-water mark")
    DDR_TOTAL = Field(1, "DDR arena bytes")
    DDR_USED = Field(1, "DDR bytes in live allocations")
    DDR_PEAK = Field(1, "DDR high-water mark")
    USED_NORMAL = Field(1, "bytes in normal-page allocations (both arenas)")
    USED_HUGE = Field(1, "bytes in 2 MiB-page allocations")
    USED_HUGE1G = Field(1, "bytes in 1 GiB-page allocations")
    USED_P2P = Field(1, "bytes allocated with a *_P2P policy")
    LIVE_ALLOCS = Field(1, "number of live allocations")
    COMMITTED = Field(1, "arena bytes backed by real pages (posix_fallocate)")
    REQUESTS = Field(1, "frames served")
    CLIENTS = Field(1, "attached host clients")
    BAD_FRAMES = Field(1, "malformed frames dropped")
    BOOT_NS = Field(1, "monotonic ns the worker started (device timestamps count from here)")
    BUSY_DMA = Field(1, "ns the DMA engine spent on tasks")
    BUSY_AICORE = Field(1, "ns the AI Core engine spent on tasks")
    BUSY_AIVECTOR = Field(1, "ns the AI Vector engine spent on tasks")
    BUSY_AICPU = Field(1, "ns the AI CPU engine spent on tasks")
    TASKS = Field(1, "stream tasks completed")
    ECC_SBE = Field(1, "HBM single-bit (corrected) ECC errors since the last clear")
    ECC_DBE = Field(1, "HBM multi-bit (uncorrectable) ECC errors since the last clear")
    ECC_SBE_TOTAL = Field(1, "single-bit ECC errors ever (aggregate)")
    ECC_DBE_TOTAL = Field(1, "multi-bit ECC errors ever (aggregate)")
    POISONED = Field(1, "entries used in the POISON table (isolated pages)")
    FAULTS = Field(1, "faults injected so far")
    LAST_ERROR = Field(1, "ACL code of the last device-side failure (npu-smi Error Code)")
    LOG_LEVEL = Field(1, "device log level 0..4 (tools may write it: msnpureport config)")
    EVENT_ENABLE = Field(1, "1: EVENT log lines are written (tools may write it)")
    LINK_FAULTS = Field(1, "bit n set: the link to card n is faulty (injected)")
    LOOP_WORK_CPU_NS = Field(1, "CPU ns the worker's loop thread spent on passes that did "
                                "work (frames, task starts, completions); its share of the "
                                "thread's CPU by the passes' wall time (device/loopcpu.py)")
    LOOP_IDLE_CPU_NS = Field(1, "CPU ns the worker's loop thread spent awake otherwise (its "
                                "bounded spin before it sleeps, housekeeping)")
    PROCESS_CPU_NS = Field(1, "CPU ns of the whole worker process (loop and engine threads)")


CTL_CLIENTS = DEVICE_CTL.words


class CLIENT_ENTRY(Layout, stride=8):
    STATE = Field(1, "ClientState (see its docstring for who writes which value)")
    PID = Field(1, "host pid")
    CTIME = Field(1, "host create time, us since epoch")
    USED = Field(1, "bytes this client has allocated on the device")
    PEAK = Field(1, "high-water mark of used")
    ALLOCS = Field(1, "live allocations of this client")


CTL_LINKS = CTL_CLIENTS + MAX_CLIENTS * CLIENT_ENTRY.words


class LINK_ENTRY(Layout):
    TX_BYTES = Field(1, "bytes this card's DMA engine copied to peer card <index>")
    TX_COPIES = Field(1, "copies to that peer")
    RX_BYTES = Field(1, "bytes this card's DMA engine copied from that peer")
    RX_COPIES = Field(1, "copies from that peer")


CTL_POISON = CTL_LINKS + 64 * LINK_ENTRY.words
MAX_POISON = 64


class POISON_ENTRY(Layout):
    START = Field(1, "device pointer of the first byte of an isolated (poisoned) page")
    LENGTH = Field(1, "bytes isolated")


CTL_MODULE_LEVELS = CTL_POISON + MAX_POISON * POISON_ENTRY.words
"""One word per module of ``logring.MODULES``: its log level, or 0xFF to follow log_level."""
DEVICE_CTL_SIZE = 2 * PAGE  # header, clients, links, poison table, module levels


class CLIENT_HEADER(Layout, stride=32):
    MAGIC = Field(1, "MAGIC_CLIENT")
    VERSION = Field(1, "PROTOCOL_VERSION of the host")
    PID = Field(1, "host pid")
    SLOT = Field(1, "client slot index")
    SUB_BYTES = Field(1, "submission ring region size")
    CPL_BYTES = Field(1, "completion ring region size")
    REP_BYTES = Field(1, "report ring region size")
    TABLES = Field(1, "byte offset of the stream table (the event table follows it)")
    HOST_SLEEPING = Field(1, "1 while a host thread waits for a reply on .wake")
    _PAD0 = pad(7)
    SYNC_WAITERS = Field(1, "host threads sleeping on .sync (stream/event synchronize)")
    _PAD1 = pad(7)


CLIENT_SUB_OFFSET = PAGE
MAX_STREAMS = 1024
"""Streams per client (host process) and device: the size of its stream table."""
MAX_EVENTS = 8192
"""Events per client and device: the size of its event table."""


class STREAM_ENTRY(Layout):
    COMPLETED = Field(1, "sequence number of the stream's last completed task")
    ERR_COUNT = Field(1, "failures so far (the host reports each new one once)")
    ERR_CODE = Field(1, "ACL code of the latest failure")
    ERR_TASK = Field(1, "sequence number of the task that failed")
    HUNG = Field(1, "1 while the head task hangs (an injected fault) until an abort")
    ETA_NS = Field(1, "CLOCK_MONOTONIC ns at which the running task should end, from the card's "
                      "last run of the same work (0: no estimate); a synchronize wakes "
                      "shortly before it and polls")


class EVENT_ENTRY(Layout):
    DONE_GEN = Field(1, "generation of the last record that completed (0: none)")
    TIMESTAMP = Field(1, "device ns since worker boot when that record completed")
    ERROR = Field(1, "failure code carried by that record (work before it failed)")
    _PAD0 = pad(1)




def client_regions(sub: int, cpl: int, rep: int) -> tuple[int, int, int, int, int]:
    """Byte offsets in a client segment: sub ring, cpl ring, report ring, stream table,
    event table; plus the total size is ``event table + MAX_EVENTS * EVENT_ENTRY.size``."""
    sub_off = CLIENT_SUB_OFFSET
    streams = sub_off + sub + cpl + rep
    return sub_off, sub_off + sub, sub_off + sub + cpl, streams, \
        streams + MAX_STREAMS * STREAM_ENTRY.size


def client_size(sub: int, cpl: int, rep: int) -> int:
    return client_regions(sub, cpl, rep)[4] + MAX_EVENTS * EVENT_ENTRY.size


class RING_HEADER(Layout, stride=24):
    HEAD = Field(1, "bytes ever published by the producer")
    _PAD0 = pad(7)
    TAIL = Field(1, "bytes ever consumed by the consumer")
    _PAD1 = pad(7)
    CAPACITY = Field(1, "data bytes (a power of two)")




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


class COMM_HEADER(Layout, stride=8):
    MAGIC = Field(1, "MAGIC_COMM (written last by the creator)")
    VERSION = Field(1, "PROTOCOL_VERSION of the creator")
    MAX_RANKS = Field(1, "COMM_MAX_RANKS")
    WAKE = Field(1, "futex word (low 32 bits) of the ranks asleep in a sync of all ranks: "
                    "the rank that arrives last writes the step and wakes them (any worker)")


COMM_RANKS = COMM_HEADER.words


class COMM_RANK(Layout):
    STATE = Field(1, "CommRankState, written by the rank's host")
    N_RANKS = Field(1, "rank count this rank was initialised with (all must agree)")
    DEV = Field(1, "the rank's card (node device id)")
    PID = Field(1, "host pid of the rank")
    ERROR = Field(1, "HcclResult of the rank's first failed collective (its worker)")
    GROUP = Field(1, "HCCS group of the rank's card (the hierarchical algorithm)")
    PROGRESS = Field(1, "step at the arrival of its running collective << 24 | pieces of "
                        "it the rank's card finished (monotonic; the one worker-written "
                        "word of this line)")
    _PAD0 = pad(1)
    STEP = Field(1, "phases of collectives this rank's card has completed (monotonic)")
    SEND = Field(1, "device pointer of the rank's input of the running collective")
    RECV = Field(1, "device pointer of the rank's output of the running collective")
    DESC = Field(2, "kind | dtype << 8 | op << 16 | algo << 24 | root << 32 of its collective "
                    "number 2k (word 0) or 2k+1 (word 1): a rank one call ahead writes the other")
    COUNT = Field(2, "element count of that collective (the same two words)")
    WAITING = Field(1, "2 * step it sleeps for (+1: on its ring neighbours only); 1: "
                       "asleep on a peer's PROGRESS or pair word; 0 awake")




class CommRankState(enum.IntEnum):
    FREE = 0
    JOINED = 1  # the rank's host wrote its entry and created its semaphore
    LEFT = 2  # comm_destroy, or the join gave up
    ATTACHED = 3  # and its card attached the segment (init returns once all are)


def comm_small_offset(rank: int, parity: int) -> int:
    """Byte offset of rank's small-message slot ``parity`` (0/1) in a communicator segment."""
    return (COMM_RANKS + COMM_MAX_RANKS * COMM_RANK.words) * 8 + \
        (2 * rank + parity) * COMM_SMALL_BYTES


class COMM_PAIR(Layout):
    SENT = Field(1, "sends of rank to peer published (monotonic; HcclSend)")
    PTR = Field(1, "device pointer of the newest send to peer")
    COUNT = Field(1, "its element count")
    DTYPE = Field(1, "its dtype (index in the card's dtype list)")
    TAKEN = Field(1, "sends of peer to rank that rank's recv completed (HcclRecv)")
    STATUS = Field(1, "0, or the HcclResult of rank's newest recv from peer (E_PARA)")
    V_DISPL = Field(1, "all_to_allv: sdispls[peer] of rank (elements)")
    V_SEND = Field(1, "all_to_allv: send_counts[peer] of rank")
    V_RECV = Field(1, "all_to_allv: recv_counts[peer] of rank")
    _PAD0 = pad(7)




def comm_pair(rank: int, peer: int) -> int:
    """Word index of the COMM_PAIR entry (rank, peer) in a communicator segment."""
    return comm_small_offset(COMM_MAX_RANKS, 0) // 8 + \
        (rank * COMM_MAX_RANKS + peer) * COMM_PAIR.words


COMM_SIZE = comm_pair(COMM_MAX_RANKS, 0) * 8


class PAGE_TABLE(Layout):
    """Header of an arena's far page table (``/npuemu.<node>.d<id>.<arena>.pages``)."""

    GENERATION = Field(1, "bumped by the card after it set entries (shared/pages.py)")
    PAGES = Field(1, "n = far pages of the arena (far_size / 2 MiB); then n words: the "
                     "physical page (file offset / 2 MiB) shown at far page i, or -1")

ALL: tuple[type[Layout], ...] = (
    REGISTRY, DEVICE_ENTRY, DEVICE_CTL, CLIENT_ENTRY, LINK_ENTRY, POISON_ENTRY, CLIENT_HEADER,
    RING_HEADER, STREAM_ENTRY, EVENT_ENTRY, COMM_HEADER, COMM_RANK, COMM_PAIR, PAGE_TABLE)

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
