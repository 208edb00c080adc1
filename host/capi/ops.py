"""C bodies of the single-op calls: op attributes, execute, handles, cast, shape inference,
model directory and load (``acl_op.h``), compile and compile options
(``acl_op_compiler.h``); the tensor descriptors are ``tensor.py``'s.

Each mirrors the C call of its name through the ``acl`` face (``acl.op`` and the tensor
calls of the top-level module): the same op library, caches and codes. Descriptor, buffer,
attribute and handle pointers are the face's int handles; arrays of them are read
``numInputs``/``numOutputs`` long (a NULL array with a count > 0: 100000). ``aclopCompile``
blocks while it compiles; execute calls are asynchronous on their stream.
"""

from __future__ import annotations

from typing import Any

from npuemu.host.acl import op
from npuemu.host.acl import tensor as acl_tensor
from npuemu.host.capi import exports as X
from npuemu.host.capi.exports import export


def _handles(p: Any, n: int) -> list[int] | None:
    """``n`` pointers of a C array as ints (None when the array is NULL but n > 0)."""
    if n <= 0:
        return []
    if p == X.ffi.NULL:
        return None
    return [X.addr(p[i]) for i in range(n)]


def _lists(func: str, *arrays: tuple[Any, int]) -> list[list[int]] | int:
    out = []
    for p, n in arrays:
        handles = _handles(p, n)
        if handles is None:
            return X.invalid(func, "a descriptor or buffer array is NULL")
        out.append(handles)
    return out


# attributes -----------------------------------------------------------------------------------
@export
def aclopCreateAttr() -> Any:
    return X.ffi.cast("aclopAttr *", op.create_attr())


@export
def aclopDestroyAttr(attr: Any) -> None:
    op.destroy_attr(X.addr(attr))


def _set(func: str, face: Any, attr: Any, name: Any, value: Any) -> int:
    if name == X.ffi.NULL:
        return X.invalid(func, "attrName is NULL")
    return face(X.addr(attr), X.text(name), value)


@export
def aclopSetAttrBool(attr: Any, name: Any, value: int) -> int:
    return _set("aclopSetAttrBool", op.set_attr_bool, attr, name, bool(value))


@export
def aclopSetAttrInt(attr: Any, name: Any, value: int) -> int:
    return _set("aclopSetAttrInt", op.set_attr_int, attr, name, value)


@export
def aclopSetAttrFloat(attr: Any, name: Any, value: float) -> int:
    return _set("aclopSetAttrFloat", op.set_attr_float, attr, name, value)


@export
def aclopSetAttrString(attr: Any, name: Any, value: Any) -> int:
    if value == X.ffi.NULL:
        return X.invalid("aclopSetAttrString", "attrValue is NULL")
    return _set("aclopSetAttrString", op.set_attr_string, attr, name, X.text(value))


@export
def aclopSetAttrDataType(attr: Any, name: Any, value: int) -> int:
    face = lambda a, n, v: op.set_attr_data_type(a, n, v)[1]  # noqa: E731
    return _set("aclopSetAttrDataType", face, attr, name, value)


def _list_setter(func: str, face: Any, conv: Any = lambda v: v) -> Any:
    def set_list(attr: Any, name: Any, num: int, values: Any) -> int:
        if num and values == X.ffi.NULL:
            return X.invalid(func, "values is NULL")
        return _set(func, face, attr, name, [conv(values[i]) for i in range(max(num, 0))])

    set_list.__name__ = func
    return set_list


export(_list_setter("aclopSetAttrListBool", op.set_attr_list_bool, bool))
export(_list_setter("aclopSetAttrListInt", op.set_attr_list_int))
export(_list_setter("aclopSetAttrListFloat", op.set_attr_list_float))
export(_list_setter("aclopSetAttrListString", op.set_attr_list_string, X.text))
export(_list_setter("aclopSetAttrListDataType",
                    lambda a, n, v: op.set_attr_list_data_type(a, n, v)[1]))


@export
def aclopSetAttrListListInt(attr: Any, name: Any, num_lists: int, nums: Any,
                            values: Any) -> int:
    if num_lists and (nums == X.ffi.NULL or values == X.ffi.NULL):
        return X.invalid("aclopSetAttrListListInt", "numValues or values is NULL")
    lists = [list(X.ffi.unpack(values[i], nums[i])) if nums[i] else []
             for i in range(max(num_lists, 0))]
    return _set("aclopSetAttrListListInt", op.set_attr_list_list_int, attr, name, lists)


# compile and execute --------------------------------------------------------------------------
def _op_type(func: str, p: Any) -> str | int:
    name = X.text(p)  # None for NULL
    return X.invalid(func, "opType is NULL") if name is None else name


@export
def aclopCompile(op_type: Any, n_in: int, in_desc: Any, n_out: int, out_desc: Any, attr: Any,
                 engine: int, flag: int, op_path: Any) -> int:
    """Mirrors ``aclopCompile`` for the current device (blocks while compiling)."""
    name = _op_type("aclopCompile", op_type)
    lists = _lists("aclopCompile", (in_desc, n_in), (out_desc, n_out))
    if isinstance(name, int):
        return name
    if isinstance(lists, int):
        return lists
    return op.compile(name, *lists, X.addr(attr), engine, flag, X.text(op_path))


def _execute(func: str, op_type: Any, n_in: int, in_desc: Any, ins: Any, n_out: int,
             out_desc: Any, outs: Any, attr: Any, s: Any) -> int:
    name = _op_type(func, op_type)
    lists = _lists(func, (in_desc, n_in), (ins, n_in), (out_desc, n_out), (outs, n_out))
    if isinstance(name, int):
        return name
    if isinstance(lists, int):
        return lists
    return op.execute_v2(name, *lists, X.addr(attr), X.addr(s))


@export
def aclopExecuteV2(*args: Any) -> int:
    """Mirrors ``aclopExecuteV2`` (asynchronous; 100024 if the op was never compiled)."""
    return _execute("aclopExecuteV2", *args)


@export
def aclopExecute(*args: Any) -> int:
    return _execute("aclopExecute", *args)


def _compile_and_execute(func: str, op_type: Any, n_in: int, in_desc: Any, ins: Any,
                         n_out: int, out_desc: Any, outs: Any, attr: Any, engine: int,
                         flag: int, op_path: Any, s: Any) -> int:
    name = _op_type(func, op_type)
    lists = _lists(func, (in_desc, n_in), (ins, n_in), (out_desc, n_out), (outs, n_out))
    if isinstance(name, int):
        return name
    if isinstance(lists, int):
        return lists
    return op.compile_and_execute_v2(name, *lists, X.addr(attr), engine, flag,
                                     X.text(op_path), X.addr(s))


@export
def aclopCompileAndExecute(*args: Any) -> int:
    return _compile_and_execute("aclopCompileAndExecute", *args)


@export
def aclopCompileAndExecuteV2(*args: Any) -> int:
    return _compile_and_execute("aclopCompileAndExecuteV2", *args)


@export
def aclopCreateHandle(op_type: Any, n_in: int, in_desc: Any, n_out: int, out_desc: Any,
                      attr: Any, out: Any) -> int:
    name = _op_type("aclopCreateHandle", op_type)
    lists = _lists("aclopCreateHandle", (in_desc, n_in), (out_desc, n_out))
    if isinstance(name, int):
        return name
    if isinstance(lists, int):
        return lists
    if out == X.ffi.NULL:
        return X.invalid("aclopCreateHandle", "handle is NULL")
    handle, ret = op.create_handle(name, *lists, X.addr(attr))
    if ret == 0:
        out[0] = X.ffi.cast("aclopHandle *", handle)
    return ret


@export
def aclopDestroyHandle(handle: Any) -> None:
    op.destroy_handle(X.addr(handle))


@export
def aclopExecWithHandle(handle: Any, n_in: int, ins: Any, n_out: int, outs: Any,
                        s: Any) -> int:
    lists = _lists("aclopExecWithHandle", (ins, n_in), (outs, n_out))
    if isinstance(lists, int):
        return lists
    return op.execute_with_handle(X.addr(handle), *lists, X.addr(s))


@export
def aclopCast(src_desc: Any, src: Any, dst_desc: Any, dst: Any, truncate: int, s: Any) -> int:
    return op.cast(X.addr(src_desc), X.addr(src), X.addr(dst_desc), X.addr(dst), truncate,
                   X.addr(s))


@export
def aclopCreateHandleForCast(src_desc: Any, dst_desc: Any, truncate: int, out: Any) -> int:
    if out == X.ffi.NULL:
        return X.invalid("aclopCreateHandleForCast", "handle is NULL")
    handle, ret = op.create_handle_for_cast(X.addr(src_desc), X.addr(dst_desc), truncate)
    if ret == 0:
        out[0] = X.ffi.cast("aclopHandle *", handle)
    return ret


@export
def aclopInferShape(op_type: Any, n_in: int, in_desc: Any, ins: Any, n_out: int,
                    out_desc: Any, attr: Any) -> int:
    name = _op_type("aclopInferShape", op_type)
    lists = _lists("aclopInferShape", (in_desc, n_in), (ins, n_in), (out_desc, n_out))
    if isinstance(name, int):
        return name
    if isinstance(lists, int):
        return lists
    return op.infer_shape(name, lists[0], lists[1], n_out, lists[2], X.addr(attr))


@export
def aclopUpdateParams(op_type: Any, n_in: int, in_desc: Any, n_out: int, out_desc: Any,
                      attr: Any) -> int:
    name = _op_type("aclopUpdateParams", op_type)
    lists = _lists("aclopUpdateParams", (in_desc, n_in), (out_desc, n_out))
    if isinstance(name, int):
        return name
    if isinstance(lists, int):
        return lists
    return op.update_params(name, *lists, X.addr(attr))


@export
def aclopSetModelDir(path: Any) -> int:
    """Mirrors ``aclopSetModelDir``: loads every single-op model file below the folder."""
    if path == X.ffi.NULL:
        return X.invalid("aclopSetModelDir", "modelDir is NULL")
    return op.set_model_dir(X.text(path))


@export
def aclopLoad(model: Any, size: int) -> int:
    """Mirrors ``aclopLoad``: one single-op model from host memory."""
    if model == X.ffi.NULL or size == 0:
        return X.invalid("aclopLoad", "model is NULL or modelSize is 0")
    return op.load(X.addr(model), size)


@export
def aclSetCompileopt(opt: int, value: Any) -> int:
    text = X.text(value)  # None for NULL
    if text is None:
        return X.invalid("aclSetCompileopt", "value is NULL")
    return acl_tensor.set_compile_opt(opt, text)


@export
def aclopSetCompileFlag(flag: int) -> int:
    """Mirrors ``aclopSetCompileFlag``: DEFAULT and FUZZ are accepted (npuemu compiles each
    shape it meets either way), anything else is 100000."""
    if flag not in (0, 1):
        return X.invalid("aclopSetCompileFlag", f"flag {flag}")
    return 0
