"""``npuemu msnpureport``: msnpureport for an emulated node: export device logs, query and
set the device log levels.

Reads the node's shared memory (registry, control blocks, the device log rings
``/npuemu.<node>.d<id>.log``); ``config --set`` writes ``log_level``, the module levels and
``event_enable`` of a device's control block (the maintenance action the real tool asks the
device's log daemon to do). A restarted worker starts again from the ``ASCEND_*`` variables
of the node. Device ids are the node's ids.

New syntax (``msnpureport <subcommand>``)::

    report [-d ID] [-o DIR] [-a] [-f]      export logs into DIR/<YYYYmmddHHMMSS>/
    config --get [-d ID]                   device maintenance configuration (default device 0)
    config --set --log (-g LEVEL | -m MODULE:LEVEL | -e enable|disable) [-d ID]
                                           LEVEL: debug|info|warning|error|null or 0..4
    help | version

Old syntax (no subcommand): ``-d [ID]`` export device logs (as ``report``), ``-s`` device
health, ``-t MODE`` set the device run mode (accepted; the emulator runs programs in host
mode, ACL_HOST, and changes nothing), ``-g``/``-m``/``-e`` [``-d ID``] set levels, ``-r``
[``-d ID``] query levels, ``-h`` help. No option at all exports, like ``report``.

    $ npuemu msnpureport report -o /tmp/logs
    device 0: 14 lines exported
    device 1: no device log (never started)
    Export finished: /tmp/logs/20261129091042

    /tmp/logs/20261129091042/
      slog/device-os-0/debug/device-0/device-0_20261129091042123.log   the log ring's text
      slog/device-os-0/run/event/event_20261129091042123.log           EVENT lines only
      slog/host/debug/plog/plog-4301_20261129090950123.log           host logs (below)
      hisi_logs/device-0/20261129091042/history.log                    ERROR and EVENT lines
      hisi_logs/device-0/20261129091042/device_info.txt                the card's facts

    $ npuemu msnpureport config --get -d 0
    +--------------------------------+--------------------------------+
    | Device ID: 0                   | Current Configuration          |
    +================================+================================+
    | Icache check Range             | 1000                           |
    | Accelerator Recover            | Enable                         |
    | Aic Coremask                   | 0xffffff                       |
    | Aiv Coremask                   | 0xffffffffffff                 |
    | Aic Singlecommit               | Enable                         |
    +-------- Log Level -------------+--------------------------------+
    | Global Level                   | ERROR                          |
    | Event Level                    | ENABLE                         |
    | Module [DEVMM]                 | DEBUG                          |
    +--------------------------------+--------------------------------+

Folders are named as CANN's export guide names them (``slog/device-os-<id>``). The host
logs are this user's plog files (``host/core/plog.py``: ``$ASCEND_PROCESS_LOG_PATH``, else
``$ASCEND_WORK_PATH``, else ``~/ascend/log``) written since the node started, copied under
``slog/host/`` with their ``debug|run|security/plog`` path. ``device_info.txt`` holds what the
node knows of the card: its SoC and that SoC's profile (cores, memory), its HCCS group, the
worker (pid, starts, last exit, uptime), health, ECC counters and isolated pages, memory in
use, attached processes, tasks and log levels; nothing is invented.

The core masks come from the SoC profile (``shared/config.py`` PROFILES: one bit per AI Core
and per AI Vector core); Icache check Range, Accelerator Recover and Aic Singlecommit are
the defaults of a real card (the emulator has no such switches). Only modules with a level
of their own are listed (the others follow the Global Level). An export directory that
already exists (two exports in the same second) gets a ``-1``, ``-2`` ... suffix. Exported
files are created 0600 and the directories 0700, whatever the umask (``shared/private.py``):
a device log shows what its users' programs ran.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

from npuemu.shared import errors, layout, logring, private, shm
from npuemu.shared.config import soc_profile
from npuemu.shared.layout import DEVICE_CTL, DeviceState
from npuemu.tools.smi import Card, NodeView, card_of, mb, open_node

_C = DEVICE_CTL
PROG = "msnpureport"
LEVEL_NAMES = {"debug": logring.DEBUG, "info": logring.INFO, "warning": logring.WARNING,
               "error": logring.ERROR, "null": logring.NULL}
_COL = 32
_LEVEL_HELP = "the global log level: debug|info|warning|error|null or 0..4"
_MODULE_HELP = "a module's log level, e.g. DEVMM:debug or TS:0 (repeatable)"
_EVENT_HELP = "turn EVENT lines on (enable) or off (disable)"


# ------------------------------------------------------------------------------- logs
def read_log(node: str, dev: int) -> str | None:
    """The text in device ``dev``'s log ring, or None if the card never started."""
    return logring.read_device_log(node, dev)


def _lines(text: str, *levels: str) -> str:
    tags = tuple(f"[{lvl}]" for lvl in levels)
    return "".join(ln for ln in text.splitlines(keepends=True) if ln.startswith(tags))


def _profile_rows(soc: str) -> list[tuple[str, object]]:
    profile = soc_profile(soc)
    if profile is None:
        return [("soc profile", "NA (not known to this host)")]
    return [("chip name", profile.chip_name), ("ai core count", profile.ai_core_num),
            ("cube core count", profile.cube_core_num),
            ("vector core count", profile.vector_core_num),
            ("ai cpu count", profile.aicpu_num), ("core types", ",".join(profile.core_types)),
            ("main memory", profile.main_memory),
            ("l2 size (MB)", mb(profile.l2_bytes))]


def device_info(view: NodeView, card: Card) -> str:
    rows: list[tuple[str, object]] = [
        ("node", view.name), ("device id", card.id), ("soc", view.soc),
        *_profile_rows(view.soc), ("hccs group", card.hccs_group),
        ("state", card.state), ("health", card.health),
        ("worker pid", card.pid or "-"), ("starts", card.starts),
        ("last worker exit", "-" if card.last_exit is None else card.last_exit)]
    if card.running:
        w = card.word
        rows.append(("worker uptime (s)",
                     f"{max(time.monotonic_ns() - w(_C.BOOT_NS), 0) / 1e9:.1f}"))
        pages = card.poisoned()
        code = w(_C.LAST_ERROR)
        rows += [
            ("HBM single bit ECC errors", f"{w(_C.ECC_SBE)} (aggregate {w(_C.ECC_SBE_TOTAL)})"),
            ("HBM double bit ECC errors", f"{w(_C.ECC_DBE)} (aggregate {w(_C.ECC_DBE_TOTAL)})"),
            ("isolated pages", len(pages)),
            *((f"  isolated page {i}", f"0x{start:x} ({length} bytes)")
              for i, (start, length) in enumerate(pages)),
            ("last error", f"{code} ({errors.name_of(code)})" if code else "NA"),
            ("faults injected", w(_C.FAULTS)),
            ("HBM used / total (MB)", f"{mb(w(_C.HBM_USED))} / {mb(w(_C.HBM_TOTAL))}"),
            ("DDR used / total (MB)", f"{mb(w(_C.DDR_USED))} / {mb(w(_C.DDR_TOTAL))}"),
            ("live allocations", w(_C.LIVE_ALLOCS)),
            ("attached processes", " ".join(str(h["pid"]) for h in card.hosts) or "-"),
            ("tasks completed", w(_C.TASKS)),
            ("loop CPU work / idle (ms)",
             f"{w(_C.LOOP_WORK_CPU_NS) / 1e6:.1f} / {w(_C.LOOP_IDLE_CPU_NS) / 1e6:.1f}"),
            ("worker process CPU (ms)", f"{w(_C.PROCESS_CPU_NS) / 1e6:.1f}"),
            ("log level", _level_name(w(_C.LOG_LEVEL))),
            ("event log", "ENABLE" if w(_C.EVENT_ENABLE) else "DISABLE")]
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}} : {v}\n" for k, v in rows)


def export(view: NodeView, devices: list[int], out_dir: str | None) -> int:
    now = datetime.datetime.now()
    stamp = now.strftime("%Y%m%d%H%M%S")
    fine = stamp + f"{now.microsecond // 1000:03d}"
    root = os.path.abspath(os.path.join(out_dir or ".", stamp))
    n = 0
    while os.path.exists(root):
        n += 1
        root = os.path.abspath(os.path.join(out_dir or ".", f"{stamp}-{n}"))
    try:
        private.makedirs(root, exist_ok=False)
    except OSError as err:
        print(f"{PROG}: cannot create {root}: {err}", file=sys.stderr)
        return 1
    for dev in devices:
        card = view.cards[dev]
        text = read_log(view.name, dev)
        if text is None:
            print(f"device {dev}: no device log (never started)")
            continue
        base = os.path.join(root, "slog", f"device-os-{dev}")
        hisi = os.path.join(root, "hisi_logs", f"device-{dev}", stamp)
        files = {
            os.path.join(base, "debug", f"device-{dev}", f"device-{dev}_{fine}.log"): text,
            os.path.join(base, "run", "event", f"event_{fine}.log"): _lines(text, "EVENT"),
            os.path.join(hisi, "history.log"): _lines(text, "ERROR", "EVENT"),
            os.path.join(hisi, "device_info.txt"): device_info(view, card),
        }
        for path, content in files.items():
            private.makedirs(os.path.dirname(path))
            with private.open_file(path, "w", encoding="utf-8") as f:
                f.write(content)
        print(f"device {dev}: {text.count(chr(10))} lines exported")
    copied = export_host_logs(os.path.join(root, "slog", "host"), view.started)
    print(f"host: {copied} log files exported")
    print(f"Export finished: {root}")
    return 0


def export_host_logs(dest: str, since: float) -> int:
    """Copy this user's plog files written since ``since`` (a time.time()) under ``dest``,
    keeping their ``<debug|run|security>/plog/`` path; returns how many were copied."""
    from npuemu.host.core import plog

    root, copied = plog.root(), 0
    for kind in ("debug", "run", "security"):
        folder = os.path.join(root, kind, "plog")
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            src = os.path.join(folder, name)
            try:
                if not name.endswith(".log") or os.path.getmtime(src) < since:
                    continue
                with open(src, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            path = os.path.join(dest, kind, "plog", name)
            private.makedirs(os.path.dirname(path))
            with private.open_file(path, "wb") as f:
                f.write(data)
            copied += 1
    return copied


def health(view: NodeView) -> int:
    for card in view.cards:
        print(f"Device ID: {card.id}  Health: {card.health}  ({card.state})")
    return 0


# ----------------------------------------------------------------------------- config
def _level_name(value: int) -> str:
    return logring.LEVELS[value] if 0 <= value < len(logring.LEVELS) else f"?{value}"


def _row(left: str, right: object) -> str:
    return f"| {left:<{_COL - 1}}| {right!s:<{_COL - 1}}|"


def config_table(view: NodeView, card: Card) -> str:
    soc = soc_profile(view.soc)
    aic = f"{(1 << soc.ai_core_num) - 1:#x}" if soc else "NA"
    aiv = f"{(1 << soc.vector_core_num) - 1:#x}" if soc else "NA"
    sep = "+" + "-" * _COL + "+" + "-" * _COL + "+"
    lines = [sep, _row(f"Device ID: {card.id}", "Current Configuration"),
             "+" + "=" * _COL + "+" + "=" * _COL + "+",
             _row("Icache check Range", 1000), _row("Accelerator Recover", "Enable"),
             _row("Aic Coremask", aic), _row("Aiv Coremask", aiv),
             _row("Aic Singlecommit", "Enable"),
             "+" + " Log Level ".center(_COL, "-") + "+" + "-" * _COL + "+",
             _row("Global Level", _level_name(card.word(_C.LOG_LEVEL))),
             _row("Event Level", "ENABLE" if card.word(_C.EVENT_ENABLE) else "DISABLE")]
    for module, level in card.module_levels().items():
        lines.append(_row(f"Module [{module}]", _level_name(level)))
    lines.append(sep)
    return "\n".join(lines)


def _running(view: NodeView, dev: int) -> Card | None:
    card = card_of(view, dev, PROG)
    if card is None:
        return None
    if not card.running:
        print(f"{PROG}: device {dev} is not running ({card.state})", file=sys.stderr)
        return None
    return card


def config_get(view: NodeView, dev: int) -> int:
    card = _running(view, dev)
    if card is None:
        return 1
    print(config_table(view, card))
    return 0


def _parse_level(text: str) -> int:
    """A level by name (``debug`` .. ``null``, any case) or by number (``0`` .. ``4``, as the
    real tool's ``-g``/``-m`` take them: 0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR, 4 NULL)."""
    word = text.strip().lower()
    level = LEVEL_NAMES.get(word)
    if level is None and word.isdigit() and int(word) < len(logring.LEVELS):
        level = int(word)
    if level is None:
        raise ValueError(f"invalid level {text!r}: one of {', '.join(LEVEL_NAMES)} "
                         f"or 0..{len(logring.LEVELS) - 1}")
    return level


def config_set(view: NodeView, dev: int, glob: str | None, modules: list[str],
               event: str | None) -> int:
    """Write the log settings into the device control block (validated first)."""
    writes: list[tuple[int, int, str]] = []
    try:
        if glob is not None:
            level = _parse_level(glob)
            writes.append((_C.LOG_LEVEL, level, f"Global Level {logring.LEVELS[level]}"))
        for item in modules:
            module, sep, level_text = item.partition(":")
            module = module.strip().upper()
            if not sep or module not in logring.MODULES:
                raise ValueError(f"invalid module setting {item!r}: MODULE:level with MODULE "
                                 f"one of {', '.join(logring.MODULES)}")
            level = _parse_level(level_text)
            writes.append((layout.CTL_MODULE_LEVELS + logring.MODULES.index(module), level,
                           f"Module [{module}] {logring.LEVELS[level]}"))
        if event is not None:
            if event.strip().lower() not in ("enable", "disable"):
                raise ValueError(f"invalid event setting {event!r}: enable or disable")
            on = event.strip().lower() == "enable"
            switch = "ENABLE" if on else "DISABLE"
            writes.append((_C.EVENT_ENABLE, int(on), f"Event Level {switch}"))
    except ValueError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    if not writes:
        print(f"{PROG}: config --set --log needs -g, -m or -e", file=sys.stderr)
        return 2
    if _running(view, dev) is None:
        return 1
    try:
        seg = shm.Segment(shm.name(view.name, f"d{dev}", "ctl"))
    except FileNotFoundError:
        print(f"{PROG}: device {dev} is not running", file=sys.stderr)
        return 1
    try:
        ctl = seg.buf[: layout.DEVICE_CTL_SIZE].cast("Q")
        try:
            if ctl[_C.STATE] != DeviceState.READY:
                print(f"{PROG}: device {dev} is not running", file=sys.stderr)
                return 1
            for index, value, _ in writes:
                ctl[index] = value
        finally:
            ctl.release()
    finally:
        seg.close()
    for _, _, what in writes:
        print(f"device {dev}: {what} set")
    return 0


# ---------------------------------------------------------------------------- commands
def _new_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npuemu msnpureport",
                                     description="device logs and log levels of a node")
    parser.add_argument("--name", help="node name (default $NPUEMU_NODE or 'default')")
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("report", help="export device logs into DIR/<timestamp>/")
    p.add_argument("--name", default=argparse.SUPPRESS,
                   help="node name (default $NPUEMU_NODE or 'default')")
    p.add_argument("-d", "--device", type=int, help="device ID (default: every device)")
    p.add_argument("-o", "--output", help="directory (default: the current one)")
    p.add_argument("-a", "--all", action="store_true", help="accepted (same export)")
    p.add_argument("-f", "--force", action="store_true", help="accepted (same export)")
    p = sub.add_parser("config", help="query (--get) or set (--set --log) device settings")
    p.add_argument("--name", default=argparse.SUPPRESS,
                   help="node name (default $NPUEMU_NODE or 'default')")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--get", action="store_true", help="show the device configuration")
    mode.add_argument("--set", action="store_true", help="change settings (with --log)")
    p.add_argument("--log", action="store_true", help="with --set: the log settings")
    p.add_argument("-d", "--device", type=int, default=0, help="device ID (default 0)")
    p.add_argument("-g", "--global", dest="glob", metavar="LEVEL",
                   help=_LEVEL_HELP)
    p.add_argument("-m", "--module", action="append", default=[], metavar="MODULE:LEVEL",
                   help=_MODULE_HELP)
    p.add_argument("-e", "--event", metavar="enable|disable", help=_EVENT_HELP)
    sub.add_parser("help", help="this help")
    sub.add_parser("version", help="the tool's version")
    return parser


def _old_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npuemu msnpureport",
        description="msnpureport for an emulated node: export device logs, query and set "
                    "the device log levels (old syntax; or a subcommand)",
        epilog="subcommands: report, config, help, version (see `msnpureport help`)")
    parser.add_argument("--name", help="node name (default $NPUEMU_NODE or 'default')")
    parser.add_argument("-d", "--device", type=int, nargs="?", const=-1,
                        help="export device logs (of device ID, default all); with -g/-m/-e/-r"
                             " the device to configure")
    parser.add_argument("-s", "--status", action="store_true", help="query device health")
    parser.add_argument("-t", "--mode", help="set the device run mode (host mode only)")
    parser.add_argument("-g", "--global", dest="glob", metavar="LEVEL",
                        help=_LEVEL_HELP)
    parser.add_argument("-m", "--module", action="append", default=[],
                        metavar="MODULE:LEVEL", help=_MODULE_HELP)
    parser.add_argument("-e", "--event", metavar="enable|disable", help=_EVENT_HELP)
    parser.add_argument("-r", "--request", action="store_true", help="query log levels")
    parser.add_argument("-a", "--all", action="store_true", help="export (same as -d)")
    parser.add_argument("-f", "--force", action="store_true", help="export (same as -d)")
    parser.add_argument("-o", "--output", help="export directory (default: the current one)")
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


def _devices(view: NodeView, dev: int | None) -> list[int] | None:
    if dev is None or dev < 0:
        return list(range(len(view.cards)))
    return [dev] if card_of(view, dev, PROG) else None


def _first_word(argv: list[str]) -> str | None:
    """The first argument that is not ``--name NODE``."""
    i = 0
    while i < len(argv):
        if argv[i] == "--name":
            i += 2
        elif argv[i].startswith("--name="):
            i += 1
        else:
            return argv[i]
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if _first_word(argv) in ("report", "config", "help", "version"):
        return _main_new(argv)
    args = _parse(_old_parser(), argv)
    if isinstance(args, int):
        return args
    return _main_old(args)


def _main_new(argv: list[str]) -> int:
    parser = _new_parser()
    args = _parse(parser, argv)
    if isinstance(args, int):
        return args
    if args.verb == "help":
        parser.print_help()
        return 0
    if args.verb == "version":
        import npuemu

        print(f"msnpureport (npuemu) {npuemu.__version__}")
        return 0
    view = open_node(args.name, PROG)
    if view is None:
        return 1
    if args.verb == "report":
        devices = _devices(view, args.device)
        return 1 if devices is None else export(view, devices, args.output)
    if args.get:
        return config_get(view, args.device)
    if not args.log:
        print(f"{PROG}: config --set supports --log only in the emulator", file=sys.stderr)
        return 2
    return config_set(view, args.device, args.glob, args.module, args.event)


def _main_old(args: argparse.Namespace) -> int:
    if args.mode is not None:
        print(f"{PROG}: run mode {args.mode!r} not set: the emulator runs programs in host "
              "mode (ACL_HOST) only; nothing changed")
        return 0
    view = open_node(args.name, PROG)
    if view is None:
        return 1
    dev = 0 if args.device is None or args.device < 0 else args.device
    if args.glob is not None or args.module or args.event is not None:
        return config_set(view, dev, args.glob, args.module, args.event)
    if args.request:
        return config_get(view, dev)
    if args.status:
        return health(view)
    devices = _devices(view, args.device)
    return 1 if devices is None else export(view, devices, args.output)


if __name__ == "__main__":
    sys.exit(main())
