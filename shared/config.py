"""Configuration shared by the host runtime and the device workers.

* :class:`SocProfile` / :data:`PROFILES`: per-SoC hardware numbers (``aclrtGetSocName``,
  ``aclrtGetDeviceInfo``, ``aclGetDeviceCapability``, ``aclrtGetMemInfo``).
* :class:`NodeConfig`: one emulated node (number of cards, SoC, memory sizes), read from the
  ``NPUEMU_*`` environment variables by :meth:`NodeConfig.from_env`.
* :func:`parse_size`, :func:`parse_visible_devices` (``ASCEND_RT_VISIBLE_DEVICES``).
* Timeouts of the host <-> device-worker protocol.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

from npuemu.shared import address

__all__ = [
    "ATTACH_TIMEOUT_S",
    "DEFAULT_DEVICES",
    "DEFAULT_SOC",
    "DEVICE_LOST_TIMEOUT_S",
    "HEARTBEAT_S",
    "MAX_ARENA_BYTES",
    "MEM_ALIGN",
    "PROFILES",
    "NodeConfig",
    "SocProfile",
    "parse_size",
    "parse_visible_devices",
]

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

DEVICE_LOST_TIMEOUT_S = 5.0
"""A device worker that died or hung is reported lost (device status ABNORMAL) within this."""

ATTACH_TIMEOUT_S = 10.0
"""Longest the host waits for a device worker to start and attach to its shared memory."""

HEARTBEAT_S = 0.5
"""Period at which a device worker proves it is alive."""

MEM_ALIGN = 2 * MiB
"""HBM and DDR sizes are rounded up to a multiple of this (the huge-page size)."""

MAX_ARENA_BYTES = address.ARENA_STRIDE
"""Largest HBM or DDR size: one arena of the device address window (128 GiB)."""

DEFAULT_DEVICES = 8
"""Cards per node when ``NPUEMU_DEVICES`` is not set."""

DEFAULT_SOC = "Ascend910B1"
"""SoC when ``NPUEMU_SOC`` is not set."""


@dataclass(frozen=True)
class SocProfile:
    """Hardware numbers of one SoC, as in ``[SoCInfo]`` of its CANN platform ``.ini`` file.

    ``hbm_bytes`` is ``memory_size``; ``l2_bytes`` is ``l2_size``. ``ddr_bytes`` (device DDR
    next to the HBM) has no ``.ini`` key: it is npuemu's choice, 8 GiB for every profile.
    """

    name: str
    hbm_bytes: int
    ddr_bytes: int
    ai_core_num: int
    cube_core_num: int
    vector_core_num: int
    aicpu_num: int
    l2_bytes: int


# Numbers from hicann/runtime src/platform/platform_config/cann/<name>.ini, [SoCInfo]
# (ai_core_cnt, cube_core_cnt, vector_core_cnt, ai_cpu_cnt, memory_size, l2_size); read at
# commits 40a5304 (910B1), a4fd650 (910B2), a4fd650 (910B3) and 494dda3 (910B4).
# 910B1 is also quoted in ACLRT_REFERENCE.md section 2.2. SoCs whose .ini lacks a field we need
# (e.g. Ascend310P3 has no cube_core_cnt) are left out rather than guessed.
_DDR_BYTES = 8 * GiB

PROFILES: dict[str, SocProfile] = {
    p.name: p
    for p in (
        SocProfile("Ascend910B1", 64 * GiB, _DDR_BYTES, 24, 24, 48, 6, 192 * MiB),
        SocProfile("Ascend910B2", 64 * GiB, _DDR_BYTES, 24, 24, 48, 6, 192 * MiB),
        SocProfile("Ascend910B3", 64 * GiB, _DDR_BYTES, 20, 20, 40, 6, 192 * MiB),
        SocProfile("Ascend910B4", 32 * GiB, _DDR_BYTES, 20, 20, 40, 6, 96 * MiB),
    )
}
"""Known SoCs by ``aclrtGetSocName`` string."""

_SIZE_RE = re.compile(
    r"(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?:(?P<unit>[kmgt])(?:i?b)?|b)?", re.IGNORECASE | re.ASCII
)
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": TiB}


def parse_size(text: str) -> int:
    """Bytes in a size such as ``"4096"``, ``"64K"``, ``"512M"``, ``"1.5G"``, ``"64GiB"``, ``"1T"``.

    Units are binary (K = 1024), case-insensitive, optionally followed by ``B`` or ``iB``; a bare
    ``B`` means bytes. Spaces around the text and before the unit are allowed. A fractional result
    is rounded up to a whole byte. Raises ValueError for anything else.
    """
    if not isinstance(text, str):
        raise TypeError(f"size must be a str, got {type(text).__name__}")
    match = _SIZE_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"invalid size {text!r}: expected a number with an optional unit K, M, G or T "
            "(binary, optionally followed by B or iB), e.g. '4096', '512M', '1.5G', '64GiB'"
        )
    unit = (match.group("unit") or "").lower()
    return math.ceil(Fraction(match.group("num")) * _UNITS[unit])


def parse_visible_devices(value: str | None, count: int) -> list[int]:
    """Logical device ids made visible by ``ASCEND_RT_VISIBLE_DEVICES=value`` out of ``count``.

    Rules (CANN ``docs/zh/env_vars/ASCEND_RT_VISIBLE_DEVICES.md``):

    * ``None`` or ``""`` (unset): all devices, ``[0, count)``.
    * Otherwise a comma-separated list of decimal ids, which must be ascending. The result is
      re-indexed by the runtime: visible device ``i`` is ``result[i]``.
    * Parsing stops at the first bad token, keeping the ids before it. A token is bad if it is
      not a plain decimal integer (no sign, no spaces, not empty), is outside ``[0, count)``,
      or is not greater than the previous id (descending or duplicate).
      ``"1, 2,3"`` gives ``[1]`` (``" 2"`` has a space); ``"1,3,8"`` with 8 devices gives
      ``[1, 3]``; a bad first token gives ``[]`` (no device visible).
    """
    if not value:
        return list(range(count))
    ids: list[int] = []
    for token in value.split(","):
        if not (token.isascii() and token.isdigit()):
            break
        dev = int(token)
        if dev >= count or (ids and dev <= ids[-1]):
            break
        ids.append(dev)
    return ids


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align


def _check_devices(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: device count must be an int, got {value!r}")
    if not 1 <= value <= address.MAX_DEVICES:
        raise ValueError(f"{what}: device count must be in 1..{address.MAX_DEVICES}, got {value}")
    return value


def _check_mem(value: Any, what: str) -> int:
    """``value`` rounded up to :data:`MEM_ALIGN`; ValueError if not in ``(0, MAX_ARENA_BYTES]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: size must be an int number of bytes, got {value!r}")
    if value <= 0:
        raise ValueError(f"{what}: size must be > 0, got {value}")
    rounded = _round_up(value, MEM_ALIGN)
    if rounded > MAX_ARENA_BYTES:
        raise ValueError(
            f"{what}: size {value} bytes exceeds the {MAX_ARENA_BYTES // GiB} GiB limit of the "
            "device address window"
        )
    return rounded


def _check_soc(value: Any, what: str) -> SocProfile:
    if isinstance(value, SocProfile):
        return value
    if isinstance(value, str) and value in PROFILES:
        return PROFILES[value]
    raise ValueError(f"{what}: unknown SoC {value!r}; known: {', '.join(PROFILES)}")


_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _check_name(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or _NAME_RE.fullmatch(value) is None:
        raise ValueError(
            f"{what}: node name must be 1-64 characters from A-Z a-z 0-9 _ . -, got {value!r}"
        )
    return value


@dataclass(frozen=True)
class NodeConfig:
    """One emulated node: ``devices`` cards of one SoC.

    ``hbm_bytes``/``ddr_bytes`` default (``None``) to the SoC profile's sizes; after
    construction they are always ints, rounded up to a multiple of :data:`MEM_ALIGN` and at
    most :data:`MAX_ARENA_BYTES`. ``soc`` may also be given by name. ``name`` identifies the
    node (e.g. in shared-memory names); ``None`` lets the runtime choose.
    """

    devices: int = DEFAULT_DEVICES
    soc: SocProfile = PROFILES[DEFAULT_SOC]
    hbm_bytes: int | None = None
    ddr_bytes: int | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        soc = _check_soc(self.soc, "soc")
        hbm = soc.hbm_bytes if self.hbm_bytes is None else self.hbm_bytes
        ddr = soc.ddr_bytes if self.ddr_bytes is None else self.ddr_bytes
        object.__setattr__(self, "devices", _check_devices(self.devices, "devices"))
        object.__setattr__(self, "soc", soc)
        object.__setattr__(self, "hbm_bytes", _check_mem(hbm, "hbm_bytes"))
        object.__setattr__(self, "ddr_bytes", _check_mem(ddr, "ddr_bytes"))
        object.__setattr__(self, "name", _check_name(self.name, "name"))

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ, **overrides: Any) -> NodeConfig:
        """Build from ``env``; keyword ``overrides`` (field names) win over the environment.

        Variables (unset or empty means the default): ``NPUEMU_DEVICES`` (int, default 8),
        ``NPUEMU_SOC`` (a :data:`PROFILES` key, default ``Ascend910B1``), ``NPUEMU_HBM`` and
        ``NPUEMU_DDR`` (sizes for :func:`parse_size`, default from the SoC) and
        ``NPUEMU_NODE`` (node name). An invalid value raises ValueError naming the variable.
        ``hbm_bytes``/``ddr_bytes`` overrides may be ints or size strings, ``soc`` a name.
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"NodeConfig.from_env: unknown override(s) {', '.join(unknown)}")
        kwargs: dict[str, Any] = {}

        def get(var: str) -> str | None:
            raw = env.get(var)
            return raw.strip() if raw and raw.strip() else None

        if (raw := get("NPUEMU_DEVICES")) is not None:
            if not (raw.isascii() and raw.isdigit()):
                raise ValueError(f"NPUEMU_DEVICES={raw!r}: expected a device count (int)")
            kwargs["devices"] = _check_devices(int(raw), f"NPUEMU_DEVICES={raw!r}")
        if (raw := get("NPUEMU_SOC")) is not None:
            kwargs["soc"] = _check_soc(raw, f"NPUEMU_SOC={raw!r}")
        for var, key in (("NPUEMU_HBM", "hbm_bytes"), ("NPUEMU_DDR", "ddr_bytes")):
            if (raw := get(var)) is not None:
                try:
                    size = parse_size(raw)
                except ValueError as exc:
                    raise ValueError(f"{var}={raw!r}: {exc}") from None
                kwargs[key] = _check_mem(size, f"{var}={raw!r}")
        if (raw := get("NPUEMU_NODE")) is not None:
            kwargs["name"] = _check_name(raw, f"NPUEMU_NODE={raw!r}")

        for key, value in overrides.items():
            if key in ("hbm_bytes", "ddr_bytes") and isinstance(value, str):
                value = parse_size(value)
            kwargs[key] = value
        return cls(**kwargs)
