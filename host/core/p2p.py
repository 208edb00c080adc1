"""Peer access between cards (``aclrtDeviceCanAccessPeer`` and friends), raising AclError.

Which cards may be peers comes from the node's topology (``shared/topology.py``: cards of
one HCCS group). Peer access is one-way and per process, as on hardware: enabling it from
the current device to ``peer`` lets the current device's DMA engine read and write the
peer's memory. A copy between two cards runs on the engine of the device that executes it
(the current device for ``aclrtMemcpy``, the stream's device for ``aclrtMemcpyAsync``),
which must have peer access to the other card; bytes move once, arena to arena.

Codes where CANN's documentation is silent (our choices): self-peer, a repeated enable, a disable
without enable and a copy without peer access give 107000; enabling towards a card that is
not reachable (another HCCS group) gives 207000.
"""

from __future__ import annotations

from npuemu.host.core import runtime
from npuemu.shared import errors, topology


def _pair(dev: object, peer: object) -> tuple[int, int]:
    rt = runtime.get()
    dev, peer = rt.check_device_id(dev), rt.check_device_id(peer)
    if dev == peer:
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"device {dev} cannot be its own peer")
    return dev, peer


def _groups() -> tuple[list[int], list[int]]:
    rt = runtime.get()
    return rt.ensure_node().groups, rt.visible()


def can_access_peer(dev: int, peer: int) -> int:
    """Mirrors ``aclrtDeviceCanAccessPeer``: 1 if the two cards share an HCCS group."""
    dev, peer = _pair(dev, peer)
    groups, visible = _groups()
    return int(topology.can_access(groups, visible[dev], visible[peer]))


def devices_topo(dev: int, other: int) -> int:
    """Mirrors ``aclrtGetDevicesTopo``: ``ACL_RT_DEVS_TOPOLOGY_*`` bits between two cards."""
    dev, other = _pair(dev, other)
    groups, visible = _groups()
    return topology.link_bits(groups, visible[dev], visible[other])


def enable_peer_access(peer: int, flags: int = 0) -> None:
    """Mirrors ``aclrtDeviceEnablePeerAccess``: from the current device to ``peer``; flags
    must be 0 (100000)."""
    rt = runtime.get()
    dev = rt.current().device
    if runtime.index(flags, errors.ACL_ERROR_INVALID_PARAM, "flags") != 0:
        raise errors.error_for(errors.ACL_ERROR_INVALID_PARAM, "flags must be 0")
    dev, peer = _pair(dev, peer)
    if not can_access_peer(dev, peer):
        raise errors.error_for(errors.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                               f"devices {dev} and {peer} are not in one HCCS group")
    with rt.lock:
        if (dev, peer) in rt.peer_access:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"peer access {dev} -> {peer} is already enabled")
        rt.peer_access.add((dev, peer))


def disable_peer_access(peer: int) -> None:
    """Mirrors ``aclrtDeviceDisablePeerAccess`` (from the current device)."""
    rt = runtime.get()
    dev, peer = _pair(rt.current().device, peer)
    with rt.lock:
        if (dev, peer) not in rt.peer_access:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"peer access {dev} -> {peer} is not enabled")
        rt.peer_access.discard((dev, peer))


def peer_access_status(dev: int, peer: int) -> int:
    """Mirrors ``aclrtDevicePeerAccessStatus``: 1 if enabled from ``dev`` to ``peer``."""
    dev, peer = _pair(dev, peer)
    return int((dev, peer) in runtime.get().peer_access)


def check_copy(executor: int, src_dev: int, dst_dev: int) -> None:
    """A copy between ``src_dev`` and ``dst_dev`` run by ``executor``'s DMA engine needs the
    executor to be one of them and to have peer access to the other."""
    if src_dev == dst_dev == executor:  # within one card: nothing to check
        return
    if src_dev != dst_dev and executor not in (src_dev, dst_dev):
        raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                               f"a copy between devices {src_dev} and {dst_dev} must run on "
                               f"one of them, not on device {executor}")
    for other in {src_dev, dst_dev} - {executor}:
        if (executor, other) not in runtime.get().peer_access:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"peer access from device {executor} to {other} is not "
                                   "enabled (aclrtDeviceEnablePeerAccess)")
