"""Configuration shared by the host runtime and the device workers.

* :class:`SocProfile` / :data:`PROFILES`: per-SoC hardware numbers (``aclrtGetSocName``,
  ``aclrtGetDeviceInfo``, ``aclGetDeviceCapability``, ``aclrtGetMemInfo``).
* :class:`NodeConfig`: one emulated node (number of cards, SoC, memory sizes), read from the
  ``NPUEMU_*`` environment variables by :meth:`NodeConfig.from_env`.
* :func:`parse_size`, :func:`parse_visible_devices` (``ASCEND_RT_VISIBLE_DEVICES``).
* Timeouts of the host <-> device-worker protocol.

Every environment variable npuemu reads is listed in :data:`VARIABLES` (a few are read where
they are used: ``HCCL_*`` by ``host/hccl/types.py`` and ``tools/hccl_test.py``,
``NPUEMU_HCCL_ALGO``, ``NPUEMU_CACHING_ALLOCATOR``, ``NPUEMU_TRACE_RECORDS``); the node's
settings are read and checked here:

* ``NPUEMU_*`` values are validated by :meth:`NodeConfig.from_env` / :func:`check_env`; a bad
  one raises ValueError naming the variable, in one line. The host turns that into a return
  code (``acl.init`` 100000; ``set_device`` and every call that needs the node 207004) and
  never starts a node with it. A node's workers get the validated values explicitly
  (:meth:`NodeConfig.worker_env`, passed as the environment of the node's processes).
* ``ASCEND_*`` values keep the real runtime's lenient rules (an invalid log level is ignored,
  ``ASCEND_RT_VISIBLE_DEVICES`` stops at the first bad token): never an error, as on
  hardware.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

from npuemu.shared import address, layout, topology

__all__ = [
    "ATTACH_TIMEOUT_S",
    "DEFAULT_DEVICES",
    "DEFAULT_SOC",
    "DEVICE_LOST_TIMEOUT_S",
    "HEARTBEAT_S",
    "MAX_ARENA_BYTES",
    "MEM_ALIGN",
    "PROFILES",
    "SOC_FAMILIES",
    "NodeConfig",
    "SocProfile",
    "parse_size",
    "parse_visible_devices",
    "soc_profile",
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

DEFAULT_MAX_STREAMS = layout.MAX_STREAMS
"""Streams per device when ``NPUEMU_MAX_STREAMS`` is not set (also its upper bound)."""

DEFAULT_ECC_SBE_WARN = 5
"""Correctable ECC errors before a card's health turns Warning (``NPUEMU_ECC_SBE_WARN``)."""

DEFAULT_NT_COPY_BYTES = 1 << 20
"""Copies of at least this many bytes in a node's processes use non-temporal stores
(``NPUEMU_NT_COPY_BYTES``; :func:`glibc_tunables`)."""
NT_TUNABLE = "glibc.cpu.x86_non_temporal_threshold"


def glibc_tunables(current: str, nt_bytes: int) -> str:
    """``GLIBC_TUNABLES`` for a node's processes: ``current`` (the caller's) plus glibc's
    non-temporal threshold of ``nt_bytes``, unless ``current`` sets it or ``nt_bytes`` is 0.

    Why: glibc's memcpy switches to non-temporal stores (no read-for-ownership of the
    destination) above 3/4 of the shared cache per thread; a VM that reports a large L3
    (300 MiB here) never reaches it, and every large arena copy (D2D, P2P, collectives) then
    moves half as fast as the memory allows (6 vs 12 GB/s measured). x86 only; elsewhere
    glibc ignores the name."""
    if not nt_bytes or NT_TUNABLE in current:
        return current
    ours = f"{NT_TUNABLE}={nt_bytes:#x}"
    return f"{current}:{ours}" if current else ours

VARIABLES: dict[str, str] = {
    "NPUEMU_NODE": "attach to this shared node instead of starting an embedded one",
    "NPUEMU_DEVICES": f"cards of an embedded node, 1..{address.MAX_DEVICES} (default 8)",
    "NPUEMU_SOC": "SoC profile of an embedded node: Ascend910B1..B4, Ascend910_9391 (or "
                  "Ascend910_93), Ascend310P3, Ascend310B1 (default Ascend910B1)",
    "NPUEMU_SDK_HOME": "where `npuemu sdk` and `npuemu run ./a.out` put the C toolkit tree",
    "NPUEMU_HBM": "HBM per card, a size such as 64G (default: the SoC's)",
    "NPUEMU_DDR": "device DDR per card, a size (default 8G)",
    "NPUEMU_TOPOLOGY": "HCCS groups, e.g. 0-3,4-7 (default: the SoC's; groups of 4 on "
                       "910B)",
    "NPUEMU_MAX_STREAMS": f"streams per card, 1..{layout.MAX_STREAMS} (default: the maximum)",
    "NPUEMU_ECC_SBE_WARN": "correctable ECC errors before health Warning, >= 1 (default 5)",
    "NPUEMU_TRACK_ALLOC": "1: record the Python stack of every malloc for leak reports",
    "NPUEMU_NT_COPY_BYTES": "copies of at least this size in a node's processes bypass the "
                            "caches (glibc's x86 non-temporal threshold); 0 = glibc's own "
                            "(default 1M)",
    "NPUEMU_HCCL_ALGO": "mesh|ring: the algorithm of in-node collectives (default mesh)",
    "NPUEMU_TRACE_RECORDS": "slots of each card's trace ring for profiling (default 131072)",
    "NPUEMU_CACHING_ALLOCATOR": "1: acl.rt.malloc/free use the host caching allocator "
                                "(read when acl is imported; default 0)",
    "ASCEND_RT_VISIBLE_DEVICES": "visible cards, ascending ids (as the real runtime reads it)",
    "ASCEND_GLOBAL_LOG_LEVEL": "0..4, other values ignored (default 3)",
    "ASCEND_MODULE_LOG_LEVEL": "MOD=lvl:MOD=lvl; one bad token voids it",
    "ASCEND_GLOBAL_EVENT_ENABLE": "0/1 (default 1)",
    "ASCEND_LOG_PRINT_TO_STDOUT": "1: host log lines also go to stdout, device ones to the "
                                  "worker's stdout",
    "ASCEND_SLOG_PRINT_TO_STDOUT": "the older name of ASCEND_LOG_PRINT_TO_STDOUT (either "
                                   "set to 1 turns it on)",
    "ASCEND_PROCESS_LOG_PATH": "root of the host plog files (first choice; default ~/ascend/log)",
    "ASCEND_WORK_PATH": "root of the host plog files when ASCEND_PROCESS_LOG_PATH is unset",
    "ASCEND_OP_CACHE_MAX_SIZE": "entries of the in-memory op map per card (default 20000)",
    "ASCEND_CACHE_PATH": "root of the on-disk op compile cache (setting it enables the cache)",
    "ASCEND_MAX_OP_CACHE_SIZE": "on-disk op cache cap in MB, -1 = no aging (default 500)",
    "ASCEND_REMAIN_CACHE_SIZE_RATIO": "% of the cap kept when aging, 1..100 (default 50)",
    "NPUEMU_ATC_FOLD": "off: ATC keeps BatchNorm and per-channel Mul/Add/Sub after a Conv or "
                       "Gemm as ops of their own instead of folding them (default on)",
    "NPUEMU_OP_INCREMENTAL": "0: compile every new op shape instead of re-tiling (default 1)",
    "HCCL_BUFFSIZE": "MB of each of a rank's two collective buffers on its card (default 200)",
    "HCCL_EXEC_TIMEOUT": "s a collective may wait for its peers, 0 = never (default 1836)",
    "HCCL_CONNECT_TIMEOUT": "s a communicator's init waits for its ranks (default 120)",
    "HCCL_TEST_USE_DEVS": "npuemu hccl-test: the cards of the ranks, e.g. 4,5,6,7 (default all)",
}
"""Every environment variable npuemu reads, with what it means."""


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align


@dataclass(frozen=True)
class SocProfile:
    """Hardware numbers of one SoC, as in ``[SoCInfo]`` of its CANN platform ``.ini`` file.

    ``hbm_bytes`` is ``memory_size``: the card's main memory, the arena ``aclrtMalloc`` takes
    from. On the inference SoCs (Ascend310P3, Ascend310B1) that memory is DDR, not HBM
    (``main_memory`` says which): npuemu still keeps it in its HBM arena, and
    ``aclrtGetMemInfo`` answers both the HBM and the DDR attributes with it there, as CANN's
    runtime maps those SoCs' HBM queries to DDR (``host/core/memory.py``); ``npuemu smi``
    shows it as Memory-Usage.
    ``l2_bytes`` is ``l2_size``; ``core_types`` is ``core_type_list``. ``ddr_bytes`` (device
    DDR next to the main memory) has no ``.ini`` key: it is npuemu's choice, 8 GiB for every
    profile. ``hccs_group``: cards per HCCS mesh of the default topology, 0 for SoCs whose
    cards have no HCCS (PCIe only: every card its own group, no peer access).
    """

    name: str
    hbm_bytes: int
    ddr_bytes: int
    ai_core_num: int
    cube_core_num: int
    vector_core_num: int
    aicpu_num: int
    l2_bytes: int
    core_types: tuple[str, ...] = ("CubeCore", "VectorCore")
    hccs_group: int = 4
    main_memory: str = "HBM"
    support_bf16: bool = True
    """``support_bf16`` of the ``.ini``'s ``[SoCInfo]`` (absent on the 310 SoCs): whether its
    op library has bfloat16 kernels (``host/ops/executor.py`` refuses them elsewhere)."""

    @property
    def chip_name(self) -> str:
        """The name npu-smi prints for the chip (``910B1``, ``310P3``)."""
        return self.name.removeprefix("Ascend")


# Numbers from hicann/runtime src/platform/platform_config/cann/<name>.ini, [SoCInfo]
# (ai_core_cnt, cube_core_cnt, vector_core_cnt, ai_cpu_cnt, memory_size, l2_size,
# core_type_list); read at commits 40a5304 (910B1, 310P3), a4fd650 (910B2, 910B3, 310B1,
# 910_9391) and 494dda3 (910B4); sizes rounded up to MEM_ALIGN (Ascend310P3's
# memory_size, 24000000000, is not a multiple of it). Ascend310P3's .ini has no
# cube_core_cnt: its AI Cores hold the cube units, so its cube count is its AI Core count.
# HCCS groups: the A2 servers' default of two groups of 4 (shared/topology.py), one mesh
# of 16 for the A3 (an A3 server joins its 16 chips over HCCS), none for the PCIe
# inference cards.
_DDR_BYTES = 8 * GiB

PROFILES: dict[str, SocProfile] = {
    p.name: p
    for p in (
        SocProfile("Ascend910B1", 64 * GiB, _DDR_BYTES, 24, 24, 48, 6, 192 * MiB),
        SocProfile("Ascend910B2", 64 * GiB, _DDR_BYTES, 24, 24, 48, 6, 192 * MiB),
        SocProfile("Ascend910B3", 64 * GiB, _DDR_BYTES, 20, 20, 40, 6, 192 * MiB),
        SocProfile("Ascend910B4", 32 * GiB, _DDR_BYTES, 20, 20, 40, 6, 96 * MiB),
        SocProfile("Ascend910_9391", 64 * GiB, _DDR_BYTES, 24, 24, 48, 6, 192 * MiB,
                   hccs_group=16),
        SocProfile("Ascend310P3", _round_up(24_000_000_000, MEM_ALIGN), _DDR_BYTES, 8, 8, 7, 7,
                   16 * MiB,
                   ("AICore", "VectorCore"), hccs_group=0, main_memory="DDR",
                   support_bf16=False),
        SocProfile("Ascend310B1", 32 * GiB, _DDR_BYTES, 1, 1, 1, 4, 4 * MiB,
                   ("AICore", "VectorCore", "CubeCore"), hccs_group=0, main_memory="DDR",
                   support_bf16=False),
    )
}
"""Known SoCs by ``aclrtGetSocName`` string."""

SOC_FAMILIES: dict[str, str] = {"Ascend910_93": "Ascend910_9391"}
"""Family names (the ``.ini`` files' ``Short_SoC_version``) accepted where a SoC is named
(``NPUEMU_SOC``, ATC's ``--soc_version``) for the profile of that family npuemu has;
``aclrtGetSocName`` then reports the profile's full name, as a real card does."""


def soc_profile(name: str) -> SocProfile | None:
    """The profile of ``name``, a SoC or a family name of :data:`SOC_FAMILIES`, or None."""
    return PROFILES.get(SOC_FAMILIES.get(name, name))


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
    found = soc_profile(value) if isinstance(value, str) else None
    if found is not None:
        return found
    raise ValueError(f"{what}: unknown SoC {value!r}; known: "
                     f"{', '.join([*PROFILES, *SOC_FAMILIES])}")


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
    topology: str | None = None
    max_streams: int = DEFAULT_MAX_STREAMS
    ecc_sbe_warn: int = DEFAULT_ECC_SBE_WARN
    track_alloc: bool = False
    nt_copy_bytes: int = DEFAULT_NT_COPY_BYTES

    def __post_init__(self) -> None:
        soc = _check_soc(self.soc, "soc")
        hbm = soc.hbm_bytes if self.hbm_bytes is None else self.hbm_bytes
        ddr = soc.ddr_bytes if self.ddr_bytes is None else self.ddr_bytes
        object.__setattr__(self, "devices", _check_devices(self.devices, "devices"))
        object.__setattr__(self, "soc", soc)
        object.__setattr__(self, "hbm_bytes", _check_mem(hbm, "hbm_bytes"))
        object.__setattr__(self, "ddr_bytes", _check_mem(ddr, "ddr_bytes"))
        object.__setattr__(self, "name", _check_name(self.name, "name"))
        object.__setattr__(self, "topology", _check_topology(self.topology, self.devices,
                                                             "topology"))
        object.__setattr__(self, "max_streams", _check_range(
            self.max_streams, 1, layout.MAX_STREAMS, "max_streams"))
        object.__setattr__(self, "ecc_sbe_warn", _check_range(
            self.ecc_sbe_warn, 1, 1 << 32, "ecc_sbe_warn"))
        object.__setattr__(self, "nt_copy_bytes", _check_range(
            self.nt_copy_bytes, 0, 1 << 40, "nt_copy_bytes"))

    def worker_env(self) -> dict[str, str]:
        """The validated worker settings as environment entries, given explicitly to the
        node's supervisor and workers (they never see a value that was not checked here)."""
        env = {"NPUEMU_MAX_STREAMS": str(self.max_streams),
               "NPUEMU_ECC_SBE_WARN": str(self.ecc_sbe_warn),
               "NPUEMU_TOPOLOGY": self.topology or "",
               "GLIBC_TUNABLES": glibc_tunables(os.environ.get("GLIBC_TUNABLES", ""),
                                                self.nt_copy_bytes)}
        return env

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
        if (raw := get("NPUEMU_TOPOLOGY")) is not None and (
                "name" in overrides or "name" not in kwargs):
            # checked against the device count in __post_init__; a host attaching to a
            # shared node (NPUEMU_NODE) uses the node's topology, not its own environment's
            kwargs["topology"] = raw
        for var, key, low, high in (
                ("NPUEMU_MAX_STREAMS", "max_streams", 1, layout.MAX_STREAMS),
                ("NPUEMU_ECC_SBE_WARN", "ecc_sbe_warn", 1, 1 << 32)):
            if (raw := get(var)) is not None:
                kwargs[key] = _parse_int(raw, low, high, var)
        if (raw := get("NPUEMU_NT_COPY_BYTES")) is not None:
            try:
                kwargs["nt_copy_bytes"] = _check_range(parse_size(raw), 0, 1 << 40, "size")
            except ValueError as exc:
                raise ValueError(f"NPUEMU_NT_COPY_BYTES={raw!r}: {exc}") from None
        if (raw := get("NPUEMU_TRACK_ALLOC")) is not None:
            if raw not in ("0", "1"):
                raise ValueError(f"NPUEMU_TRACK_ALLOC={raw!r}: expected 0 or 1")
            kwargs["track_alloc"] = raw == "1"

        for key, value in overrides.items():
            if key in ("hbm_bytes", "ddr_bytes") and isinstance(value, str):
                value = parse_size(value)
            kwargs[key] = value
        if "topology" in kwargs and "topology" not in overrides:
            devices = kwargs.get("devices", DEFAULT_DEVICES)
            try:
                _check_topology(kwargs["topology"], devices, "")
            except ValueError as exc:
                raise ValueError(f"NPUEMU_TOPOLOGY={kwargs['topology']!r}: {exc}") from None
        return cls(**kwargs)


@dataclass(frozen=True)
class WorkerSettings:
    """What a node's supervisor and workers read from their environment, which the host
    gives them explicitly (:meth:`NodeConfig.worker_env`, already validated). A value that
    is still invalid (a supervisor started by hand) falls back to the default: a worker never
    dies of its environment."""

    max_streams: int = DEFAULT_MAX_STREAMS
    ecc_sbe_warn: int = DEFAULT_ECC_SBE_WARN
    topology: str | None = None
    log_to_stdout: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> WorkerSettings:
        def number(var: str, low: int, high: int, default: int) -> int:
            try:
                return _parse_int(env.get(var, "").strip(), low, high, var)
            except ValueError:
                return default

        return cls(number("NPUEMU_MAX_STREAMS", 1, layout.MAX_STREAMS, DEFAULT_MAX_STREAMS),
                   number("NPUEMU_ECC_SBE_WARN", 1, 1 << 32, DEFAULT_ECC_SBE_WARN),
                   env.get("NPUEMU_TOPOLOGY", "").strip() or None,
                   log_to_stdout(env))


def log_to_stdout(env: Mapping[str, str] = os.environ) -> bool:
    """Whether log lines are printed to stdout: ``ASCEND_LOG_PRINT_TO_STDOUT=1`` or its older
    name ``ASCEND_SLOG_PRINT_TO_STDOUT=1``, which most scripts still set."""
    return any(env.get(var, "").strip() == "1"
               for var in ("ASCEND_LOG_PRINT_TO_STDOUT", "ASCEND_SLOG_PRINT_TO_STDOUT"))


def check_env(env: Mapping[str, str] = os.environ) -> str:
    """One line describing the first invalid ``NPUEMU_*`` value of ``env``, or ``""``."""
    try:
        NodeConfig.from_env(env)
    except (ValueError, TypeError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ""


def _parse_int(raw: str, low: int, high: int, var: str) -> int:
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(f"{var}={raw!r}: expected an integer in {low}..{high}")
    return _check_range(int(raw), low, high, f"{var}={raw!r}")


def _check_range(value: Any, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: expected an int, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{what}: must be in {low}..{high}, got {value}")
    return value


def _check_topology(value: Any, devices: int, what: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what}: topology must be a str such as '0-3,4-7', got {value!r}")
    try:
        topology.parse(value, devices)
    except ValueError as exc:
        prefix = f"{what}: " if what else ""
        raise ValueError(f"{prefix}{exc} (cards 0..{devices - 1})") from None
    return value.strip()


# ---- the op caches (host/ops): lenient, as the real runtime's own parsers are -------------
OP_DISK_CAP_MB = 500
OP_DISK_REMAIN_PCT = 50


def op_map_capacity(env: Mapping[str, str] = os.environ) -> tuple[int | None, str]:
    """``ASCEND_OP_CACHE_MAX_SIZE``: ``(entries, "")`` if set to a positive int, ``(None,
    problem)`` if set to anything else (the caller logs it and keeps its default), ``(None,
    "")`` if unset."""
    raw = env.get("ASCEND_OP_CACHE_MAX_SIZE")
    if not raw:
        return None, ""
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value > 0:
        return value, ""
    return None, f"ASCEND_OP_CACHE_MAX_SIZE={raw!r} is not a positive integer; using the default"


def op_disk_cache_path(env: Mapping[str, str] = os.environ) -> str | None:
    """``ASCEND_CACHE_PATH`` (None if unset or empty)."""
    return env.get("ASCEND_CACHE_PATH") or None


def op_disk_cache_limits(env: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """``(cap MB or -1, remain %)`` from ``ASCEND_MAX_OP_CACHE_SIZE`` and
    ``ASCEND_REMAIN_CACHE_SIZE_RATIO``; an invalid value falls back to its default."""
    def read(name: str, default: int) -> int:
        try:
            return int(env.get(name, default))
        except ValueError:
            return default

    cap = read("ASCEND_MAX_OP_CACHE_SIZE", OP_DISK_CAP_MB)
    ratio = read("ASCEND_REMAIN_CACHE_SIZE_RATIO", OP_DISK_REMAIN_PCT)
    if not (cap == -1 or 1 <= cap < 2**31 - 1):
        cap = OP_DISK_CAP_MB
    if not 1 <= ratio <= 100:
        ratio = OP_DISK_REMAIN_PCT
    return cap, ratio


def op_incremental(env: Mapping[str, str] = os.environ) -> bool:
    """``NPUEMU_OP_INCREMENTAL``: re-tile instead of compiling (default on; ``0`` turns it
    off)."""
    return env.get("NPUEMU_OP_INCREMENTAL", "1") != "0"
