"""``npuemu status``: what a node is doing, read straight from its shared memory.

Read-only: maps the registry and each device's control block, never talks to a worker.

- A card whose heartbeat is older than ``DEVICE_LOST_TIMEOUT_S`` shows ``HUNG`` (the
  supervisor marks it in the registry; status also judges the heartbeat it reads itself).
- A node whose supervisor is gone shows ``DEAD``, and its cards ``LOST`` (never READY) unless
  their worker process still lives.
- ``--clean`` removes the names of this user's dead nodes (``shm.clean_dead``: only names
  no live process holds) and the logs of shared nodes that no longer run.

    $ npuemu status
    node default  (Ascend910B1, 4 devices, supervisor pid 4242, protocol 2)
    dev  pid    state  health  HBM used / total        DDR used / total     hosts
    0    4250   READY  OK      2.0 MiB / 64.0 GiB      0 B / 8.0 GiB        4301
    1    -      ABSENT -       -                       -                    -
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import psutil

from npuemu.shared import layout, shm
from npuemu.shared.config import DEVICE_LOST_TIMEOUT_S
from npuemu.shared.layout import (
    CLIENT_ENTRY,
    CTL_CLIENTS,
    DEVICE_CTL,
    DEVICE_ENTRY,
    LINK_ENTRY,
    REG_DEVICES,
    REGISTRY,
    ClientState,
    DeviceState,
    Health,
    NodeState,
)
from npuemu.tools.sizes import format_size


def nodes() -> list[str]:
    """Names of this user's nodes that have a registry in /dev/shm (other users' nodes are
    not ours to read)."""
    found = []
    for e in shm.leftovers():
        if e.endswith(".reg") and not e.startswith("sem."):
            try:
                if os.stat(f"{shm.SHM_DIR}/{e}").st_uid == os.geteuid():
                    found.append(e[len(shm.PREFIX) : -4])
            except FileNotFoundError:
                continue
    return sorted(found)


def _words(seg: shm.Segment, n: int) -> list[int]:
    view = seg.buf[: n * 8].cast("Q")
    try:
        return list(view)
    finally:
        view.release()


def read_node(name: str) -> dict:
    """A snapshot of node ``name`` as plain data (FileNotFoundError if there is none)."""
    seg = shm.Segment(shm.name(name, "reg"))
    try:
        reg = _words(seg, layout.REGISTRY_SIZE // 8)
    finally:
        seg.close()
    ndev = reg[REGISTRY.DEVICES]
    alive = _process_alive(reg[REGISTRY.SUP_PID], reg[REGISTRY.SUP_CTIME])
    state = NodeState(reg[REGISTRY.STATE]).name if alive else "DEAD"
    soc = layout.unpack_str(reg[REGISTRY.SOC : REGISTRY.SOC + 4])
    node: dict[str, Any] = {
        "name": name, "state": state, "soc": soc, "devices": [],
        "supervisor_pid": reg[REGISTRY.SUP_PID], "owner_pid": reg[REGISTRY.OWNER_PID],
        "protocol": reg[REGISTRY.VERSION]}
    for dev in range(ndev):
        entry = reg[REG_DEVICES + dev * DEVICE_ENTRY.words :][: DEVICE_ENTRY.words]
        node["devices"].append(_read_device(name, dev, entry, reg, alive))
    return node


def _process_alive(pid: int, ctime_us: int) -> bool:
    """(pid, create time) identifies the process; a reused pid does not count."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return (abs(proc.create_time() * 1e6 - ctime_us) < 1000
                and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _read_device(name: str, dev: int, entry: list[int], reg: list[int], alive: bool) -> dict:
    state = DeviceState(entry[DEVICE_ENTRY.STATE])
    info: dict[str, Any] = {"id": dev, "pid": entry[DEVICE_ENTRY.PID] or None, "state": state.name,
            "health": None, "starts": entry[DEVICE_ENTRY.STARTS],
            "last_exit": layout.decode_exit(entry[DEVICE_ENTRY.EXIT_STATUS]),
            "hbm_total": reg[REGISTRY.HBM_BYTES], "ddr_total": reg[REGISTRY.DDR_BYTES],
            "hbm_used": None, "ddr_used": None, "hosts": [], "links": [],
            "hccs_group": entry[DEVICE_ENTRY.HCCS_GROUP]}
    if not alive:  # the registry is stale: only a worker that still lives is not LOST
        if state not in (DeviceState.ABSENT, DeviceState.STOPPED, DeviceState.LOST) and \
                not _process_alive(entry[DEVICE_ENTRY.PID], entry[DEVICE_ENTRY.CTIME]):
            info["state"] = DeviceState.LOST.name
        return info
    if state not in (DeviceState.READY, DeviceState.BOOTING, DeviceState.HUNG):
        return info
    try:
        seg = shm.Segment(shm.name(name, f"d{dev}", "ctl"))
    except FileNotFoundError:
        return info
    try:
        ctl = _words(seg, layout.DEVICE_CTL_SIZE // 8)
    finally:
        seg.close()
    age_s = (time.monotonic_ns() - ctl[DEVICE_CTL.HEARTBEAT]) / 1e9
    ctl_state = DeviceState(ctl[DEVICE_CTL.STATE])
    if ctl_state == DeviceState.READY and (state == DeviceState.HUNG
                                           or age_s > DEVICE_LOST_TIMEOUT_S):
        ctl_state = DeviceState.HUNG
    info.update(state=ctl_state.name, heartbeat_age_s=round(age_s, 3),
                health=Health(ctl[DEVICE_CTL.HEALTH]).name,
                hbm_used=ctl[DEVICE_CTL.HBM_USED], hbm_peak=ctl[DEVICE_CTL.HBM_PEAK],
                ddr_used=ctl[DEVICE_CTL.DDR_USED], live_allocs=ctl[DEVICE_CTL.LIVE_ALLOCS],
                committed=ctl[DEVICE_CTL.COMMITTED], requests=ctl[DEVICE_CTL.REQUESTS])
    info["hbm_pools"] = hbm_pools(ctl)
    for peer in range(reg[REGISTRY.DEVICES]):
        base = layout.CTL_LINKS + peer * LINK_ENTRY.words
        counters = ctl[base : base + LINK_ENTRY.words]
        if any(counters):
            info["links"].append({"peer": peer, "tx_bytes": counters[LINK_ENTRY.TX_BYTES],
                                  "tx_copies": counters[LINK_ENTRY.TX_COPIES],
                                  "rx_bytes": counters[LINK_ENTRY.RX_BYTES],
                                  "rx_copies": counters[LINK_ENTRY.RX_COPIES]})
    for slot in range(layout.MAX_CLIENTS):
        base = CTL_CLIENTS + slot * CLIENT_ENTRY.words
        if ctl[base + CLIENT_ENTRY.STATE] == ClientState.ACTIVE:
            info["hosts"].append({"pid": ctl[base + CLIENT_ENTRY.PID],
                                  "used": ctl[base + CLIENT_ENTRY.USED],
                                  "allocs": ctl[base + CLIENT_ENTRY.ALLOCS]})
    return info


def hbm_pools(ctl: list[int]) -> dict:
    """The HBM heap's pool figures published in the control block (``device/memory/pools.py``):
    free bytes, free blocks, largest free block, external fragmentation
    (1 - largest / free) and the normal-page pool's size (the rest is the huge-page pool)."""
    free = ctl[DEVICE_CTL.HBM_TOTAL] - ctl[DEVICE_CTL.HBM_USED]
    largest = ctl[DEVICE_CTL.HBM_LARGEST_FREE]
    return {"free": free, "free_blocks": ctl[DEVICE_CTL.HBM_FREE_BLOCKS],
            "largest_free": largest,
            "fragmentation": round(1 - largest / free, 4) if free > 0 else 0.0,
            "normal_pool": ctl[DEVICE_CTL.HBM_NORMAL_POOL],
            "huge_pool": ctl[DEVICE_CTL.HBM_TOTAL] - ctl[DEVICE_CTL.HBM_NORMAL_POOL]}


def fmt_bytes(n: int | None) -> str:
    return format_size(n)  # written once for every tool: npuemu/tools/sizes.py


def render(node: dict) -> str:
    lines = [f"node {node['name']}  ({node['soc']}, {len(node['devices'])} devices, "
             f"{node['state']}, supervisor pid {node['supervisor_pid']}, "
             f"protocol {node['protocol']})",
             f"{'dev':<4} {'pid':<8} {'state':<8} {'health':<8} {'HBM used / total':<24} "
             f"{'DDR used / total':<22} hosts"]
    for d in node["devices"]:
        hbm = f"{fmt_bytes(d['hbm_used'])} / {fmt_bytes(d['hbm_total'])}"
        ddr = f"{fmt_bytes(d['ddr_used'])} / {fmt_bytes(d['ddr_total'])}"
        hosts = ",".join(str(h["pid"]) for h in d["hosts"]) or "-"
        lines.append(f"{d['id']:<4} {d['pid'] or '-'!s:<8} {d['state']:<8} "
                     f"{d['health'] or '-':<8} {hbm:<24} {ddr:<22} {hosts}")
    groups: dict[int, list[int]] = {}
    for d in node["devices"]:
        groups.setdefault(d["hccs_group"], []).append(d["id"])
    lines.append("topology: HCCS groups " + "  ".join(
        "{" + ",".join(map(str, ids)) + "}" for ids in groups.values())
        + " (peers within a group; SYS between groups)")
    for d in node["devices"]:
        if d.get("hbm_pools"):
            p = d["hbm_pools"]
            lines.append(f"HBM {d['id']}: normal-page pool {fmt_bytes(p['normal_pool'])}, "
                         f"huge-page pool {fmt_bytes(p['huge_pool'])}; free "
                         f"{fmt_bytes(p['free'])} in {p['free_blocks']} blocks, largest "
                         f"{fmt_bytes(p['largest_free'])}, fragmentation "
                         f"{p['fragmentation']:.1%}")
    for d in node["devices"]:
        for link in d["links"]:
            lines.append(f"P2P {d['id']} -> {link['peer']}: {fmt_bytes(link['tx_bytes'])} in "
                         f"{link['tx_copies']} copies;  {link['peer']} -> {d['id']}: "
                         f"{fmt_bytes(link['rx_bytes'])} in {link['rx_copies']} copies "
                         f"(by device {d['id']}'s DMA)")
    return "\n".join(lines)


def clean() -> int:
    """``npuemu status --clean``: remove what this user's dead nodes left behind."""
    from npuemu.host.driver.node import log_path

    removed = shm.clean_dead()
    for node, count in sorted(removed.items()):
        print(f"node {node}: removed {count} shared-memory names (its supervisor is gone)")
    live = set(shm.listening_nodes())
    logs = os.path.dirname(log_path("x"))
    for entry in sorted(os.listdir(logs)):
        if entry.endswith(".log") and entry[:-4] not in live:
            os.unlink(os.path.join(logs, entry))
            print(f"node {entry[:-4]}: removed its log {os.path.join(logs, entry)}")
    if not removed:
        print("npuemu status --clean: no names of dead nodes left")
    return 0


def main(name: str | None, as_json: bool, clean_dead: bool = False) -> int:
    if clean_dead:
        clean()
    names = [name] if name else (
        [os.environ["NPUEMU_NODE"]] if os.environ.get("NPUEMU_NODE") else nodes())
    found = []
    for n in names:
        try:
            found.append(read_node(n))
        except PermissionError as err:
            print(f"npuemu: node {n!r}: {err}")
            return 1
        except FileNotFoundError:
            if name or os.environ.get("NPUEMU_NODE"):
                print(f"npuemu: no node named {n!r} is running")
                return 1  # a node that vanished while listing them all is just skipped
    if as_json:
        print(json.dumps(found, indent=2))
    elif not found:
        print("npuemu: no node is running")
    else:
        print("\n\n".join(render(n) for n in found))
    return 0
