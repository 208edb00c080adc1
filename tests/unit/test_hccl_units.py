"""HCCL pieces that need no device: enum values and codes as ``hccl_types.h`` lists them, the
rank-table parser, root info, block splitting, environment settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from npuemu.host.acl import hccl as pyhccl
from npuemu.host.hccl import comm, ranktable
from npuemu.host.hccl.collectives import _blocks
from npuemu.host.hccl.types import (
    HcclDataType,
    HcclError,
    HcclResult,
    buffer_bytes,
    connect_timeout_s,
    exec_timeout_s,
    numpy_dtype,
    reduce_name,
)


def test_values_match_the_reference() -> None:
    assert (HcclResult.HCCL_E_PARA, HcclResult.HCCL_E_TIMEOUT, HcclResult.HCCL_E_REMOTE,
            HcclResult.HCCL_E_IN_STATUS) == (1, 9, 21, 1041)
    assert (HcclDataType.HCCL_DATA_TYPE_FP16, HcclDataType.HCCL_DATA_TYPE_FP32,
            HcclDataType.HCCL_DATA_TYPE_BFP16, HcclDataType.HCCL_DATA_TYPE_INT64) == (3, 4, 11, 5)
    assert (pyhccl.HCCL_REDUCE_SUM, pyhccl.HCCL_REDUCE_MIN, pyhccl.HCCL_SEND) == (0, 3, 0)


def test_dtypes_and_ops() -> None:
    assert numpy_dtype(4) == np.float32 and numpy_dtype(0) == np.int8
    for bad, code in ((99, 1), ("fp32", 1), (12, 5)):  # 12 = INT128
        with pytest.raises(HcclError) as info:
            numpy_dtype(bad)
        assert info.value.code == code
    assert reduce_name(2) == "max"
    with pytest.raises(HcclError) as info:
        reduce_name(255)
    assert info.value.code == 1 and info.value.name == "HCCL_E_PARA"


@pytest.mark.parametrize(("m", "p"), [(0, 3), (5, 8), (3001, 3), (16, 4)])
def test_blocks_cover_exactly(m: int, p: int) -> None:
    blocks = _blocks(m, p)
    assert len(blocks) == p and sum(n for _, n in blocks) == m
    assert all(blocks[k][0] + blocks[k][1] == blocks[k + 1][0] for k in range(p - 1))
    assert max(n for _, n in blocks) - min(n for _, n in blocks) <= 1


def test_root_info_round_trip() -> None:
    info = comm.get_root_info()
    assert len(info) == 4108
    assert comm._root_key(info) == comm._root_key(bytes(info))
    assert comm._root_key(info) != comm._root_key(comm.get_root_info())
    with pytest.raises(HcclError) as err:
        comm._root_key(b"\0" * 4108)
    assert err.value.code == 1


def _table(**over: object) -> str:
    doc = {"status": "completed", "version": "1.0", "server_count": "1",
           "server_list": [{"server_id": "node_0", "device": [
               {"device_id": "4", "device_ip": "192.168.1.8", "rank_id": "0"},
               {"device_id": "5", "rank_id": "1"}]}]}
    doc.update(over)
    return json.dumps(doc)


def test_rank_table_parses() -> None:
    table = ranktable.parse(_table())
    assert table.servers == 1 and table.devices == {0: 4, 1: 5}
    assert table.server_of[1] == "node_0"


@pytest.mark.parametrize("over", [
    {"status": "initializing"},
    {"server_count": "2"},
    {"server_list": []},
    {"server_list": [{"server_id": "n", "device": [{"device_id": 0, "rank_id": "0"}]}]},
    {"server_list": [{"server_id": "n", "device": [{"device_id": "0", "rank_id": "1"}]}]},
    {"server_list": [{"server_id": "x" * 65, "device": []}]},
])
def test_rank_table_flaws_are_e_para(over: dict) -> None:
    with pytest.raises(HcclError) as info:
        ranktable.parse(_table(**over))
    assert info.value.code == HcclResult.HCCL_E_PARA


def test_rank_table_missing_file(tmp_path) -> None:
    with pytest.raises(HcclError) as info:
        ranktable.load(str(tmp_path / "none.json"))
    assert info.value.code == HcclResult.HCCL_E_OPEN_FILE_FAILURE


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HCCL_EXEC_TIMEOUT", "HCCL_CONNECT_TIMEOUT", "HCCL_BUFFSIZE"):
        monkeypatch.delenv(name, raising=False)
    assert (exec_timeout_s(), connect_timeout_s(), buffer_bytes()) == (1836, 140, 200 << 20)
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "0")
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "5")
    monkeypatch.setenv("HCCL_BUFFSIZE", "1")
    assert (exec_timeout_s(), connect_timeout_s(), buffer_bytes()) == (86400, 5, 1 << 20)


def test_pyhccl_face_returns_codes_first() -> None:
    ret, root = pyhccl.HcclGetRootInfo()
    assert ret == 0 and len(root.internal) == 4108
    assert pyhccl.HcclGetRankSize(0x1234) == (1, None)
    assert pyhccl.HcclBarrier(0x1234, 0) == 1
    assert pyhccl.HcclGetErrorString(9) == "timeout"
    assert pyhccl.data_type_size(3) == 2
