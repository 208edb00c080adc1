"""``npuemu smi``: npu-smi for an emulated node, read straight from its shared memory.

Read-only (maps the registry and the device control blocks, never talks to a worker),
except ``smi set -t clear-ecc-info``, which injects ``clear_ecc`` into the card (as the real
command asks the driver to clear its counters).

    $ npuemu smi info

+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.rc3                 Version: 24.1.rc3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B1               | Alarm         | 97.8        36                0    / 0             |
| 0                         | 0000:C1:00.0  | 3           0    / 256        3074 / 65536         |
+===========================+===============+====================================================+
| 1     910B1               | UNKNOWN       | -           -                 -                    |
| 0                         | 0000:C2:00.0  | -           -                 -                    |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU ID                    | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 0                         | 4301          | python3.11               | 2                       |
+===========================+===============+====================================================+
| No running processes found in NPU 1                                                            |
+===========================+===============+====================================================+

    $ npuemu smi info -t ecc -i 0
            NPU ID                                   : 0
            HBM Single Bit Error Count               : 0
            HBM Double Bit Error Count               : 1
            ...
    $ npuemu smi set -t clear-ecc-info -i 0
            Status                         : OK
            Message                        : Set chip clear-ecc-info successfully

Power and temperature are not measured (an emulated card has no sensors): they are derived
from the card's AICore(%) (u, 0..100, below) by a stated linear model of a 910B card, the
same for every SoC profile::

    Power(W)             = 90.0 + (350.0 - 90.0) * u / 100     (idle 90 W, 350 W at full load)
    Temp(C)              = 35 + (70 - 35) * u / 100            (rounded to whole degrees)
    HBM Temperature(C)   = Temp(C) + 2

So an idle card shows 90.0 W and 35 C, and a card that has been busy half its uptime 220.0 W
and 52 C. A card whose worker is not running shows ``-``. What else is invented (a card has
a PCIe address; an emulated one has none): the version line is :data:`DRIVER_VERSION` (the
driver release whose layout these tables follow; npuemu has no driver, scripts parse a
driver version there), clock speeds and manufacturer id are fixed (the 910B's), Bus-Ids
follow an 8-card Atlas 800T A2 server (``0000:C1:00.0``, ``0000:C2:00.0``, ``0000:81:00.0``
...), serial numbers are derived from the node name. The other numbers are real: Health,
usage (MB = MiB, rounded up; the firmware's share counts as used, as on a card), AICore(%)
(AI Core busy time over the worker's uptime), ECC counters, isolated pages, processes
(attached host clients). Hugepages-Usage is the host's huge pages (``/proc/meminfo``:
in use / total), as npu-smi reports them. Memory-Usage is the device DDR and HBM-Usage the
HBM; on the SoCs whose main memory is DDR (Ascend310P3, Ascend310B1) Memory-Usage is that
memory and HBM-Usage ``0 / 0``, as those cards show it. The Chip row is the chip index on
the card (0: one chip per emulated card). A card whose worker is not running (never
started, or lost) shows Health ``UNKNOWN``.

Usage::

    npuemu smi info [--name NODE] [-l] [-t health|ecc|memory -i ID]
    npuemu smi set [--name NODE] -t clear-ecc-info -i ID
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import zlib
from dataclasses import dataclass, field

import psutil

from npuemu.shared import errors, layout, logring, shm
from npuemu.shared.config import soc_profile
from npuemu.shared.layout import DEVICE_CTL, POISON_ENTRY, DeviceState
from npuemu.tools.status import hbm_pools

_C = DEVICE_CTL
MiB = 1 << 20
HEALTH_NAMES = {0: "OK", 1: "Warning", 2: "Alarm", 3: "Critical"}
UNKNOWN = "UNKNOWN"
IDLE_W, FULL_W = 90.0, 350.0
"""Power model: watts at AICore(%) 0 and 100 (linear between; see the module docstring)."""
IDLE_C, FULL_C = 35, 70
"""Temperature model: degrees C at AICore(%) 0 and 100 (linear between)."""
HBM_OVER_C = 2
"""HBM temperature above the chip temperature of the model."""
DRIVER_VERSION = "24.1.rc3"
"""The version npu-smi prints in its first line (see the module docstring)."""
_BUS = ("C1", "C2", "81", "82", "01", "02", "41", "42")
_W = (27, 15, 52)  # the three cells of the box table
_PW = (27, 15, 26, 25)  # the process table splits the third cell in two


# ---------------------------------------------------------------------------- node reading
@dataclass
class Card:
    """One device of a node as a tool sees it: the registry entry and, while its worker
    runs, a snapshot of its control block (``ctl``, a list of words)."""

    id: int
    state: str
    pid: int | None
    starts: int
    last_exit: int | None
    hbm_total: int
    ddr_total: int
    hosts: list[dict] = field(default_factory=list)
    ctl: list[int] | None = None
    hccs_group: int = 0

    @property
    def running(self) -> bool:
        return self.ctl is not None

    def word(self, index: int) -> int:
        assert self.ctl is not None
        return self.ctl[index]

    @property
    def health(self) -> str:
        if self.state == "HUNG":  # no heartbeat within DEVICE_LOST_TIMEOUT_S
            return "Critical"
        return HEALTH_NAMES.get(self.ctl[_C.HEALTH], UNKNOWN) if self.ctl else UNKNOWN

    def poisoned(self) -> list[tuple[int, int]]:
        """Isolated pages: (device pointer, length)."""
        if not self.ctl:
            return []
        out = []
        for i in range(min(self.ctl[_C.POISONED], layout.MAX_POISON)):
            base = layout.CTL_POISON + i * POISON_ENTRY.words
            out.append((self.ctl[base + POISON_ENTRY.START], self.ctl[base + POISON_ENTRY.LENGTH]))
        return out

    def module_levels(self) -> dict[str, int]:
        """Modules with a level of their own (not following the global level)."""
        if not self.ctl:
            return {}
        return {m: self.ctl[layout.CTL_MODULE_LEVELS + i] for i, m in enumerate(logring.MODULES)
                if self.ctl[layout.CTL_MODULE_LEVELS + i] != 0xFF}


@dataclass
class NodeView:
    name: str
    soc: str
    state: str
    cards: list[Card]
    started: float = 0.0  # time.time() the node's supervisor started (0: unknown)


def node_name(name: str | None) -> str:
    return name or os.environ.get("NPUEMU_NODE") or "default"


def read_ctl(node: str, dev: int) -> list[int] | None:
    """Words of device ``dev``'s control block while its worker is READY, else None."""
    try:
        seg = shm.Segment(shm.name(node, f"d{dev}", "ctl"))
    except FileNotFoundError:
        return None
    try:
        view = seg.buf[: layout.DEVICE_CTL_SIZE].cast("Q")
        try:
            words = list(view)
        finally:
            view.release()
    finally:
        seg.close()
    if words[_C.MAGIC] != layout.MAGIC_DEVICE or words[_C.STATE] != DeviceState.READY:
        return None
    return words


def read_node(name: str) -> NodeView:
    """The node's cards (FileNotFoundError if no node ``name`` runs)."""
    from npuemu.tools import status

    node = status.read_node(name)
    cards = []
    for d in node["devices"]:
        card = Card(d["id"], d["state"], d["pid"], d["starts"], d["last_exit"],
                    d["hbm_total"], d["ddr_total"], d["hosts"], hccs_group=d["hccs_group"])
        if d["state"] in ("READY", "HUNG") and node["state"] != "DEAD":
            card.ctl = read_ctl(name, d["id"])
            if card.ctl is None:  # died since the registry was read
                card.state = "LOST"
        cards.append(card)
    try:
        started = psutil.Process(node["supervisor_pid"]).create_time()
    except (psutil.Error, ValueError):
        started = 0.0
    return NodeView(name, node["soc"], node["state"], cards, started)


def open_node(name: str | None, prog: str) -> NodeView | None:
    """``read_node`` for a command: prints the error and returns None if there is no node."""
    name = node_name(name)
    try:
        return read_node(name)
    except FileNotFoundError:
        err = errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE, f"no node named {name!r} is "
                               f"running (start one with `npuemu start --name {name}`)")
        print(f"{prog}: {err}", file=sys.stderr)
        return None
    except PermissionError as err:  # another user's node
        print(f"{prog}: node {name!r}: {err}", file=sys.stderr)
        return None


def card_of(view: NodeView, dev: int, prog: str) -> Card | None:
    if not 0 <= dev < len(view.cards):
        print(f"{prog}: no NPU {dev} in node {view.name!r} ({len(view.cards)} NPUs)",
              file=sys.stderr)
        return None
    return view.cards[dev]


def mb(nbytes: int) -> int:
    """Bytes as MB (MiB), rounded up."""
    return -(-nbytes // MiB)


def bus_id(dev: int) -> str:
    return f"0000:{_BUS[dev] if dev < len(_BUS) else f'{0x10 + dev:02X}'}:00.0"


def serial(node: str, dev: int) -> str:
    return f"NE{zlib.crc32(node.encode()):08X}{dev:04d}"


def npu_util(card: Card) -> int:
    """AI Core busy time over the worker's uptime, in percent."""
    if not card.ctl:
        return 0
    uptime = time.monotonic_ns() - card.word(_C.BOOT_NS)
    if uptime <= 0:
        return 0
    return max(0, min(100, card.word(_C.BUSY_AICORE) * 100 // uptime))


def power_w(util: int) -> float:
    """Modelled board power at AICore(%) ``util`` (not measured: see the module docstring)."""
    return IDLE_W + (FULL_W - IDLE_W) * util / 100


def temp_c(util: int) -> int:
    """Modelled chip temperature at AICore(%) ``util`` (not measured)."""
    return round(IDLE_C + (FULL_C - IDLE_C) * util / 100)


def host_hugepages() -> tuple[int, int]:
    """The host's huge pages: ``(in use, total)`` from ``/proc/meminfo`` ((0, 0) if none)."""
    info: dict[str, int] = {}
    with contextlib.suppress(OSError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("HugePages_Total", "HugePages_Free"):
                info[key] = int(value.split()[0])
    total = info.get("HugePages_Total", 0)
    return total - info.get("HugePages_Free", total), total


def _memory_cells(view: NodeView, card: Card) -> tuple[str, str]:
    """Memory-Usage and HBM-Usage of a running card (see the module docstring)."""
    main = _usage(mb(card.word(_C.HBM_USED)), mb(card.word(_C.HBM_TOTAL)))
    profile = soc_profile(view.soc)
    if profile is not None and profile.main_memory == "DDR":
        return main, _usage(0, 0)
    return _usage(mb(card.word(_C.DDR_USED)), mb(card.word(_C.DDR_TOTAL))), main


def kv(pairs: list[tuple[str, object]]) -> str:
    """npu-smi's ``key : value`` block (tab, keys padded to a common width)."""
    width = max(30, *(len(k) for k, _ in pairs))
    return "\n".join(f"\t{k:<{width}} : {v}" for k, v in pairs)


# -------------------------------------------------------------------------------- info box
def _line(ch: str = "-", widths: tuple[int, ...] = _W) -> str:
    return "+" + "+".join(ch * w for w in widths) + "+"


def _cells(*texts: object, widths: tuple[int, ...] = _W) -> str:
    return "|" + "|".join(f" {t}".ljust(w) for t, w in zip(texts, widths, strict=True)) + "|"


def _full(text: str) -> str:
    inner = sum(_W) + len(_W) - 1
    return "|" + f" {text}".ljust(inner) + "|"


def _triple(a: object, b: object, c: object) -> str:
    return f"{a!s:<12}{b!s:<18}{c}"


def _usage(used: int, total: int) -> str:
    return f"{used:<4} / {total}"


def render_info(view: NodeView) -> str:
    inner = sum(_W) + len(_W) - 1
    lines = ["+" + "-" * inner + "+",
             _full(f"{'npu-smi ' + DRIVER_VERSION:<32} Version: {DRIVER_VERSION}"),
             _line(),
             _cells("NPU   Name", "Health", _triple("Power(W)", "Temp(C)",
                                                     "Hugepages-Usage(page)")),
             _cells("Chip", "Bus-Id", _triple("AICore(%)", "Memory-Usage(MB)", "HBM-Usage(MB)")),
             _line("=")]
    profile = soc_profile(view.soc)
    short = profile.chip_name if profile else view.soc.removeprefix("Ascend")
    huge = _usage(*host_hugepages())
    for card in view.cards:
        if card.running:
            util = npu_util(card)
            first = _triple(f"{power_w(util):.1f}", temp_c(util), huge)
            second = _triple(util, *_memory_cells(view, card))
        else:
            first = second = _triple("-", "-", "-")
        lines += [_cells(f"{card.id:<6}{short}", card.health, first),
                  _cells("0", bus_id(card.id), second), _line("=")]
    lines += [_line(), _cells("NPU ID", "Process id", "Process name", "Process memory(MB)",
                              widths=_PW), _line("=")]
    for card in view.cards:
        hosts = card.hosts if card.running else []
        for host in hosts:
            try:
                pname = psutil.Process(host["pid"]).name()
            except psutil.Error:
                pname = "-"
            lines.append(_cells(card.id, host["pid"], pname, mb(host["used"]), widths=_PW))
        if not hosts:
            lines.append(_full(f"No running processes found in NPU {card.id}"))
        lines.append(_line("="))
    return "\n".join(lines)


def render_list(view: NodeView) -> str:
    blocks = [kv([("Total Count", len(view.cards))])]
    for card in view.cards:
        blocks.append(kv([("NPU ID", card.id), ("Product Name", view.soc),
                          ("Serial Number", serial(view.name, card.id)), ("Chip Count", 1)]))
    return "\n\n".join(blocks)


def render_health(view: NodeView, card: Card) -> str:
    error: tuple[int | str, str]
    if card.state == "HUNG":
        code = errors.ACL_ERROR_RT_LOST_HEARTBEAT
        error = (code, f"{errors.name_of(code)}: no heartbeat from the device (worker pid "
                       f"{card.pid} hung or stopped)")
    elif card.running:
        code = card.word(_C.LAST_ERROR)
        error = (code, f"{errors.name_of(code)}: {errors.describe(code)}") if code else (
            "NA", "NA")
    elif card.state == "LOST":
        code = errors.ACL_ERROR_RT_LOST_HEARTBEAT
        how = card.last_exit
        detail = (f"killed by signal {-how}" if how is not None and how < 0
                  else f"exit status {how}")
        error = (code, f"{errors.name_of(code)}: device lost (worker {detail})")
    else:
        error = ("NA", f"device not started ({card.state})")
    return kv([("NPU ID", card.id), ("Health", card.health), ("Error Code", error[0]),
               ("Error Information", error[1])])


def render_ecc(view: NodeView, card: Card) -> str:
    w = card.word
    return kv([("NPU ID", card.id),
               ("HBM Single Bit Error Count", w(_C.ECC_SBE)),
               ("HBM Double Bit Error Count", w(_C.ECC_DBE)),
               ("HBM Single Bit Aggregate Total Err Cnt", w(_C.ECC_SBE_TOTAL)),
               ("HBM Double Bit Aggregate Total Err Cnt", w(_C.ECC_DBE_TOTAL)),
               ("HBM Single Bit Isolated Pages Count", 0),
               ("HBM Double Bit Isolated Pages Count", len(card.poisoned())),
               ("HBM Single Bit Next-Isolated Pages Count", 0),
               ("HBM Double Bit Next-Isolated Pages Count", 0)])


def render_memory(view: NodeView, card: Card) -> str:
    """``-t memory``; on a SoC whose main memory is DDR (Ascend310P3, Ascend310B1) that
    memory is the DDR capacity and the HBM capacity is 0, as such a card reports them."""
    profile = soc_profile(view.soc)
    ddr, hbm = card.ddr_total, card.hbm_total
    if profile is not None and profile.main_memory == "DDR":
        ddr, hbm = hbm, 0
    return kv([("NPU ID", card.id), ("DDR Capacity(MB)", mb(ddr)),
               ("DDR Clock Speed(MHz)", 3200), ("HBM Capacity(MB)", mb(hbm)),
               ("HBM Clock Speed(MHz)", 1600), ("HBM Temperature(C)",
                                  temp_c(npu_util(card)) + HBM_OVER_C if card.running else "NA"),
               ("HBM Manufacturer ID", "0x5"), *_pool_rows(card)])


def _pool_rows(card: Card) -> list[tuple[str, object]]:
    """Page pools of the HBM heap (npuemu's own rows; npu-smi has none)."""
    if not card.running:
        return []
    p = hbm_pools(card.ctl)  # type: ignore[arg-type]
    return [("HBM Normal Page Pool(MB)", mb(p["normal_pool"])),
            ("HBM Huge Page Pool(MB)", mb(p["huge_pool"])),
            ("HBM Free(MB)", mb(p["free"])), ("HBM Free Blocks", p["free_blocks"]),
            ("HBM Largest Free Block(MB)", mb(p["largest_free"])),
            ("HBM Fragmentation(%)", f"{p['fragmentation'] * 100:.1f}")]


# ------------------------------------------------------------------------------- commands
def _parser() -> argparse.ArgumentParser:
    model = ("Power(W) and Temp(C) are not measured: they are modelled from AICore(%) u (AI "
             f"Core busy time over the worker's uptime) as {IDLE_W:.0f} + "
             f"{FULL_W - IDLE_W:.0f}*u/100 W and {IDLE_C} + {FULL_C - IDLE_C}*u/100 C.")
    parser = argparse.ArgumentParser(prog="npuemu smi", description="npu-smi of an npuemu node",
                                     epilog=model)
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("info", help="the NPU table, or one kind of information (-t) of one NPU",
                       epilog=model)
    p.add_argument("--name", help="node name (default $NPUEMU_NODE or 'default')")
    p.add_argument("-l", action="store_true", help="list the NPUs (id, product, serial)")
    p.add_argument("-t", dest="type", choices=("health", "ecc", "memory"),
                   help="one kind of information of NPU -i ID")
    p.add_argument("-i", dest="id", type=int, help="NPU ID")
    p = sub.add_parser("set", help="clear the ECC counters of one NPU")
    p.add_argument("--name", help="node name (default $NPUEMU_NODE or 'default')")
    p.add_argument("-t", dest="type", choices=("clear-ecc-info",), required=True,
                   help="what to set: clear-ecc-info clears the ECC counters")
    p.add_argument("-i", dest="id", type=int, required=True, help="NPU ID")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    prog = "npu-smi"
    if args.verb == "info" and args.type and args.id is None:
        print(f"{prog}: -t {args.type} needs -i ID", file=sys.stderr)
        return 2
    view = open_node(args.name, prog)
    if view is None:
        return 1
    if args.verb == "set":
        return _clear_ecc(view, args.id)
    if args.l:
        print(render_list(view))
        return 0
    if not args.type:
        print(render_info(view))
        return 0
    card = card_of(view, args.id, prog)
    if card is None:
        return 1
    if args.type == "ecc" and not card.running:
        print(f"{prog}: NPU {card.id} is not running ({card.state}): no ECC information",
              file=sys.stderr)
        return 1
    render = {"health": render_health, "ecc": render_ecc, "memory": render_memory}[args.type]
    print(render(view, card))
    return 0


def _clear_ecc(view: NodeView, dev: int) -> int:
    from npuemu.tools import inject

    card = card_of(view, dev, "npu-smi")
    if card is None:
        return 1
    if not card.running:
        print(f"npu-smi: NPU {dev} is not running ({card.state})", file=sys.stderr)
        return 1
    try:
        inject.inject_fault(view.name, dev, "clear_ecc", {})
    except errors.AclError as err:
        print(kv([("Status", "FAILED"), ("Message", str(err))]))
        return 1
    print(kv([("Status", "OK"), ("Message", "Set chip clear-ecc-info successfully")]))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
