"""``npuemu inject``: inject a hardware fault into a card of a running shared node.

Attaches to the node as a host client (``NPUEMU_NODE``), calls
``npuemu.host.core.faults.inject(dev, kind, **params)`` and detaches. ``DEV`` is the card's id in
the node (``ASCEND_RT_VISIBLE_DEVICES`` is ignored here). Values are ints (``0x..``
allowed), ``true``/``false`` (or ``1``/``0`` for a flag), or strings. Kinds and their
parameters (``device/faults.py``):

    ecc_single ptr=P | ecc_multi ptr=P | aicore/aivector/aicpu [kernel=NAME] [nth=N]
    hang [count=N] | dma [code=507013|507053] | link peer=D [clear=true] | lost | clear_ecc

    $ npuemu inject -d 0 ecc_multi ptr=0x100000001000
    injected ecc_multi into device 0 of node default: ptr=0x100000001000
    $ npuemu inject -d 1 lost
    injected lost into device 1 of node default: device 1 is LOST (worker 4250 killed)
    $ npuemu inject -d 0 ecc_multi ptr=0x1
    npuemu inject: ACL_ERROR_RT_PARAM_INVALID (107000): 0x1 is not an address of device 0
    $ npuemu inject --file faults.json     # [{"device": 0, "kind": "hang", "params": {}}]

``lost`` returns once the supervisor has marked the card LOST (at most 5 s). A card that is
already LOST is refused with 507010: injecting would attach to it, which restarts it.

Faults that can never fire are refused before anything is sent, with one line (exit 2): a
missing or unknown parameter (``ecc_multi`` without ``ptr=``, ``hang cont=3``), a value of
the wrong type or range (``nth=0``, ``dma code=1``), a kernel of the ready library named on
an engine it does not run on (``aicore kernel=relu``: relu is an AI Vector kernel), and a
``link`` peer outside the card's HCCS group (P2P copies never cross groups, so no copy
would ever use that link) or equal to the card. A kernel name the ready library does not
have is accepted (it may be in a binary the program loads itself; the CLI cannot know).

    $ npuemu inject -d 0 aicore kernel=relu
    npuemu inject: kernel 'relu' runs on aivector, not aicore: this fault could never fire
    $ npuemu inject -d 0 link peer=5
    npuemu inject: peer 5 is outside device 0's HCCS group {0,1,2,3}: no P2P copy uses it

Exit status: 0 done, 1 an ACL error (code and name printed) or no such node, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from npuemu.shared import errors

LOST_WAIT_S = 5.0

_INT, _BOOL, _STR = "an int", "true or false", "a name"
_PTR = "a device address, e.g. 0x100000001000"
PARAMS: dict[str, dict[str, tuple[str, bool]]] = {
    "ecc_single": {"ptr": (_PTR, True)},
    "ecc_multi": {"ptr": (_PTR, True)},
    "aicore": {"kernel": (_STR, False), "nth": (_INT, False)},
    "aivector": {"kernel": (_STR, False), "nth": (_INT, False)},
    "aicpu": {"kernel": (_STR, False), "nth": (_INT, False)},
    "hang": {"count": (_INT, False)},
    "dma": {"code": (_INT, False)},
    "link": {"peer": (_INT, True), "clear": (_BOOL, False)},
    "lost": {},
    "clear_ecc": {},
}
"""Each fault kind's parameters: name -> (what the value must be, required)."""
_TYPES = {_INT: int, _PTR: int, _BOOL: bool, _STR: str}
DMA_CODES = (errors.ACL_ERROR_RT_SYS_DMA, errors.ACL_ERROR_RT_DEVICE_MEM_ERROR)


def check(kind: str, params: dict[str, Any]) -> None:
    """Refuse (ValueError, one line) a fault whose parameters are missing, unknown, of the
    wrong type or out of range. Node-independent; see ``check_on_node`` for the rest."""
    if kind not in PARAMS:
        raise ValueError(f"unknown fault {kind!r}: one of {', '.join(PARAMS)}")
    spec = PARAMS[kind]
    unknown = sorted(set(params) - set(spec))
    if unknown:
        takes = ", ".join(f"{k}=" for k in spec) or "no parameters"
        raise ValueError(f"{kind} takes {takes}; not {', '.join(unknown)}")
    for key, (what, required) in spec.items():
        if key not in params:
            if required:
                raise ValueError(f"{kind} needs {key}= ({what})")
            continue
        value = params[key]
        wanted = _TYPES[what]
        if wanted is bool and type(value) is int and value in (0, 1):  # clear=1, as documented
            value = params[key] = bool(value)
        if type(value) is not wanted and not (wanted is str and isinstance(value, int)):
            raise ValueError(f"{kind} {key}={value!r}: must be {what}")
    if params.get("nth", 1) < 1 or params.get("count", 1) < 1:
        raise ValueError(f"{kind}: nth= and count= must be >= 1")
    if kind == "dma" and params.get("code", DMA_CODES[0]) not in DMA_CODES:
        raise ValueError(f"dma code={params['code']}: one of {DMA_CODES[0]}, {DMA_CODES[1]}")
    if kind in ("aicore", "aivector", "aicpu") and "kernel" in params:
        params["kernel"] = str(params["kernel"])
        engine = library_engine(params["kernel"])
        if engine is not None and engine != kind:
            raise ValueError(f"kernel {params['kernel']!r} runs on {engine}, not {kind}: "
                             "this fault could never fire")


def library_engine(kernel: str) -> str | None:
    """The engine of ``kernel`` in the ready kernel library, or None if it is not there."""
    from npuemu.shared import kernel_library

    func = getattr(kernel_library, kernel, None)
    return getattr(func, "__npu_kernel__", None) if callable(func) else None


def check_on_node(node_info: dict, dev: int, kind: str, params: dict[str, Any]) -> None:
    """Refuse (ValueError) a fault that the node's wiring makes impossible: a ``link`` to
    the card itself, to a card the node does not have, or outside the card's HCCS group."""
    if kind != "link":
        return
    peer, cards = params["peer"], node_info["devices"]
    if peer == dev or not 0 <= peer < len(cards):
        raise ValueError(f"link peer={peer}: must be another device of the node "
                         f"(0..{len(cards) - 1}, not {dev})")
    group = [d["id"] for d in cards if d["hccs_group"] == cards[dev]["hccs_group"]]
    if peer not in group:
        raise ValueError(f"peer {peer} is outside device {dev}'s HCCS group "
                         f"{{{','.join(map(str, group))}}}: no P2P copy uses that link")


def parse_value(text: str) -> Any:
    """``0x10`` -> 16, ``12`` -> 12, ``true`` -> True, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for base in (0, 10):  # base 10 also takes leading zeros ("010")
        try:
            return int(text, base)
        except ValueError:
            pass
    return text


def parse_params(pairs: list[str]) -> dict[str, Any]:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"parameter {pair!r} is not key=value")
        params[key] = parse_value(value)
    return params


def _describe(params: dict[str, Any]) -> str:
    shown = [f"{k}=0x{v:x}" if k == "ptr" and isinstance(v, int) else f"{k}={v}"
             for k, v in params.items()]
    return " ".join(shown) or "(no parameters)"


def _use_node(node: str) -> None:
    """Make this process's runtime attach to ``node``, with the node's own device ids."""
    os.environ["NPUEMU_NODE"] = node
    os.environ.pop("ASCEND_RT_VISIBLE_DEVICES", None)


def inject_fault(node: str, dev: int, kind: str, params: dict[str, Any]) -> str:
    """Inject one fault; returns what happened (a line). Raises ValueError for a fault that
    can never fire (``check``, ``check_on_node``), AclError for the rest."""
    from npuemu.host.core import faults
    from npuemu.tools import status

    try:
        info = status.read_node(node)
    except FileNotFoundError:
        raise errors.error_for(errors.ACL_ERROR_RT_NO_DEVICE,
                               f"no node named {node!r} is running") from None
    if type(dev) is not int or not 0 <= dev < len(info["devices"]):
        raise errors.error_for(errors.ACL_ERROR_RT_INVALID_DEVICEID,
                               f"no device {dev!r} in node {node!r} "
                               f"({len(info['devices'])} devices)")
    if not isinstance(params, dict):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "params must be a map")
    check(kind, params)
    check_on_node(info, dev, kind, params)
    card = info["devices"][dev]
    if card["state"] == "LOST":
        raise errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT,
                               f"device {dev} is lost; a set_device brings up a fresh card")
    _use_node(node)
    faults.inject(dev, kind, **params)
    what = _wait_lost(node, dev, card["pid"]) if kind == "lost" else _describe(params)
    return f"injected {kind} into device {dev} of node {node}: {what}"


def _wait_lost(node: str, dev: int, pid: int | None) -> str:
    from npuemu.tools import status

    deadline = time.monotonic() + LOST_WAIT_S
    while time.monotonic() < deadline:
        try:
            state = status.read_node(node)["devices"][dev]["state"]
        except FileNotFoundError:
            return "the node is gone"
        if state == "LOST":
            return f"device {dev} is LOST (worker {pid} killed)"
        time.sleep(0.01)
    return f"device {dev} not yet marked LOST after {LOST_WAIT_S:.0f} s"


def _load_file(path: str) -> list[tuple[int, str, dict]]:
    with open(path, encoding="utf-8") as f:
        items = json.load(f)
    if not isinstance(items, list):
        raise ValueError("the file must hold a JSON list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "kind" not in item or "device" not in item:
            raise ValueError(f"entry {i} needs 'device' and 'kind' (and optional 'params')")
        params = item.get("params") or {}
        if not isinstance(params, dict):
            raise ValueError(f"entry {i}: 'params' must be a map")
        out.append((item["device"], item["kind"], params))
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npuemu inject", description="inject a fault into a card of a running node",
        epilog="kinds: ecc_single ptr=, ecc_multi ptr=, aicore|aivector|aicpu kernel= nth=, "
               "hang count=, dma code=, link peer= clear=, lost, clear_ecc")
    parser.add_argument("--name", help="node name (default $NPUEMU_NODE or 'default')")
    parser.add_argument("-d", "--device", type=int, help="device id in the node")
    parser.add_argument("--file", help="JSON list of {device, kind, params} to inject in order")
    parser.add_argument("kind", nargs="?", help="the fault: " + ", ".join(PARAMS))
    parser.add_argument("params", nargs="*", metavar="key=value",
                        help="the fault's parameters (ints may be 0x..; flags true/false or 1/0)")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    node = args.name or os.environ.get("NPUEMU_NODE") or "default"
    try:
        if args.file:
            if args.kind or args.device is not None:
                raise ValueError("--file takes no -d, KIND or parameters")
            todo = _load_file(args.file)
        else:
            if args.kind is None or args.device is None:
                raise ValueError("need -d DEV and KIND (or --file)")
            todo = [(args.device, args.kind, parse_params(args.params))]
        for _dev, kind, params in todo:  # every entry checked before the first is injected
            check(kind, params)
    except (OSError, ValueError) as err:
        print(f"npuemu inject: {err}", file=sys.stderr)
        return 2
    for dev, kind, params in todo:
        try:
            print(inject_fault(node, dev, kind, params), flush=True)
        except ValueError as err:
            print(f"npuemu inject: {err}", file=sys.stderr)
            return 2
        except errors.AclError as err:
            print(f"npuemu inject: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
