"""Child of ``tests/unit/test_om_hostile.py``: load every ``*.om`` of a directory on card 0,
from the file (``aclmdlLoadFromFile``) and from host memory (``aclmdlLoadFromMem``), unload
what loaded, and print one ``RESULT`` JSON line ``{"codes": {file: [from_file, from_mem]},
"after": ret}``; ``after`` is the load of ``GOOD`` (a pristine file) once all the others
were tried: the process and its card still work.

Usage: ``python om_hostile_load.py DIR GOOD``.
"""

from __future__ import annotations

import json
import os
import sys

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def load_both(path: str) -> list[int]:
    """The codes of a load from the file and from memory (each unloaded if it loaded)."""
    codes = []
    with open(path, "rb") as f:
        image = f.read()
    for model_id, ret in (acl.mdl.load_from_file(path),
                          acl.mdl.load_from_mem(acl.util.bytes_to_ptr(image), len(image))):
        codes.append(ret)
        if ret == 0:
            describe(model_id)
            ok(acl.mdl.unload(model_id), f"unload {path}")
    return codes


def describe(model_id: int) -> None:
    """``aclmdlGetDesc`` of a loaded model and every getter on it (none may raise)."""
    desc = acl.mdl.create_desc()
    ok(acl.mdl.get_desc(desc, model_id), "get_desc")
    for i in range(acl.mdl.get_num_inputs(desc)):
        acl.mdl.get_input_size_by_index(desc, i)
        acl.mdl.get_input_dims(desc, i)
        acl.mdl.get_input_name_by_index(desc, i)
    for i in range(acl.mdl.get_num_outputs(desc)):
        acl.mdl.get_output_size_by_index(desc, i)
        acl.mdl.get_cur_output_dims(desc, i)
        acl.mdl.get_output_data_type(desc, i)
    acl.mdl.get_dynamic_batch(desc)
    ok(acl.mdl.destroy_desc(desc), "destroy_desc")


def main(directory: str, good: str) -> None:
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".om"))
    codes = {name: load_both(os.path.join(directory, name)) for name in names}
    model_id, after = acl.mdl.load_from_file(good)
    if after == 0:
        ok(acl.mdl.unload(model_id), "unload the good model")
    print("RESULT " + json.dumps({"codes": codes, "after": after}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
