"""Rank-table JSON (host/hccl/ranktable.py): good tables of one and several servers
(versions 1.0 and 1.2), rank -> (server, device) resolution, and every rule broken once
with HCCL's code, read from files as ``HcclCommInitClusterInfo`` reads them."""

from __future__ import annotations

import copy
import json

import pytest

from npuemu.host.hccl import ranktable
from npuemu.host.hccl.types import HcclError, HcclResult

TWO_SERVERS = {
    "status": "completed", "version": "1.0", "server_count": "2",
    "server_list": [
        {"server_id": "node_0", "device": [
            {"device_id": "0", "device_ip": "192.168.1.8", "device_port": "16667",
             "rank_id": "0"},
            {"device_id": "1", "device_ip": "192.168.1.9", "rank_id": "1"}]},
        {"server_id": "node_1", "device": [
            {"device_id": "0", "device_ip": "192.168.2.8", "rank_id": "3"},
            {"device_id": "1", "device_ip": "192.168.2.9", "rank_id": "2"}]},
    ],
}


def _write(tmp_path, doc, name="table.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_two_servers_resolve_rank_to_server_and_device(tmp_path) -> None:
    table = ranktable.load(_write(tmp_path, TWO_SERVERS))
    assert table.version == "1.0" and table.servers == 2 and table.size == 4
    assert table.server_ids == ("node_0", "node_1")
    e = table.locate(2)
    assert (e.server_id, e.server_index, e.device_id, e.device_ip) == ("node_1", 1, 1,
                                                                       "192.168.2.9")
    assert table.locate(0).device_port == 16667 and table.locate(1).device_port is None
    assert table.devices == {0: 0, 1: 1, 2: 1, 3: 0}
    assert table.server_of == {0: "node_0", 1: "node_0", 2: "node_1", 3: "node_1"}
    assert table.ranks_of("node_1") == [2, 3]
    assert [table.local_rank(r) for r in range(4)] == [0, 1, 0, 1]
    with pytest.raises(HcclError) as err:
        table.locate(4)
    assert err.value.code == HcclResult.HCCL_E_PARA


def test_version_1_2_and_single_server_without_ips(tmp_path) -> None:
    doc = copy.deepcopy(TWO_SERVERS)
    doc["version"] = "1.2"
    doc["super_pod_list"] = [{"super_pod_id": "0", "server_list": [{"server_id": "node_0"}]}]
    doc["server_list"][0]["device"][0]["super_device_id"] = "0"
    assert ranktable.load(_write(tmp_path, doc)).version == "1.2"
    one = {"status": "completed", "server_list": [{"server_id": "s", "device": [
        {"device_id": "3", "rank_id": "0"}, {"device_id": "2", "rank_id": "1"}]}]}
    table = ranktable.parse(json.dumps(one))
    assert table.version == "1.0" and table.devices == {0: 3, 1: 2}
    # the digest names the rendezvous: the same text gives the same key, another text not
    assert table.digest == ranktable.parse(json.dumps(one)).digest != \
        ranktable.load(_write(tmp_path, TWO_SERVERS, "b.json")).digest


def _broken(path: str, value) -> dict:
    """TWO_SERVERS with ``path`` (keys and indexes) set to ``value`` (None deletes)."""
    doc = copy.deepcopy(TWO_SERVERS)
    *head, last = path
    node = doc
    for key in head:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return doc


BAD = {
    "status initializing": _broken(("status",), "initializing"),
    "unknown version": _broken(("version",), "2.0"),
    "server_count wrong": _broken(("server_count",), "3"),
    "server_count not a string": _broken(("server_count",), 2),
    "no servers": _broken(("server_list",), []),
    "duplicate server_id": _broken(("server_list", 1, "server_id"), "node_0"),
    "long server_id": _broken(("server_list", 1, "server_id"), "x" * 65),
    "empty device list": _broken(("server_list", 1, "device"), []),
    "rank_id not a string": _broken(("server_list", 0, "device", 0, "rank_id"), 0),
    "rank_id negative": _broken(("server_list", 0, "device", 0, "rank_id"), "-1"),
    "duplicate rank_id": _broken(("server_list", 1, "device", 0, "rank_id"), "0"),
    "rank gap": _broken(("server_list", 1, "device", 0, "rank_id"), "7"),
    "duplicate device on a server": _broken(("server_list", 0, "device", 1, "device_id"), "0"),
    "missing device_id": _broken(("server_list", 0, "device", 1, "device_id"), None),
    "device_ip missing across servers": _broken(("server_list", 1, "device", 0, "device_ip"),
                                                None),
    "device_ip not an address": _broken(("server_list", 0, "device", 0, "device_ip"),
                                        "300.1.1.1"),
    "device_port zero": _broken(("server_list", 0, "device", 0, "device_port"), "0"),
    "device_port too big": _broken(("server_list", 0, "device", 0, "device_port"), "65536"),
    "device not an object": _broken(("server_list", 0, "device", 0), "0"),
    "not an object": [1, 2],
    "not JSON": "{status: completed",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tables_are_e_para(tmp_path, case: str) -> None:
    with pytest.raises(HcclError) as err:
        ranktable.load(_write(tmp_path, BAD[case]))
    assert err.value.code == HcclResult.HCCL_E_PARA, case
    assert "rank table" in str(err.value)


def test_unreadable_file_is_open_file_failure(tmp_path) -> None:
    for path in (str(tmp_path / "missing.json"), str(tmp_path)):
        with pytest.raises(HcclError) as err:
            ranktable.load(path)
        assert err.value.code == HcclResult.HCCL_E_OPEN_FILE_FAILURE
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(HcclError) as err:
        ranktable.load(str(binary))
    assert err.value.code == HcclResult.HCCL_E_OPEN_FILE_FAILURE
