"""How the cards of a node are wired: HCCS groups, and PCIe between groups.

A node is a set of HCCS groups: cards in one group share an HCCS mesh (link bits
``ACL_RT_DEVS_TOPOLOGY_HCCS``) and can access each other as peers; cards of different
groups only reach each other through the host bridge (``ACL_RT_DEVS_TOPOLOGY_SYS``) and
cannot be peers. The default models an 8-card server as two 4-card groups (0-3, 4-7);
``NPUEMU_TOPOLOGY`` overrides it, e.g. ``"0-7"`` (one mesh) or ``"0-1,2-3"``.
"""

from __future__ import annotations

from npuemu.shared.enums import DevsTopology

GROUP_SIZE = 4


def parse(spec: str | None, devices: int, group_size: int = GROUP_SIZE) -> list[int]:
    """HCCS group number of each card. Every card must be in exactly one group. Without
    ``spec``, groups of ``group_size`` cards (the SoC's); 0 means the cards have no HCCS,
    each is a group of its own."""
    if not spec or not spec.strip():
        return [dev // group_size if group_size else dev for dev in range(devices)]
    groups = [-1] * devices
    for number, part in enumerate(spec.split(",")):
        lo, _, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"topology {spec!r}: {part!r} is not a card range") from None
        for dev in range(first, last + 1):
            if not 0 <= dev < devices or groups[dev] != -1:
                raise ValueError(f"topology {spec!r}: card {dev} is out of range or repeated")
            groups[dev] = number
    if -1 in groups:
        raise ValueError(f"topology {spec!r}: card {groups.index(-1)} is in no group")
    return groups


def link_bits(groups: list[int], a: int, b: int) -> int:
    """``aclrtGetDevicesTopo`` bits between two cards."""
    if groups[a] == groups[b]:
        return int(DevsTopology.ACL_RT_DEVS_TOPOLOGY_HCCS)
    return int(DevsTopology.ACL_RT_DEVS_TOPOLOGY_SYS)


def can_access(groups: list[int], a: int, b: int) -> bool:
    return a != b and groups[a] == groups[b]
