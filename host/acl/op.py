"""``acl.op``: pyACL's single-operator module (the ``aclop*`` calls), over ``host/ops``.

Calls return ``ret`` or a tuple ending in ``ret``; handles are ints. Mirrors the pyACL
method table: ``set_model_dir``, ``load``, ``create_attr``/``destroy_attr``, every
``set_attr_*``, ``execute``/``execute_v2`` (async; never compile: 100024 without a compiled or
loaded match), ``create_handle``/``execute_with_handle``/``destroy_handle``, ``cast``,
``create_handle_for_cast``, ``infer_shape``, ``set_max_op_queue_num``.

Beyond today's pyACL (which lacks them; the C API has them): ``compile`` (``aclopCompile``,
blocks while it builds), ``compile_and_execute_v2`` / ``compile_and_execute``
(``aclopCompileAndExecute(V2)``, async after the compile) and ``acl.set_compile_opt``
(``aclSetCompileopt``, in ``host/acl/tensor.py``). ``engine_type`` accepts
``ACL_ENGINE_SYS`` (0; the op's own engine), ``ACL_ENGINE_AICORE`` (1) and
``ACL_ENGINE_VECTOR`` (2) — the real runtime supports only SYS, so 1 and 2 are accepted and
have no effect (the op library fixes each op's engine); other values 100000.
``compile_flag`` accepts ``ACL_COMPILE_SYS`` (0); ``ACL_COMPILE_UNREGISTERED`` (1) with no
op path is 100000, with one 200001 (custom op paths are not emulated); others 200001.
"""

from __future__ import annotations

from npuemu.host.acl._wrap import ret_only, with_result
from npuemu.host.core import hostread, runtime
from npuemu.host.ops import cache, executor, models
from npuemu.host.ops import desc as D
from npuemu.host.ops import types as T

_IMPORTED = frozenset(globals())


def __dir__() -> list[str]:
    """``dir(acl.op)`` lists the op calls and constants, not the modules this one imports."""
    return sorted(n for n in globals() if n not in _IMPORTED and not n.startswith("_"))


ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR = 0, 1, 2
ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED = 0, 1
ACL_OP_COMPILE_DEFAULT, ACL_OP_COMPILE_FUZZ = 0, 1


def _attr(handle: object) -> D.OpAttr:
    attr = D.attr_of(handle)
    if attr is None:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "attr is null")
    return attr


# attributes -------------------------------------------------------------------------------------
def create_attr() -> int:
    """``aclopCreateAttr`` -> attr handle."""
    return D.create_attr().handle


def destroy_attr(attr: int) -> None:
    """``aclopDestroyAttr``."""
    D.destroy_attr(attr)


def _setter(kind: str):
    @ret_only
    def set_attr(attr: int, name: str, value: object) -> None:
        _attr(attr).set(kind, name, value)

    set_attr.__name__ = set_attr.__qualname__ = f"set_attr_{kind}"
    set_attr.__doc__ = f"``aclopSetAttr{kind.title().replace('_', '')}``: returns ret."
    return set_attr


set_attr_bool = _setter("bool")
set_attr_int = _setter("int")
set_attr_float = _setter("float")
set_attr_string = _setter("string")
set_attr_list_bool = _setter("list_bool")
set_attr_list_int = _setter("list_int")
set_attr_list_float = _setter("list_float")
set_attr_list_string = _setter("list_string")
set_attr_list_list_int = _setter("list_list_int")


def set_attr_data_type(attr: int, name: str, dtype: int) -> tuple[int, int]:
    """``aclopSetAttrDataType``: pyACL returns ``(attr, ret)``."""
    return attr, _setter("data_type")(attr, name, dtype)


def set_attr_list_data_type(attr: int, name: str, dtypes: list) -> tuple[int, int]:
    """``aclopSetAttrListDataType``: pyACL returns ``(attr, ret)``."""
    return attr, _setter("list_data_type")(attr, name, dtypes)


# compile and execute ----------------------------------------------------------------------------
def _check_compile_args(engine_type: object, compile_flag: object, op_path: object) -> None:
    if engine_type not in (ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR):
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, f"engine type {engine_type!r}")
    if compile_flag == ACL_COMPILE_UNREGISTERED and not op_path:
        raise T.fail(T.ACL_ERROR_INVALID_PARAM, "ACL_COMPILE_UNREGISTERED needs an op path")
    if compile_flag != ACL_COMPILE_SYS:
        raise T.fail(T.ACL_ERROR_API_NOT_SUPPORT, f"compile type {compile_flag!r}")


@ret_only
def compile(op_type: str, in_desc_list: list, out_desc_list: list, attr: int,
            engine_type: int = ACL_ENGINE_SYS, compile_flag: int = ACL_COMPILE_SYS,
            op_path: str | None = None) -> None:
    """``aclopCompile`` (not in today's pyACL): compile for the current device (blocks)."""
    _check_compile_args(engine_type, compile_flag, op_path)
    req = executor.request(op_type, in_desc_list, out_desc_list, attr)
    executor.compile_request(req, runtime.get().current_link())


@ret_only
def execute_v2(op_type: str, in_desc_list: list, in_buf_list: list, out_desc_list: list,
               out_buf_list: list, attr: int, stream: int) -> None:
    """``aclopExecuteV2``: async; never compiles (100024 without a match)."""
    executor.execute(op_type, in_desc_list, in_buf_list, out_desc_list, out_buf_list, attr,
                     stream)


execute = execute_v2


@ret_only
def compile_and_execute_v2(op_type: str, in_desc_list: list, in_buf_list: list,
                           out_desc_list: list, out_buf_list: list, attr: int,
                           engine_type: int, compile_flag: int, op_path: str | None,
                           stream: int) -> None:
    """``aclopCompileAndExecuteV2`` (not in today's pyACL): compile (or reuse), then
    execute asynchronously on ``stream``."""
    _check_compile_args(engine_type, compile_flag, op_path)
    executor.execute(op_type, in_desc_list, in_buf_list, out_desc_list, out_buf_list, attr,
                     stream, compile=True)


compile_and_execute = compile_and_execute_v2


@with_result(0)
def create_handle(op_type: str, in_desc_list: list, out_desc_list: list, attr: int) -> int:
    """``aclopCreateHandle`` -> ``(handle, ret)``; 100024 if nothing matches."""
    return executor.create_handle(op_type, in_desc_list, out_desc_list, attr).handle


@ret_only
def execute_with_handle(handle: int, in_buf_list: list, out_buf_list: list,
                        stream: int) -> None:
    """``aclopExecWithHandle``: async; 100021/100022 for wrong buffer counts."""
    executor.exec_with_handle(handle, in_buf_list, out_buf_list, stream)


def destroy_handle(handle: int) -> None:
    """``aclopDestroyHandle``."""
    executor.destroy_handle(handle)


def _cast_attr(dst_desc: int, truncate: int) -> D.OpAttr:
    dst = D.need_desc(dst_desc)
    attr = D.OpAttr()
    attr.values = {"dst_type": ("int", dst.dtype), "truncate": ("bool", bool(truncate))}
    return attr


@ret_only
def cast(src_desc: int, src_buf: int, dst_desc: int, dst_buf: int, truncate: int,
         stream: int) -> None:
    """``aclopCast``: a built-in Cast (compiled on first use, like the real built-in)."""
    attr = _cast_attr(dst_desc, truncate)
    executor.execute("Cast", [src_desc], [src_buf], [dst_desc], [dst_buf], attr, stream,
                     compile=True)


@with_result(0)
def create_handle_for_cast(src_desc: int, dst_desc: int, truncate: int) -> int:
    """``aclopCreateHandleForCast`` -> ``(handle, ret)`` (compiles the Cast if needed)."""
    attr = _cast_attr(dst_desc, truncate)
    req = executor.request("Cast", [src_desc], [dst_desc], attr)
    executor.compile_request(req, runtime.get().current_link())
    return executor.create_handle("Cast", [src_desc], [dst_desc], attr).handle


@ret_only
def infer_shape(op_type: str, in_desc_list: list, in_buf_list: list, num_outputs: int,
                out_desc_list: list, attr: int) -> None:
    """``aclopInferShape``: writes the inferred dims (and dtype) into the output descs."""
    from npuemu.host.ops import registry, signature

    req = executor.request(op_type, in_desc_list, out_desc_list, attr)
    op = registry.lookup(op_type)
    attrs = registry.attrs_of(op, signature.attr_values(req.attr))
    ins = [signature.spec(d) for d in req.present]
    outs = signature.outputs(op, ins, [], attrs)
    if num_outputs != len(outs) or len(req.outs) != len(outs):
        raise T.fail(T.ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                     f"{op_type} has {len(outs)} outputs, {num_outputs} asked")
    for d, spec in zip(req.outs, outs, strict=True):
        d.dims, d.dtype = spec.shape, T.acl_dtype(spec.dtype)
        d.changed()


@ret_only
def update_params(op_type: str, in_desc_list: list, out_desc_list: list, attr: int) -> None:
    """``aclopUpdateParams``: compiles (no kernel selector is emulated)."""
    req = executor.request(op_type, in_desc_list, out_desc_list, attr)
    executor.compile_request(req, runtime.get().current_link())


@ret_only
def set_max_op_queue_num(n: int) -> None:
    """``aclopSetMaxOpQueueNum``: LRU capacity of the in-memory op map; 0 -> 100000."""
    cache.set_capacity(n)


def configure(config_path: str | None) -> int:
    """The ``aclInit`` JSON keys of the op layer (``max_opqueue_num``); returns ret."""
    return cache.configure(config_path)


@ret_only
def set_model_dir(path: str) -> None:
    """``aclopSetModelDir``: static load of every ``*.om`` below ``path`` (3 levels)."""
    models.set_model_dir(path)


@ret_only
def load(model: object, size: int | None = None) -> None:
    """``aclopLoad(ptr, size)``: one model from host memory (``bytes`` is accepted too)."""
    if isinstance(model, bytes | bytearray):
        data = bytes(model)
    else:  # 100000 unless [model, model + size) is readable host memory (checked first)
        data = hostread.read(model, size, "single-op model memory")
    models.load(data)
