"""The ``npuemu`` command: node control, the demo, the benchmark, and running pyACL programs.

    npuemu --version | python -m npuemu ...  # the version; the same command as a module
    npuemu start [--devices N] [--hbm SIZE] [--ddr SIZE] [--name NAME]
    npuemu status [--name NAME] [--json] [--clean]   # --clean: remove dead nodes' names
    npuemu stop [--name NAME] [--force]  # refused while programs are attached, unless --force
    npuemu run script.py [args...]      # `import acl` resolves to npuemu's pyACL module
    npuemu run -m module [args...]      # as python -m; errors reported as python reports them
    npuemu run ./a.out [args...]        # a C/C++ program, with the SDK's environment
    npuemu sdk [--prefix DIR]            # the C ABI: headers and libraries, as a CANN toolkit
    npuemu demo                          # a short tour on an embedded node
    npuemu bench [--quick] [--json PATH] [--only KEYS]
    npuemu inject [--name NAME] -d DEV KIND [key=value ...]   # a hardware fault
    npuemu smi info|set ...              # npu-smi: health, ECC, memory, processes
    npuemu msnpureport [report|config ...]   # device logs and log levels
    npuemu msprof --application="python app.py" --output=DIR   # profile (see -h)
    npuemu atc --model=M.onnx --framework=5 --output=M --soc_version=SOC | --singleop=J --output=D
    npuemu hccl-test OP [-b -e -f -d -o ...]   # hccl_test's collective benchmarks
    npuemu memory snapshot|pools [--name NAME]   # device memory of a running node

The tools after ``bench`` parse their own options (``npuemu TOOL -h``). A command whose
reader stops early (``npuemu status --json | head``) ends quietly with status 141.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import runpy
import sys
import time

from npuemu.shared import control, shm
from npuemu.shared.config import ATTACH_TIMEOUT_S, NodeConfig, glibc_tunables

DEFAULT_NODE = "default"


def _node_name(args: argparse.Namespace) -> str:
    return args.name or os.environ.get("NPUEMU_NODE") or DEFAULT_NODE


def cmd_start(args: argparse.Namespace) -> int:
    """Start a shared node in the background; returns once every worker is ready."""
    from npuemu.host.driver.node import log_path, spawn_supervisor, wait_for_node
    from npuemu.shared import errors

    name = _node_name(args)
    if _answers(name):
        print(f"npuemu start: a node named {name!r} is already running", file=sys.stderr)
        return 1
    for node, stale in shm.clean_dead().items():  # names left by killed supervisors
        print(f"npuemu start: removed {stale} stale shared-memory names of node {node!r}")
    overrides = {k: v for k, v in (("devices", args.devices), ("hbm_bytes", args.hbm),
                                   ("ddr_bytes", args.ddr)) if v is not None}
    try:
        config = NodeConfig.from_env(name=name, **overrides)
    except (TypeError, ValueError) as err:
        print(f"npuemu start: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    log = log_path(name)
    with open(log, "wb") as f:  # one log per node name, removed by a clean stop
        proc = spawn_supervisor(name, config, eager=True, log=f.fileno())
    try:
        sock = wait_for_node(name, proc)
        reply = control.call(sock, ["hello", os.getpid(), False])  # once all workers are up
        sock.close()
        if reply[0]:
            raise errors.error_for(reply[0], reply[1])
    except (errors.AclError, OSError) as err:
        print(f"npuemu start: {err} (log: {log})", file=sys.stderr)
        return 1
    print(f"node {name} ready: {config.devices} x {config.soc.name} in "
          f"{time.perf_counter() - t0:.2f} s (supervisor pid {proc.pid}, log {log})")
    return 0


def _answers(name: str) -> bool:
    """True if a supervisor accepts connections for ``name``."""
    try:
        control.connect(name, timeout=ATTACH_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop a shared node; refused while programs are attached unless ``--force``."""
    from npuemu.host.driver.node import log_path

    name = _node_name(args)
    try:
        sock = control.connect(name, timeout=ATTACH_TIMEOUT_S)
    except PermissionError as err:
        print(f"npuemu stop: {err}", file=sys.stderr)
        return 1
    except OSError:
        stale = shm.clean_dead()
        if stale.get(name):
            print(f"node {name} had no supervisor; removed {stale[name]} stale shared-memory "
                  "names")
            return 0
        print(f"npuemu stop: no node named {name!r} is running", file=sys.stderr)
        return 1
    reply = control.call(sock, ["stop", bool(args.force)])
    if reply[0]:
        sock.close()
        if len(reply) > 2 and reply[2]:  # refused: programs are attached
            pids = ", ".join(map(str, reply[2]))
            print(f"npuemu stop: node {name!r} is in use by pid {pids}; `npuemu stop --force` "
                  "ends their sessions (their calls then fail with 507901)", file=sys.stderr)
            return 1
        print(f"npuemu stop: {reply[1]}", file=sys.stderr)
        return 1
    sock.settimeout(ATTACH_TIMEOUT_S)
    try:  # the supervisor closes every connection once the node is down
        while sock.recv(4096):
            pass
    except OSError:
        pass
    sock.close()
    with contextlib.suppress(OSError):
        os.unlink(log_path(name))
    print(f"node {name} stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from npuemu.tools import status

    return status.main(args.name, args.json, args.clean)


def install_acl() -> None:
    """Make ``import acl`` (and ``acl.rt``, ``acl.util``, ...) resolve to npuemu's module."""
    from npuemu.host.acl import toplevel

    toplevel.install()
    from npuemu.host.acl import hccl  # pyhccl's names (collectives)

    sys.modules["pyhccl"] = hccl


def cmd_run(args: argparse.Namespace) -> int:
    """Run a pyACL program unmodified, as ``python script.py args...`` (or, with ``-m``,
    ``python -m module args...``) would."""
    if args.module is None and args.script is None:
        print("npuemu run: give a script or -m MODULE", file=sys.stderr)
        return 2
    if args.module is not None and args.script is not None:  # the module's first argument
        args.args = [args.script, *args.args]
    if args.module is None:
        from npuemu.tools import sdk

        if sdk.is_native(args.script):  # a compiled program: libascendcl.so serves it
            return sdk.run_native(args.script, args.args)
    install_acl()
    if args.module is None and not os.path.isfile(args.script):  # as python says it
        print(f"npuemu run: can't open file {os.path.abspath(args.script)!r}: no such file",
              file=sys.stderr)
        return 2
    try:
        if args.module:
            sys.argv = [args.module, *args.args]
            sys.path.insert(0, os.getcwd())
            try:
                found = importlib.util.find_spec(args.module)
            except (ImportError, ValueError):
                found = None
            if found is None:
                print(f"npuemu run: no module named {args.module}", file=sys.stderr)
                return 1
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(args.script)
            sys.argv = [args.script, *args.args]
            sys.path.insert(0, os.path.dirname(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)  # sys.exit("message"), as python prints it
        return 1
    except Exception as exc:  # the program's own error: its traceback, as python prints it
        _print_program_traceback(exc)
        return 1
    return 0


def _print_program_traceback(exc: BaseException) -> None:
    """The traceback of ``exc`` without the frames of ``npuemu run`` and runpy above the
    program (so it reads as ``python script.py`` would print it)."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")
                              or tb.tb_frame.f_code.co_filename.endswith("runpy.py")):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def cmd_demo(args: argparse.Namespace) -> int:
    from npuemu.tools import demo

    return demo.main()


def cmd_bench(args: argparse.Namespace) -> int:
    """The bench runs with the copy settings of the node's processes (``GLIBC_TUNABLES``,
    ``config.glibc_tunables``): it re-executes itself once with them, so that a limit such
    as ``np.copyto`` is the best copy this machine makes, as the workers' copies are."""
    current = os.environ.get("GLIBC_TUNABLES", "")
    try:
        wanted = glibc_tunables(current, NodeConfig.from_env().nt_copy_bytes)
    except ValueError:
        wanted = current  # the bench reports the bad setting itself
    if wanted != current:
        os.execve(sys.executable, [sys.executable, "-m", "npuemu", *sys.argv[1:]],
                  {**os.environ, "GLIBC_TUNABLES": wanted})
    from npuemu.tools import bench

    return bench.main(quick=args.quick, json_path=args.json, only=args.only)


_DELEGATED = {"inject": "inject a hardware fault into a card of a running node",
              "smi": "npu-smi: NPU table, health, ECC and memory information",
              "msnpureport": "msnpureport: export device logs, query and set log levels",
              "atc": "ATC: ONNX models (--model) or single-op descriptions (--singleop) "
                     "into .om files",
              "hccl-test": "hccl_test: collective benchmarks (all_reduce, ...) on the cards",
              "msprof": "msprof: profile a program, export, analyze and plot its timeline",
              "memory": "device memory of a running node: snapshot (torch's format), pools",
              "sdk": "the C ABI: a CANN-shaped toolkit tree (headers, libascendcl.so, "
                     "set_env.sh) for C/C++ programs"}
"""Subcommands handled by ``npuemu.tools.<name>.main(argv) -> int`` (their own parsers)."""


def _delegate(name: str, argv: list[str]) -> int:
    import importlib

    return importlib.import_module(f"npuemu.tools.{name.replace('-', '_')}").main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npuemu",
                                     description=__doc__.split("\n")[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=f"npuemu {_version()}",
                        help="print npuemu's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    name_help = f"node name (default $NPUEMU_NODE or {DEFAULT_NODE!r})"
    p = sub.add_parser("start", help="start a shared node in the background")
    p.add_argument("--devices", type=int, metavar="N",
                   help="number of cards (default $NPUEMU_DEVICES or 8)")
    p.add_argument("--hbm", metavar="SIZE", help="HBM per device, e.g. 64G (default: the SoC's)")
    p.add_argument("--ddr", metavar="SIZE", help="DDR per device, e.g. 8G (default: the SoC's)")
    p.add_argument("--name", help=name_help)
    p.set_defaults(func=cmd_start)
    p = sub.add_parser("stop", help="stop a shared node")
    p.add_argument("--name", help=name_help)
    p.add_argument("--force", action="store_true",
                   help="stop even while programs are attached (their calls then fail "
                        "with 507901)")
    p.set_defaults(func=cmd_stop)
    p = sub.add_parser("status", help="devices, memory and attached hosts of running nodes")
    p.add_argument("--name", help="only this node (default: every running node)")
    p.add_argument("--json", action="store_true", help="print the nodes as JSON")
    p.add_argument("--clean", action="store_true",
                   help="first remove what this user's dead nodes left in /dev/shm")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("run", help="run a pyACL program with `import acl` resolved to npuemu")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a module as `python -m MODULE` would (instead of a script)")
    p.add_argument("script", nargs="?", help="the program to run (unless -m is given)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("demo", help="a short tour on an embedded node")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("bench", help="measure npuemu against this machine's limits")
    p.add_argument("--quick", action="store_true",
                   help="fewer samples, no 256 MiB copies (~36 s on an idle 2-CPU machine; "
                        "longer under load)")
    p.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    p.add_argument("--only", metavar="KEYS", type=lambda v: v.split(","),
                   help="run only these figures (comma-separated keys, e.g. ops,models; "
                        "an unknown key lists them all)")
    p.set_defaults(func=cmd_bench)
    for name, text in _DELEGATED.items():  # parsed by the tool itself (see main)
        p = sub.add_parser(name, help=text, add_help=False)
        p.add_argument("args", nargs=argparse.REMAINDER,
                       help=f"the options of `npuemu {name}` (see `npuemu {name} -h`)")
        p.set_defaults(func=lambda args, name=name: _delegate(name, args.args))
    return parser


def _version() -> str:
    import npuemu

    return npuemu.__version__


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        code = _dispatch(argv)
        if sys.stdout is not None:  # a closed pipe shows here, not as "Exception ignored"
            with contextlib.suppress(ValueError):  # (a program may have closed stdout)
                sys.stdout.flush()
        return code
    except BrokenPipeError:  # `npuemu status --json | head`: the reader left; not an error
        with contextlib.suppress(OSError):  # no second traceback when stdout is flushed
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in _DELEGATED:  # options like -d go to the tool, not to argparse here
        return _delegate(argv[0], argv[1:])
    if argv[:2] == ["run", "-m"] and len(argv) > 2:  # as `python -m MODULE ARGS`: every
        # argument after the module is the module's own, even `--flag` (argparse would take it)
        return cmd_run(argparse.Namespace(module=argv[2], script=None, args=argv[3:]))
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
