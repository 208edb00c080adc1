"""``npuemu atc --singleop=ops.json --output=DIR``: compile single-op descriptions into
single-op model files (``.om``), as ATC's single-op mode does (``atc --singleop``).

The JSON is a list of ``{"op": "Add", "input_desc": [{"format": "ND", "shape": [8, 16],
"type": "int32"}, ...], "output_desc": [...]}`` with the optional keys ``name``, ``attr``
(``[{"name", "type", "value"}]``, types ``bool, int, float, string, list_bool, list_int,
list_float, list_string, list_list_int, data_type``) and, per desc, ``origin_format``,
``origin_shape``, ``shape_range``, ``is_const``/``const_value``. Output files are named as
ATC names them: ``<seq>_<OpType>_<dtype_format_dims of each input>_<... of each output>.om``
(e.g. ``0_Add_3_2_3_3_3_2_3_3_3_2_3_3.om``), or ``<name>.om`` when ``name`` is given.
Compiling is host work only (no node is started). ``--soc_version``, ``--log`` and
``--mode=0`` are accepted; other modes are not emulated. ``acl.op.set_model_dir(DIR)``
loads the files. Exit status: 0 on success, 1 when an op does not compile (each failure is
printed with its ACL code), 2 for bad arguments. Without ``--singleop`` the command is
ATC's model mode (``--model --framework=5 --output --soc_version``, ``--mode=1``), handled
by ``npuemu.host.models.atc.run``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from npuemu.host.ops import compiler, models, registry, signature
from npuemu.host.ops import desc as D
from npuemu.host.ops import types as T
from npuemu.shared import errors

DTYPE_NAMES = {"float": 0, "float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4,
               "int16": 6, "uint16": 7, "uint32": 8, "int64": 9, "uint64": 10, "double": 11,
               "float64": 11, "bool": 12}


def _dtype(value: object) -> int:
    if isinstance(value, int):
        return value
    found = DTYPE_NAMES.get(str(value).lower())
    if found is None:
        raise ValueError(f"unknown type {value!r}")
    return found


def _format(value: object) -> int:
    if isinstance(value, int):
        return value
    found = T.FORMAT_BY_NAME.get(str(value).upper())
    if found is None:
        raise ValueError(f"unknown format {value!r}")
    return found


def _desc(item: dict) -> D.TensorDesc:
    desc = D.TensorDesc(_dtype(item["type"]), D._dims(item["shape"]),  # int64 dims
                        _format(item.get("format", "ND")))
    if item.get("shape_range"):
        desc.shape_range = tuple((int(lo), int(hi)) for lo, hi in item["shape_range"])
    if item.get("origin_format") is not None:
        desc.origin_format = _format(item["origin_format"])
    if item.get("is_const") or item.get("const_value") is not None:
        values = np.asarray(item.get("const_value", []), dtype=T.numpy_dtype(desc.dtype))
        desc.const = values.tobytes()
    return desc


def _attr(items: list[dict]) -> D.OpAttr | None:
    if not items:
        return None
    attr = D.OpAttr()
    for it in items:
        attr.set(it["type"], it["name"], it["value"])
    return attr


def _file_name(seq: int, op: dict, ins: list[D.TensorDesc], outs: list[D.TensorDesc]) -> str:
    if op.get("name"):
        return f"{op['name']}.om"
    parts = [str(seq), op["op"]]
    for d in (*ins, *outs):
        parts += [str(d.dtype), str(d.format), *(str(x) for x in d.dims)]
    return "_".join(parts) + ".om"


def compile_one(seq: int, op: dict, out_dir: str) -> str:
    """Compile one op description into ``out_dir``; returns the file name."""
    ins = [_desc(i) for i in op.get("input_desc", [])]
    outs = [_desc(o) for o in op.get("output_desc", [])]
    attr = _attr(op.get("attr") or [])
    op_def = registry.lookup(op["op"])
    present = [d for d in ins if not d.unused]
    stand_in = [signature.representative(d) if d.dynamic else d for d in present]
    specs = [signature.spec(d) for d in stand_in]
    attrs = registry.attrs_of(op_def, signature.attr_values(attr))
    hint = [] if any(d.dynamic for d in outs) else [signature.spec(d) for d in outs]
    out_specs = signature.outputs(op_def, specs, hint, attrs)
    binary = compiler.build(op_def, specs, out_specs, attrs)
    name = _file_name(seq, op, ins, outs)
    data = models.encode(op_def.type, ins, outs, attr, binary)
    tmp = os.path.join(out_dir, f".{name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(out_dir, name))
    return name


def single_op_parser() -> argparse.ArgumentParser:
    """The options of single-op mode (``--singleop``)."""
    p = argparse.ArgumentParser(
        prog="npuemu atc", description="ATC single-op mode: compile single-op descriptions "
        "(a JSON list) into single-op model files (.om) for acl.op.set_model_dir",
        epilog="model mode (ONNX -> OM): npuemu atc --model=M.onnx ... (see `npuemu atc -h`)")
    p.add_argument("--singleop", required=True, help="single-op description JSON")
    p.add_argument("--output", required=True, help="output directory")
    p.add_argument("--soc_version", default=None, help="accepted (the ops do not depend on it)")
    p.add_argument("--mode", default="0", help="0, the only mode emulated here")
    p.add_argument("--log", default="null", help="accepted")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not any(a.startswith("--singleop") for a in argv):  # model mode (helper "models")
        from npuemu.host.models import atc as model_atc
        return model_atc.run(argv)
    args = single_op_parser().parse_args(argv)
    if args.mode != "0":
        print(f"npuemu atc: --mode={args.mode} is not emulated", file=sys.stderr)
        return 2
    try:
        with open(args.singleop, encoding="utf-8") as f:
            ops = json.load(f)
    except (OSError, ValueError) as err:
        print(f"npuemu atc: cannot read {args.singleop}: {err}", file=sys.stderr)
        return 2
    if isinstance(ops, dict):
        ops = [ops]
    if not isinstance(ops, list):
        print(f"npuemu atc: {args.singleop} holds {type(ops).__name__}, not a list of op "
              "descriptions", file=sys.stderr)
        return 2
    os.makedirs(args.output, exist_ok=True)
    failed = 0
    for seq, op in enumerate(ops):
        try:
            if not isinstance(op, dict):
                raise TypeError(f"an op description is a JSON object, not {op!r:.40}")
            name = compile_one(seq, op, args.output)
        except (errors.AclError, ValueError, KeyError, TypeError, AttributeError,
                IndexError, OverflowError) as err:  # the JSON's values, whatever their shape
            failed += 1
            print(f"npuemu atc: op {seq} ({op.get('op') if isinstance(op, dict) else op!r}) "
                  f"failed: {err}", file=sys.stderr)
            continue
        print(f"{os.path.join(args.output, name)}")
    print(f"ATC run {'success' if not failed else 'failed'}: {len(ops) - failed} of "
          f"{len(ops)} single-op models written")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
