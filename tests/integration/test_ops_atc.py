"""``npuemu atc --singleop`` then the pyACL sample flow of ``acl_execute_add.py``:
``set_model_dir`` → ``execute_v2`` (no compile in the program) → results compared."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

OPS = [
    {"op": "Add", "input_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"},
                                 {"format": "ND", "shape": [8, 16], "type": "int32"}],
     "output_desc": [{"format": "ND", "shape": [8, 16], "type": "int32"}]},
    {"op": "ReduceSum",
     "input_desc": [{"format": "ND", "shape": [4, 6], "type": "float"},
                    {"format": "ND", "shape": [1], "type": "int32", "is_const": True,
                     "const_value": [1]}],
     "output_desc": [{"format": "ND", "shape": [4, 1], "type": "float"}],
     "attr": [{"name": "keep_dims", "type": "bool", "value": True}]},
    {"op": "Relu",  # a dynamic-shape model: one file for every batch in 1..64
     "input_desc": [{"format": "ND", "shape": [-1, 8], "type": "float",
                     "shape_range": [[1, 64], [8, 8]]}],
     "output_desc": [{"format": "ND", "shape": [-1, 8], "type": "float",
                      "shape_range": [[1, 64], [8, 8]]}]},
]


def test_atc_singleop_then_set_model_dir_and_execute_v2(run_py, tmp_path):
    spec = tmp_path / "ops.json"
    spec.write_text(json.dumps([*OPS, {"op": "NoSuchOp", "input_desc": [],
                                       "output_desc": []}]))
    out = tmp_path / "op_models"
    res = subprocess.run([sys.executable, "-m", "npuemu.tools.atc", f"--singleop={spec}",
                          f"--output={out}", "--soc_version=Ascend910B1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "100020" in res.stderr  # the unknown op, reported
    names = sorted(p.name for p in out.iterdir())
    assert names == ["0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om",
                     "1_ReduceSum_0_2_4_6_3_2_1_0_2_4_1.om", "2_Relu_0_2_-1_8_0_2_-1_8.om"]
    assert (out / names[0]).read_bytes()[:4] == b"IMOD"
    body = f"""
ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
ctx, ret = acl.rt.create_context(0)
s = stream()
attr = acl.op.create_attr()
R["dir"] = acl.op.set_model_dir({str(out)!r})
a = np.arange(128, dtype=np.int32).reshape(8, 16)
descs, bufs, ptrs = [], [], []
for arr in (a, a * 3, np.zeros_like(a)):
    d = acl.create_tensor_desc(3, [8, 16], 2)
    size = acl.get_tensor_desc_size(d)
    p, ret = acl.rt.malloc(size, 2)
    h2d(p, arr.tobytes())
    descs.append(d); bufs.append(acl.create_data_buffer(p, size)); ptrs.append(p)
R["exec"] = acl.op.execute_v2("Add", descs[:2], bufs[:2], descs[2:], bufs[2:], attr, s)
ok(acl.rt.synchronize_stream(s), "sync")
got = np.frombuffer(d2h(ptrs[2], a.nbytes), np.int32).reshape(8, 16)
R["ok"] = bool((got == a * 4).all())
x = np.arange(24, dtype=np.float32).reshape(4, 6)
dx = acl.create_tensor_desc(0, [4, 6], 2); px = malloc(96); h2d(px, x.tobytes())
axes = np.array([1], np.int32)
dax = acl.create_tensor_desc(3, [1], 2); pax = malloc(4); h2d(pax, axes.tobytes())
ax_bytes = axes.tobytes()  # kept alive: the pointer must outlive the call
ok(acl.set_tensor_const(dax, acl.util.bytes_to_ptr(ax_bytes), 4))
dy = acl.create_tensor_desc(0, [4, 1], 2); py = malloc(16)
at2 = acl.op.create_attr(); ok(acl.op.set_attr_bool(at2, "keep_dims", 1))
R["reduce"] = acl.op.execute_v2("ReduceSum", [dx, dax], [acl.create_data_buffer(px, 96),
    acl.create_data_buffer(pax, 4)], [dy], [acl.create_data_buffer(py, 16)], at2, s)
ok(acl.rt.synchronize_stream(s), "sync")
R["sum"] = np.frombuffer(d2h(py, 16), np.float32).tolist()
relu = []
for n in (3, 50, 65):
    v = np.linspace(-1, 1, n * 8, dtype=np.float32).reshape(n, 8)
    dv = acl.create_tensor_desc(0, [n, 8], 2); pv = malloc(v.nbytes); h2d(pv, v.tobytes())
    po = malloc(v.nbytes); bv = acl.create_data_buffer(pv, v.nbytes)
    bo = acl.create_data_buffer(po, v.nbytes)
    ret = acl.op.execute_v2("Relu", [dv], [bv], [dv], [bo], 0, s)
    ok(acl.rt.synchronize_stream(s), "sync")
    relu.append(ret if ret else bool((np.frombuffer(d2h(po, v.nbytes), np.float32)
                                      == np.maximum(v, 0).ravel()).all()))
R["relu"] = relu
f32 = acl.create_tensor_desc(0, [8, 16], 2)
R["unmatched"] = acl.op.execute_v2("Add", [f32, f32], bufs[:2], [f32], bufs[2:], 0, s)
for b in bufs: ok(acl.destroy_data_buffer(b))
for p in ptrs: ok(acl.rt.free(p))
for d in descs: acl.destroy_tensor_desc(d)
acl.op.destroy_attr(attr)
ok(acl.rt.destroy_stream(s)); ok(acl.rt.destroy_context(ctx))
ok(acl.rt.reset_device(0)); ok(acl.finalize())
"""
    r = run_scenario(run_py, CHILD_HELPERS, body, {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G",
                                                   "NPUEMU_DDR": "256M"}, timeout=60)
    assert r["dir"] == 0 and r["exec"] == 0 and r["ok"]
    assert r["reduce"] == 0 and r["sum"] == [15.0, 51.0, 87.0, 123.0]
    assert r["unmatched"] == 100024  # execute_v2 never compiles
    assert r["relu"] == [True, True, 100024]  # inside the model's range, then outside
