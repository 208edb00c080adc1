"""The C ABI's runtime calls from C programs compiled against the SDK tree: memory
management, bad handles, the headers under the samples' compiler flags, every declared
function exported, enum values as the Python face's, not-emulated calls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from npuemu.shared import enums
from tests.cabi.conftest import PROGS

pytestmark = pytest.mark.integration


def test_memory_program(compile_c, run_c):
    res = run_c(compile_c("memory.c"))
    assert res.returncode == 0, res.stdout + res.stderr
    for line in ("policies ok", "copies ok", "info ok", "memory program done"):
        assert line in res.stdout


def test_seed_examples(compile_c, run_c, sdk_root):
    """Copy/compute overlap with events, synchronize with timeout, memory usage info, stream
    and event flags (tests/cabi/progs/seed.c)."""
    res = run_c(compile_c("seed.c"), str(sdk_root / "kernels" / "npuemu_library.py"),
                str(PROGS / "boom_kernels.py"))
    assert res.returncode == 0, res.stdout + res.stderr
    for line in ("overlap ok", "sync with timeout ok", "mem usage ok",
                 "stream and event flags ok", "seed examples done"):
        assert line in res.stdout


def test_bad_handles_get_the_runtime_codes(compile_c, run_c):
    res = run_c(compile_c("bad_handles.c"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "bad handles done" in res.stdout
    assert "code aclrtFree(host) = 107000" in res.stdout
    assert "junk descriptors, buffers, models and handles refused" in res.stdout


def test_not_emulated_call_answers_207000_with_a_log_line(compile_c, run_c, tmp_path):
    logs = tmp_path / "logs"
    res = run_c(compile_c("not_emulated.c"), env={"ASCEND_PROCESS_LOG_PATH": str(logs)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "aclGetCannAttribute is not emulated" in res.stdout
    text = "".join(p.read_text() for p in logs.rglob("*.log"))
    assert "aclGetCannAttribute is not emulated by npuemu" in text


HEADER_FLAGS = [
    ("headers.cpp", ["-std=c++11", "-Wall"]),
    ("headers.cpp", ["-std=c++14", "-Werror", "-fstack-protector-strong", "-fPIE", "-pie",
                     "-O2", "-s", "-Wl,-z,relro", "-Wl,-z,now", "-Wl,-z,noexecstack",
                     "-Wl,--copy-dt-needed-entries"]),
    ("headers.cpp", ["-std=c++17", "-Wall", "-Werror", "-D_GLIBCXX_USE_CXX11_ABI=0"]),
    ("headers_c.c", ["-std=c99", "-Wall", "-Werror", "-pedantic-errors"]),
]


@pytest.mark.parametrize(("src", "flags"), HEADER_FLAGS,
                         ids=["cxx11", "hccl-example", "cxx17-old-abi", "c99"])
@pytest.mark.parametrize("layout", ["include", "runtime/include"])
def test_headers_compile_silently(sdk_root, tmp_path, src, flags, layout):
    """The samples' include and link paths: T/include + T/lib64, or T/runtime/include +
    T/runtime/lib64/stub (NPU_HOST_LIB) with -lacl_op_compiler."""
    lib = "lib64" if layout == "include" else "runtime/lib64/stub"
    cc = "g++" if src.endswith(".cpp") else "gcc"
    exe = tmp_path / "a.out"
    cmd = [cc, *flags, str(Path(__file__).parent / "progs" / src), f"-I{sdk_root}/{layout}",
           f"-L{sdk_root}/{lib}", "-lascendcl", "-lacl_op_compiler", "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and not res.stderr, res.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                         env={"LD_LIBRARY_PATH": f"{sdk_root}/lib64"})
    assert run.returncode == 0, run.stdout + run.stderr


def _declared_functions(sdk_root: Path, lib) -> set[str]:
    import cffi

    from npuemu.host.capi import build

    ffi = cffi.FFI()
    ffi.cdef(build.cdef_of(lib, sdk_root / "include"))
    return {name.split(" ", 1)[1] for name in ffi._parser._declarations
            if name.startswith("function ")}


def _exported(path: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if " T " in line}


def test_every_declared_function_is_exported(sdk_root):
    from npuemu.host.capi import build

    declared = _declared_functions(sdk_root, build.ASCENDCL)
    exported = _exported(sdk_root / "lib64/libascendcl.so")
    assert len(declared) > 100
    assert declared - exported == set()
    assert "aclAppLog" in exported  # the variadic one, written in C
    hccl = _declared_functions(sdk_root, build.HCCL)
    hccl_exported = _exported(sdk_root / "lib64/libhccl.so")
    assert {"HcclScatter", "HcclBarrier", "HcclAlltoAllV", "HcclReduce",
            "HcclCommInitRootInfoConfig"} <= hccl <= hccl_exported
    assert not any(n.startswith("acl") for n in hccl_exported)  # those are libascendcl's


def test_header_enums_have_the_python_face_values(sdk_root):
    import cffi

    from npuemu.host.capi import build

    ffi = cffi.FFI()
    ffi.cdef(build.cdef_of(build.ASCENDCL, sdk_root / "include"))
    consts = ffi._parser._int_constants
    checked = 0
    for cls in vars(enums).values():
        if not (isinstance(cls, type) and issubclass(cls, int)
                and cls.__module__ == enums.__name__):
            continue
        for name, member in cls.__members__.items():
            if name in consts:
                assert consts[name] == int(member), f"{cls.__name__}.{name}"
                checked += 1
    assert checked > 100


def test_error_code_headers_hold_the_shared_table(sdk_root):
    from npuemu.shared import errors

    text = (sdk_root / "include/acl/error_codes/rt_error_codes.h").read_text()
    assert f"ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = {errors.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT};" in text
    base = (sdk_root / "include/acl/error_codes/acl_error_codes.h").read_text()
    assert "static const int32_t ACL_ERROR_NONE = 0;" in base


def test_profiling_program(compile_c, run_c, tmp_path):
    res = run_c(compile_c("prof.c"), cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "prof program done" in res.stdout
    runs = list((tmp_path / "output").glob("PROF_*"))
    assert len(runs) == 1, list((tmp_path / "output").iterdir())
    assert (runs[0] / "mindstudio_profiler_output").is_dir()


def test_pools_virtual_memory_and_shareable_handles(compile_c, run_c):
    res = run_c(compile_c("vmm.c"), env={"NPUEMU_DEVICES": "2"})
    assert res.returncode == 0, res.stdout + res.stderr
    for line in ("pool ok", "virtual memory ok", "peer status 0", "vmm program done"):
        assert line in res.stdout


@pytest.mark.parametrize("text", ["{}", '{"profiler": {"switch": "on"}}',
                                  '{"dump": {"dump_list": [], "dump_path": "./dump"}}'])
def test_acl_init_with_the_samples_config_files(compile_c, run_c, tmp_path, text):
    (tmp_path / "acl.json").write_text(text)
    res = run_c(compile_c("init_config.c"), "acl.json", cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "aclInit -> 0" in res.stdout
