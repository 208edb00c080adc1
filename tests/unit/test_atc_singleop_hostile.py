"""``npuemu atc --singleop`` on hostile JSON: a top-level value that is no list, entries that
are no objects, dims outside int64, descs and ranges of the wrong shape, bad const values.
Each is an exit status (2 for a file that is no op list, 1 for an op that does not compile)
with a message naming the op, never a traceback."""

from __future__ import annotations

import json

import pytest

from npuemu.tools import atc

F = {"type": "float", "shape": [4], "format": "ND"}
CASES = {
    "number": (5, 2),
    "string_entries": (["x", 3], 1),
    "dim_past_int64": ([{"op": "Add", "input_desc": [{**F, "shape": [2**64]}] * 2,
                         "output_desc": [F]}], 1),
    "shape_not_a_list": ([{"op": "Add", "input_desc": [{**F, "shape": 7}] * 2}], 1),
    "desc_not_an_object": ([{"op": "Add", "input_desc": [5, 5]}], 1),
    "range_not_pairs": ([{"op": "Add", "input_desc": [F, F],
                          "output_desc": [{**F, "shape_range": [1]}]}], 1),
    "const_not_numbers": ([{"op": "Add", "input_desc": [{**F, "const_value": "abc"}, F]}], 1),
    "attr_not_objects": ([{"op": "Add", "input_desc": [F, F], "attr": [5]}], 1),
    "op_type_a_number": ([{"op": 5, "input_desc": [F, F]}], 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_single_op_json_is_an_exit_status(tmp_path, capsys, name) -> None:
    doc, status = CASES[name]
    path = tmp_path / "ops.json"
    path.write_text(json.dumps(doc))
    assert atc.main([f"--singleop={path}", f"--output={tmp_path / 'out'}"]) == status
    err = capsys.readouterr().err
    assert "npuemu atc:" in err and "Traceback" not in err
