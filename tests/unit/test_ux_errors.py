"""What a user reads when a model or op call fails: the code's real CANN name, not
ACL_ERROR_UNKNOWN (the GE and ACL model/op codes were missing from shared/errors)."""

from __future__ import annotations

import pytest

from npuemu.host.models import codes as model_codes
from npuemu.host.models import omfile
from npuemu.host.ops import types as op_types
from npuemu.shared import errors


def _codes(module: object) -> dict[str, int]:
    return {n: v for n, v in vars(module).items()
            if n.startswith("ACL_ERROR_") and type(v) is int}


@pytest.mark.parametrize("module", [model_codes, op_types])
def test_codes_defined_by_features_have_their_cann_names(module):
    found = _codes(module)
    assert found
    for name, value in found.items():
        assert errors.name_of(value) == name, name


def test_bad_om_path_names_the_ge_code(tmp_path):
    with pytest.raises(errors.AclError) as info:
        omfile.read_file(tmp_path / "missing.om")
    assert info.value.code == 145002
    assert str(info.value).startswith("ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID (145002): ")


def test_garbage_om_names_the_ge_code(tmp_path):
    path = tmp_path / "garbage.om"
    path.write_bytes(b"garbage" * 10)
    with pytest.raises(errors.AclError) as info:
        omfile.read_file(path)
    assert info.value.name == "ACL_ERROR_GE_PARAM_INVALID"


def test_op_codes_name_themselves():
    assert errors.name_of(100024) == "ACL_ERROR_OP_NOT_FOUND"
    assert errors.describe(100026) != errors.describe(-1)
