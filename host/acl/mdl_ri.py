"""``acl.mdl``'s model runtime instance calls (``aclmdlRI*``): stream capture and replay,
and models built by hand on persistent streams, over ``host/core/capture.py`` and ``model_ri.py``.

pyACL has no binding of these functions; their names here follow pyACL's rule (the C
name without ``aclmdl``, in snake case: ``aclmdlRICaptureBegin`` is
``acl.mdl.ri_capture_begin``). Calls return ``ret`` or a tuple ending in ``ret``; an
instance is an int handle. What blocks: ``ri_capture_end`` and ``ri_build_end`` (the
card's replies to the registration), ``ri_execute`` (the whole replay), ``ri_destroy``
(its queued replays, bounded); the rest returns at once.

``ri_abort`` stops the instance's replays (``host/core/model_ri.py``). Not emulated (each
returns 207000 and logs it): task groups and their updates, task parameters and
``ri_update``, conditional tasks, nested captures, the destroy callbacks.
"""

from __future__ import annotations

from npuemu.host.acl._wrap import ret_only, with_result
from npuemu.host.core import capture, model_ri

__all__ = [
    "ri_abort", "ri_add_cond_task", "ri_bind_stream", "ri_build_begin", "ri_build_end",
    "ri_capture_begin", "ri_capture_end", "ri_capture_get_info", "ri_capture_task_grp_begin",
    "ri_capture_task_grp_end", "ri_capture_task_update_begin", "ri_capture_task_update_end",
    "ri_capture_thread_exchange_mode", "ri_capture_to_model_ri_begin",
    "ri_cond_handle_create", "ri_cond_handle_get_cond_ptr", "ri_debug_json_print",
    "ri_debug_print", "ri_destroy", "ri_destroy_register_callback",
    "ri_destroy_unregister_callback", "ri_end_task", "ri_execute", "ri_execute_async",
    "ri_get_id", "ri_get_name", "ri_get_streams", "ri_get_tasks_by_stream",
    "ri_kernel_task_get_attribute", "ri_set_name", "ri_task_disable", "ri_task_get_params",
    "ri_task_get_seq_id", "ri_task_get_type", "ri_task_set_params", "ri_unbind_stream",
    "ri_update",
]

ri_capture_begin = ret_only(capture.capture_begin)
ri_capture_get_info = with_result(0, 0)(capture.capture_get_info)
ri_capture_end = with_result(0)(capture.capture_end)
ri_capture_thread_exchange_mode = with_result(0)(capture.thread_exchange_mode)
ri_execute_async = ret_only(model_ri.execute_async)
ri_execute = ret_only(model_ri.execute)
ri_abort = ret_only(model_ri.abort)
ri_destroy = ret_only(model_ri.destroy)
ri_debug_print = ret_only(model_ri.debug_print)
ri_debug_json_print = ret_only(model_ri.debug_json_print)
ri_build_begin = with_result(0)(model_ri.build_begin)
ri_bind_stream = ret_only(model_ri.bind_stream)
ri_end_task = ret_only(model_ri.end_task)
ri_build_end = ret_only(model_ri.build_end)
ri_unbind_stream = ret_only(model_ri.unbind_stream)
ri_set_name = ret_only(model_ri.set_name)
ri_get_name = with_result("")(model_ri.get_name)
ri_get_id = with_result(0)(model_ri.instance_id)
ri_get_streams = with_result([])(model_ri.stream_handles)

ri_capture_task_grp_begin = ret_only(model_ri.not_emulated("aclmdlRICaptureTaskGrpBegin"))
ri_capture_task_grp_end = with_result(0)(model_ri.not_emulated("aclmdlRICaptureTaskGrpEnd"))
ri_capture_task_update_begin = ret_only(model_ri.not_emulated("aclmdlRICaptureTaskUpdateBegin"))
ri_capture_task_update_end = ret_only(model_ri.not_emulated("aclmdlRICaptureTaskUpdateEnd"))
ri_capture_to_model_ri_begin = ret_only(model_ri.not_emulated("aclmdlRICaptureToModelRIBegin"))
ri_update = ret_only(model_ri.not_emulated("aclmdlRIUpdate"))
ri_task_get_params = with_result({})(model_ri.not_emulated("aclmdlRITaskGetParams"))
ri_task_set_params = ret_only(model_ri.not_emulated("aclmdlRITaskSetParams"))
ri_task_disable = ret_only(model_ri.not_emulated("aclmdlRITaskDisable"))
ri_task_get_type = with_result(0)(model_ri.not_emulated("aclmdlRITaskGetType"))
ri_task_get_seq_id = with_result(0)(model_ri.not_emulated("aclmdlRITaskGetSeqId"))
ri_get_tasks_by_stream = with_result([])(model_ri.not_emulated("aclmdlRIGetTasksByStream"))
ri_kernel_task_get_attribute = with_result({})(
    model_ri.not_emulated("aclmdlRIKernelTaskGetAttribute"))
ri_cond_handle_create = with_result(0)(model_ri.not_emulated("aclmdlRICondHandleCreate"))
ri_cond_handle_get_cond_ptr = with_result(0)(model_ri.not_emulated("aclmdlRICondHandleGetCondPtr"))
ri_add_cond_task = ret_only(model_ri.not_emulated("aclmdlRIAddCondTask"))
ri_destroy_register_callback = ret_only(
    model_ri.not_emulated("aclmdlRIDestroyRegisterCallback"))
ri_destroy_unregister_callback = ret_only(
    model_ri.not_emulated("aclmdlRIDestroyUnregisterCallback"))
