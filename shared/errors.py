"""ACL error codes and the exception classes npuemu raises for them.

The numeric values are the public CANN ones: the ACL-layer codes from ``acl_base_rt.h`` and the
runtime codes (107xxx / 207xxx / 507xxx) from ``error_codes/rt_error_codes.h``, and the graph
engine's (145xxx / 245xxx / 545xxx, ``ge_error_codes.h``) that the model path passes through. Bands:
1xxxxx caller or parameter error, 2xxxxx resource or feature, 3xxxxx storage, 5xxxxx internal
or device error.

Every code is a plain module constant (``ACL_ERROR_RT_LOST_HEARTBEAT = 507010``).
``CODE_NAMES`` and ``DESCRIPTIONS`` map a code to its canonical name and a one-line summary.
``error_for(code)`` builds the most specific ``AclError`` subclass for a code, and
``check(ret)`` raises it for any non-zero return value.
"""

from __future__ import annotations

from typing import Any

# --------------------------------------------------------------------------------------------
# Success (ACL_RT_SUCCESS and ACL_ERROR_NONE are aliases of ACL_SUCCESS in the headers)
# --------------------------------------------------------------------------------------------
ACL_SUCCESS = 0
ACL_RT_SUCCESS = 0
ACL_ERROR_NONE = 0

# --------------------------------------------------------------------------------------------
# ACL layer (acl_base_rt.h)
# --------------------------------------------------------------------------------------------
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_REPEAT_SUBSCRIBE = 100033
ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034
ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_ERROR_REPEAT_FINALIZE = 100037
ACL_ERROR_COMPILING_STUB_MODE = 100039
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_INVALID_PROFILING_CONFIG = 100010
ACL_ERROR_PROF_ALREADY_RUN = 100042
ACL_ERROR_PROF_NOT_RUN = 100043
ACL_ERROR_PROF_REPEAT_SUBSCRIBE = 148046
ACL_ERROR_PROF_API_CONFLICT = 148047
ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007

ACL_ERROR_BAD_ALLOC = 200000
ACL_ERROR_API_NOT_SUPPORT = 200001
ACL_ERROR_INVALID_DEVICE = 200002
ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003
ACL_ERROR_RESOURCE_NOT_MATCH = 200004
ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005
ACL_ERROR_FEATURE_UNSUPPORTED = 200006

ACL_ERROR_STORAGE_OVER_LIMIT = 300000

ACL_ERROR_INTERNAL_ERROR = 500000
ACL_ERROR_FAILURE = 500001
ACL_ERROR_GE_FAILURE = 500002
ACL_ERROR_RT_FAILURE = 500003
ACL_ERROR_DRV_FAILURE = 500004
ACL_ERROR_PROFILING_FAILURE = 500005

# --------------------------------------------------------------------------------------------
# ACL layer, model and single-op codes (acl_base_rt.h; meanings from GE's aclError.md)
# --------------------------------------------------------------------------------------------
ACL_ERROR_WRITE_FILE = 100004
ACL_ERROR_INVALID_FILE_SIZE = 100005
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_FILE_MISSING_ATTR = 100007
ACL_ERROR_FILE_ATTR_INVALID = 100008
ACL_ERROR_INVALID_DUMP_CONFIG = 100009
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_DESERIALIZE_MODEL = 100012
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_READ_MODEL_FAILURE = 100014
ACL_ERROR_MODEL_SIZE_INVALID = 100015
ACL_ERROR_MODEL_MISSING_ATTR = 100016
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_MODEL_NOT_DYNAMIC = 100019
ACL_ERROR_OP_TYPE_NOT_MATCH = 100020
ACL_ERROR_OP_INPUT_NOT_MATCH = 100021
ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022
ACL_ERROR_OP_ATTR_NOT_MATCH = 100023
ACL_ERROR_OP_NOT_FOUND = 100024
ACL_ERROR_OP_LOAD_FAILED = 100025
ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026
ACL_ERROR_FORMAT_NOT_MATCH = 100027
ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED = 100028
ACL_ERROR_KERNEL_NOT_FOUND = 100029
ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED = 100030
ACL_ERROR_KERNEL_ALREADY_REGISTERED = 100031
ACL_ERROR_NOT_STATIC_AIPP = 100038
ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG = 148048
ACL_ERROR_INVALID_OPP_PATH = 148049
ACL_ERROR_OP_UNSUPPORTED_DYNAMIC = 148050
ACL_ERROR_INVALID_BUNDLE_MODEL_ID = 148053

# --------------------------------------------------------------------------------------------
# Graph engine (ge_error_codes.h): the model path passes them through unchanged
# --------------------------------------------------------------------------------------------
ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_NOT_INIT = 145001
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003
ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007
ACL_ERROR_GE_EXEC_LOAD_MODEL_REPEATED = 145009
ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID = 145011
ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID = 145012
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID = 145013
ACL_ERROR_GE_AIPP_NOT_EXIST = 145015
ACL_ERROR_GE_FORMAT_INVALID = 145020
ACL_ERROR_GE_SHAPE_INVALID = 145021
ACL_ERROR_GE_DATATYPE_INVALID = 145022
ACL_ERROR_GE_MEMORY_ALLOCATION = 245000
ACL_ERROR_GE_INTERNAL_ERROR = 545000
ACL_ERROR_GE_LOAD_MODEL = 545001
ACL_ERROR_GE_EXEC_LOAD_MODEL_PARTITION_FAILED = 545002
ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED = 545003
ACL_ERROR_GE_EXEC_LOAD_TASK_PARTITION_FAILED = 545004
ACL_ERROR_GE_EXEC_LOAD_KERNEL_PARTITION_FAILED = 545005
ACL_ERROR_GE_UNLOAD_MODEL = 545009
ACL_ERROR_GE_MODEL_EXECUTE_TIMEOUT = 545601

# --------------------------------------------------------------------------------------------
# Runtime, parameter band (rt_error_codes.h)
# --------------------------------------------------------------------------------------------
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_STREAM_CONTEXT = 107003
ACL_ERROR_RT_MODEL_CONTEXT = 107004
ACL_ERROR_RT_STREAM_MODEL = 107005
ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006
ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL = 107007
ACL_ERROR_RT_ADDR_UNALIGNED = 107008
ACL_ERROR_RT_FILE_OPEN = 107009
ACL_ERROR_RT_FILE_WRITE = 107010
ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011
ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012
ACL_ERROR_RT_STREAM_NO_CB_REG = 107015
ACL_ERROR_RT_INVALID_MEMORY_TYPE = 107016
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_INVALID_MALLOC_TYPE = 107018
ACL_ERROR_RT_WAIT_TIMEOUT = 107019
ACL_ERROR_RT_TASK_TIMEOUT = 107020
ACL_ERROR_RT_SYSPARAMOPT_NOT_SET = 107021
ACL_ERROR_RT_DEVICE_TASK_ABORT = 107022
ACL_ERROR_RT_STREAM_ABORT = 107023
ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107024
ACL_ERROR_RT_STREAM_UNJOINED = 107025
ACL_ERROR_RT_MODEL_CAPTURED = 107026
ACL_ERROR_RT_STREAM_CAPTURED = 107027
ACL_ERROR_RT_EVENT_CAPTURED = 107028
ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029
ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030
ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT = 107031
ACL_ERROR_STREAM_CAPTURE_CONFLICT = 107032
ACL_ERROR_RT_TASK_ABORT_STOP = 107035
ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107036
ACL_ERROR_RT_MODEL_RUNNING = 107037
ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107038
ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY = 107039
ACL_ERROR_RT_MODEL_UPDATE_FAILED = 107040
ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC = 107041

# --------------------------------------------------------------------------------------------
# Runtime, resource band
# --------------------------------------------------------------------------------------------
ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_MEMORY_FREE = 207002
ACL_ERROR_RT_AICORE_OVER_FLOW = 207003
ACL_ERROR_RT_NO_DEVICE = 207004
ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207005
ACL_ERROR_RT_NO_PERMISSION = 207006
ACL_ERROR_RT_NO_EVENT_RESOURCE = 207007
ACL_ERROR_RT_NO_STREAM_RESOURCE = 207008
ACL_ERROR_RT_NO_NOTIFY_RESOURCE = 207009
ACL_ERROR_RT_OVER_LIMIT = 207012
ACL_ERROR_RT_AIVEC_OVER_FLOW = 207016
ACL_ERROR_RT_OVER_FLOW = 207017
ACL_ERROR_RT_DEVICE_OOM = 207018
ACL_ERROR_RT_TIMEOUT = 207020
ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED = 207021

# --------------------------------------------------------------------------------------------
# Runtime, internal / device band
# --------------------------------------------------------------------------------------------
ACL_ERROR_RT_INTERNAL_ERROR = 507000
ACL_ERROR_RT_TS_ERROR = 507001
ACL_ERROR_RT_STREAM_TASK_FULL = 507002
ACL_ERROR_RT_STREAM_TASK_EMPTY = 507003
ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004
ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006
ACL_ERROR_RT_CONTEXT_RELEASE_ERROR = 507007
ACL_ERROR_RT_LOST_HEARTBEAT = 507010
ACL_ERROR_RT_REPORT_TIMEOUT = 507012
ACL_ERROR_RT_SYS_DMA = 507013
ACL_ERROR_RT_AICORE_TIMEOUT = 507014
ACL_ERROR_RT_AICORE_EXCEPTION = 507015
ACL_ERROR_RT_AICORE_TRAP_EXCEPTION = 507016
ACL_ERROR_RT_AICPU_TIMEOUT = 507017
ACL_ERROR_RT_AICPU_EXCEPTION = 507018
ACL_ERROR_RT_IPC_ERROR = 507022
ACL_ERROR_RT_KERNEL_LOOKUP = 507027
ACL_ERROR_RT_VECTOR_CORE_TIMEOUT = 507034
ACL_ERROR_RT_VECTOR_CORE_EXCEPTION = 507035
ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION = 507036
ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046
ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047
ACL_ERROR_RT_SEND_MSG = 507051
ACL_ERROR_RT_COPY_DATA = 507052
ACL_ERROR_RT_DEVICE_MEM_ERROR = 507053
ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR = 507054
ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR = 507055
ACL_ERROR_RT_LINK_ERROR = 507056
ACL_ERROR_RT_SUSPECT_REMOTE_ERROR = 507057
ACL_ERROR_RT_DRV_INTERNAL_ERROR = 507899
ACL_ERROR_RT_AICPU_INTERNAL_ERROR = 507900
ACL_ERROR_RT_SOCKET_CLOSE = 507901
ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507903
ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 507910
ACL_ERROR_HOST_MEMORY_NOT_REGISTERED = 507911
ACL_ERROR_RT_L3_PORT_ERROR = 507914
ACL_ERROR_RT_CCU_TIMEOUT = 507915
ACL_ERROR_RT_CCU_EXCEPTION = 507916

# Name used by AclError for a code that is not in the table.
UNKNOWN_NAME = "ACL_ERROR_UNKNOWN"

# One short description per distinct code (aliases share their canonical entry).
DESCRIPTIONS: dict[int, str] = {
    ACL_SUCCESS: "The call succeeded.",
    ACL_ERROR_INVALID_PARAM: "An argument failed the ACL checks (null pointer, size 0, bad flag).",
    ACL_ERROR_UNINITIALIZE: "ACL was used before aclInit.",
    ACL_ERROR_REPEAT_INITIALIZE: "aclInit was called twice.",
    ACL_ERROR_REPEAT_SUBSCRIBE: "The stream already has a report subscriber.",
    ACL_ERROR_INVALID_FILE: "A file or path argument is invalid.",
    ACL_ERROR_INVALID_PROFILING_CONFIG: "The profiling configuration is invalid.",
    ACL_ERROR_PROF_ALREADY_RUN: "Profiling is already running (this mode or device).",
    ACL_ERROR_PROF_NOT_RUN: "Profiling was not initialized or started.",
    ACL_ERROR_PROF_REPEAT_SUBSCRIBE: "The model is already subscribed for profiling.",
    ACL_ERROR_PROF_API_CONFLICT: "Profiling API modes (init/start vs. subscribe) were mixed.",
    ACL_ERROR_PROF_MODULES_UNSUPPORTED: "A requested profiling data type is not supported.",
    ACL_ERROR_STREAM_NOT_SUBSCRIBE: "The stream has no report subscriber.",
    ACL_ERROR_THREAD_NOT_SUBSCRIBE: "The thread is not subscribed to any stream.",
    ACL_ERROR_WAIT_CALLBACK_TIMEOUT: "Waiting for a callback timed out.",
    ACL_ERROR_REPEAT_FINALIZE: "aclFinalize was called twice.",
    ACL_ERROR_COMPILING_STUB_MODE: "The call reached a link-time stub library, not a real runtime.",
    ACL_ERROR_BAD_ALLOC: "The ACL layer could not allocate host memory.",
    ACL_ERROR_API_NOT_SUPPORT: "This API is not supported here.",
    ACL_ERROR_INVALID_DEVICE: "The device is not valid.",
    ACL_ERROR_MEMORY_ADDRESS_UNALIGNED: "A memory address is not suitably aligned.",
    ACL_ERROR_RESOURCE_NOT_MATCH: "The resources passed do not belong together.",
    ACL_ERROR_INVALID_RESOURCE_HANDLE: "A resource handle is not valid.",
    ACL_ERROR_FEATURE_UNSUPPORTED: "The requested feature is not supported.",
    ACL_ERROR_STORAGE_OVER_LIMIT: "A storage limit was exceeded.",
    ACL_ERROR_INTERNAL_ERROR: "An unexpected internal error.",
    ACL_ERROR_FAILURE: "A generic failure.",
    ACL_ERROR_GE_FAILURE: "The graph engine reported a failure.",
    ACL_ERROR_RT_FAILURE: "The runtime reported a failure.",
    ACL_ERROR_DRV_FAILURE: "The driver reported a failure.",
    ACL_ERROR_PROFILING_FAILURE: "The profiling subsystem reported a failure.",
    ACL_ERROR_WRITE_FILE: "Writing a file failed.",
    ACL_ERROR_INVALID_FILE_SIZE: "A file has an invalid size.",
    ACL_ERROR_PARSE_FILE: "A file could not be parsed.",
    ACL_ERROR_FILE_MISSING_ATTR: "A file lacks a required attribute.",
    ACL_ERROR_FILE_ATTR_INVALID: "A file attribute is invalid.",
    ACL_ERROR_INVALID_DUMP_CONFIG: "The dump configuration is invalid.",
    ACL_ERROR_INVALID_MODEL_ID: "The model id is not valid.",
    ACL_ERROR_DESERIALIZE_MODEL: "The model could not be deserialized.",
    ACL_ERROR_PARSE_MODEL: "The model could not be parsed.",
    ACL_ERROR_READ_MODEL_FAILURE: "The model file could not be read.",
    ACL_ERROR_MODEL_SIZE_INVALID: "The model size is invalid.",
    ACL_ERROR_MODEL_MISSING_ATTR: "The model lacks a required attribute.",
    ACL_ERROR_MODEL_INPUT_NOT_MATCH: "The inputs do not match the model.",
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH: "The outputs do not match the model.",
    ACL_ERROR_MODEL_NOT_DYNAMIC: "The model is not a dynamic model.",
    ACL_ERROR_OP_TYPE_NOT_MATCH: "The op type is unknown or does not match.",
    ACL_ERROR_OP_INPUT_NOT_MATCH: "The op's inputs do not match its definition.",
    ACL_ERROR_OP_OUTPUT_NOT_MATCH: "The op's outputs do not match its definition.",
    ACL_ERROR_OP_ATTR_NOT_MATCH: "The op's attributes do not match its definition.",
    ACL_ERROR_OP_NOT_FOUND: "No compiled or loaded op matches this signature.",
    ACL_ERROR_OP_LOAD_FAILED: "Loading the op failed.",
    ACL_ERROR_UNSUPPORTED_DATA_TYPE: "The data type is not supported.",
    ACL_ERROR_FORMAT_NOT_MATCH: "The tensor format does not match.",
    ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED: "No binary selector is registered for the op.",
    ACL_ERROR_KERNEL_NOT_FOUND: "The op kernel was not found.",
    ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED: "A binary selector is already registered.",
    ACL_ERROR_KERNEL_ALREADY_REGISTERED: "The op kernel is already registered.",
    ACL_ERROR_NOT_STATIC_AIPP: "The AIPP configuration is not static.",
    ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG: "The max_opqueue_num setting is invalid.",
    ACL_ERROR_INVALID_OPP_PATH: "The op package path is invalid.",
    ACL_ERROR_OP_UNSUPPORTED_DYNAMIC: "The op does not support dynamic shapes.",
    ACL_ERROR_INVALID_BUNDLE_MODEL_ID: "The bundle model id is not valid.",
    ACL_ERROR_GE_PARAM_INVALID: "The graph engine refused a parameter or the model content.",
    ACL_ERROR_GE_EXEC_NOT_INIT: "The graph engine executor is not initialized.",
    ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID: "The model path is invalid or the file unreadable.",
    ACL_ERROR_GE_EXEC_MODEL_ID_INVALID: "The model id is not valid.",
    ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID: "The model data size is invalid.",
    ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID: "The model memory address is invalid.",
    ACL_ERROR_GE_EXEC_LOAD_MODEL_REPEATED: "The model is already loaded.",
    ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID: "The dynamic input address is invalid.",
    ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID: "The dynamic input length is invalid.",
    ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID: "The dynamic batch size is invalid.",
    ACL_ERROR_GE_AIPP_NOT_EXIST: "The model has no AIPP configuration.",
    ACL_ERROR_GE_FORMAT_INVALID: "The tensor format is invalid.",
    ACL_ERROR_GE_SHAPE_INVALID: "The tensor shape is invalid.",
    ACL_ERROR_GE_DATATYPE_INVALID: "The data type is invalid.",
    ACL_ERROR_GE_MEMORY_ALLOCATION: "The graph engine could not allocate memory.",
    ACL_ERROR_GE_INTERNAL_ERROR: "The graph engine hit an internal error.",
    ACL_ERROR_GE_LOAD_MODEL: "Loading the model failed.",
    ACL_ERROR_GE_EXEC_LOAD_MODEL_PARTITION_FAILED: "Loading the model partition failed.",
    ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED: "Loading the weight partition failed.",
    ACL_ERROR_GE_EXEC_LOAD_TASK_PARTITION_FAILED: "Loading the task partition failed.",
    ACL_ERROR_GE_EXEC_LOAD_KERNEL_PARTITION_FAILED: "Loading the kernel partition failed.",
    ACL_ERROR_GE_UNLOAD_MODEL: "Unloading the model failed.",
    ACL_ERROR_GE_MODEL_EXECUTE_TIMEOUT: "The model execution timed out.",
    ACL_ERROR_RT_PARAM_INVALID: "A parameter failed the runtime-layer checks.",
    ACL_ERROR_RT_INVALID_DEVICEID: "The device id is out of range or cannot be mapped.",
    ACL_ERROR_RT_CONTEXT_NULL: "The calling thread has no current context.",
    ACL_ERROR_RT_STREAM_CONTEXT: "The stream does not belong to the current context.",
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID: "The event carries no valid timestamp.",
    ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL: "The end event was recorded before the start event.",
    ACL_ERROR_RT_ADDR_UNALIGNED: "A memory address is not aligned as the runtime requires.",
    ACL_ERROR_RT_STREAM_SUBSCRIBE: "Subscribing the stream for reports failed.",
    ACL_ERROR_RT_THREAD_SUBSCRIBE: "The thread has no report subscription.",
    ACL_ERROR_RT_STREAM_NO_CB_REG: "No callback thread is registered for the stream.",
    ACL_ERROR_RT_INVALID_MEMORY_TYPE: "The memory type is not valid for this call.",
    ACL_ERROR_RT_INVALID_HANDLE: "The handle is not valid.",
    ACL_ERROR_RT_INVALID_MALLOC_TYPE: "The allocation type is not valid.",
    ACL_ERROR_RT_WAIT_TIMEOUT: "A wait timed out.",
    ACL_ERROR_RT_TASK_TIMEOUT: "A task timed out.",
    ACL_ERROR_RT_SYSPARAMOPT_NOT_SET: "The system parameter option has not been set.",
    ACL_ERROR_RT_DEVICE_TASK_ABORT: "A device task abort is in progress.",
    ACL_ERROR_RT_STREAM_ABORT: "A stream abort is in progress.",
    ACL_ERROR_RT_TASK_ABORT_STOP: "A device task abort stopped before its post-processing.",
    ACL_ERROR_RT_MODEL_CONTEXT: "The model is not in the current context.",
    ACL_ERROR_RT_STREAM_MODEL: "The stream is not bound to the model, or is bound to another.",
    ACL_ERROR_RT_FILE_OPEN: "A file could not be opened.",
    ACL_ERROR_RT_FILE_WRITE: "A file could not be written.",
    ACL_ERROR_RT_CAPTURE_DEPENDENCY: "A capture depends on work that is not part of it.",
    ACL_ERROR_RT_STREAM_UNJOINED: "A stream joined to the capture was not joined back to its "
                                  "origin stream.",
    ACL_ERROR_RT_MODEL_CAPTURED: "The model runtime instance is being captured.",
    ACL_ERROR_RT_STREAM_CAPTURED: "The stream is capturing: the call is not allowed on it.",
    ACL_ERROR_RT_EVENT_CAPTURED: "The event was recorded in a capture: the call is not allowed.",
    ACL_ERROR_RT_STREAM_NOT_CAPTURED: "The stream is not capturing.",
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT: "Not allowed while a capture is under way in a mode "
                                           "other than relaxed.",
    ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT: "A disallowed implicit dependency on the default stream.",
    ACL_ERROR_STREAM_CAPTURE_CONFLICT: "Streams that depend on each other cannot begin capture "
                                       "together.",
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED: "The capture was not begun on this stream.",
    ACL_ERROR_RT_MODEL_RUNNING: "The model runtime instance is still running.",
    ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD: "The capture is ended by another thread than the "
                                              "one that began it.",
    ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY: "The array given is too small.",
    ACL_ERROR_RT_MODEL_UPDATE_FAILED: "The model runtime instance could not be updated.",
    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC: "An async call that turns synchronous is not allowed "
                                           "while a capture is under way (not relaxed).",
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT: "The runtime does not support this feature or flag.",
    ACL_ERROR_RT_MEMORY_ALLOCATION: "Device memory allocation failed: out of memory.",
    ACL_ERROR_RT_MEMORY_FREE: "Freeing memory failed.",
    ACL_ERROR_RT_AICORE_OVER_FLOW: "An AI Core computation overflowed.",
    ACL_ERROR_RT_NO_DEVICE: "No device is available.",
    ACL_ERROR_RT_RESOURCE_ALLOC_FAIL: "A runtime resource could not be allocated.",
    ACL_ERROR_RT_NO_PERMISSION: "The caller lacks permission for this operation.",
    ACL_ERROR_RT_NO_EVENT_RESOURCE: "The pool of event ids is exhausted.",
    ACL_ERROR_RT_NO_STREAM_RESOURCE: "The pool of stream ids is exhausted.",
    ACL_ERROR_RT_NO_NOTIFY_RESOURCE: "The pool of notify ids is exhausted.",
    ACL_ERROR_RT_OVER_LIMIT: "A runtime limit was exceeded.",
    ACL_ERROR_RT_AIVEC_OVER_FLOW: "An AI Vector computation overflowed.",
    ACL_ERROR_RT_OVER_FLOW: "A floating-point overflow was detected.",
    ACL_ERROR_RT_DEVICE_OOM: "The device ran out of memory.",
    ACL_ERROR_RT_TIMEOUT: "A driver operation timed out.",
    ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED: "The requested link type is not supported.",
    ACL_ERROR_RT_INTERNAL_ERROR: "An unexpected error inside the runtime.",
    ACL_ERROR_RT_TS_ERROR: "The task scheduler reported an internal error.",
    ACL_ERROR_RT_STREAM_TASK_FULL: "The stream's task queue is full.",
    ACL_ERROR_RT_STREAM_TASK_EMPTY: "The stream's task queue is empty.",
    ACL_ERROR_RT_STREAM_NOT_COMPLETE: "The stream still has unfinished tasks.",
    ACL_ERROR_RT_EVENT_NOT_COMPLETE: "The event has not completed yet.",
    ACL_ERROR_RT_CONTEXT_RELEASE_ERROR: "Releasing the context failed.",
    ACL_ERROR_RT_LOST_HEARTBEAT: "The device stopped sending heartbeats and is considered lost.",
    ACL_ERROR_RT_REPORT_TIMEOUT: "No callback report arrived before the timeout.",
    ACL_ERROR_RT_SYS_DMA: "The DMA engine reported an error.",
    ACL_ERROR_RT_AICORE_TIMEOUT: "An AI Core task timed out.",
    ACL_ERROR_RT_AICORE_EXCEPTION: "An AI Core task raised an exception.",
    ACL_ERROR_RT_AICORE_TRAP_EXCEPTION: "An AI Core task hit a trap.",
    ACL_ERROR_RT_AICPU_TIMEOUT: "An AI CPU task timed out.",
    ACL_ERROR_RT_AICPU_EXCEPTION: "An AI CPU task raised an exception.",
    ACL_ERROR_RT_IPC_ERROR: "An inter-process sharing operation failed.",
    ACL_ERROR_RT_KERNEL_LOOKUP: "The kernel could not be found.",
    ACL_ERROR_RT_VECTOR_CORE_TIMEOUT: "An AI Vector core task timed out.",
    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION: "An AI Vector core task raised an exception.",
    ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION: "An AI Vector core task hit a trap.",
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: "Stream synchronization timed out.",
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: "Event synchronization timed out.",
    ACL_ERROR_RT_SEND_MSG: "Sending a message over the host-device channel failed.",
    ACL_ERROR_RT_COPY_DATA: "A data copy failed.",
    ACL_ERROR_RT_DEVICE_MEM_ERROR: "A device memory error was detected.",
    ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR: "An uncorrectable multi-bit ECC error occurred in HBM.",
    ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR: "A device memory error is suspected.",
    ACL_ERROR_RT_LINK_ERROR: "A device network link reported an error.",
    ACL_ERROR_RT_SUSPECT_REMOTE_ERROR: "The fault probably lies on the remote peer.",
    ACL_ERROR_RT_DRV_INTERNAL_ERROR: "The driver hit an internal error.",
    ACL_ERROR_RT_AICPU_INTERNAL_ERROR: "The AI CPU hit an internal error.",
    ACL_ERROR_RT_SOCKET_CLOSE: "The host-device channel was closed.",
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED: "The capture was invalidated by an error during it.",
    ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED: "The host memory range is already registered.",
    ACL_ERROR_HOST_MEMORY_NOT_REGISTERED: "The host memory range has not been registered.",
    ACL_ERROR_RT_L3_PORT_ERROR: "An L3 port (unified-bus memory) error occurred.",
    ACL_ERROR_RT_CCU_TIMEOUT: "A collective communication unit task timed out.",
    ACL_ERROR_RT_CCU_EXCEPTION: "A collective communication unit task raised an exception.",
}

# Extra names in the headers that share a value with a canonical name.
ALIASES: dict[str, str] = {
    "ACL_RT_SUCCESS": "ACL_SUCCESS",
    "ACL_ERROR_NONE": "ACL_SUCCESS",
}

# Canonical name of every code, read back from the constants above.
CODE_NAMES: dict[int, str] = {
    value: name
    for name, value in list(globals().items())
    if name.startswith("ACL_") and isinstance(value, int) and name not in ALIASES
}


def name_of(code: int) -> str:
    """Canonical CANN name of ``code``, or ``ACL_ERROR_UNKNOWN``."""
    return CODE_NAMES.get(int(code), UNKNOWN_NAME)


def describe(code: int) -> str:
    """One-line description of ``code``."""
    return DESCRIPTIONS.get(int(code), "Unknown error code.")


# --------------------------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------------------------
class AclError(Exception):
    """An ACL call failed with ``code``; ``detail`` says what happened in this instance."""

    code: int
    name: str
    detail: str

    def __init__(self, code: int, detail: str = "") -> None:
        code = int(code)
        super().__init__(code, detail)
        self.code = code
        self.name = name_of(code)
        self.detail = detail

    @property
    def description(self) -> str:
        """The fixed description of this error's code."""
        return describe(self.code)

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.detail or self.description}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.detail!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild through __init__ (so name is recomputed); keep any extra attributes.
        extra = {k: v for k, v in self.__dict__.items() if k not in ("code", "name", "detail")}
        return (type(self), (self.code, self.detail), extra or None)


class ParamError(AclError):
    """Caller or parameter error (1xxxxx)."""


class ResourceError(AclError):
    """Resource exhausted or feature unsupported (2xxxxx)."""


class StorageError(AclError):
    """Storage error (3xxxxx)."""


class DeviceError(AclError):
    """Internal, driver or device failure (5xxxxx)."""


class OutOfMemoryError(ResourceError):
    """Device memory exhausted (207001, 207018)."""


class DeviceLostError(DeviceError):
    """The device or its channel is gone (507010, 507901)."""


class SyncTimeoutError(DeviceError):
    """A synchronize or report wait expired (507046, 507047, 507012)."""


class ContextError(ParamError):
    """The calling thread has no current context (107002)."""


class InvalidDeviceError(ParamError):
    """The device id is not valid (107001)."""


_EXACT_CLASSES: dict[int, type[AclError]] = {
    ACL_ERROR_RT_MEMORY_ALLOCATION: OutOfMemoryError,
    ACL_ERROR_RT_DEVICE_OOM: OutOfMemoryError,
    ACL_ERROR_RT_LOST_HEARTBEAT: DeviceLostError,
    ACL_ERROR_RT_SOCKET_CLOSE: DeviceLostError,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: SyncTimeoutError,
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: SyncTimeoutError,
    ACL_ERROR_RT_REPORT_TIMEOUT: SyncTimeoutError,
    ACL_ERROR_RT_CONTEXT_NULL: ContextError,
    ACL_ERROR_RT_INVALID_DEVICEID: InvalidDeviceError,
}

_BAND_CLASSES: dict[int, type[AclError]] = {
    1: ParamError,
    2: ResourceError,
    3: StorageError,
    5: DeviceError,
}


def class_for(code: int) -> type[AclError]:
    """Most specific exception class for ``code``: exact code first, then band, else AclError."""
    code = int(code)
    exact = _EXACT_CLASSES.get(code)
    if exact is not None:
        return exact
    if code <= 0:
        return AclError
    return _BAND_CLASSES.get(code // 100000, AclError)


def error_for(code: int, detail: str = "") -> AclError:
    """An instance of the most specific exception class for ``code``."""
    return class_for(code)(code, detail)


def check(ret: int, detail: str = "") -> None:
    """Raise ``error_for(ret, detail)`` unless ``ret`` is ACL_SUCCESS."""
    if ret != ACL_SUCCESS:
        raise error_for(ret, detail)
