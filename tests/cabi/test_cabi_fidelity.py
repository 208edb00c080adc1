"""A C program's questions about its card's SoC (``tests/cabi/progs/device_facts.c``):
``aclGetDeviceCapability`` and ``aclrtGetDeviceInfo`` answer from the node's SoC profile, for
a 910B card and an inference card (Ascend310P3), with the codes CANN gives for what they do
not answer."""

from __future__ import annotations

import pytest

from npuemu.shared.config import soc_profile

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("soc", ["Ascend910B4", "Ascend310P3"])
def test_a_c_program_reads_its_socs_numbers(compile_c, run_c, soc):
    res = run_c(compile_c("device_facts.c"),
                env={"NPUEMU_DEVICES": "1", "NPUEMU_SOC": soc, "NPUEMU_HBM": "256M",
                     "NPUEMU_DDR": "64M"})
    assert res.returncode == 0, res.stdout + res.stderr
    got = {what: (int(ret), value) for what, ret, value in
           (line.split() for line in res.stdout.splitlines())}
    p = soc_profile(soc)
    assert got == {
        "cap_aicore": (0, str(p.ai_core_num)), "cap_vector": (0, str(p.vector_core_num)),
        "cap_l2": (0, str(p.l2_bytes)), "cap_undefined": (100000, "-1"),
        "cap_null": (100000, "0"),
        "info_aicpu": (0, str(p.aicpu_num)), "info_aicore": (0, str(p.ai_core_num)),
        "info_cube": (0, str(p.cube_core_num)), "info_vector": (0, str(p.vector_core_num)),
        "info_memory": (0, str(256 << 20)), "info_grid": (207000, "-1"),
        "info_null": (100000, "0"), "soc": (0, soc)}
