"""Integration tests of the Pythonic host API (``npuemu.host.Device`` and friends).

Every scenario runs in a fresh interpreter (``python -c``) with a 2-device, 1 GiB HBM,
256 MiB DDR embedded node that belongs to that child: the child's exit tears the node down.
Each child ends with ``done(**result)``, which prints one ``RESULT {json}`` line with its
pid and its node's processes; ``run`` then checks that nothing of that node is left in
/dev/shm and that its supervisor and workers are gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from npuemu.shared import shm

pytestmark = pytest.mark.integration

ENV_SIZES = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}
GIB = 1 << 30
# Settings a developer's shell may have that would change what a child attaches to (other
# NPUEMU_* variables, e.g. a test-session tag, are passed on).
SCRUBBED = ("NPUEMU_NODE", "NPUEMU_DEVICES", "NPUEMU_HBM", "NPUEMU_DDR", "NPUEMU_SOC",
            "ASCEND_RT_VISIBLE_DEVICES")

PRELUDE = """
import gc, json, os, sys, threading
import numpy as np
import pytest
import npuemu.host as host
from npuemu.host import (
    AclError,
    ContextError,
    Device,
    DeviceArray,
    DeviceBuffer,
    DeviceLostError,
    InvalidDeviceError,
    MemInfo,
    OutOfMemoryError,
    ParamError,
    ResourceError,
    current_device,
    device_count,
    retained_devices,
)
from npuemu.host import acl
from npuemu.host.core import runtime
from npuemu.shared.enums import DeviceStatus, MemAttr
from npuemu.tools import status as _status
GIB, MIB = 1 << 30, 1 << 20

def done(**result):
    rt = runtime._runtime
    node = rt.node if rt is not None else None
    result["_pid"] = os.getpid()
    if node is not None:
        info = _status.read_node(node.name)
        result["_node"] = node.name
        result["_pids"] = [info["supervisor_pid"]] + [
            d["pid"] for d in info["devices"] if d["pid"]]
    print("RESULT " + json.dumps(result), flush=True)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(ENV_SIZES)
    env.update(extra)
    return env


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def run(code: str, **env: str) -> dict:
    """Run PRELUDE + ``code`` in a child; returns its ``done()`` result after the leak check."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                          env=_env(**env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, f"no RESULT line:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(lines[0][len("RESULT "):])
    deadline = time.monotonic() + 10
    pids = result.get("_pids", [])
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.05)
    assert all(_gone(p) for p in pids), f"node processes left behind: {pids}"
    left = [e for e in shm.leftovers()
            if e.removeprefix("sem.").startswith(f"{shm.PREFIX}e{result['_pid']}-")]
    assert not left, f"left in /dev/shm: {left}"
    return result


# ------------------------------------------------------------------------------ import


def test_importing_the_package_is_cheap_and_starts_nothing() -> None:
    code = textwrap.dedent("""
        import json, os, sys
        import npuemu.host as pkg
        loaded = sorted(m for m in sys.modules if m.startswith("npuemu.host") or m == "numpy")
        from npuemu.shared import errors
        assert pkg.AclError is errors.AclError and pkg.OutOfMemoryError is errors.OutOfMemoryError
        from npuemu.host import acl                   # the submodule, not an AttributeError
        from npuemu.host import Device                # lazy attribute
        assert Device is sys.modules["npuemu.host.api"].Device and "Device" in dir(pkg)
        try:
            pkg.no_such_name
        except AttributeError:
            pass
        else:
            raise AssertionError("no AttributeError")
        print(json.dumps({"loaded": loaded, "all": pkg.__all__, "pid": os.getpid(),
                          "count": acl.rt.get_device_count(),
                          "node": str(sys.modules["npuemu.host.core.runtime"].get().node)}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["loaded"] == ["npuemu.host"]    # no numpy, no runtime, no acl
    assert result["count"] == [2, 0]
    assert result["node"] == "None"               # counting devices starts no node
    for name in ("Device", "DeviceArray", "DeviceBuffer", "device_count", "AclError",
                 "DeviceLostError", "OutOfMemoryError", "InvalidDeviceError"):
        assert name in result["all"]
    assert "acl" not in result["all"]
    assert not [e for e in shm.leftovers() if f"npuemu.e{result['pid']}-" in e]


def test_api_module_imports_before_and_after_acl_without_cycles() -> None:
    for first, second in (("npuemu.host.api", "npuemu.host.acl"),
                          ("npuemu.host.acl", "npuemu.host.api"),
                          ("npuemu.host.core.runtime", "npuemu.host.api")):
        code = f"import {first}, {second}; import npuemu.host; npuemu.host.Device"
        proc = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------------------ Device


def test_device_queries() -> None:
    result = run("""
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
    """)
    assert result["repr"] == "<npuemu.Device 0 Ascend910B1>"
    assert result["soc"] == "Ascend910B1"
    assert result["hbm"] == [GIB, GIB]
    assert result["ddr_total"] == 256 << 20
    assert (result["code"], result["name"]) == (107001, "ACL_ERROR_RT_INVALID_DEVICEID")
    assert result["current"] == "None"  # mem_info attached device 0 but bound no thread
    assert result["retained"] == [0]


def test_with_device_sets_resets_and_restores_the_previous_context() -> None:
    result = run("""
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

        with pytest.raises(KeyError):                  # an exception still resets
            with Device(0):
                raise KeyError
        assert 0 not in runtime.get().devices and acl.rt.get_device() == (1, 0)
        done(steps=steps, restored=restored)
    """)
    assert result["steps"] == [[0, 0], [1, 0], [0, 0], [1, 0], [0, 0], [-1, 107002]]
    assert result["restored"] == [1, 0]


def test_methods_make_their_device_current_only_for_the_call() -> None:
    result = run("""
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
        t.start(); t.join()
        done(same=same, buf_dev=buf.device.id, retained=retained_devices(),
             seen=[repr(seen["before"]), seen["data"].hex(), repr(seen["after"])])
    """)
    assert result["same"] == [0, 0]
    assert result["buf_dev"] == 1
    assert result["retained"] == [1]  # device 0 was reset by the with; device 1 kept
    assert result["seen"] == ["None", "03" * 16, "None"]


# ------------------------------------------------------------------------------ buffers


def test_buffer_copies_round_trip() -> None:
    result = run("""
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
        with pytest.raises(TypeError):
            a.copy_from_host(12)
        done(out1=out1 == payload, out2=out2 == payload[::-1], out3=out3,
             got=got[:8].tolist(), head=head, tail=tail.hex(), errors=errors, repr=repr(a))
    """)
    assert result["out1"] and result["out2"]
    assert result["out3"] == list(range(64))
    assert result["got"] == result["head"] == list(range(8))
    assert result["tail"] == "ab" * 256
    assert result["errors"] == ["ValueError"] * 7
    assert result["repr"].startswith("<npuemu.DeviceBuffer 256 bytes at 0x1")
    assert result["repr"].endswith(" on device 0>")


def test_buffer_free_is_idempotent_and_blocks_use_after_free() -> None:
    result = run("""
        dev = Device(0)
        total = dev.mem_info().total
        b = dev.malloc(4 * MIB)
        used = total - dev.mem_info().free
        b.free(); b.free()
        host.empty_cache()  # the caching allocator keeps freed blocks until asked
        after_free = dev.mem_info().free
        with pytest.raises(ParamError) as e:
            b.copy_from_host(b"x")
        with dev.malloc(MIB) as c:
            assert not c.freed
        assert c.freed
        d = dev.malloc(MIB); del d; gc.collect()                   # __del__ frees
        arr = DeviceArray.from_numpy(np.ones(1000)); arr.free(); arr.free()
        host.empty_cache()
        done(used=used, after=after_free, total=total, code=e.value.code,
             end=dev.mem_info().free, repr=repr(b), freed=[b.freed, arr.freed])
    """)
    assert result["used"] >= 4 << 20
    assert result["after"] == result["total"] == result["end"]
    assert result["code"] == 107000
    assert result["repr"].endswith(" freed>")
    assert result["freed"] == [True, True]


def test_buffer_outlived_by_reset_never_touches_a_later_allocation() -> None:
    result = run("""
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
    """)
    assert result["data"] == "02" * 64


# ------------------------------------------------------------------------------ errors


def test_errors_carry_their_acl_codes() -> None:
    result = run("""
        import npuemu.shared.errors as E
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
        ok = dev.malloc(GIB // 2)                            # still usable after OOM
        other = Device(1).malloc(64)
        with pytest.raises(ParamError) as e:                 # P2P without peer access
            other.copy_from(dev.malloc(64))
        codes["p2p"] = [e.value.code, e.value.name]
        done(codes=codes)
    """)
    codes = result["codes"]
    assert codes["malloc0"] == [100000, "ACL_ERROR_INVALID_PARAM"]
    assert codes["malloc-1"] == codes["mallocstr"] == codes["policy"] == codes["malloc0"]
    assert codes["oom"] == [207001, "ACL_ERROR_RT_MEMORY_ALLOCATION"]
    assert codes["oom_array"] == codes["oom"]
    assert codes["p2p"] == [107000, "ACL_ERROR_RT_PARAM_INVALID"]


def test_lost_device_raises_device_lost_and_free_stays_quiet() -> None:
    result = run("""
        import signal, time
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
    """)
    assert result["status"] == 1
    assert result["code"] == 507010
    assert result["freed"] is True


# ------------------------------------------------------------------------------ arrays


def test_device_array_round_trips() -> None:
    result = run("""
        rng = np.random.default_rng(0)
        samples = [rng.standard_normal((3, 5)).astype(np.float32),
                   np.arange(24, dtype=np.int64).reshape(2, 3, 4),
                   rng.standard_normal(7).astype(np.float16),
                   np.array([True, False, True]),
                   np.array(3.25),                                 # 0-d
                   np.zeros((0, 4), np.int32),                     # zero-size
                   (np.arange(12.0) + 1j).reshape(3, 4),
                   np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")]),
                   np.arange(100.0).reshape(10, 10).T[::2, 1:]]    # not contiguous
        same = []
        for x in samples:
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
    """)
    assert all(result["same"]), result["same"]
    assert result["a"] == [[5, 6], [7, 8]]
    assert result["bad"] == ["ValueError", "ValueError"]
    assert result["repr"].startswith("<npuemu.DeviceArray shape=(4, 4) dtype=uint16 device=1 ")
    assert " ptr=0x1" in result["repr"]
    assert result["has_array"] is False
    assert result["dev"] == [0, 1]
    assert result["buffer"] == [32, True]


def test_device_array_fill() -> None:
    result = run("""
        big = DeviceArray((1 << 19, 3), np.float32)          # 6 MiB: several 1 MiB chunks
        big.fill(1.5)                                        # staged through the host
        b = big.to_numpy()
        fills = [bool((b == 1.5).all())]
        big.fill(0)                                          # one memset
        fills.append(not big.to_numpy().any())
        ints = DeviceArray((5,), np.int16)
        ints.fill(-1); fills.append(ints.to_numpy().tolist() == [-1] * 5)
        ints.fill(258); fills.append(ints.to_numpy().tolist() == [258] * 5)
        DeviceArray((0,), np.float64).fill(2.0)              # nothing to do
        big.free()
        with pytest.raises(ParamError):
            big.fill(0)
        done(fills=fills)
    """)
    assert result["fills"] == [True] * 4


def test_device_array_default_device_and_implicit_attach() -> None:
    result = run("""
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
    """)
    assert result["first"] == [0, [0], "None"]
    assert result["b"] == 1 and result["c"] == 1
    assert result["released"] is True
    assert result["again"] == [0, 1]
    assert result["a2"] == [0, 1, 2, 3]


def test_forked_child_leaves_the_parents_memory_alone() -> None:
    result = run("""
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
                buf.free()                                   # inert in the child
                del buf; gc.collect()
            finally:
                os.write(w, bytes([code]))
                os._exit(0)
        os.waitpid(pid, 0)
        child = os.read(r, 1)[0]
        done(child=child, data=bytes(buf.copy_to_host()).hex(), freed=buf.freed)
    """)
    assert result["child"] == 0
    assert result["data"] == "07" * 64
    assert result["freed"] is False
