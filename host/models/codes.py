"""Error codes of the model path (GE codes, ``ge_error_codes.h``, as
``aclmdlLoadFromFile`` and friends return them).

The ACL model layer passes GE codes through unchanged, so a bad OM file reaches the user as
``ACL_ERROR_GE_PARAM_INVALID`` (bad content) or ``ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID``
(missing or unreadable file, or a size of 0), as the real runtime's load path does.
"""

from __future__ import annotations

from npuemu.shared.errors import AclError

ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003
ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID = 145013
ACL_ERROR_GE_SHAPE_INVALID = 145021
ACL_ERROR_GE_DATATYPE_INVALID = 145022
ACL_ERROR_GE_INTERNAL_ERROR = 545000
ACL_ERROR_GE_LOAD_MODEL = 545001


class ModelError(AclError):
    """A model could not be converted, written or read; ``code`` is the GE/ACL code."""


class UnsupportedOpsError(ModelError):
    """The graph holds ops the op library does not cover; ``ops`` lists (op_type, node)."""

    def __init__(self, ops: list[tuple[str, str]]) -> None:
        self.ops = list(ops)
        names = "; ".join(f"{op} (node {node!r})" for op, node in self.ops)
        super().__init__(ACL_ERROR_GE_PARAM_INVALID, f"unsupported ops: {names}")
