"""``npuemu memory``: device memory of a running node, from outside the programs using it.

    npuemu memory snapshot [-o FILE] [--name NODE]   # every live block, torch's pickle format
    npuemu memory pools [--name NODE] [--json]       # page pools and fragmentation per card

``snapshot`` writes ``{"segments": [...], "device_traces": [...]}`` as
``torch.cuda.memory._snapshot()`` does (default ``memory_snapshot.pickle``), so PyTorch's
memory viewer (pytorch.org/memory_viz) opens it: one segment per live block of any process
on the node, each block tagged with the owning client slot; no stack frames (a program
gets its own blocks with frames from ``npuemu.host.memory_snapshot()`` under
``NPUEMU_TRACK_ALLOC=1``). ``pools`` prints what ``npuemu.host.pool_stats`` returns.
Both attach to the node as a client for a moment (one round trip per card).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys

from npuemu.shared import errors
from npuemu.tools.sizes import format_size

DEFAULT_NODE = "default"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npuemu memory",
                                     description="device memory of a running node")
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("snapshot", help="write every live block as a torch memory snapshot")
    p.add_argument("-o", dest="out", default="memory_snapshot.pickle",
                   help="output pickle (default memory_snapshot.pickle)")
    p.add_argument("--name", help=f"node name (default $NPUEMU_NODE or {DEFAULT_NODE!r})")
    p = sub.add_parser("pools", help="page pools and fragmentation of every card")
    p.add_argument("--name", help=f"node name (default $NPUEMU_NODE or {DEFAULT_NODE!r})")
    p.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _attach(name: str | None) -> None:
    from npuemu.host.core import runtime

    os.environ["NPUEMU_NODE"] = name or os.environ.get("NPUEMU_NODE") or DEFAULT_NODE
    os.environ.pop("ASCEND_RT_VISIBLE_DEVICES", None)
    runtime.get().told_no_node = True  # a node that is not running: main says so, once


def snapshot(out: str) -> int:
    from npuemu.host.core import memstats

    snap = memstats.node_snapshot()
    with open(out, "wb") as f:
        pickle.dump(snap, f)
    total = sum(s["total_size"] for s in snap["segments"])
    print(f"{out}: {len(snap['segments'])} blocks, {format_size(total)} on "
          f"{len(snap['device_traces'])} cards")
    return 0


def pools(as_json: bool) -> int:
    from npuemu.host.core import memstats, runtime

    cards = {dev: memstats.pool_stats(dev) for dev in range(len(runtime.get().visible()))}
    if as_json:
        print(json.dumps(cards, indent=1))
        return 0
    print(f"{'card':<5}{'arena':<6}{'pool':<8}{'reserved':>11}{'used':>11}{'free':>11}"
          f"{'largest free':>14}{'fragm.':>8}")
    for dev, arenas in cards.items():
        for arena, rows in arenas.items():
            for r in rows:
                print(f"{dev:<5}{arena:<6}{r['name']:<8}{format_size(r['reserved']):>11}"
                      f"{format_size(r['used']):>11}{format_size(r['free']):>11}"
                      f"{format_size(r['largest_free']):>14}{r['fragmentation']:>8.1%}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _attach(args.name)
    try:
        if args.verb == "snapshot":
            return snapshot(args.out)
        return pools(args.json)
    except errors.AclError as err:
        print(f"npuemu memory: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
