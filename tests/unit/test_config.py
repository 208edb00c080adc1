"""Unit tests of npuemu.shared.config."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from npuemu.shared import address, config
from npuemu.shared.config import NodeConfig, parse_size, parse_visible_devices

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


# ---------------------------------------------------------------- parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("0", 0),
        ("64K", 64 * KiB),
        ("64k", 64 * KiB),
        ("512M", 512 * MiB),
        ("64G", 64 * GiB),
        ("1T", TiB),
        ("1.5G", 3 * GiB // 2),
        ("64GiB", 64 * GiB),
        ("64gib", 64 * GiB),
        ("64GB", 64 * GiB),
        ("2MiB", 2 * MiB),
        ("4096B", 4096),
        ("4096b", 4096),
        (" 8M ", 8 * MiB),
        ("8 M", 8 * MiB),
        (".5K", 512),
        ("0.1K", 103),  # 102.4 rounded up to a whole byte
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


BAD_SIZES = ["", " ", "abc", "-1", "+1", "1e3", "64X", "64P", "1,5G", "4096iB", "G"]
BAD_SIZES += ["1..5G", "1 .5G", "64 G B", "0x10", "64GiBs", "\u0663"]


@pytest.mark.parametrize("text", BAD_SIZES)
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text)


def test_parse_size_needs_str() -> None:
    with pytest.raises(TypeError):
        parse_size(4096)  # type: ignore[arg-type]


# ---------------------------------------------------------------- ASCEND_RT_VISIBLE_DEVICES


@pytest.mark.parametrize(
    ("value", "count", "expected"),
    [
        (None, 8, list(range(8))),
        ("", 8, list(range(8))),
        (None, 0, []),
        ("1", 8, [1]),
        ("1,2,3", 8, [1, 2, 3]),
        ("0,7", 8, [0, 7]),
        # the examples of CANN's ASCEND_RT_VISIBLE_DEVICES documentation
        ("1, 2,3", 8, [1]),
        ("1, 2", 8, [1]),
        ("1,3,8", 8, [1, 3]),
        # parsing stops at the first bad token
        ("3,1,2", 8, [3]),  # not ascending
        ("1,1,2", 8, [1]),  # duplicate
        ("1,a,2", 8, [1]),
        ("1,-2", 8, [1]),
        ("1,+2", 8, [1]),
        ("1,,2", 8, [1]),  # empty token
        ("1,2,", 8, [1, 2]),
        (" 1", 8, []),
        ("1 ", 8, []),
        ("8", 8, []),
        ("x", 8, []),
        (",1", 8, []),
        ("0,1", 1, [0]),
        ("1.0,2", 8, []),
        ("01,2", 8, [1, 2]),
        ("63", 64, [63]),
    ],
)
def test_parse_visible_devices(value: str | None, count: int, expected: list[int]) -> None:
    assert parse_visible_devices(value, count) == expected


# ---------------------------------------------------------------- SoC profiles


def test_profile_910b1_matches_reference() -> None:
    p = config.PROFILES["Ascend910B1"]
    assert p.name == "Ascend910B1"
    assert p.hbm_bytes == 68719476736
    assert p.ai_core_num == 24
    assert p.cube_core_num == 24
    assert p.vector_core_num == 48
    assert p.aicpu_num == 6
    assert p.l2_bytes == 201326592
    assert p.ddr_bytes == 8 * GiB


def test_profiles_are_consistent() -> None:
    for name, p in config.PROFILES.items():
        assert p.name == name
        if p.core_types == ("CubeCore", "VectorCore"):  # split cores: two AIV per AIC
            assert p.vector_core_num == 2 * p.cube_core_num, name
        assert p.vector_core_num > 0 and 0 < p.cube_core_num <= p.ai_core_num, name
        assert p.main_memory in ("HBM", "DDR") and p.hccs_group >= 0, name
        assert 0 < p.hbm_bytes <= config.MAX_ARENA_BYTES
        assert p.hbm_bytes % config.MEM_ALIGN == 0 and p.ddr_bytes % config.MEM_ALIGN == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.PROFILES["Ascend910B1"].ai_core_num = 1  # type: ignore[misc]


def test_timeouts() -> None:
    assert config.DEVICE_LOST_TIMEOUT_S == 5.0  # the bound the issue sets for device loss
    assert 0 < config.HEARTBEAT_S < config.DEVICE_LOST_TIMEOUT_S < config.ATTACH_TIMEOUT_S


# ---------------------------------------------------------------- NodeConfig


def test_node_config_defaults() -> None:
    cfg = NodeConfig()
    assert cfg.devices == 8
    assert cfg.soc is config.PROFILES["Ascend910B1"]
    assert cfg.hbm_bytes == 64 * GiB
    assert cfg.ddr_bytes == 8 * GiB
    assert cfg.name is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.devices = 2  # type: ignore[misc]


def test_node_config_memory_rounding_and_limits() -> None:
    assert NodeConfig(hbm_bytes=1).hbm_bytes == 2 * MiB
    assert NodeConfig(hbm_bytes=3 * MiB).hbm_bytes == 4 * MiB
    assert NodeConfig(ddr_bytes=128 * GiB).ddr_bytes == 128 * GiB
    assert config.MAX_ARENA_BYTES == address.ARENA_STRIDE == 128 * GiB
    for bad in (0, -1, 128 * GiB + 1, 256 * GiB):
        with pytest.raises(ValueError, match="hbm_bytes"):
            NodeConfig(hbm_bytes=bad)
        with pytest.raises(ValueError, match="ddr_bytes"):
            NodeConfig(ddr_bytes=bad)
    with pytest.raises(ValueError, match="hbm_bytes"):
        NodeConfig(hbm_bytes="1G")  # type: ignore[arg-type]


def test_node_config_devices_range() -> None:
    assert NodeConfig(devices=1).devices == 1
    assert NodeConfig(devices=address.MAX_DEVICES).devices == 64
    for bad in (0, -1, 65, True):
        with pytest.raises(ValueError, match="devices"):
            NodeConfig(devices=bad)


def test_node_config_soc_by_name_and_profile_sizes() -> None:
    cfg = NodeConfig(soc="Ascend910B4")  # type: ignore[arg-type]
    assert cfg.soc is config.PROFILES["Ascend910B4"]
    assert cfg.hbm_bytes == 32 * GiB
    with pytest.raises(ValueError, match="unknown SoC"):
        NodeConfig(soc="Ascend999")  # type: ignore[arg-type]


def test_node_config_name() -> None:
    assert NodeConfig(name="node-1.a_b").name == "node-1.a_b"
    for bad in ("", "a/b", "a b", "x" * 65):
        with pytest.raises(ValueError, match="name"):
            NodeConfig(name=bad)


# ---------------------------------------------------------------- NodeConfig.from_env


def test_from_env_empty_gives_defaults() -> None:
    assert NodeConfig.from_env({}) == NodeConfig()


def test_from_env_reads_variables() -> None:
    env = {
        "NPUEMU_DEVICES": "4",
        "NPUEMU_HBM": "16G",
        "NPUEMU_DDR": "512MiB",
        "NPUEMU_SOC": "Ascend910B3",
        "NPUEMU_NODE": "n0",
        "UNRELATED": "x",
    }
    cfg = NodeConfig.from_env(env)
    assert cfg.devices == 4
    assert cfg.hbm_bytes == 16 * GiB
    assert cfg.ddr_bytes == 512 * MiB
    assert cfg.soc.name == "Ascend910B3"
    assert cfg.name == "n0"


def test_from_env_uses_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC", "NPUEMU_NODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NPUEMU_DEVICES", "2")
    assert NodeConfig.from_env().devices == 2


def test_from_env_soc_sets_memory_default() -> None:
    cfg = NodeConfig.from_env({"NPUEMU_SOC": "Ascend910B4"})
    assert cfg.hbm_bytes == 32 * GiB
    cfg = NodeConfig.from_env({"NPUEMU_SOC": "Ascend910B4", "NPUEMU_HBM": "1G"})
    assert cfg.hbm_bytes == GiB


def test_from_env_empty_values_are_unset() -> None:
    env = {"NPUEMU_DEVICES": "", "NPUEMU_HBM": " ", "NPUEMU_SOC": "", "NPUEMU_NODE": ""}
    assert NodeConfig.from_env(env) == NodeConfig()


def test_from_env_rounds_hbm_up() -> None:
    assert NodeConfig.from_env({"NPUEMU_HBM": "1.5M"}).hbm_bytes == 2 * MiB


def test_from_env_overrides_win() -> None:
    env = {"NPUEMU_DEVICES": "4", "NPUEMU_HBM": "16G", "NPUEMU_NODE": "envnode"}
    cfg = NodeConfig.from_env(env, devices=2, hbm_bytes="1G", ddr_bytes=64 * MiB, name=None)
    assert cfg.devices == 2
    assert cfg.hbm_bytes == GiB
    assert cfg.ddr_bytes == 64 * MiB
    assert cfg.name is None
    cfg = NodeConfig.from_env({}, soc="Ascend910B2")
    assert cfg.soc.name == "Ascend910B2"
    with pytest.raises(TypeError, match="bogus"):
        NodeConfig.from_env({}, bogus=1)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("NPUEMU_DEVICES", "abc"),
        ("NPUEMU_DEVICES", "0"),
        ("NPUEMU_DEVICES", "65"),
        ("NPUEMU_DEVICES", "-1"),
        ("NPUEMU_DEVICES", "4.0"),
        ("NPUEMU_HBM", "lots"),
        ("NPUEMU_HBM", "0"),
        ("NPUEMU_HBM", "129G"),
        ("NPUEMU_DDR", "1P"),
        ("NPUEMU_DDR", "200GiB"),
        ("NPUEMU_SOC", "Ascend910Z"),
        ("NPUEMU_NODE", "bad/name"),
    ],
)
def test_from_env_errors_name_the_variable(var: str, value: str) -> None:
    with pytest.raises(ValueError, match=var):
        NodeConfig.from_env({var: value})


# every NPUEMU_* variable is validated in one place --------------------------------------------
@pytest.mark.parametrize("env,var", [
    ({"NPUEMU_MAX_STREAMS": "abc"}, "NPUEMU_MAX_STREAMS"),
    ({"NPUEMU_MAX_STREAMS": "0"}, "NPUEMU_MAX_STREAMS"),
    ({"NPUEMU_MAX_STREAMS": "4096"}, "NPUEMU_MAX_STREAMS"),
    ({"NPUEMU_SOC": "Ascend910B9"}, "NPUEMU_SOC"),
    ({"NPUEMU_TOPOLOGY": "0-9"}, "NPUEMU_TOPOLOGY"),
    ({"NPUEMU_DEVICES": "2", "NPUEMU_TOPOLOGY": "0-3"}, "NPUEMU_TOPOLOGY"),
    ({"NPUEMU_ECC_SBE_WARN": "-1"}, "NPUEMU_ECC_SBE_WARN"),
    ({"NPUEMU_TRACK_ALLOC": "yes"}, "NPUEMU_TRACK_ALLOC"),
    ({"NPUEMU_DEVICES": "x"}, "NPUEMU_DEVICES"),
    ({"NPUEMU_HBM": "lots"}, "NPUEMU_HBM"),
    ({"NPUEMU_NODE": "a b"}, "NPUEMU_NODE"),
])
def test_check_env_names_the_bad_variable_in_one_line(env, var) -> None:
    problem = config.check_env(env)
    assert problem.startswith(var) and "\n" not in problem


def test_valid_environment_reaches_the_workers_explicitly() -> None:
    env = {"NPUEMU_DEVICES": "2", "NPUEMU_TOPOLOGY": "0-1", "NPUEMU_MAX_STREAMS": "64",
           "NPUEMU_ECC_SBE_WARN": "3", "NPUEMU_TRACK_ALLOC": "1", "ASCEND_GLOBAL_LOG_LEVEL": "9"}
    assert config.check_env(env) == ""
    cfg = config.NodeConfig.from_env(env)
    assert cfg.track_alloc and cfg.max_streams == 64
    worker = config.WorkerSettings.from_env(cfg.worker_env())
    assert worker == config.WorkerSettings(64, 3, "0-1", False)


def test_copies_of_the_node_use_non_temporal_stores(monkeypatch) -> None:
    name = "glibc.cpu.x86_non_temporal_threshold"
    assert config.glibc_tunables("", 1 << 20) == f"{name}=0x100000"
    assert config.glibc_tunables("glibc.malloc.arena_max=2", 4096) == \
        f"glibc.malloc.arena_max=2:{name}=0x1000"
    assert config.glibc_tunables(f"{name}=0x40", 4096) == f"{name}=0x40"  # the caller's wins
    assert config.glibc_tunables("x=1", 0) == "x=1"  # 0: glibc's own threshold
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    cfg = config.NodeConfig.from_env({"NPUEMU_NT_COPY_BYTES": "256K"})
    assert cfg.worker_env()["GLIBC_TUNABLES"] == f"{name}=0x40000"
    assert config.NodeConfig.from_env({}).nt_copy_bytes == config.DEFAULT_NT_COPY_BYTES
    with pytest.raises(ValueError, match="NPUEMU_NT_COPY_BYTES"):
        config.NodeConfig.from_env({"NPUEMU_NT_COPY_BYTES": "lots"})


def test_worker_settings_never_fail_on_a_bad_value() -> None:
    bad = {"NPUEMU_MAX_STREAMS": "abc", "NPUEMU_ECC_SBE_WARN": "",
           "ASCEND_LOG_PRINT_TO_STDOUT": "1"}
    assert config.WorkerSettings.from_env(bad) == config.WorkerSettings(log_to_stdout=True)


# Names in the source that are not variables npuemu reads: what the C toolkit's set_env.sh
# (host/capi/sdk.py) exports for C programs and their builds, and the C preprocessor macros of
# the libraries' build (host/capi/build.py).
NOT_READ = {"ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ASCEND_TOOLKIT_HOME", "NPUEMU_HAS_APP_LOG",
            "NPUEMU_HOT_CALLS"}


def test_every_variable_read_is_documented() -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    used = set()
    for folder in ("host", "device", "shared"):
        for path in (root / folder).rglob("*.py"):
            used.update(re.findall(r"[\"']((?:NPUEMU|ASCEND)_[A-Z_]+)[\"']", path.read_text()))
    assert used - NOT_READ <= set(config.VARIABLES), sorted(used - NOT_READ - set(config.VARIABLES))
