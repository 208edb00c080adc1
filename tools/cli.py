"""The ``npuemu`` command: node control, the demo, the benchmark, and running pyACL programs.

    npuemu start [--devices N] [--hbm SIZE] [--ddr SIZE] [--name NAME]
    npuemu status [--name NAME] [--json]
    npuemu stop [--name NAME]
    npuemu run script.py [args...]      # `import acl` resolves to npuemu's pyACL module
    npuemu demo                          # a short tour on an embedded node
    npuemu bench [--quick] [--json PATH]
    npuemu inject [--name NAME] -d DEV KIND [key=value ...]   # a hardware fault
    npuemu smi info|set ...              # npu-smi: health, ECC, memory, processes
    npuemu msnpureport [report|config ...]   # device logs and log levels
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time

from npuemu.shared import control, shm
from npuemu.shared.config import ATTACH_TIMEOUT_S, NodeConfig

DEFAULT_NODE = "default"


def _node_name(args: argparse.Namespace) -> str:
    return args.name or os.environ.get("NPUEMU_NODE") or DEFAULT_NODE


def cmd_start(args: argparse.Namespace) -> int:
    """Start a shared node in the background; returns once every worker is ready."""
    from npuemu.host.driver.node import spawn_supervisor, wait_for_node
    from npuemu.shared import errors

    name = _node_name(args)
    if _answers(name):
        print(f"npuemu start: a node named {name!r} is already running", file=sys.stderr)
        return 1
    stale = shm.unlink_all(name)  # names left by a node whose supervisor was killed
    if stale:
        print(f"npuemu start: removed {stale} stale shared-memory names of node {name!r}")
    overrides = {k: v for k, v in (("devices", args.devices), ("hbm_bytes", args.hbm),
                                   ("ddr_bytes", args.ddr)) if v is not None}
    try:
        config = NodeConfig.from_env(name=name, **overrides)
    except (TypeError, ValueError) as err:
        print(f"npuemu start: {err}", file=sys.stderr)
        return 2
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"npuemu-{name}.log")
    t0 = time.perf_counter()
    with open(log_path, "ab") as log:
        proc = spawn_supervisor(name, config, eager=True, log=log.fileno())
    try:
        sock = wait_for_node(name, proc)
        control.call(sock, ["hello", os.getpid(), False])  # answered once all workers are up
        sock.close()
    except (errors.AclError, OSError) as err:
        print(f"npuemu start: {err} (log: {log_path})", file=sys.stderr)
        return 1
    print(f"node {name} ready: {config.devices} x {config.soc.name} in "
          f"{time.perf_counter() - t0:.2f} s (supervisor pid {proc.pid}, log {log_path})")
    return 0


def _answers(name: str) -> bool:
    """True if a supervisor accepts connections for ``name``."""
    try:
        control.connect(name, timeout=ATTACH_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def cmd_stop(args: argparse.Namespace) -> int:
    name = _node_name(args)
    try:
        sock = control.connect(name, timeout=ATTACH_TIMEOUT_S)
    except OSError:
        stale = shm.unlink_all(name)
        if stale:
            print(f"node {name} had no supervisor; removed {stale} stale shared-memory names")
            return 0
        print(f"npuemu stop: no node named {name!r} is running", file=sys.stderr)
        return 1
    control.call(sock, ["stop"])
    sock.settimeout(ATTACH_TIMEOUT_S)
    try:  # the supervisor closes every connection once the node is down
        while sock.recv(4096):
            pass
    except OSError:
        pass
    sock.close()
    print(f"node {name} stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from npuemu.tools import status

    return status.main(args.name, args.json)


def install_acl() -> None:
    """Make ``import acl`` (and ``acl.rt``, ``acl.util``) resolve to npuemu's module."""
    from npuemu.host import acl

    sys.modules["acl"] = acl
    sys.modules["acl.rt"] = acl.rt
    sys.modules["acl.util"] = acl.util
    from npuemu.host.acl import hccl  # pyhccl's names (collectives)

    sys.modules["pyhccl"] = hccl


def cmd_run(args: argparse.Namespace) -> int:
    """Run a pyACL program unmodified, as ``python script.py args...`` would."""
    install_acl()
    script = os.path.abspath(args.script)
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from npuemu.tools import demo

    return demo.main()


def cmd_bench(args: argparse.Namespace) -> int:
    from npuemu.tools import bench

    return bench.main(quick=args.quick, json_path=args.json)


_DELEGATED = {"inject": "inject a hardware fault into a card of a running node",
              "smi": "npu-smi: NPU table, health, ECC and memory information",
              "msnpureport": "msnpureport: export device logs, query and set log levels"}
"""Subcommands handled by ``npuemu.tools.<name>.main(argv) -> int`` (their own parsers)."""


def _delegate(name: str, argv: list[str]) -> int:
    import importlib

    return importlib.import_module(f"npuemu.tools.{name}").main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npuemu", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("start", help="start a shared node in the background")
    p.add_argument("--devices", type=int)
    p.add_argument("--hbm", help="HBM per device, e.g. 64G (default: the SoC's)")
    p.add_argument("--ddr", help="DDR per device, e.g. 8G")
    p.add_argument("--name", help=f"node name (default $NPUEMU_NODE or {DEFAULT_NODE!r})")
    p.set_defaults(func=cmd_start)
    p = sub.add_parser("stop", help="stop a shared node")
    p.add_argument("--name")
    p.set_defaults(func=cmd_stop)
    p = sub.add_parser("status", help="devices, memory and attached hosts of running nodes")
    p.add_argument("--name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("run", help="run a pyACL program with `import acl` resolved to npuemu")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("demo", help="a short tour on an embedded node")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("bench", help="measure npuemu against this machine's limits")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="PATH")
    p.set_defaults(func=cmd_bench)
    for name, text in _DELEGATED.items():  # parsed by the tool itself (see main)
        p = sub.add_parser(name, help=text, add_help=False)
        p.add_argument("args", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda args, name=name: _delegate(name, args.args))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in _DELEGATED:  # options like -d go to the tool, not to argparse here
        return _delegate(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
