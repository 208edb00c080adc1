"""Image pre-processing ops (AI Core): ``Aipp``, the first task of a model built with
``--insert_op_conf`` (ATC inserts CANN's ``Aipp`` op after the input it names).

Inputs: ``images`` (uint8, the raw images as the model's input holds them) and, for dynamic
AIPP only, ``params`` (uint8, the ``kAippDynamicPara`` record that ``aclmdlSetInputAIPP``
wrote). Output ``features``: the model's input (``out_shape``, ``out_dtype`` float32 or
float16; NCHW, or NHWC when ``out_layout`` is ``"NHWC"``: a model built with
``--input_format=NHWC``). ``aipp_mode`` ``"static"``: the parameters are the attributes of
``shared/aipp.py``'s ``as_attrs``; ``"dynamic"``: they are read from ``params`` at every run.
The kernel runs the whole batch as one block and calls ``shared/aipp.py``'s pipeline; an
image whose result does not fit ``features`` fails the task (AI Core's code).
"""

from __future__ import annotations

from typing import Any

from npuemu.host.ops.registry import Body, OpDef, Spec, bad, register

OUT_DTYPES = ("float32", "float16")


def _infer(ins: list[Spec], attrs: dict[str, Any], hint: list[Spec]) -> list[Spec]:
    mode = attrs.get("aipp_mode")
    if mode not in ("static", "dynamic"):
        raise bad(f"Aipp: aipp_mode {mode!r} (static or dynamic)")
    if (mode == "dynamic") != (len(ins) == 2):
        raise bad(f"Aipp: {mode} AIPP takes {2 if mode == 'dynamic' else 1} inputs, "
                  f"got {len(ins)}")
    shape = tuple(int(d) for d in attrs.get("out_shape") or ())
    dtype = attrs.get("out_dtype")
    if len(shape) != 4 or min(shape) < 1 or dtype not in OUT_DTYPES:
        raise bad(f"Aipp: output {dtype} {shape} (NCHW float32 or float16)")
    return [Spec(dtype, shape)]


def _source(ins: list[Spec], outs: list[Spec], attrs: dict[str, Any]) -> Body:
    helpers = "from npuemu.shared import aipp as _aipp\n"
    last = attrs.get("out_layout") == "NHWC"
    if attrs["aipp_mode"] == "dynamic":
        return Body(f"_aipp.run(x0, _aipp.unpack(x1), y0, {last})", split=False,
                    helpers=helpers)
    params = {k: attrs[k] for k in ("input_format", "csc_switch", "rbuv_swap_switch",
                                    "ax_swap_switch", "src_image_size", "matrix",
                                    "output_bias", "input_bias", "crop", "resize", "padding",
                                    "mean_chn", "min_chn", "var_reci_chn", "padding_value")}
    helpers += f"_P = _aipp.from_attrs({params!r}, {outs[0].shape[0]})\n"
    return Body(f"_aipp.run(x0, _P, y0, {last})", split=False, helpers=helpers)


register(OpDef("Aipp", "aicore", ("images", "params"), ("features",), frozenset({"uint8"}),
               _infer, _source, attrs={"aipp_mode": "static", "out_shape": None,
                                       "out_dtype": "float32", "out_layout": "NCHW"},
               optional=1))
