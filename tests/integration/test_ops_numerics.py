"""Numerics of every op type of the library against numpy, through a real device worker:
dtypes, broadcasting, NCHW/NHWC, and tilings with several blocks and tiles. One child
program (``tests/progs/ops_numerics.py``) runs every case (``run_op``: compile into HBM,
execute on a stream, copy back) and reports each case's max error."""

from __future__ import annotations

from pathlib import Path

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}


def test_every_op_type_matches_numpy_through_the_worker(run_prog):
    r = run_program(run_prog, "ops_numerics.py", "every_op", env=ENV, timeout=240)
    bad = {k: v for k, v in r.items() if v is not True}
    from npuemu.host.ops import registry

    registry.lookup("Add")
    covered = {name.split("-")[0] for name in r}
    assert not bad, bad
    for op, test in ELSEWHERE.items():  # each named where its numerics are checked
        assert op in (TESTS / test).read_text(), (op, test)
    assert set(registry.REGISTRY) <= covered | set(ELSEWHERE) | ZOO_ONLY, \
        set(registry.REGISTRY) - covered - set(ELSEWHERE) - ZOO_ONLY


TESTS = Path(__file__).resolve().parent.parent
_SAMPLES = "unit/test_ops_samples.py"  # against numpy / onnxruntime, block by block
_CARD = "integration/test_ops_samples_card.py"  # through a real card, by acl.op
ELSEWHERE = {
    # the op library's newer families: numerics checked by these tests, not by this program
    "Aipp": "unit/test_models_aipp_cfg.py",  # and through a card by test_models_aipp
    "ArgMaxV2": _CARD, "TopK": _CARD, "GEMM": _CARD, "ResizeBilinearV2": _CARD,
    "Slice": _SAMPLES, "SliceD": _SAMPLES, "ResizeNearestNeighborV2": _SAMPLES,
    "StridedSliceD": _SAMPLES, "PadV3D": _SAMPLES, "Conv3D": _SAMPLES,
    "Conv2DTransposeD": _SAMPLES, "MaxPool3D": _SAMPLES, "AvgPool3D": _SAMPLES,
}
ZOO_ONLY: set[str] = set()
"""Ops whose numerics only the onnx package's models check (unit/test_models_zoo.py): none
now, every op of the library has a case here or a test named in ``ELSEWHERE``."""
