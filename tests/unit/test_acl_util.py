"""Unit tests of npuemu.host.acl.util (pyACL ``acl.util``)."""

from __future__ import annotations

import ctypes
import errno
import threading
import time
import warnings

import numpy as np
import pytest

from npuemu.host.acl import util
from npuemu.shared import address

DEV_PTR = address.encode(0, address.HBM, 0x1000)


# ---------------------------------------------------------------- bytes <-> ptr


def test_bytes_round_trip() -> None:
    data = b"hello npu\x00\xff"
    ptr = util.bytes_to_ptr(data)
    assert isinstance(ptr, int) and ptr != 0
    assert util.ptr_to_bytes(ptr, len(data)) == data
    assert util.ptr_to_bytes(ptr + 6, 3) == b"npu"


def test_bytes_to_ptr_points_into_the_bytes_object() -> None:
    data = b"abcdef"
    # CPython: the buffer follows the bytes object header (no copy was made).
    assert util.bytes_to_ptr(data) == id(data) + bytes.__basicsize__ - 1


def test_ptr_to_bytes_is_a_copy() -> None:
    buf = bytearray(b"abcd")
    copy = util.ptr_to_bytes(util.bytes_to_ptr(buf), 4)
    buf[0] = ord("z")
    assert copy == b"abcd"


def test_bytearray_pointer_is_writable_in_place() -> None:
    buf = bytearray(8)
    ptr = util.bytes_to_ptr(buf)
    ctypes.memmove(ptr, b"xyz", 3)
    assert bytes(buf[:3]) == b"xyz"
    assert util.ptr_to_bytes(ptr, 3) == b"xyz"


def test_bytes_to_ptr_buffer_objects() -> None:
    arr = np.arange(4, dtype=np.int32)
    assert util.bytes_to_ptr(memoryview(arr)) == arr.ctypes.data
    assert util.bytes_to_ptr(arr) == arr.ctypes.data
    data = b"readonly"
    assert util.bytes_to_ptr(memoryview(data)) == util.bytes_to_ptr(data)
    assert util.bytes_to_ptr(memoryview(data)[2:]) == util.bytes_to_ptr(data) + 2
    assert util.bytes_to_ptr(b"") != 0


def test_bytes_to_ptr_rejects_non_buffers_and_strided_views() -> None:
    with pytest.raises(ValueError, match="bytes-like"):
        util.bytes_to_ptr("text")
    with pytest.raises(ValueError, match="bytes-like"):
        util.bytes_to_ptr(12345)
    with pytest.raises(ValueError, match="contiguous"):
        util.bytes_to_ptr(memoryview(bytearray(8))[::2])


def test_ptr_to_bytes_zero_and_negative_size() -> None:
    ptr = util.bytes_to_ptr(b"abc")
    assert util.ptr_to_bytes(ptr, 0) == b""
    with pytest.raises(ValueError, match="size"):
        util.ptr_to_bytes(ptr, -1)


# ---------------------------------------------------------------- device-pointer refusal


@pytest.mark.parametrize(
    "ptr",
    [
        address.DEVICE_VA_BASE,
        DEV_PTR,
        address.encode(63, address.DDR, 0),
        address.DEVICE_VA_END - 1,
    ],
)
def test_ptr_to_bytes_refuses_device_pointer(ptr: int) -> None:
    with pytest.raises(ValueError, match=f"0x{ptr:x}.*device address"):
        util.ptr_to_bytes(ptr, 4)


def test_ptr_to_bytes_refuses_range_running_into_device_window() -> None:
    ptr = address.DEVICE_VA_BASE - 2
    with pytest.raises(ValueError, match=f"0x{ptr:x}.*device address"):
        util.ptr_to_bytes(ptr, 4)


def test_ptr_to_bytes_refuses_null_and_bad_pointers() -> None:
    with pytest.raises(ValueError, match="null pointer 0x0"):
        util.ptr_to_bytes(0, 4)
    with pytest.raises(ValueError, match="null pointer"):
        util.ptr_to_bytes(0, 0)
    with pytest.raises(ValueError, match="not a valid host address"):
        util.ptr_to_bytes(-8, 4)
    with pytest.raises(ValueError, match="not a valid host address"):
        util.ptr_to_bytes((1 << 64) - 2, 4)
    with pytest.raises(TypeError):
        util.ptr_to_bytes(1.5, 4)  # type: ignore[arg-type]


def test_ptr_to_numpy_refuses_device_and_null_pointer() -> None:
    refused = pytest.raises(ValueError, match=f"0x{DEV_PTR:x}.*device address")
    with pytest.warns(DeprecationWarning), refused:
        util.ptr_to_numpy(DEV_PTR, (4,), 11)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="null pointer 0x0"):
        util.ptr_to_numpy(0, (4,), 11)


# ---------------------------------------------------------------- numpy


def test_numpy_to_ptr_warns_and_returns_data_address() -> None:
    arr = np.arange(10, dtype=np.float32)
    with pytest.warns(DeprecationWarning, match="numpy_to_ptr"):
        ptr = util.numpy_to_ptr(arr)
    assert ptr == arr.ctypes.data
    assert util.ptr_to_bytes(ptr, arr.nbytes) == arr.tobytes()


def test_numpy_to_ptr_discontiguous_extra_warning() -> None:
    arr = np.arange(10, dtype=np.int16)[::2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ptr = util.numpy_to_ptr(arr)
    categories = [w.category for w in caught]
    assert DeprecationWarning in categories and UserWarning in categories
    assert ptr == arr.ctypes.data


def test_numpy_to_ptr_needs_ndarray() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="ndarray"):
        util.numpy_to_ptr([1, 2, 3])  # type: ignore[arg-type]


def test_numpy_contiguous_to_ptr() -> None:
    arr = np.arange(12, dtype=np.int32).reshape(3, 4)
    with pytest.warns(DeprecationWarning):
        ptr, same = util.numpy_contiguous_to_ptr(arr)
    assert same is arr and ptr == arr.ctypes.data

    strided = arr[:, ::2]
    with pytest.warns(DeprecationWarning):
        ptr, arr2 = util.numpy_contiguous_to_ptr(strided)
    assert arr2.flags.c_contiguous and ptr == arr2.ctypes.data
    np.testing.assert_array_equal(arr2, strided)
    assert util.ptr_to_bytes(ptr, arr2.nbytes) == strided.tobytes()

    scalar = np.array(3.5)
    with pytest.warns(DeprecationWarning):
        _, arr0 = util.numpy_contiguous_to_ptr(scalar)
    assert arr0.shape == ()


def test_ptr_to_numpy_views_memory() -> None:
    src = np.arange(6, dtype=np.float32)
    with pytest.warns(DeprecationWarning, match="ptr_to_numpy"):
        view = util.ptr_to_numpy(src.ctypes.data, (2, 3), 11)
    assert view.shape == (2, 3) and view.dtype == np.float32
    np.testing.assert_array_equal(view.ravel(), src)
    assert np.shares_memory(view, src)
    assert view.flags.writeable
    view[1, 2] = 42.0
    assert src[5] == 42.0
    src[0] = -1.0
    assert view[0, 0] == -1.0


def test_ptr_to_numpy_over_bytearray() -> None:
    buf = bytearray(16)
    with pytest.warns(DeprecationWarning):
        view = util.ptr_to_numpy(util.bytes_to_ptr(buf), (4,), 6)
    view[:] = [1, 2, 3, 0xFFFFFFFF]
    assert bytes(buf) == np.array([1, 2, 3, 0xFFFFFFFF], dtype=np.uint32).tobytes()


@pytest.mark.parametrize(
    ("code", "dtype"),
    [
        (0, np.bool_),
        (1, np.int8),
        (2, np.uint8),
        (3, np.int16),
        (4, np.uint16),
        (5, np.int32),
        (6, np.uint32),
        (7, np.int64),
        (8, np.uint64),
        (11, np.float32),
        (12, np.float64),
        (23, np.float16),
    ],
)
def test_ptr_to_numpy_type_codes(code: int, dtype: type) -> None:
    src = np.ones(4, dtype=dtype)
    with pytest.warns(DeprecationWarning):
        view = util.ptr_to_numpy(src.ctypes.data, (4,), code)
    assert view.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(view, src)
    assert np.shares_memory(view, src)


@pytest.mark.parametrize("code", [9, 10, 13, 22, 24, -1, 100])
def test_ptr_to_numpy_unknown_type_code(code: int) -> None:
    src = np.zeros(4, dtype=np.float64)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="npy_type"):
        util.ptr_to_numpy(src.ctypes.data, (4,), code)


def test_ptr_to_numpy_shapes() -> None:
    src = np.arange(4, dtype=np.int64)
    with pytest.warns(DeprecationWarning):
        scalar = util.ptr_to_numpy(src.ctypes.data, (), 7)
    assert scalar.shape == () and scalar[()] == 0
    with pytest.warns(DeprecationWarning):
        empty = util.ptr_to_numpy(src.ctypes.data, (0, 3), 7)
    assert empty.shape == (0, 3)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="negative"):
        util.ptr_to_numpy(src.ctypes.data, (-1,), 7)
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="tuple"):
        util.ptr_to_numpy(src.ctypes.data, [4], 7)  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="tuple"):
        util.ptr_to_numpy(src.ctypes.data, (2.0,), 7)  # type: ignore[arg-type]


# ---------------------------------------------------------------- threads


def test_start_stop_thread_runs_fn_with_args() -> None:
    seen: list[object] = []
    idents: list[int] = []

    def fn(args: object) -> None:
        idents.append(threading.get_ident())
        seen.append(args)

    tid, ret = util.start_thread(fn, [1, 2])
    assert ret == 0 and isinstance(tid, int) and tid > 0
    assert util.stop_thread(tid) == 0
    assert seen == [[1, 2]]
    assert idents == [tid]
    assert util.stop_thread(tid) == 100000  # already joined: unknown


def test_start_thread_none_args_calls_without_argument() -> None:
    called = threading.Event()
    tid, ret = util.start_thread(called.set, None)
    assert ret == 0
    assert util.stop_thread(tid) == 0
    assert called.is_set()


def test_stop_thread_waits_for_the_thread() -> None:
    done = threading.Event()

    def fn(delay: float) -> None:
        time.sleep(delay)
        done.set()

    tid, _ = util.start_thread(fn, 0.2)
    assert util.stop_thread(tid) == 0
    assert done.is_set()


def test_started_thread_is_daemon() -> None:
    release = threading.Event()
    tid, _ = util.start_thread(lambda _: release.wait(5), 0)
    try:
        thread = next(t for t in threading.enumerate() if t.ident == tid)
        assert thread.daemon
    finally:
        release.set()
        assert util.stop_thread(tid) == 0


def test_stop_thread_unknown_tid() -> None:
    assert util.stop_thread(123456789) == 100000


def test_stop_thread_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(util, "STOP_THREAD_TIMEOUT_S", 0.05)
    release = threading.Event()
    tid, _ = util.start_thread(lambda _: release.wait(5), 0)
    assert util.stop_thread(tid) == errno.ETIMEDOUT
    release.set()
    assert util.stop_thread(tid) == 0  # still registered after the timeout


def test_stop_thread_from_the_thread_itself() -> None:
    result: list[int] = []
    box: dict[str, int] = {}
    started = threading.Event()
    finished = threading.Event()

    def fn(_: object) -> None:
        started.wait(5)
        result.append(util.stop_thread(box["tid"]))
        finished.set()

    tid, _ = util.start_thread(fn, 0)
    box["tid"] = tid
    started.set()
    assert finished.wait(5)
    assert util.stop_thread(tid) == 0
    assert result == [errno.EDEADLK]


def test_thread_exception_surfaces_in_stop_thread(capsys: pytest.CaptureFixture[str]) -> None:
    def fn(_: object) -> None:
        raise KeyError("boom")

    tid, ret = util.start_thread(fn, 0)
    assert ret == 0
    with pytest.raises(RuntimeError, match="exception=KeyError,msg=thread call failed;"):
        util.stop_thread(tid)
    assert "KeyError" in capsys.readouterr().err
    assert util.stop_thread(tid) == 100000


def test_start_thread_needs_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        util.start_thread(42, None)  # type: ignore[arg-type]
