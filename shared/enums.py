"""CANN runtime enumerations, with the exact CANN member names and values.

Sources: ``acl_rt.h``, ``acl_base_rt.h``, ``acl_rt_memory_soma.h``, ``rt_external_base.h`` and
the slog header (log levels). Class names drop the ``aclrt``/``acl``/``rt`` prefix. Groups of
OR-able ``#define`` flags are ``IntFlag``; everything else is ``IntEnum``. Where C defines
two names for one value, the first Python member is the current name and the other an alias.

Module-level aliases at the bottom repeat the members pyACL samples use most, so that
``from npuemu.shared.enums import ACL_MEM_MALLOC_HUGE_FIRST`` works like the sample constants.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

# --------------------------------------------------------------------------------------------
# Device
# --------------------------------------------------------------------------------------------


class RunMode(IntEnum):
    """aclrtRunMode."""

    ACL_DEVICE = 0
    ACL_HOST = 1


class TsId(IntEnum):
    """aclrtTsId."""

    ACL_TS_ID_AICORE = 0
    ACL_TS_ID_AIVECTOR = 1
    ACL_TS_ID_RESERVED = 2


class DeviceStatus(IntEnum):
    """aclrtDeviceStatus."""

    ACL_RT_DEVICE_STATUS_NORMAL = 0
    ACL_RT_DEVICE_STATUS_ABNORMAL = 1
    ACL_RT_DEVICE_STATUS_END = 0xFFFF


class DeviceState(IntEnum):
    """aclrtDeviceState (states passed to a device state callback)."""

    ACL_RT_DEVICE_STATE_SET_PRE = 0
    ACL_RT_DEVICE_STATE_SET_POST = 1
    ACL_RT_DEVICE_STATE_RESET_PRE = 2
    ACL_RT_DEVICE_STATE_RESET_POST = 3


class DevAttr(IntEnum):
    """aclrtDevAttr (aclrtGetDeviceInfo)."""

    ACL_DEV_ATTR_AICPU_CORE_NUM = 1
    ACL_DEV_ATTR_AICORE_CORE_NUM = 101
    ACL_DEV_ATTR_CUBE_CORE_NUM = 102
    ACL_DEV_ATTR_VECTOR_CORE_NUM = 201
    ACL_DEV_ATTR_WARP_SIZE = 202
    ACL_DEV_ATTR_MAX_THREAD_PER_VECTOR_CORE = 203
    ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE = 204
    ACL_DEV_ATTR_LOCAL_MEM_PER_VECTOR_CORE = 204  # deprecated alias
    ACL_DEV_ATTR_MAX_GRID_DIM_X = 205
    ACL_DEV_ATTR_MAX_GRID_DIM_Y = 206
    ACL_DEV_ATTR_MAX_GRID_DIM_Z = 207
    ACL_DEV_ATTR_MAX_BLOCK_PER_GRID = 208
    ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK = 209
    ACL_DEV_ATTR_MAX_BLOCK_DIM_X = 210
    ACL_DEV_ATTR_MAX_BLOCK_DIM_Y = 211
    ACL_DEV_ATTR_MAX_BLOCK_DIM_Z = 212
    ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE = 301
    ACL_DEV_ATTR_L2_CACHE_SIZE = 302
    ACL_DEV_ATTR_SMP_ID = 401
    ACL_DEV_ATTR_PHY_CHIP_ID = 402
    ACL_DEV_ATTR_SUPER_POD_DEVICE_ID = 403
    ACL_DEV_ATTR_SUPER_POD_DEVIDE_ID = 403  # misspelt deprecated alias, kept by CANN
    ACL_DEV_ATTR_SUPER_POD_SERVER_ID = 404
    ACL_DEV_ATTR_SUPER_POD_ID = 405
    ACL_DEV_ATTR_CUST_OP_PRIVILEGE = 406
    ACL_DEV_ATTR_MAINBOARD_ID = 407
    ACL_DEV_ATTR_HD_CONNECT_TYPE = 408
    ACL_DEV_ATTR_DEVICE_FORM_FACTOR = 409
    ACL_DEV_ATTR_IS_VIRTUAL = 501
    ACL_DEV_ATTR_NPU_ARCH = 601


class DeviceInfo(IntEnum):
    """aclDeviceInfo (aclGetDeviceCapability)."""

    ACL_DEVICE_INFO_UNDEFINED = -1
    ACL_DEVICE_INFO_AI_CORE_NUM = 0
    ACL_DEVICE_INFO_VECTOR_CORE_NUM = 1
    ACL_DEVICE_INFO_L2_SIZE = 2


class DevsTopology(IntFlag):
    """ACL_RT_DEVS_TOPOLOGY_* bits (aclrtGetDevicesTopo)."""

    ACL_RT_DEVS_TOPOLOGY_HCCS = 0x01
    ACL_RT_DEVS_TOPOLOGY_PIX = 0x02
    ACL_RT_DEVS_TOPOLOGY_PIB = 0x04
    ACL_RT_DEVS_TOPOLOGY_PHB = 0x08
    ACL_RT_DEVS_TOPOLOGY_SYS = 0x10
    ACL_RT_DEVS_TOPOLOGY_SIO = 0x20
    ACL_RT_DEVS_TOPOLOGY_HCCS_SW = 0x40


class SysParamOpt(IntEnum):
    """aclSysParamOpt (aclrtCtxSetSysParamOpt)."""

    ACL_OPT_DETERMINISTIC = 0
    ACL_OPT_ENABLE_DEBUG_KERNEL = 1
    ACL_OPT_STRONG_CONSISTENCY = 2


# --------------------------------------------------------------------------------------------
# Stream
# --------------------------------------------------------------------------------------------


class StreamFlag(IntFlag):
    """ACL_STREAM_* creation flags (aclrtCreateStreamWithConfig); unknown bits are kept."""

    ACL_STREAM_FAST_LAUNCH = 0x01
    ACL_STREAM_FAST_SYNC = 0x02
    ACL_STREAM_PERSISTENT = 0x04
    ACL_STREAM_HUGE = 0x08
    ACL_STREAM_CPU_SCHEDULE = 0x10
    ACL_STREAM_DEVICE_USE_ONLY = 0x20


class StreamStatus(IntEnum):
    """aclrtStreamStatus (aclrtStreamQuery)."""

    ACL_STREAM_STATUS_COMPLETE = 0
    ACL_STREAM_STATUS_NOT_READY = 1
    ACL_STREAM_STATUS_RESERVED = 0xFFFF


class StreamFailureMode(IntEnum):
    """ACL_CONTINUE_ON_FAILURE / ACL_STOP_ON_FAILURE (aclrtSetStreamFailureMode)."""

    ACL_CONTINUE_ON_FAILURE = 0
    ACL_STOP_ON_FAILURE = 1


class StreamAttr(IntEnum):
    """aclrtStreamAttr (aclrtSetStreamAttribute / aclrtGetStreamAttribute)."""

    ACL_STREAM_ATTR_FAILURE_MODE = 1
    ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK = 2
    ACL_STREAM_ATTR_USER_CUSTOM_TAG = 3
    ACL_STREAM_ATTR_CACHE_OP_INFO = 4
    ACL_STREAM_ATTR_PRIORITY = 5


class StreamWaitValue(IntEnum):
    """ACL_STREAM_WAIT_VALUE_* comparison modes (aclrtValueWait)."""

    ACL_STREAM_WAIT_VALUE_GEQ = 0
    ACL_STREAM_WAIT_VALUE_EQ = 1
    ACL_STREAM_WAIT_VALUE_AND = 2
    ACL_STREAM_WAIT_VALUE_NOR = 3


# --------------------------------------------------------------------------------------------
# Model runtime instances (aclmdlRI*: stream capture and models built by hand)
# --------------------------------------------------------------------------------------------


class CaptureMode(IntEnum):
    """aclmdlRICaptureMode (aclmdlRICaptureBegin, aclmdlRICaptureThreadExchangeMode)."""

    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2


class CaptureStatus(IntEnum):
    """aclmdlRICaptureStatus (aclmdlRICaptureGetInfo)."""

    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE = 1
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED = 2


class ModelStreamFlag(IntEnum):
    """ACL_MODEL_STREAM_FLAG_* (aclmdlRIBindStream): a head stream runs from the start of
    each execution; a default one only when activated."""

    ACL_MODEL_STREAM_FLAG_HEAD = 0x00000000
    ACL_MODEL_STREAM_FLAG_DEFAULT = 0x7FFFFFFF


class ModelRIDebugJsonPrint(IntEnum):
    """ACL_MDLRI_DEBUG_JSON_PRINT_* flags (aclmdlRIDebugJsonPrint)."""

    ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY = 0
    ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE = 1


# --------------------------------------------------------------------------------------------
# Event
# --------------------------------------------------------------------------------------------


class EventFlag(IntFlag):
    """ACL_EVENT_* creation flags (aclrtCreateEventWithFlag); EXTERNAL is not meant to be ORed."""

    ACL_EVENT_SYNC = 0x01
    ACL_EVENT_CAPTURE_STREAM_PROGRESS = 0x02
    ACL_EVENT_TIME_LINE = 0x08
    ACL_EVENT_DEVICE_USE_ONLY = 0x10
    ACL_EVENT_EXTERNAL = 0x20
    ACL_EVENT_IPC = 0x40


class EventRecordFlag(IntEnum):
    """ACL_EVENT_RECORD_* flags (aclrtRecordEventWithFlag)."""

    ACL_EVENT_RECORD_DEFAULT = 0
    ACL_EVENT_RECORD_EXTERNAL = 1


class EventWaitFlag(IntEnum):
    """ACL_EVENT_WAIT_* flags (aclrtStreamWaitEventWithFlag)."""

    ACL_EVENT_WAIT_DEFAULT = 0
    ACL_EVENT_WAIT_EXTERNAL = 1


class EventStatus(IntEnum):
    """aclrtEventStatus (aclrtQueryEvent, deprecated)."""

    ACL_EVENT_STATUS_COMPLETE = 0
    ACL_EVENT_STATUS_NOT_READY = 1
    ACL_EVENT_STATUS_RESERVED = 2


class EventRecordedStatus(IntEnum):
    """aclrtEventRecordedStatus (aclrtQueryEventStatus)."""

    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1


class EventWaitStatus(IntEnum):
    """aclrtEventWaitStatus (aclrtQueryEventWaitStatus)."""

    ACL_EVENT_WAIT_STATUS_COMPLETE = 0
    ACL_EVENT_WAIT_STATUS_NOT_READY = 1
    ACL_EVENT_WAIT_STATUS_RESERVED = 0xFFFF


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------


class MemcpyKind(IntEnum):
    """aclrtMemcpyKind."""

    ACL_MEMCPY_HOST_TO_HOST = 0
    ACL_MEMCPY_HOST_TO_DEVICE = 1
    ACL_MEMCPY_DEVICE_TO_HOST = 2
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3
    ACL_MEMCPY_DEFAULT = 4
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7


class MemMallocPolicy(IntEnum):
    """aclrtMemMallocPolicy, page-size part (0..7); the OR-able bits are MemMallocModifier."""

    ACL_MEM_MALLOC_HUGE_FIRST = 0
    ACL_MEM_MALLOC_HUGE_ONLY = 1
    ACL_MEM_MALLOC_NORMAL_ONLY = 2
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
    ACL_MEM_MALLOC_HUGE1G_ONLY = 6
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7


class MemMallocModifier(IntFlag):
    """aclrtMemMallocPolicy modifier bits, ORed onto a MemMallocPolicy value."""

    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x100
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000


# All modifier bits of an aclrtMemMallocPolicy value; the rest is the page-size policy.
POLICY_MODIFIER_MASK = 0x100 | 0x1000 | 0x100000


def split_policy(policy: int) -> tuple[int, MemMallocModifier]:
    """Split an aclrtMemMallocPolicy value into (page-size policy int, modifier bits).

    The first item is a plain int because CANN accepts out-of-range policies (it then picks
    huge pages for sizes of 2 MiB or more); callers map it to MemMallocPolicy themselves.
    """
    policy = int(policy)
    return policy & ~POLICY_MODIFIER_MASK, MemMallocModifier(policy & POLICY_MODIFIER_MASK)


class MemAttr(IntEnum):
    """aclrtMemAttr (aclrtGetMemInfo, aclrtPhysicalMemProp.memAttr)."""

    ACL_DDR_MEM = 0
    ACL_HBM_MEM = 1
    ACL_DDR_MEM_HUGE = 2
    ACL_DDR_MEM_NORMAL = 3
    ACL_HBM_MEM_HUGE = 4
    ACL_HBM_MEM_NORMAL = 5
    ACL_DDR_MEM_P2P_HUGE = 6
    ACL_DDR_MEM_P2P_NORMAL = 7
    ACL_HBM_MEM_P2P_HUGE = 8
    ACL_HBM_MEM_P2P_NORMAL = 9
    ACL_HBM_MEM_HUGE1G = 10
    ACL_HBM_MEM_P2P_HUGE1G = 11
    ACL_MEM_NORMAL = 12
    ACL_MEM_HUGE = 13
    ACL_MEM_HUGE1G = 14
    ACL_MEM_P2P_NORMAL = 15
    ACL_MEM_P2P_HUGE = 16
    ACL_MEM_P2P_HUGE1G = 17


class MemLocationType(IntEnum):
    """aclrtMemLocationType (aclrtPointerGetAttributes, aclrtMemLocation)."""

    ACL_MEM_LOCATION_TYPE_HOST = 0
    ACL_MEM_LOCATION_TYPE_DEVICE = 1
    ACL_MEM_LOCATION_TYPE_UNREGISTERED = 2
    ACL_MEM_LOCATION_TYPE_MANAGED = 3
    ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4


class MemHandleType(IntEnum):
    """aclrtMemHandleType (aclrtPhysicalMemProp.handleType)."""

    ACL_MEM_HANDLE_TYPE_NONE = 0
    ACL_MEM_HANDLE_TYPE_POSIX = 2


class MemAllocationType(IntEnum):
    """aclrtMemAllocationType (aclrtPhysicalMemProp.allocationType)."""

    ACL_MEM_ALLOCATION_TYPE_PINNED = 0


class MemGranularityOptions(IntEnum):
    """aclrtMemGranularityOptions (aclrtMemGetAllocationGranularity)."""

    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM = 0
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1
    ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF


class MemSharedHandleType(IntEnum):
    """aclrtMemSharedHandleType (aclrtMemExportToShareableHandleV2 and friends)."""

    ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT = 1
    ACL_MEM_SHARE_HANDLE_TYPE_FABRIC = 2


class MemPoolAttr(IntEnum):
    """aclrtMemPoolAttr (aclrtMemPoolSetAttr / aclrtMemPoolGetAttr)."""

    ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1
    ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC = 2
    ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3
    ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD = 4
    ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT = 5
    ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH = 6
    ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT = 7
    ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH = 8


# --------------------------------------------------------------------------------------------
# Callbacks, exceptions, errors
# --------------------------------------------------------------------------------------------


class CallbackBlockType(IntEnum):
    """aclrtCallbackBlockType (aclrtLaunchCallback)."""

    ACL_CALLBACK_NO_BLOCK = 0
    ACL_CALLBACK_BLOCK = 1


class ExceptionExpandType(IntEnum):
    """rtExceptionExpandType_t (aclrtExceptionInfo.expandInfo.type)."""

    RT_EXCEPTION_INVALID = 0
    RT_EXCEPTION_FFTS_PLUS = 1
    RT_EXCEPTION_AICORE = 2
    RT_EXCEPTION_UB = 3
    RT_EXCEPTION_CCU = 4
    RT_EXCEPTION_FUSION = 5
    RT_EXCEPTION_AICPU = 6


class ExceptionType(IntEnum):
    """rtExceptionType (legacy runtime exception kinds)."""

    RT_EXCEPTION_NONE = 0
    RT_EXCEPTION_TS_DOWN = 1
    RT_EXCEPTION_TASK_TIMEOUT = 2
    RT_EXCEPTION_TASK_FAILURE = 3
    RT_EXCEPTION_DEV_RUNNING_DOWN = 4
    RT_EXCEPTION_STREAM_ID_FREE_FAILED = 5


class LastErrLevel(IntEnum):
    """aclrtLastErrLevel (aclrtPeekAtLastError / aclrtGetLastError)."""

    ACL_RT_THREAD_LEVEL = 0


class ErrorType(IntEnum):
    """aclrtErrorType (aclrtGetErrorVerbose)."""

    ACL_RT_NO_ERROR = 0
    ACL_RT_ERROR_MEMORY = 1
    ACL_RT_ERROR_L2 = 2
    ACL_RT_ERROR_AICORE = 3
    ACL_RT_ERROR_LINK = 4
    ACL_RT_ERROR_L3_PORT = 5
    ACL_RT_ERROR_OTHERS = 0xFFFF


class AicoreErrorType(IntEnum):
    """aclrtAicoreErrorType (detail of an ACL_RT_ERROR_AICORE error)."""

    ACL_RT_AICORE_ERROR_UNKNOWN = 0
    ACL_RT_AICORE_ERROR_SW = 1
    ACL_RT_AICORE_ERROR_HW_LOCAL = 2


class DeviceTaskAbortStage(IntEnum):
    """aclrtDeviceTaskAbortStage (aclrtSetDeviceTaskAbortCallback)."""

    ACL_RT_DEVICE_TASK_ABORT_PRE = 0
    ACL_RT_DEVICE_TASK_ABORT_POST = 1


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------


class BinaryLoadOptionType(IntEnum):
    """aclrtBinaryLoadOptionType (aclrtBinaryLoadFromFile / FromData options)."""

    ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD = 1
    ACL_RT_BINARY_LOAD_OPT_MAGIC = 2
    ACL_RT_BINARY_LOAD_OPT_LAZY_MAGIC = 2  # older alias of MAGIC
    ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE = 3


class BinaryMagic(IntEnum):
    """ACL_RT_BINARY_MAGIC_ELF_* values for ACL_RT_BINARY_LOAD_OPT_MAGIC."""

    ACL_RT_BINARY_MAGIC_ELF_AICORE = 0x43554245
    ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE = 0x41415246
    ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE = 0x41494343


class EngineType(IntEnum):
    """aclrtEngineType (ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE value)."""

    ACL_RT_ENGINE_TYPE_AIC = 0
    ACL_RT_ENGINE_TYPE_AIV = 1


class LaunchKernelAttrId(IntEnum):
    """aclrtLaunchKernelAttrId (aclrtLaunchKernelCfg attributes)."""

    ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE = 1
    ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE = 2
    ACL_RT_LAUNCH_KERNEL_ATTR_LOCAL_MEMORY_SIZE = 2  # deprecated alias
    ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE = 3
    ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET = 4
    ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH = 5
    ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP = 6
    ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT = 7
    ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US = 8


# --------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------


class LogLevel(IntEnum):
    """DLOG_* levels of the slog logger (ASCEND_GLOBAL_LOG_LEVEL values 0..4)."""

    DLOG_DEBUG = 0
    DLOG_INFO = 1
    DLOG_WARN = 2
    DLOG_ERROR = 3
    DLOG_NULL = 4


class AclLogLevel(IntEnum):
    """aclLogLevel (aclAppLog / acl.app_log)."""

    ACL_DEBUG = 0
    ACL_INFO = 1
    ACL_WARNING = 2
    ACL_ERROR = 3


# --------------------------------------------------------------------------------------------
# Data types (acl_base.h aclDataType)
# --------------------------------------------------------------------------------------------


class DataType(IntEnum):
    """aclDataType (``acl_base.h``): element types of data buffers and tensor descriptors."""

    ACL_DT_UNDEFINED = -1
    ACL_FLOAT = 0
    ACL_FLOAT16 = 1
    ACL_INT8 = 2
    ACL_INT32 = 3
    ACL_UINT8 = 4
    ACL_INT16 = 6
    ACL_UINT16 = 7
    ACL_UINT32 = 8
    ACL_INT64 = 9
    ACL_UINT64 = 10
    ACL_DOUBLE = 11
    ACL_BOOL = 12
    ACL_STRING = 13
    ACL_COMPLEX64 = 16
    ACL_COMPLEX128 = 17
    ACL_BF16 = 27
    ACL_INT4 = 29
    ACL_UINT1 = 30
    ACL_COMPLEX32 = 33



# --------------------------------------------------------------------------------------------
# pyACL numpy type codes (acl.util.ptr_to_numpy); values are numpy's NPY_TYPES numbers
# --------------------------------------------------------------------------------------------

NPY_TYPES: dict[int, str] = {
    0: "bool",
    1: "int8",
    2: "uint8",
    3: "int16",
    4: "uint16",
    5: "int32",
    6: "uint32",
    7: "int64",
    8: "uint64",
    11: "float32",
    12: "float64",
    23: "float16",
}

# --------------------------------------------------------------------------------------------
# Module-level aliases (the names pyACL samples define as constants)
# --------------------------------------------------------------------------------------------

# run mode
ACL_DEVICE = RunMode.ACL_DEVICE
ACL_HOST = RunMode.ACL_HOST

# memcpy kinds
ACL_MEMCPY_HOST_TO_HOST = MemcpyKind.ACL_MEMCPY_HOST_TO_HOST
ACL_MEMCPY_HOST_TO_DEVICE = MemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE
ACL_MEMCPY_DEVICE_TO_HOST = MemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST
ACL_MEMCPY_DEVICE_TO_DEVICE = MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE
ACL_MEMCPY_DEFAULT = MemcpyKind.ACL_MEMCPY_DEFAULT
ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = MemcpyKind.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE
ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = MemcpyKind.ACL_MEMCPY_INNER_DEVICE_TO_DEVICE
ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = MemcpyKind.ACL_MEMCPY_INTER_DEVICE_TO_DEVICE

# malloc policies and modifiers
ACL_MEM_MALLOC_HUGE_FIRST = MemMallocPolicy.ACL_MEM_MALLOC_HUGE_FIRST
ACL_MEM_MALLOC_HUGE_ONLY = MemMallocPolicy.ACL_MEM_MALLOC_HUGE_ONLY
ACL_MEM_MALLOC_NORMAL_ONLY = MemMallocPolicy.ACL_MEM_MALLOC_NORMAL_ONLY
ACL_MEM_MALLOC_HUGE_FIRST_P2P = MemMallocPolicy.ACL_MEM_MALLOC_HUGE_FIRST_P2P
ACL_MEM_MALLOC_HUGE_ONLY_P2P = MemMallocPolicy.ACL_MEM_MALLOC_HUGE_ONLY_P2P
ACL_MEM_MALLOC_NORMAL_ONLY_P2P = MemMallocPolicy.ACL_MEM_MALLOC_NORMAL_ONLY_P2P
ACL_MEM_MALLOC_HUGE1G_ONLY = MemMallocPolicy.ACL_MEM_MALLOC_HUGE1G_ONLY
ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = MemMallocPolicy.ACL_MEM_MALLOC_HUGE1G_ONLY_P2P
ACL_MEM_TYPE_LOW_BAND_WIDTH = MemMallocModifier.ACL_MEM_TYPE_LOW_BAND_WIDTH
ACL_MEM_TYPE_HIGH_BAND_WIDTH = MemMallocModifier.ACL_MEM_TYPE_HIGH_BAND_WIDTH
ACL_MEM_ACCESS_USER_SPACE_READONLY = MemMallocModifier.ACL_MEM_ACCESS_USER_SPACE_READONLY

# memory attributes (aclrtGetMemInfo)
ACL_DDR_MEM = MemAttr.ACL_DDR_MEM
ACL_HBM_MEM = MemAttr.ACL_HBM_MEM
ACL_DDR_MEM_HUGE = MemAttr.ACL_DDR_MEM_HUGE
ACL_DDR_MEM_NORMAL = MemAttr.ACL_DDR_MEM_NORMAL
ACL_HBM_MEM_HUGE = MemAttr.ACL_HBM_MEM_HUGE
ACL_HBM_MEM_NORMAL = MemAttr.ACL_HBM_MEM_NORMAL
ACL_DDR_MEM_P2P_HUGE = MemAttr.ACL_DDR_MEM_P2P_HUGE
ACL_DDR_MEM_P2P_NORMAL = MemAttr.ACL_DDR_MEM_P2P_NORMAL
ACL_HBM_MEM_P2P_HUGE = MemAttr.ACL_HBM_MEM_P2P_HUGE
ACL_HBM_MEM_P2P_NORMAL = MemAttr.ACL_HBM_MEM_P2P_NORMAL
ACL_HBM_MEM_HUGE1G = MemAttr.ACL_HBM_MEM_HUGE1G
ACL_HBM_MEM_P2P_HUGE1G = MemAttr.ACL_HBM_MEM_P2P_HUGE1G
ACL_MEM_NORMAL = MemAttr.ACL_MEM_NORMAL
ACL_MEM_HUGE = MemAttr.ACL_MEM_HUGE
ACL_MEM_HUGE1G = MemAttr.ACL_MEM_HUGE1G
ACL_MEM_P2P_NORMAL = MemAttr.ACL_MEM_P2P_NORMAL
ACL_MEM_P2P_HUGE = MemAttr.ACL_MEM_P2P_HUGE
ACL_MEM_P2P_HUGE1G = MemAttr.ACL_MEM_P2P_HUGE1G

# stream flags, failure modes, status
ACL_STREAM_FAST_LAUNCH = StreamFlag.ACL_STREAM_FAST_LAUNCH
ACL_STREAM_FAST_SYNC = StreamFlag.ACL_STREAM_FAST_SYNC
ACL_STREAM_PERSISTENT = StreamFlag.ACL_STREAM_PERSISTENT
ACL_STREAM_HUGE = StreamFlag.ACL_STREAM_HUGE
ACL_STREAM_CPU_SCHEDULE = StreamFlag.ACL_STREAM_CPU_SCHEDULE
ACL_STREAM_DEVICE_USE_ONLY = StreamFlag.ACL_STREAM_DEVICE_USE_ONLY
ACL_CONTINUE_ON_FAILURE = StreamFailureMode.ACL_CONTINUE_ON_FAILURE
ACL_STOP_ON_FAILURE = StreamFailureMode.ACL_STOP_ON_FAILURE
ACL_STREAM_STATUS_COMPLETE = StreamStatus.ACL_STREAM_STATUS_COMPLETE
ACL_STREAM_STATUS_NOT_READY = StreamStatus.ACL_STREAM_STATUS_NOT_READY

# event flags and status
ACL_EVENT_SYNC = EventFlag.ACL_EVENT_SYNC
ACL_EVENT_CAPTURE_STREAM_PROGRESS = EventFlag.ACL_EVENT_CAPTURE_STREAM_PROGRESS
ACL_EVENT_TIME_LINE = EventFlag.ACL_EVENT_TIME_LINE
ACL_EVENT_DEVICE_USE_ONLY = EventFlag.ACL_EVENT_DEVICE_USE_ONLY
ACL_EVENT_EXTERNAL = EventFlag.ACL_EVENT_EXTERNAL
ACL_EVENT_IPC = EventFlag.ACL_EVENT_IPC
ACL_EVENT_STATUS_COMPLETE = EventStatus.ACL_EVENT_STATUS_COMPLETE
ACL_EVENT_STATUS_NOT_READY = EventStatus.ACL_EVENT_STATUS_NOT_READY
ACL_EVENT_RECORDED_STATUS_NOT_READY = EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_NOT_READY
ACL_EVENT_RECORDED_STATUS_COMPLETE = EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_COMPLETE

# callbacks and device status
ACL_CALLBACK_NO_BLOCK = CallbackBlockType.ACL_CALLBACK_NO_BLOCK
ACL_CALLBACK_BLOCK = CallbackBlockType.ACL_CALLBACK_BLOCK
ACL_RT_DEVICE_STATUS_NORMAL = DeviceStatus.ACL_RT_DEVICE_STATUS_NORMAL
ACL_RT_DEVICE_STATUS_ABNORMAL = DeviceStatus.ACL_RT_DEVICE_STATUS_ABNORMAL

# stream capture (aclmdlRI*)
ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = CaptureMode.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = CaptureMode.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL
ACL_MODEL_RI_CAPTURE_MODE_RELAXED = CaptureMode.ACL_MODEL_RI_CAPTURE_MODE_RELAXED
ACL_MODEL_RI_CAPTURE_STATUS_NONE = CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_NONE
ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE = CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED = CaptureStatus.ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
ACL_MODEL_STREAM_FLAG_HEAD = ModelStreamFlag.ACL_MODEL_STREAM_FLAG_HEAD
ACL_MODEL_STREAM_FLAG_DEFAULT = ModelStreamFlag.ACL_MODEL_STREAM_FLAG_DEFAULT
