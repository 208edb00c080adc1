"""``npuemu msprof``: msprof's command line over npuemu's profiler.

    npuemu msprof --application="python app.py --its args" --output=DIR [switches]
    npuemu msprof --export=on --output=DIR          # (re-)export DIR or the PROF_* dirs in it
    npuemu msprof --analyze=on --output=DIR         # print the waits report
    npuemu msprof --plot=timeline.png --output=DIR  # draw the timeline with matplotlib

Collection runs the application unmodified in a child interpreter in which ``import acl``
resolves to npuemu (as ``npuemu run``) and a profiling session starts before the program's
first line; the child writes raw data into a new ``DIR/PROF_*`` as it goes, and this process
exports it after the child ends, whatever way it ended (a crash or ``kill -9`` leaves a
partial but readable trace). The output is private: directories are created 0700 and
files 0600, whatever the umask (``shared/private.py``). Applications: ``python[3] script.py
args``, ``python -m module args`` or ``script.py args``; anything else is refused (exit 2).

Switches (``on``/``off``): ``--task-time`` (on; also ``l0``..``l3``), ``--ascendcl`` (on: time
the ``acl`` API), ``--runtime-api`` (off; same timer), ``--aicpu`` (off), ``--msproftx`` (off),
``--sys-hardware-mem`` (off; the HBM counter track is always written). Other msprof options
(``--ai-core``, ``--aic-metrics``, ``--storage-limit``, ``--type``, ...) are accepted and
ignored, with a note. Exit status: the application's.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shlex
import subprocess
import sys

ENV = "NPUEMU_MSPROF"
SWITCHES = {"task-time": "on", "ascendcl": "on", "runtime-api": "off", "aicpu": "off",
            "msproftx": "off", "sys-hardware-mem": "off"}
IGNORED = ("storage-limit", "ai-core", "aic-mode", "aic-metrics", "ai-vector-core", "hccl",
           "l2", "ge-api", "task-memory", "model-execution", "sys-hardware-mem-freq",
           "sys-cpu-profiling", "sys-profiling", "sys-pid-profiling", "sys-io-profiling",
           "sys-interconnection-profiling", "dvpp-profiling", "sys-lp", "sys-period",
           "sys-devices", "llc-profiling", "host-sys", "host-sys-usage", "type",
           "summary-format", "python-path", "reports", "model-id", "iteration-id", "clear",
           "mstx-domain-include", "mstx-domain-exclude", "delay", "duration")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npuemu msprof",
                                description="collect, export, analyze and plot profiles")
    p.add_argument("--application", help='the program to run, e.g. "python app.py"')
    p.add_argument("--output", help="result root (default: the current directory)")
    p.add_argument("--export", choices=("on", "off"), default="off",
                   help="export the PROF_* dirs under --output again")
    p.add_argument("--analyze", nargs="?", const="on", choices=("on", "off"), default="off",
                   help="print the waits report of the PROF_* dirs under --output")
    p.add_argument("--rule", help="accepted for msprof compatibility (the report is fixed)")
    p.add_argument("--plot", metavar="PNG", help="draw the timeline of the newest PROF_* dir")
    for name, default in SWITCHES.items():
        p.add_argument(f"--{name}", default=default, help=f"on/off (default {default})")
    for name in IGNORED:
        p.add_argument(f"--{name}", help=argparse.SUPPRESS)
    return p


def data_types(args: argparse.Namespace) -> int:
    from npuemu.host.prof import session as s

    bits = 0
    if args.task_time != "off":
        bits |= {"l0": s.ACL_PROF_TASK_TIME_L0, "l2": s.ACL_PROF_TASK_TIME_L2,
                 "l3": s.ACL_PROF_TASK_TIME_L3}.get(args.task_time, s.ACL_PROF_TASK_TIME)
    for flag, bit in (("ascendcl", s.ACL_PROF_ACL_API), ("runtime_api", s.ACL_PROF_RUNTIME_API),
                      ("aicpu", s.ACL_PROF_AICPU), ("msproftx", s.ACL_PROF_MSPROFTX),
                      ("sys_hardware_mem", s.ACL_PROF_TASK_MEMORY)):
        if getattr(args, flag) == "on":
            bits |= bit
    return bits


def child_command(application: str) -> list[str] | None:
    """The child's argv for ``application``, or None if it is not a Python program."""
    argv = shlex.split(application)
    if not argv:
        return None
    if os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    if not argv:
        return None
    if argv[0] == "-m" and len(argv) > 1:
        return [sys.executable, "-m", "npuemu.tools.msprof", "--child-module", *argv[1:]]
    if argv[0].endswith(".py"):
        return [sys.executable, "-m", "npuemu.tools.msprof", "--child-script", *argv]
    return None


def missing_program(command: list[str]) -> str | None:
    """Why the child ``command`` cannot start (its script or module is not there), or None."""
    kind, target = command[3], command[4]
    if kind == "--child-script" and not os.path.isfile(target):
        return f"the application's script {target!r} does not exist"
    if kind == "--child-module":
        import importlib.util

        try:
            found = importlib.util.find_spec(target) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"the application's module {target!r} cannot be found"
    return None


def collect(args: argparse.Namespace) -> int:
    from npuemu.host.prof import export
    from npuemu.shared import private

    output = os.path.abspath(args.output or ".")
    command = child_command(args.application)
    if command is None:
        print(f"[ERROR] npuemu msprof profiles Python programs only: {args.application!r}",
              file=sys.stderr)
        return 2
    problem = missing_program(command)
    if problem:  # checked before any output folder is made: nothing is left behind
        print(f"[ERROR] {problem}: nothing was collected", file=sys.stderr)
        return 2
    private.makedirs(output)
    before = set(export.find_prof_dirs(output))
    env = {**os.environ, ENV: json.dumps({"output": output, "data_types": data_types(args)})}
    code = subprocess.call(command, env=env)
    new = [d for d in export.find_prof_dirs(output) if d not in before]
    for prof_dir in new:
        print(f"[INFO] Start export data in {os.path.basename(prof_dir)}.")
        _export_one(prof_dir)
    if not new:
        print("[WARNING] the application opened no device: nothing was collected.")
    print("[INFO] Profiling finished.")
    return code


def _export_one(prof_dir: str) -> None:
    from npuemu.host.prof import export, model

    paths = export.export(prof_dir)
    run = model.load(prof_dir)
    name = os.path.basename(prof_dir)
    rows = [["Job Info", "Device ID", "Dir Name", "Collection Time", "Tasks", "Dropped"]]
    rows += [["NA", str(dev), name, name.split("_")[2], str(len(device.tasks)),
              str(device.info.get("dropped", 0))] for dev, device in sorted(run.devices.items())]
    print(table(rows))
    print(f"[INFO] Timeline: {paths['timeline']}")


def table(rows: list[list[str]]) -> str:
    """``rows`` (the first is the header) as aligned columns: text left, numbers right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric = [all(row[i].isdigit() for row in rows[1:]) and len(rows) > 1
               for i in range(len(widths))]
    return "\n".join("  ".join(cell.rjust(w) if num else cell.ljust(w)
                               for cell, w, num in zip(row, widths, numeric, strict=True))
                     .rstrip() for row in rows)


def run_child(kind: str, argv: list[str]) -> int:
    """Inside the child: start the session, run the program, stop the session."""
    from npuemu.host.acl import prof as acl_prof
    from npuemu.host.prof import pyapi, session
    from npuemu.tools.cli import install_acl

    config = json.loads(os.environ.pop(ENV))
    install_acl()
    timed = config["data_types"] & session.API_BITS  # pyACL's calls and the Pythonic API's
    hooks = (acl_prof.ApiTimer(), pyapi.PythonicApiTimer()) if timed else ()
    run = session.Session(config["output"], config["data_types"], mode="cli", hooks=hooks)
    session.activate(run)
    sys.argv = list(argv)
    code = 0
    try:
        if kind == "module":
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        session.deactivate(run)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("--child-script", "--child-module"):
        return run_child(argv[0].removeprefix("--child-"), argv[1:])
    args = build_parser().parse_args(argv)
    ignored = [n for n in IGNORED if getattr(args, n.replace("-", "_")) is not None]
    if ignored:
        print(f"[INFO] ignored by npuemu: {', '.join('--' + n for n in ignored)}")
    if args.application:
        return collect(args)
    return _offline(args)


def _offline(args: argparse.Namespace) -> int:
    from npuemu.host.prof import export, model, plot, waits

    if args.export != "on" and args.analyze != "on" and not args.plot:
        print("[ERROR] give --application, --export=on, --analyze or --plot", file=sys.stderr)
        return 2
    dirs = export.find_prof_dirs(args.output or ".")
    if not dirs:
        print(f"[ERROR] no PROF_* directory at {args.output or '.'}", file=sys.stderr)
        return 1
    if args.export == "on":
        for prof_dir in dirs:
            print(f"[INFO] Start export data in {os.path.basename(prof_dir)}.")
            _export_one(prof_dir)
        print("[INFO] Export finished.")
    if args.analyze == "on":
        for prof_dir in dirs:
            print(f"== {os.path.basename(prof_dir)}")
            print(waits.format_report(waits.analyze(model.load(prof_dir))))
    if args.plot:
        newest = max(dirs, key=os.path.getmtime)
        print(f"[INFO] Timeline picture: {plot.plot(model.load(newest), args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
