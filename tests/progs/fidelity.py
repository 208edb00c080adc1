"""Child program of ``tests/integration/test_fidelity_pyacl.py``: what programs written for
real cards check of pyACL (dict keys, argument errors, codes, ``dir``), and the memory
figures of an idle card seen by ``aclrtGetMemInfo``.

``python fidelity.py SCENARIO [ARG...]`` runs one scenario and prints ``R`` (see
``childlib``); the assertions are the test's.
"""

import numpy as np
from childlib import R, acl, main, ok, scenario

ACL_DDR_MEM, ACL_HBM_MEM = 0, 1  # aclrtMemAttr


def _type_error(call, *args, **kwargs):
    """The TypeError message of ``call(*args, **kwargs)`` (None if it raised none)."""
    try:
        call(*args, **kwargs)
    except TypeError as err:
        return str(err)
    return None


@scenario
def utilization():
    """``get_device_utilization_rate`` on a set device and on a device the node lacks."""
    ok(acl.rt.set_device(0))
    R["rates"] = list(acl.rt.get_device_utilization_rate(0))
    R["bad"] = list(acl.rt.get_device_utilization_rate(99))


@scenario
def thread_args():
    """pyACL's argument errors of ``start_thread``/``stop_thread``, and a normal run."""
    start, stop = acl.util.start_thread, acl.util.stop_thread
    R["start"] = [_type_error(start), _type_error(start, print),
                  _type_error(start, print, None, 3), _type_error(start, 5, None),
                  _type_error(start, fn=print, args=None)]
    R["stop"] = [_type_error(stop), _type_error(stop, "x"), _type_error(stop, 1, 2)]
    seen = []
    tid, ret = start(seen.append, "ran")
    R["run"] = [ret, stop(tid), seen, stop(tid)]


@scenario
def op_without_model():
    """Executing an op type that has no compiled model (a known one and an unknown one),
    and compiling the unknown one."""
    ok(acl.init())
    ok(acl.rt.set_device(0))
    stream, ret = acl.rt.create_stream()
    ok(ret)
    data = np.ones(4, np.float32).tobytes()
    ptr, ret = acl.rt.malloc(len(data), 0)
    ok(ret)
    desc = acl.create_tensor_desc(0, [4], 2)
    buf = acl.create_data_buffer(ptr, len(data))
    attr = acl.op.create_attr()
    R["codes"] = {
        op_type: acl.op.execute_v2(op_type, [desc], [buf], [desc], [buf], attr, stream)
        for op_type in ("Relu", "NoSuchOpType")}
    R["handle"] = acl.op.create_handle("NoSuchOpType", [desc], [desc], attr)[1]
    R["compile"] = acl.op.compile("NoSuchOpType", [desc], [desc], attr)


@scenario
def module_names():
    """``dir()`` of the pyACL submodules."""
    R["rt"] = dir(acl.rt)
    R["util"] = dir(acl.util)
    R["op"] = dir(acl.op)


@scenario
def idle_memory():
    """``aclrtGetMemInfo`` of HBM and DDR on an idle card (nothing allocated)."""
    ok(acl.rt.set_device(0))
    R["hbm"] = list(acl.rt.get_mem_info(ACL_HBM_MEM))
    R["ddr"] = list(acl.rt.get_mem_info(ACL_DDR_MEM))


@scenario
def device_info():
    """``aclrtGetDeviceInfo`` of card 0 for the attributes it answers, one it does not
    emulate (a SIMT grid limit) and an unknown one; a device the node lacks; then
    ``aclrtGetMemInfo`` of card 0 for DDR and HBM attributes (``mem``, by attribute) and a
    bfloat16 Add (``bf16_add``)."""
    attrs = {"aicpu": 1, "aicore": 101, "cube": 102, "vector": 201, "memory": 301, "l2": 302,
             "chip": 402, "virtual": 501, "grid_x": 205, "unknown": 9999}
    R["info"] = {name: list(acl.rt.get_device_info(0, attr)) for name, attr in attrs.items()}
    R["bad_device"] = list(acl.rt.get_device_info(99, 1))
    ok(acl.rt.set_device(0))
    R["mem"] = {attr: list(acl.rt.get_mem_info(attr)) for attr in (0, 1, 2, 3, 4, 5, 6, 9)}
    R["bf16_add"] = bf16_add()
    ok(acl.rt.reset_device(0))


def bf16_add():
    """1.5 + 1.5 in bfloat16 on card 0 (``run_op``, hccl.bfloat16's tagged uint16 bits in),
    or the code of its refusal."""
    from npuemu.host.api import run_op
    from npuemu.host.hccl.types import BFLOAT16
    from npuemu.shared.bf16 import from_float32, to_float32
    from npuemu.shared.errors import AclError

    try:
        (y,) = run_op("Add", [from_float32(np.full(3, 1.5, np.float32)).view(BFLOAT16)] * 2)
    except AclError as err:
        return err.code
    out = to_float32(y.to_numpy().view(np.uint16)).tolist()
    y.free()
    return out


@scenario
def failing_call():
    """One failing call (an unknown device), whose host log line goes to stdout when the
    environment asks for it."""
    R["ret"] = acl.rt.set_device(99)


if __name__ == "__main__":
    main()
