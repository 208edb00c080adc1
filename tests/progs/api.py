"""Child program of ``tests/integration/test_api.py``: scenarios of the Pythonic host API
(``npuemu.host.Device``, ``DeviceBuffer``, ``DeviceArray`` and the errors they raise, which
mirror ``aclrtSetDevice``/``aclrtResetDevice``, ``aclrtMalloc``/``aclrtFree``,
``aclrtMemcpy``/``aclrtMemset`` and ``aclrtGetMemInfo``).

``python api.py SCENARIO`` runs one scenario. It does not install the top-level ``acl``
module (the API needs none). A scenario checks what it can with ``pytest.raises`` and ends
with ``done(**result)``, which prints one ``RESULT {json}`` line with the child's pid and
its node's processes, so the test can check that nothing of that node is left.
"""

import gc
import json
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

import npuemu.host as host
import npuemu.shared.errors as E
from npuemu.host import (
    AclError,
    Device,
    DeviceArray,
    DeviceBuffer,
    DeviceLostError,
    InvalidDeviceError,
    MemInfo,
    OutOfMemoryError,
    ParamError,
    ResourceError,
    acl,
    current_device,
    device_count,
    retained_devices,
)
from npuemu.host.core import runtime
from npuemu.shared.enums import DeviceStatus, MemAttr
from npuemu.tools import status as _status

GIB, MIB = 1 << 30, 1 << 20
SCENARIOS = {}


def scenario(fn):
    """Register ``fn`` as a scenario run by its name."""
    SCENARIOS[fn.__name__] = fn
    return fn


def done(**result):
    """Print ``result`` with this pid, the node's name and its processes' pids."""
    rt = runtime._runtime
    node = rt.node if rt is not None else None
    result["_pid"] = os.getpid()
    if node is not None:
        info = _status.read_node(node.name)
        result["_node"] = node.name
        result["_pids"] = [info["supervisor_pid"]] + [
            d["pid"] for d in info["devices"] if d["pid"]]
    print("RESULT " + json.dumps(result), flush=True)


# ------------------------------------------------------------------------------ Device
@scenario
def device_queries():
    """Device identity, memory info, status, an invalid id, a wrong type."""
    assert device_count() == 2 and current_device() is None
    d = Device(0)
    assert d.id == 0 and d == Device(0) and d != Device(1) and hash(d) == hash(Device(0))
    assert Device(d) == d and Device(np.int64(1)).id == 1
    info = d.mem_info()
    assert isinstance(info, MemInfo) and info == (info.free, info.total)
    ddr = d.mem_info(MemAttr.ACL_DDR_MEM)
    assert d.status() is DeviceStatus.ACL_RT_DEVICE_STATUS_NORMAL
    d.synchronize()
    with pytest.raises(InvalidDeviceError) as e:
        Device(2)
    with pytest.raises(TypeError):
        Device("0")
    done(repr=repr(d), soc=d.soc_name, hbm=list(info), ddr_total=ddr.total,
         code=e.value.code, name=e.value.name, current=repr(current_device()),
         retained=retained_devices())


@scenario
def with_device():
    """Nested ``with Device``: set, reset and the previous context restored."""
    steps = []
    with Device(0) as d0:
        steps.append(acl.rt.get_device())
        with Device(1):
            steps.append(acl.rt.get_device())
            with Device(0):                       # nested: reference count 2
                steps.append(acl.rt.get_device())
            steps.append(acl.rt.get_device())
        steps.append(acl.rt.get_device())
        assert 0 in runtime.get().devices and current_device() == d0
    steps.append(acl.rt.get_device())              # no context any more: 107002
    assert runtime.get().devices == {}             # both reset to 0 references

    assert acl.rt.set_device(1) == 0               # a context set through acl ...
    with Device(0):
        pass
    restored = acl.rt.get_device()                 # ... is current again afterwards

    with pytest.raises(KeyError), Device(0):       # an exception still resets
        raise KeyError
    assert 0 not in runtime.get().devices and acl.rt.get_device() == (1, 0)
    done(steps=steps, restored=restored)


@scenario
def methods_current():
    """Methods of another device, and of a thread without one, bind nothing lasting."""
    with Device(0):
        buf = Device(1).malloc(64)                 # device 1: retained implicitly
        Device(1).mem_info()
        same = acl.rt.get_device()
    seen = {}

    def worker():
        seen["before"] = current_device()
        b = DeviceBuffer(1, 16)
        b.fill(3)
        seen["data"] = bytes(b.copy_to_host())
        seen["after"] = current_device()
        b.free()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    done(same=same, buf_dev=buf.device.id, retained=retained_devices(),
         seen=[repr(seen["before"]), seen["data"].hex(), repr(seen["after"])])


# ------------------------------------------------------------------------------ buffers
def buffer_errors(a, b):
    """The ValueErrors of bad copies and fills of a 256-byte ``a`` (``b``: 512 bytes)."""
    errors = []
    for call in (lambda: a.copy_from_host(b"x" * 257),        # too big
                 lambda: a.copy_from_host(np.zeros((8, 8), np.int32)[:, ::2]),
                 lambda: a.copy_to_host(bytearray(255)),        # too small
                 lambda: a.copy_to_host(b"x" * 256),            # read-only
                 lambda: a.fill(256), lambda: a.fill(-1),
                 lambda: a.copy_from(b)):                       # 512 into 256
        with pytest.raises(ValueError) as e:
            call()
        errors.append(type(e.value).__name__)
    return errors


@scenario
def buffer_copies():
    """Buffers filled from bytes, bytearray, ndarray and memoryview, and read back."""
    dev = Device(0)
    a, b = dev.malloc(256), dev.malloc(512, policy=0)
    assert (a.nbytes, b.nbytes, a.device, a.ptr != b.ptr) == (256, 512, dev, True)
    payload = bytes(range(256))
    a.copy_from_host(payload)
    out1 = bytes(a.copy_to_host())
    a.copy_from_host(bytearray(payload[::-1]))
    out2 = bytes(a.copy_to_host())
    a.copy_from_host(np.arange(64, dtype=np.int32))           # ndarray, 256 bytes
    out3 = np.frombuffer(a.copy_to_host(), np.int32).tolist()
    a.copy_from_host(memoryview(np.arange(8, dtype=np.int64).reshape(2, 4)))
    got = np.zeros(32, np.int64)
    assert a.copy_to_host(got) is got                          # into `out`
    b.fill(0xAB)
    b.copy_from(a)                                             # D2D into the start
    tail = bytes(b.copy_to_host())[256:]
    head = np.frombuffer(b.copy_to_host(), np.int64)[:8].tolist()
    errors = buffer_errors(a, b)
    with pytest.raises(TypeError):
        a.copy_from_host(12)
    done(out1=out1 == payload, out2=out2 == payload[::-1], out3=out3,
         got=got[:8].tolist(), head=head, tail=tail.hex(), errors=errors, repr=repr(a))


@scenario
def buffer_free():
    """free twice, use after free, ``with`` and ``__del__`` freeing, the cache emptied."""
    dev = Device(0)
    total = dev.mem_info().total
    b = dev.malloc(4 * MIB)
    used = total - dev.mem_info().free
    b.free()
    b.free()
    host.empty_cache()  # the caching allocator keeps freed blocks until asked
    after_free = dev.mem_info().free
    with pytest.raises(ParamError) as e:
        b.copy_from_host(b"x")
    with dev.malloc(MIB) as c:
        assert not c.freed
    assert c.freed
    d = dev.malloc(MIB)
    del d
    gc.collect()                                               # __del__ frees
    arr = DeviceArray.from_numpy(np.ones(1000))
    arr.free()
    arr.free()
    host.empty_cache()
    done(used=used, after=after_free, total=total, code=e.value.code,
         end=dev.mem_info().free, repr=repr(b), freed=[b.freed, arr.freed])


@scenario
def outlived_by_reset():
    """A buffer released by a reset, freed and used after its address was reused."""
    with Device(0) as dev:
        old = dev.malloc(64)
        old.fill(1)
    assert old.freed                                    # reset released it
    with Device(0) as dev:
        new = dev.malloc(64)                            # may reuse the address
        new.fill(2)
        same_ptr = new.ptr == old.ptr
        old.free()                                      # must not free `new`
        with pytest.raises(ParamError):
            old.copy_from_host(b"x" * 64)
        with pytest.raises(ParamError):
            new.copy_from(old)
        data = bytes(new.copy_to_host())
        assert not new.freed
    done(same_ptr=same_ptr, data=data.hex())


# ------------------------------------------------------------------------------ errors
@scenario
def error_codes():
    """Bad mallocs, out of memory, a copy between cards without peer access."""
    assert host.AclError is E.AclError and host.OutOfMemoryError is E.OutOfMemoryError
    assert host.DeviceLostError is E.DeviceLostError
    dev = Device(0)
    codes = {}
    for label, call in (("malloc0", lambda: dev.malloc(0)),
                        ("malloc-1", lambda: dev.malloc(-1)),
                        ("mallocstr", lambda: dev.malloc("8")),
                        ("policy", lambda: dev.malloc(8, policy=-1))):
        with pytest.raises(ParamError) as e:
            call()
        codes[label] = [e.value.code, e.value.name]
    with pytest.raises(AclError) as e:
        dev.malloc(2 * GIB)
    assert isinstance(e.value, OutOfMemoryError)
    codes["oom"] = [e.value.code, e.value.name]
    with pytest.raises(OutOfMemoryError) as e:
        DeviceArray((GIB // 2 + 1,), np.float32, device=dev)
    codes["oom_array"] = [e.value.code, e.value.name]
    _kept = dev.malloc(GIB // 2)                         # still usable after OOM
    other = Device(1).malloc(64)
    with pytest.raises(ParamError) as e:                 # P2P without peer access
        other.copy_from(dev.malloc(64))
    codes["p2p"] = [e.value.code, e.value.name]
    done(codes=codes)


@scenario
def lost_device():
    """Device 0's worker killed: DeviceLostError, a quiet free, device 1 unaffected."""
    dev = Device(0)
    buf = dev.malloc(64)
    worker = _status.read_node(runtime.get().node.name)["devices"][0]["pid"]
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while dev.status() is DeviceStatus.ACL_RT_DEVICE_STATUS_NORMAL:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(DeviceLostError) as e:
        buf.copy_from_host(b"x" * 64)
    buf.free()                                   # no exception: the memory is gone
    with pytest.raises(DeviceLostError):
        dev.mem_info()
    alive = Device(1).malloc(8)                  # the other device is unaffected
    alive.fill(1)
    done(status=int(dev.status()), code=e.value.code, freed=buf.freed)


# ------------------------------------------------------------------------------ arrays
def array_samples():
    """Arrays of many dtypes and layouts (0-d, zero-size, structured, not contiguous)."""
    rng = np.random.default_rng(0)
    return [rng.standard_normal((3, 5)).astype(np.float32),
            np.arange(24, dtype=np.int64).reshape(2, 3, 4),
            rng.standard_normal(7).astype(np.float16),
            np.array([True, False, True]),
            np.array(3.25),                                 # 0-d
            np.zeros((0, 4), np.int32),                     # zero-size
            (np.arange(12.0) + 1j).reshape(3, 4),
            np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")]),
            np.arange(100.0).reshape(10, 10).T[::2, 1:]]    # not contiguous


@scenario
def array_round_trips():
    """DeviceArray.from_numpy / to_numpy of every sample; bad shapes and dtypes."""
    same = []
    for x in array_samples():
        d = DeviceArray.from_numpy(x)
        y = d.to_numpy()
        same.append(y.shape == x.shape and y.dtype == x.dtype and np.array_equal(y, x)
                    and y.flags.c_contiguous and d.nbytes == x.nbytes)
    a = DeviceArray.from_numpy([[1, 2], [3, 4]])                  # array-like
    a.copy_from_numpy(np.array([[5, 6], [7, 8]], dtype=a.dtype))
    bad = []
    for arr in (np.zeros((2, 3), a.dtype), np.zeros((2, 2), np.float32)):
        with pytest.raises(ValueError):
            a.copy_from_numpy(arr)
        bad.append("ValueError")
    with pytest.raises(TypeError):
        DeviceArray.from_numpy(np.array([object()]))
    with pytest.raises(ValueError):
        Device(0).array((2, -1), np.float32)
    e = Device(1).array((4, 4), np.uint16)
    assert (e.shape, e.dtype, e.ndim, e.size, e.nbytes) == ((4, 4), np.uint16, 2, 16, 32)
    done(same=same, a=a.to_numpy().tolist(), bad=bad, repr=repr(e),
         has_array=hasattr(DeviceArray, "__array__"), dev=[a.device.id, e.device.id],
         buffer=[e.buffer.nbytes, e.ptr == e.buffer.ptr])


@scenario
def array_fill():
    """DeviceArray.fill of floats (staged), zero (a memset), ints, an empty array."""
    big = DeviceArray((1 << 19, 3), np.float32)          # 6 MiB: several 1 MiB chunks
    big.fill(1.5)                                        # staged through the host
    b = big.to_numpy()
    fills = [bool((b == 1.5).all())]
    big.fill(0)                                          # one memset
    fills.append(not big.to_numpy().any())
    ints = DeviceArray((5,), np.int16)
    ints.fill(-1)
    fills.append(ints.to_numpy().tolist() == [-1] * 5)
    ints.fill(258)
    fills.append(ints.to_numpy().tolist() == [258] * 5)
    DeviceArray((0,), np.float64).fill(2.0)              # nothing to do
    big.free()
    with pytest.raises(ParamError):
        big.fill(0)
    done(fills=fills)


@scenario
def array_default_device():
    """Arrays on the default device, the thread's device, an explicit one; re-attach."""
    a = DeviceArray.from_numpy(np.arange(4))             # no current device: device 0
    first = [a.device.id, retained_devices(), repr(current_device())]
    with Device(1):
        b = DeviceArray.from_numpy(np.arange(4))         # the thread's current device
    c = DeviceArray.from_numpy(np.arange(4), device=1)   # explicit; re-attaches 1
    assert b.freed and not c.freed
    assert acl.rt.reset_device(0) == 0                   # the acl face releases it ...
    released = a.freed
    a2 = DeviceArray.from_numpy(np.arange(4))            # ... and it is attached again
    done(first=first, b=b.device.id, c=c.device.id, released=released,
         again=retained_devices(), a2=a2.to_numpy().tolist())


@scenario
def fork():
    """A forked child touches the parent's buffer (207000), frees it and drops its last
    reference (both inert in the child); the parent's data stays."""
    buf = Device(0).malloc(64)
    buf.fill(7)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                buf.copy_from_host(b"x" * 64)
            except ResourceError as e:
                code = 0 if e.code == 207000 else 2
            buf.free()                               # inert in the child
            del buf
            gc.collect()
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(r, 1)[0]
    done(child=child, data=bytes(buf.copy_to_host()).hex(), freed=buf.freed)


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
