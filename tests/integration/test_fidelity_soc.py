"""The SoC profiles the samples target besides Ascend910B1-B4 (Ascend310P3 and Ascend310B1 for
inference, the A3's Ascend910_9391, also named by its family Ascend910_93), each through a
node start (``npuemu start`` with ``NPUEMU_SOC``), ``aclrtGetSocName``, ``npuemu smi``, the
node's HCCS topology, ``aclrtGetDeviceInfo``, an op tiled for the SoC's cores
(``tests/progs/soc_tiling.py``) and a model converted by ATC with ``--soc_version`` and run
by ``acl.mdl`` (``tests/progs/models_mdl.py``)."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from childprog import run_program

from npuemu.host.models import atc
from npuemu.shared.config import soc_profile
from tests.integration.test_models_mdl import ort_run
from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration
SOCS = {  # NPUEMU_SOC -> (the SoC name a card reports, AI Cores, AI Vector cores, HCCS peers)
    "Ascend310P3": ("Ascend310P3", 8, 7, False),
    "Ascend310B1": ("Ascend310B1", 1, 1, False),
    "Ascend910_93": ("Ascend910_9391", 24, 48, True),
}
"""Numbers of the SoCs' CANN platform files (``ai_core_cnt``, ``vector_core_cnt``)."""


def start(npuemu_cli, name: str, soc: str, tmp_path) -> None:
    res = npuemu_cli("start", "--name", name, "--devices", "2", "--hbm", "1G", "--ddr", "256M",
                     env={"NPUEMU_SOC": soc, "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("soc", sorted(SOCS))
def test_profile_through_node_smi_op_and_model(npuemu_cli, node_name, run_prog, status,
                                               tmp_path, soc):
    full, aicore, aivector, hccs = SOCS[soc]
    start(npuemu_cli, node_name, soc, tmp_path)
    node = status(node_name)
    assert node["soc"] == full
    groups = [d["hccs_group"] for d in node["devices"]]
    assert (groups[0] == groups[1]) is hccs, groups  # the PCIe cards have no HCCS mesh

    table = npuemu_cli("smi", "info", "--name", node_name)
    assert table.returncode == 0, table.stderr
    chip = soc_profile(soc).chip_name
    rows = re.findall(r"^\| (\d+) +(\S+) +\| OK ", table.stdout, re.MULTILINE)
    assert rows == [("0", chip), ("1", chip)], table.stdout  # each NPU's first line

    env = {"NPUEMU_NODE": node_name}
    res = run_prog("soc_tiling.py", str(tmp_path / "prof"), env=env, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    r = json.loads(next(ln for ln in res.stdout.splitlines()
                        if ln.startswith("RESULT "))[len("RESULT "):])
    assert r["soc"] == r["soc_before_set_device"] == full
    assert r["cores"] == {"aicore": aicore, "aivector": aivector}
    assert r["compiled"] == {"k_Add": aivector, "k_MatMul": aicore} == r["ran"]

    r = run_program(run_prog, "fidelity.py", "device_info", env=env, timeout=120)
    info, mem = r["info"], {int(k): v for k, v in r["mem"].items()}
    assert all(ret == 0 for _f, _t, ret in mem.values()), mem
    hbm = [mem[a][:2] for a in (1, 4, 5, 9)]  # ACL_HBM_MEM, HBM_MEM_HUGE, _NORMAL, _P2P_NORMAL
    ddr = [mem[a][:2] for a in (0, 2, 3, 6)]  # ACL_DDR_MEM, DDR_MEM_HUGE, _NORMAL, _P2P_HUGE
    assert hbm[0][1] == 1 << 30 and all(t == 1 << 30 for _f, t in hbm)
    if soc_profile(soc).main_memory == "DDR":  # one memory: the runtime answers HBM with DDR
        assert ddr == [hbm[0], hbm[1], hbm[2], hbm[1]], mem
    else:
        assert all(t == 256 << 20 for _f, t in ddr), mem
    # the 310 SoCs' op library has no bfloat16 kernels (their .ini lacks support_bf16)
    assert r["bf16_add"] == ([3.0] * 3 if soc_profile(soc).support_bf16 else 100026)
    profile = soc_profile(soc)
    assert info == {"aicpu": [profile.aicpu_num, 0], "aicore": [aicore, 0],
                    "cube": [profile.cube_core_num, 0], "vector": [aivector, 0],
                    "memory": [1 << 30, 0], "l2": [profile.l2_bytes, 0], "chip": [0, 0],
                    "virtual": [0, 0], "grid_x": [0, 207000], "unknown": [0, 107000]}

    model = small_cnn()
    onnx.save(model, tmp_path / "cnn.onnx")
    report = atc.convert(tmp_path / "cnn.onnx", tmp_path / "cnn", soc)
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run_program(run_prog, "models_mdl.py", "flow", report["om"], tmp_path / "x.npy",
                tmp_path / "y.npy", env=env, timeout=180)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ort_run(model, x), rtol=1e-4,
                               atol=1e-5)


def test_atc_writes_the_full_soc_name_for_a_family(tmp_path):
    onnx.save(small_cnn(), tmp_path / "cnn.onnx")
    from npuemu.host.models import omfile

    om = atc.convert(tmp_path / "cnn.onnx", tmp_path / "cnn", "Ascend910_93")["om"]
    assert omfile.read_file(om).model_def["soc_version"] == "Ascend910_9391"
    with pytest.raises(atc.ModelError, match="Ascend310P3"):
        atc.convert(tmp_path / "cnn.onnx", tmp_path / "bad", "Ascend310Z9")
