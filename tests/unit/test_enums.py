"""Tests for npuemu.shared.enums: CANN member names and values."""

from __future__ import annotations

import enum
import inspect

import pytest

from npuemu.shared import enums


def _enum_classes() -> list[type[enum.Enum]]:
    return [
        obj
        for obj in vars(enums).values()
        if inspect.isclass(obj) and issubclass(obj, enum.Enum) and obj.__module__ == enums.__name__
    ]


def test_every_class_has_a_docstring():
    classes = _enum_classes()
    assert len(classes) > 20
    for cls in classes:
        assert cls.__doc__ and cls.__doc__.strip(), cls.__name__


def test_memcpy_kinds():
    names = [
        "ACL_MEMCPY_HOST_TO_HOST",
        "ACL_MEMCPY_HOST_TO_DEVICE",
        "ACL_MEMCPY_DEVICE_TO_HOST",
        "ACL_MEMCPY_DEVICE_TO_DEVICE",
        "ACL_MEMCPY_DEFAULT",
        "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE",
        "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE",
        "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE",
    ]
    assert [m.name for m in enums.MemcpyKind] == names
    assert [int(m) for m in enums.MemcpyKind] == list(range(8))
    for name in names:
        assert getattr(enums, name) is enums.MemcpyKind[name]


def test_malloc_policies_and_modifiers():
    names = [
        "ACL_MEM_MALLOC_HUGE_FIRST",
        "ACL_MEM_MALLOC_HUGE_ONLY",
        "ACL_MEM_MALLOC_NORMAL_ONLY",
        "ACL_MEM_MALLOC_HUGE_FIRST_P2P",
        "ACL_MEM_MALLOC_HUGE_ONLY_P2P",
        "ACL_MEM_MALLOC_NORMAL_ONLY_P2P",
        "ACL_MEM_MALLOC_HUGE1G_ONLY",
        "ACL_MEM_MALLOC_HUGE1G_ONLY_P2P",
    ]
    assert [m.name for m in enums.MemMallocPolicy] == names
    assert [int(m) for m in enums.MemMallocPolicy] == list(range(8))
    for name in names:
        assert getattr(enums, name) is enums.MemMallocPolicy[name]
    assert enums.ACL_MEM_TYPE_LOW_BAND_WIDTH == 0x100
    assert enums.ACL_MEM_TYPE_HIGH_BAND_WIDTH == 0x1000
    assert enums.ACL_MEM_ACCESS_USER_SPACE_READONLY == 0x100000
    assert enums.POLICY_MODIFIER_MASK == 0x101100
    assert sum(int(m) for m in enums.MemMallocModifier) == enums.POLICY_MODIFIER_MASK


def test_split_policy():
    value = enums.ACL_MEM_MALLOC_HUGE_FIRST_P2P | enums.ACL_MEM_TYPE_HIGH_BAND_WIDTH
    base, mods = enums.split_policy(value)
    assert base == enums.ACL_MEM_MALLOC_HUGE_FIRST_P2P
    assert mods == enums.MemMallocModifier.ACL_MEM_TYPE_HIGH_BAND_WIDTH
    assert enums.split_policy(2) == (2, enums.MemMallocModifier(0))
    assert enums.split_policy(99)[0] == 99  # out-of-range policies pass through


def test_mem_attrs():
    names = [
        "ACL_DDR_MEM",
        "ACL_HBM_MEM",
        "ACL_DDR_MEM_HUGE",
        "ACL_DDR_MEM_NORMAL",
        "ACL_HBM_MEM_HUGE",
        "ACL_HBM_MEM_NORMAL",
        "ACL_DDR_MEM_P2P_HUGE",
        "ACL_DDR_MEM_P2P_NORMAL",
        "ACL_HBM_MEM_P2P_HUGE",
        "ACL_HBM_MEM_P2P_NORMAL",
        "ACL_HBM_MEM_HUGE1G",
        "ACL_HBM_MEM_P2P_HUGE1G",
        "ACL_MEM_NORMAL",
        "ACL_MEM_HUGE",
        "ACL_MEM_HUGE1G",
        "ACL_MEM_P2P_NORMAL",
        "ACL_MEM_P2P_HUGE",
        "ACL_MEM_P2P_HUGE1G",
    ]
    assert [m.name for m in enums.MemAttr] == names
    assert [int(m) for m in enums.MemAttr] == list(range(18))
    for name in names:
        assert getattr(enums, name) is enums.MemAttr[name]


def test_stream_flags_and_status():
    flags = enums.StreamFlag
    assert flags.ACL_STREAM_FAST_LAUNCH == 0x1
    assert flags.ACL_STREAM_FAST_SYNC == 0x2
    assert flags.ACL_STREAM_PERSISTENT == 0x4
    assert flags.ACL_STREAM_HUGE == 0x8
    assert flags.ACL_STREAM_CPU_SCHEDULE == 0x10
    assert flags.ACL_STREAM_DEVICE_USE_ONLY == 0x20
    combined = enums.ACL_STREAM_FAST_LAUNCH | enums.ACL_STREAM_FAST_SYNC
    assert int(combined) == 3
    assert flags.ACL_STREAM_FAST_SYNC in combined
    assert int(flags(0x1000)) == 0x1000  # unknown bits are kept, not rejected
    assert enums.StreamStatus.ACL_STREAM_STATUS_COMPLETE == 0
    assert enums.StreamStatus.ACL_STREAM_STATUS_NOT_READY == 1
    assert enums.StreamStatus.ACL_STREAM_STATUS_RESERVED == 0xFFFF
    assert enums.ACL_CONTINUE_ON_FAILURE == 0
    assert enums.ACL_STOP_ON_FAILURE == 1
    assert enums.StreamAttr.ACL_STREAM_ATTR_FAILURE_MODE == 1
    assert enums.StreamAttr.ACL_STREAM_ATTR_PRIORITY == 5
    assert enums.StreamWaitValue.ACL_STREAM_WAIT_VALUE_NOR == 3


def test_event_flags_and_status():
    flags = enums.EventFlag
    assert flags.ACL_EVENT_SYNC == 0x1
    assert flags.ACL_EVENT_CAPTURE_STREAM_PROGRESS == 0x2
    assert flags.ACL_EVENT_TIME_LINE == 8
    assert enums.ACL_EVENT_TIME_LINE == 8
    assert flags.ACL_EVENT_DEVICE_USE_ONLY == 0x10
    assert flags.ACL_EVENT_EXTERNAL == 0x20
    assert flags.ACL_EVENT_IPC == 0x40
    assert enums.EventStatus.ACL_EVENT_STATUS_RESERVED == 2
    assert enums.EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_NOT_READY == 0
    assert enums.EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_COMPLETE == 1
    assert enums.EventWaitStatus.ACL_EVENT_WAIT_STATUS_RESERVED == 0xFFFF
    assert enums.EventRecordFlag.ACL_EVENT_RECORD_EXTERNAL == 1
    assert enums.EventWaitFlag.ACL_EVENT_WAIT_EXTERNAL == 1


def test_device_enums():
    assert enums.ACL_HOST == 1
    assert enums.ACL_DEVICE == 0
    assert enums.RunMode(1) is enums.RunMode.ACL_HOST
    status = enums.DeviceStatus
    assert [int(m) for m in status] == [0, 1, 0xFFFF]
    assert status.ACL_RT_DEVICE_STATUS_END == 0xFFFF
    assert enums.DevAttr.ACL_DEV_ATTR_AICORE_CORE_NUM == 101
    assert enums.DevAttr.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE == 301
    assert enums.DevAttr.ACL_DEV_ATTR_DEVICE_FORM_FACTOR == 409
    assert enums.DevAttr.ACL_DEV_ATTR_NPU_ARCH == 601
    assert (
        enums.DevAttr.ACL_DEV_ATTR_LOCAL_MEM_PER_VECTOR_CORE
        is enums.DevAttr.ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE
    )
    assert enums.DeviceInfo.ACL_DEVICE_INFO_UNDEFINED == -1
    assert enums.DeviceInfo.ACL_DEVICE_INFO_L2_SIZE == 2
    assert enums.DeviceState.ACL_RT_DEVICE_STATE_RESET_POST == 3
    assert enums.TsId.ACL_TS_ID_AIVECTOR == 1
    topo = enums.DevsTopology
    assert [int(m) for m in topo] == [0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40]


def test_misc_enums():
    assert enums.CallbackBlockType.ACL_CALLBACK_BLOCK == 1
    assert enums.ExceptionExpandType.RT_EXCEPTION_AICORE == 2
    assert enums.ExceptionExpandType.RT_EXCEPTION_AICPU == 6
    assert enums.ExceptionType.RT_EXCEPTION_STREAM_ID_FREE_FAILED == 5
    assert enums.ErrorType.ACL_RT_ERROR_OTHERS == 0xFFFF
    assert enums.MemLocationType.ACL_MEM_LOCATION_TYPE_HOST_NUMA == 4
    assert enums.MemPoolAttr.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH == 8
    assert enums.LaunchKernelAttrId.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US == 8
    assert enums.BinaryLoadOptionType(2).name == "ACL_RT_BINARY_LOAD_OPT_MAGIC"


def test_log_levels():
    assert [(m.name, int(m)) for m in enums.LogLevel] == [
        ("DLOG_DEBUG", 0),
        ("DLOG_INFO", 1),
        ("DLOG_WARN", 2),
        ("DLOG_ERROR", 3),
        ("DLOG_NULL", 4),
    ]
    assert enums.AclLogLevel.ACL_ERROR == 3


@pytest.mark.parametrize(
    ("code", "dtype"),
    [(0, "bool"), (1, "int8"), (5, "int32"), (7, "int64"), (11, "float32"), (23, "float16")],
)
def test_npy_types(code, dtype):
    assert enums.NPY_TYPES[code] == dtype


def test_npy_types_are_numpy_type_numbers():
    # pyACL hands the code straight to numpy, so on Linux it must equal numpy's type number.
    np = pytest.importorskip("numpy")
    for code, name in enums.NPY_TYPES.items():
        assert np.dtype(name).num == code, name
