"""``npuemu sdk``: a CANN-shaped toolkit tree of npuemu's C headers and libraries.

    $ npuemu sdk --prefix /opt/npuemu-sdk
    npuemu SDK ready at /opt/npuemu-sdk (built in 7.9 s)
      source /opt/npuemu-sdk/set_env.sh
      g++ main.cpp -I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64 -lascendcl
    $ npuemu sdk --print-prefix
    /root/.cache/npuemu/sdk

Idempotent: an up-to-date tree is left as it is ("up to date"); ``--force`` rebuilds it.
``npuemu run ./a.out [args]`` (``run_native``) runs a C program with the tree's environment
(the default prefix, built first if needed). Layout: ``npuemu.host.capi.sdk``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ELF_MAGIC = b"\x7fELF"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npuemu sdk", description=__doc__.split("\n")[0])
    p.add_argument("--prefix", type=Path,
                   help="where to put the tree (default $NPUEMU_SDK_HOME or "
                        "~/.cache/npuemu/sdk)")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument("--print-prefix", action="store_true",
                   help="print the tree's path and exit (nothing is built)")
    p.add_argument("-v", "--verbose", action="store_true", help="show the compiler's output")
    return p


def main(argv: list[str] | None = None) -> int:
    from npuemu.host.capi import sdk

    args = build_parser().parse_args(argv)
    if args.print_prefix:
        print((args.prefix or sdk.default_prefix()).resolve())
        return 0
    t0 = time.perf_counter()
    fresh = args.force or not sdk.is_current((args.prefix or sdk.default_prefix()).resolve())
    try:
        root = sdk.ensure(args.prefix, force=args.force, verbose=args.verbose)
    except Exception as err:  # the compiler's failure (or a missing one), shown whole
        print(f"npuemu sdk: could not build the SDK: {err}", file=sys.stderr)
        return 1
    state = f"built in {time.perf_counter() - t0:.1f} s" if fresh else "up to date"
    print(f"npuemu SDK ready at {root} ({state})\n  source {root}/set_env.sh\n"
          f"  g++ main.cpp -I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64 -lascendcl")
    return 0


def is_native(path: str) -> bool:
    """True if ``path`` is an ELF executable (a compiled program, not a Python script)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def run_native(program: str, args: list[str]) -> int:
    """Run a compiled program with the SDK's environment (``set_env.sh``'s variables): it
    finds ``libascendcl.so`` and ``libhccl.so`` through ``LD_LIBRARY_PATH``. Replaces this
    process (exec), so signals and the exit status are the program's own."""
    from npuemu.host.capi import sdk

    root = sdk.ensure(Path(os.environ["NPUEMU_SDK_HOME"]) if os.environ.get("NPUEMU_SDK_HOME")
                      else None)
    path = program if os.sep in program else os.path.join(".", program)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(path, [program, *args], sdk.environment(root))
    return 127  # not reached
