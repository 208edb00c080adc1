"""The tools as a new user meets them, through real workers: ``npuemu msprof`` on a program
written on the Pythonic API gets host rows (``api_statistic`` and the ``CANN`` timeline
process) and an aligned console summary; ``npuemu smi`` on a SoC whose main memory is DDR
(Ascend310P3) shows it as Memory-Usage with HBM-Usage ``0 / 0``, and an idle card of the
profile's size counts the firmware's share as used."""

from __future__ import annotations

import csv
import json
import os
import re
import textwrap

import pytest

from npuemu.host.prof import export
from npuemu.shared.config import soc_profile

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}

PYTHONIC_APP = """
import numpy as np
from npuemu.host import Device, DeviceArray, Stream

with Device(0) as dev:
    x = DeviceArray.from_numpy(np.arange(1024, dtype=np.float32))
    y = dev.malloc(4096)
    with Stream() as s:
        s.synchronize()
    assert (x.to_numpy() == np.arange(1024)).all()
print("app ok")
"""


def test_msprof_gives_a_pythonic_program_host_rows(npuemu_cli, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(PYTHONIC_APP))
    out = tmp_path / "out"
    res = npuemu_cli("msprof", f"--application=python {app}", f"--output={out}", env=ENV,
                     timeout=180)
    assert res.returncode == 0 and "app ok" in res.stdout, res.stdout + res.stderr
    (prof_dir,) = export.find_prof_dirs(str(out))
    folder = os.path.join(prof_dir, export.OUTPUT)
    (stats,) = [f for f in os.listdir(folder) if f.startswith("api_statistic_")]
    with open(os.path.join(folder, stats), newline="") as f:
        names = {row["API Name"] for row in csv.DictReader(f)}
    assert {"DeviceArray.to_numpy", "Device.malloc", "Stream.synchronize"} <= names, names
    (timeline,) = [f for f in os.listdir(folder) if f.startswith("msprof_")]
    with open(os.path.join(folder, timeline)) as f:
        events = json.load(f)
    assert any(e.get("name") == "AscendCL@Device.malloc" for e in events)
    head, row = (ln for ln in res.stdout.splitlines() if ln.startswith(("Job Info", "NA ")))
    assert head.index("Dir Name") == row.index("PROF_"), (head, row)  # aligned columns


def test_smi_on_a_ddr_soc_and_a_card_of_the_profiles_size(npuemu_cli, node_name, tmp_path):
    """Ascend310P3 at its own sizes (24 GB DDR main memory, sparse shared memory): the main
    memory is Memory-Usage, with the firmware's 3 GiB in use on the idle card; HBM-Usage is
    ``0 / 0``, as such a card shows it."""
    res = npuemu_cli("start", "--name", node_name, "--devices", "1",
                     env={"NPUEMU_SOC": "Ascend310P3", "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stdout + res.stderr
    table = npuemu_cli("smi", "info", "--name", node_name)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    (first,) = [i for i, ln in enumerate(lines) if re.match(r"\| 0 +310P3 +\| OK ", ln)]
    memory, hbm = re.findall(r"(\d+) +/ (\d+)", lines[first + 1].split("|")[3])
    total = soc_profile("Ascend310P3").hbm_bytes >> 20  # 24000000000 B up to 2 MiB pages
    assert memory == ("3072", str(total)), lines[first + 1]
    assert hbm == ("0", "0")
    res = npuemu_cli("smi", "info", "-t", "memory", "-i", "0", "--name", node_name)
    facts = {k.strip(): v.strip() for k, v in (ln.split(" : ", 1) for ln in
                                              res.stdout.splitlines() if " : " in ln)}
    assert (facts["DDR Capacity(MB)"], facts["HBM Capacity(MB)"]) == (str(total), "0"), \
        res.stdout
