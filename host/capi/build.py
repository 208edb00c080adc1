"""Builds npuemu's C libraries (``libascendcl.so``, ``libhccl.so``) with cffi's embedding mode.

Each library is made from its headers alone: the headers are run through the C preprocessor
with ``NPUEMU_CDEF`` defined (no system headers, no visibility attributes), and every function
they declare becomes an exported symbol whose body enters the embedded interpreter
(``boot.py`` attaches the Python code; what npuemu does not emulate answers 207000 with a log
line). So a header cannot declare what the library does not export. A library's hot calls
(``Library.hot``) are written in C (``native.c``); cffi's body of each is renamed
``npuemu_py_<name>``, which the C one calls for what it does not handle itself.

The error-code headers are generated here from ``npuemu.shared.errors`` (one table for both
ABIs). Nothing built is committed: ``npuemu sdk`` builds into the SDK tree (``sdk.py``).
Building blocks for a few seconds (the system C compiler); nothing here starts a device.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from npuemu.host.hccl.types import HcclResult
from npuemu.shared import errors

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include"


@dataclass(frozen=True)
class Library:
    """One shared library: its file name, the headers it exports and extra C code."""

    soname: str
    module: str  # cffi's module name inside the library
    headers: tuple[str, ...]
    defines: tuple[str, ...] = ()
    prelude: str = ""  # C defined before its headers are included
    hot: tuple[str, ...] = ()  # calls written in native.c (cffi's body: npuemu_py_<name>)


ASCENDCL = Library("libascendcl.so", "_npuemu_ascendcl",
                   ("acl/acl.h", "acl/acl_op_compiler.h", "acl/acl_prof.h"),
                   ("NPUEMU_HAS_APP_LOG", "NPUEMU_HOT_CALLS"),
                   hot=("aclrtMalloc", "aclrtFree", "aclrtLaunchKernel",
                        "aclrtSynchronizeStream"))
HCCL = Library("libhccl.so", "_npuemu_hccl", ("hccl/hccl.h",))
DVPP = Library("libacl_dvpp.so", "_npuemu_acl_dvpp", ("acl/ops/acl_dvpp.h",),
               prelude="#define ENABLE_DVPP_INTERFACE 1\n")
LIBRARIES = (ASCENDCL, HCCL, DVPP)

_CODE_HEADERS = {
    "acl_error_codes.h": lambda n: not n.startswith(("ACL_ERROR_RT_", "ACL_ERROR_GE_")),
    "rt_error_codes.h": lambda n: n.startswith("ACL_ERROR_RT_"),
    "ge_error_codes.h": lambda n: n.startswith("ACL_ERROR_GE_"),
}


def error_code_headers() -> dict[str, str]:
    """``acl/error_codes/<file>`` -> text: every code of ``npuemu.shared.errors`` as the
    ``static const int32_t`` constants CANN's headers define (ACL layer, runtime, graph)."""
    codes = {n: v for n, v in vars(errors).items()
             if n.startswith("ACL_") and type(v) is int}
    out = {}
    for fname, keep in _CODE_HEADERS.items():
        guard = "NPUEMU_" + fname.replace(".", "_").upper() + "_"
        lines = [f"/* npuemu C ABI: {fname}, generated from npuemu's error table. */",
                 f"#ifndef {guard}", f"#define {guard}", "#ifndef NPUEMU_CDEF",
                 "#include <stdint.h>", "#endif", ""]
        lines += [f"static const int32_t {n} = {v};"
                  for n, v in sorted(codes.items(), key=lambda kv: (kv[1], kv[0])) if keep(n)]
        out[fname] = "\n".join([*lines, "", f"#endif /* {guard} */", ""])
    return out


def write_includes(dest: Path) -> None:
    """The header tree (``acl/``, ``hccl/``) with the generated code headers, into ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(INCLUDE, dest)
    codes = dest / "acl" / "error_codes"
    codes.mkdir(parents=True, exist_ok=True)
    for fname, text in error_code_headers().items():
        (codes / fname).write_text(text)


def source_digest() -> str:
    """What a built library depends on: npuemu's version, the Python it embeds, the headers,
    the C code and this module; a change of any of these rebuilds the SDK."""
    from npuemu import __version__

    h = hashlib.sha256(f"{__version__}\0{python_executable()}\0".encode())
    for path in [*sorted(INCLUDE.rglob("*.h")), HERE / "native.c", HERE / "sdk.py",
                 Path(__file__)]:
        h.update(path.relative_to(HERE).as_posix().encode() + b"\0" + path.read_bytes())
    for text in error_code_headers().values():
        h.update(text.encode())
    return h.hexdigest()[:16]


def python_executable() -> str:
    """The interpreter the libraries embed and spawn nodes with (not a C program's path):
    the building one, as it names itself (a virtual environment's ``bin/python`` stays one)."""
    return os.path.abspath(sys.executable)


_STATIC_CONST = re.compile(r"^\s*static\s+const\b.*;\s*$", re.MULTILINE)


def cdef_of(lib: Library, include: Path) -> str:
    """The declarations of ``lib``'s headers as cffi reads them: preprocessed with
    ``NPUEMU_CDEF``, without the ``static const`` codes (constants are C's business)."""
    probe = "".join(f'#include "{h}"\n' for h in lib.headers)
    out = subprocess.run(["cc", "-E", "-P", "-DNPUEMU_CDEF", "-I", str(include), "-x", "c",
                          "-"], input=probe, capture_output=True, text=True, check=True)
    return _STATIC_CONST.sub("", out.stdout)


def renamed_hot(lib: Library, cdef: str) -> str:
    """``cdef`` with each of ``lib``'s hot calls declared as ``npuemu_py_<name>`` (cffi's
    body, which native.c's function of the real name calls when it cannot go straight on)."""
    for name in lib.hot:
        cdef, count = re.subn(rf"\b{name}\s*\(", f"npuemu_py_{name}(", cdef)
        if count != 1:
            raise RuntimeError(f"{lib.soname}: {name} is declared {count} times")
    return cdef


_INIT = """\
import sys
sys.path[:0] = [p for p in {paths!r} if p not in sys.path]
from {module} import ffi, lib
try:
    from npuemu.host.capi import boot
    boot.attach({soname!r}, ffi, lib, {python!r})
except BaseException:
    import traceback
    traceback.print_exc()
    sys.stderr.write("npuemu: {soname} could not start its runtime (above); every call "
                     "fails with {code}\\n")
    for _name in dir(lib):
        _fn = getattr(lib, _name)
        if callable(_fn) and (not _name.startswith("npuemu_")
                              or _name.startswith("npuemu_py_")):
            _res = ffi.typeof(_fn).result
            _value = ({code} if _res.cname == "int" or ({hccl} and _res.kind == "enum")
                      else -1 if _res.kind == "enum" else None if _res.kind in
                      ("pointer", "void") else 0)
            try:
                ffi.def_extern(name=_name)(lambda *_a, _v=_value: _v)
            except Exception:
                pass
"""


def _python_paths() -> list[str]:
    """The building Python's standard library and site folders (not the folder it was
    started from, nor a test run's own paths): put first on the embedded interpreter's path."""
    roots = tuple(os.path.realpath(r) + os.sep for r in {sys.prefix, sys.base_prefix})
    return [p for p in sys.path if p and os.path.isdir(p)
            and ((os.path.realpath(p) + os.sep).startswith(roots) or "site-packages" in p)]


def _init_code(lib: Library) -> str:
    """What the library runs when the program's first call starts the interpreter; if npuemu
    cannot start (not importable by the building Python any more), every call fails with
    ACL_ERROR_INTERNAL_ERROR (HCCL_E_INTERNAL) rather than cffi's default of 0 (success)."""
    hccl = lib is HCCL
    return _INIT.format(paths=_python_paths(), module=lib.module, soname=lib.soname,
                        python=python_executable(), hccl=hccl,
                        code=int(HcclResult.HCCL_E_INTERNAL) if hccl
                        else errors.ACL_ERROR_INTERNAL_ERROR)


def _c_string(text: str) -> str:
    """``text`` (UTF-8) as a C string literal: plain characters as they are, every other byte
    as an octal escape."""
    plain = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+ ")
    return '"' + "".join(chr(b) if b in plain else f"\\{b:03o}" for b in text.encode()) + '"'


def build(lib: Library, include: Path, out_dir: Path, *, verbose: bool = False) -> Path:
    """Compile ``lib`` against the header tree ``include`` into ``out_dir/<soname>``
    (built in a temporary folder, then moved in place: a concurrent reader never sees half
    a file)."""
    import cffi

    ffi = cffi.FFI()
    ffi.embedding_api(renamed_hot(lib, cdef_of(lib, include)))
    ffi.cdef("int npuemu_host_is_python(void);")  # native.c
    if lib.hot:
        ffi.cdef("int npuemu_bind_hot(void);")  # native.c
    if lib.defines:
        ffi.cdef('extern "Python" void npuemu_app_log(int, const char *, const char *,'
                 ' uint32_t, const char *);')
    includes = "".join(f'#include "{h}"\n' for h in lib.headers)
    defines = "".join(f"#define {d} 1\n" for d in lib.defines)
    defines += f"#define NPUEMU_PYTHON {_c_string(python_executable())}\n"
    native = (HERE / "native.c").read_text()
    ffi.set_source(lib.module, lib.prelude + includes + defines + native,
                   include_dirs=[str(include)],
                   extra_link_args=[f"-Wl,-soname,{lib.soname}", "-lpthread"])
    ffi.embedding_init_code(_init_code(lib))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="npuemu-capi-") as tmp:
        built = ffi.compile(tmpdir=tmp, target=lib.soname, verbose=verbose)
        final = out_dir / lib.soname
        os.replace(built, final)
    return final
