"""Tests for npuemu.shared.errors: code table, exception classes, pickling."""

from __future__ import annotations

import pickle

import pytest

from npuemu.shared import errors

ALL_CLASSES = [
    errors.AclError,
    errors.ParamError,
    errors.ResourceError,
    errors.StorageError,
    errors.DeviceError,
    errors.OutOfMemoryError,
    errors.DeviceLostError,
    errors.SyncTimeoutError,
    errors.ContextError,
    errors.InvalidDeviceError,
]


def _constants() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(errors).items()
        if name.startswith("ACL_") and isinstance(value, int)
    }


def test_every_constant_is_in_the_table_under_its_own_name():
    for name, value in _constants().items():
        canonical = errors.ALIASES.get(name, name)
        assert errors.CODE_NAMES[value] == canonical, name


def test_codes_are_unique_per_name():
    consts = {n: v for n, v in _constants().items() if n not in errors.ALIASES}
    assert len(set(consts.values())) == len(consts)


def test_code_names_round_trip():
    for code, name in errors.CODE_NAMES.items():
        assert getattr(errors, name) == code
    assert len(set(errors.CODE_NAMES.values())) == len(errors.CODE_NAMES)


def test_every_code_has_a_description():
    assert errors.CODE_NAMES.keys() == errors.DESCRIPTIONS.keys()
    for text in errors.DESCRIPTIONS.values():
        assert text and text.endswith(".")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ACL_SUCCESS", 0),
        ("ACL_RT_SUCCESS", 0),
        ("ACL_ERROR_INVALID_PARAM", 100000),
        ("ACL_ERROR_UNINITIALIZE", 100001),
        ("ACL_ERROR_REPEAT_INITIALIZE", 100002),
        ("ACL_ERROR_REPEAT_FINALIZE", 100037),
        ("ACL_ERROR_BAD_ALLOC", 200000),
        ("ACL_ERROR_FEATURE_UNSUPPORTED", 200006),
        ("ACL_ERROR_INTERNAL_ERROR", 500000),
        ("ACL_ERROR_FAILURE", 500001),
        ("ACL_ERROR_RT_FAILURE", 500003),
        ("ACL_ERROR_DRV_FAILURE", 500004),
        ("ACL_ERROR_RT_PARAM_INVALID", 107000),
        ("ACL_ERROR_RT_INVALID_DEVICEID", 107001),
        ("ACL_ERROR_RT_CONTEXT_NULL", 107002),
        ("ACL_ERROR_RT_THREAD_SUBSCRIBE", 107012),
        ("ACL_ERROR_RT_TASK_ABORT_STOP", 107035),
        ("ACL_ERROR_RT_FEATURE_NOT_SUPPORT", 207000),
        ("ACL_ERROR_RT_MEMORY_ALLOCATION", 207001),
        ("ACL_ERROR_RT_AIVEC_OVER_FLOW", 207016),
        ("ACL_ERROR_RT_OVER_FLOW", 207017),
        ("ACL_ERROR_RT_DEVICE_OOM", 207018),
        ("ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED", 207021),
        ("ACL_ERROR_RT_STREAM_NOT_COMPLETE", 507004),
        ("ACL_ERROR_RT_EVENT_NOT_COMPLETE", 507006),
        ("ACL_ERROR_RT_LOST_HEARTBEAT", 507010),
        ("ACL_ERROR_RT_REPORT_TIMEOUT", 507012),
        ("ACL_ERROR_RT_AICORE_TIMEOUT", 507014),
        ("ACL_ERROR_RT_AICORE_EXCEPTION", 507015),
        ("ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", 507016),
        ("ACL_ERROR_RT_AICPU_EXCEPTION", 507018),
        ("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", 507035),
        ("ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", 507046),
        ("ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", 507047),
        ("ACL_ERROR_RT_DEVICE_MEM_ERROR", 507053),
        ("ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", 507054),
        ("ACL_ERROR_RT_LINK_ERROR", 507056),
        ("ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", 507057),
        ("ACL_ERROR_RT_SOCKET_CLOSE", 507901),
        ("ACL_ERROR_RT_L3_PORT_ERROR", 507914),
        ("ACL_ERROR_RT_CCU_TIMEOUT", 507915),
        ("ACL_ERROR_RT_CCU_EXCEPTION", 507916),
    ],
)
def test_spot_values(name, value):
    assert getattr(errors, name) == value


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (100000, errors.ParamError),
        (107000, errors.ParamError),
        (107001, errors.InvalidDeviceError),
        (107002, errors.ContextError),
        (200002, errors.ResourceError),
        (207000, errors.ResourceError),
        (207001, errors.OutOfMemoryError),
        (207018, errors.OutOfMemoryError),
        (300000, errors.StorageError),
        (500000, errors.DeviceError),
        (507015, errors.DeviceError),
        (507010, errors.DeviceLostError),
        (507901, errors.DeviceLostError),
        (507046, errors.SyncTimeoutError),
        (507047, errors.SyncTimeoutError),
        (507012, errors.SyncTimeoutError),
        (199999, errors.ParamError),  # unknown code: falls back to its band
        (400000, errors.AclError),  # no band class
        (-1, errors.AclError),
    ],
)
def test_error_for_picks_the_most_specific_class(code, cls):
    err = errors.error_for(code, "why")
    assert type(err) is cls
    assert err.code == code
    assert err.detail == "why"


def test_class_hierarchy():
    assert issubclass(errors.OutOfMemoryError, errors.ResourceError)
    assert issubclass(errors.DeviceLostError, errors.DeviceError)
    assert issubclass(errors.SyncTimeoutError, errors.DeviceError)
    assert issubclass(errors.ContextError, errors.ParamError)
    assert issubclass(errors.InvalidDeviceError, errors.ParamError)
    for cls in ALL_CLASSES:
        assert issubclass(cls, errors.AclError)
        assert issubclass(cls, Exception)


def test_attributes_and_unknown_name():
    err = errors.AclError(507010, "gone")
    assert (err.code, err.name, err.detail) == (507010, "ACL_ERROR_RT_LOST_HEARTBEAT", "gone")
    assert errors.AclError(123).name == "ACL_ERROR_UNKNOWN"
    assert errors.AclError(123).detail == ""


def test_str_format():
    err = errors.error_for(507010, "device 3 worker died")
    assert str(err) == "ACL_ERROR_RT_LOST_HEARTBEAT (507010): device 3 worker died"
    plain = errors.error_for(errors.ACL_ERROR_RT_LOST_HEARTBEAT)
    expected = errors.DESCRIPTIONS[507010]
    assert str(plain) == f"ACL_ERROR_RT_LOST_HEARTBEAT (507010): {expected}"
    assert str(errors.AclError(42)).startswith("ACL_ERROR_UNKNOWN (42): ")


@pytest.mark.parametrize("cls", ALL_CLASSES)
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_round_trip(cls, protocol):
    err = cls(507010, "device 3 worker died")
    back = pickle.loads(pickle.dumps(err, protocol=protocol))
    assert type(back) is cls
    assert (back.code, back.name, back.detail) == (err.code, err.name, err.detail)
    assert str(back) == str(err)


def test_pickle_keeps_extra_attributes():
    err = errors.error_for(507015, "kernel fault")
    err.device_id = 3
    back = pickle.loads(pickle.dumps(err))
    assert back.device_id == 3
    assert back.code == 507015


def test_check():
    errors.check(0)
    errors.check(errors.ACL_SUCCESS, "ignored")
    with pytest.raises(errors.SyncTimeoutError) as info:
        errors.check(507046, "stream 5")
    assert info.value.code == 507046
    assert info.value.detail == "stream 5"
    with pytest.raises(errors.ParamError):
        errors.check(100000)
