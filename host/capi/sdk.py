"""A toolkit tree shaped like a CANN install, holding npuemu's C headers and libraries.

``ensure(prefix)`` writes (T = ``prefix``)::

    T/include/acl/{acl.h, acl_base.h, acl_rt.h, acl_op.h, acl_op_compiler.h, acl_mdl.h,
                   acl_prof.h, ops/acl_cblas.h, ops/acl_dvpp.h, error_codes/*.h}
    T/include/hccl/{hccl.h, hccl_types.h}
    T/lib64/libascendcl.so (+ libhccl.so, libacl_dvpp.so)   the libraries (cffi embedding)
    T/lib64/{libacl_op_compiler.so, libacl_rt.so, libmsprofiler.so, libprofapi.so}
                                        small libraries that load libascendcl.so, which
                                        exports all of their calls (CMakeLists name them)
    T/lib64/stub/*.so                   the same libraries, for -L .../stub link lines
    T/runtime/{include, lib64}, T/compiler/{include, lib64}   links to the above
    T/set_env.sh, T/bin/setenv.bash     the environment (see ``SET_ENV``)
    T/bin/atc                           runs ``npuemu atc``
    T/kernels/npuemu_library.py         the ready kernel library (aclrtBinaryLoadFromFile)
    T/.npuemu-sdk                       what the tree was built from (``build.source_digest``)

It is idempotent: a tree whose stamp matches is left as it is; otherwise (another npuemu
version, other headers or C code, another Python) it is rebuilt. The default prefix is per
user: ``$NPUEMU_SDK_HOME``, else ``$XDG_CACHE_HOME/npuemu/sdk`` (``~/.cache/npuemu/sdk``).
Building takes a few seconds (the system C compiler); a lock file keeps two builds of one
prefix apart.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from npuemu.host.capi import build

STAMP = ".npuemu-sdk"
SHIMS = ("libacl_op_compiler.so", "libacl_rt.so", "libmsprofiler.so", "libprofapi.so")

SET_ENV = """\
# npuemu's toolkit environment, as CANN's set_env.sh gives it: source it (. {root}/set_env.sh).
# Safe under `set -eu`. DDK_PATH and NPU_HOST_LIB (the samples' build variables) are set
# only when unset.
export ASCEND_TOOLKIT_HOME="{root}"
export ASCEND_HOME_PATH="{root}"
export ASCEND_OPP_PATH="{root}/opp"
export ASCEND_AICPU_PATH="{root}"
export TOOLCHAIN_HOME="{root}/toolkit"
export DDK_PATH="${{DDK_PATH:-{root}}}"
export NPU_HOST_LIB="${{NPU_HOST_LIB:-{root}/runtime/lib64/stub}}"
case ":${{LD_LIBRARY_PATH:-}}:" in
    *":{root}/lib64:"*) ;;
    *) export LD_LIBRARY_PATH="{root}/lib64${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}" ;;
esac
case ":${{PATH:-}}:" in
    *":{root}/bin:"*) ;;
    *) export PATH="{root}/bin${{PATH:+:${{PATH}}}}" ;;
esac
"""

ATC = """\
#!/bin/sh
# atc of the npuemu toolkit: npuemu's model and single-op converter
exec "{python}" -m npuemu.tools.cli atc "$@"
"""


def default_prefix() -> Path:
    """The per-user SDK location (``$NPUEMU_SDK_HOME`` or the user's cache folder)."""
    if os.environ.get("NPUEMU_SDK_HOME"):
        return Path(os.environ["NPUEMU_SDK_HOME"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "npuemu" / "sdk"


def is_current(prefix: Path) -> bool:
    stamp = prefix / STAMP
    return stamp.is_file() and stamp.read_text().strip() == build.source_digest()


def ensure(prefix: Path | None = None, *, force: bool = False, verbose: bool = False) -> Path:
    """The SDK tree at ``prefix`` (default ``default_prefix()``), built if missing or stale."""
    root = (prefix or default_prefix()).resolve()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if force or not is_current(root):
            _build_tree(root, verbose)
    return root


def _build_tree(root: Path, verbose: bool) -> None:
    with contextlib.suppress(FileNotFoundError):
        (root / STAMP).unlink()
    build.write_includes(root / "include")
    lib64 = root / "lib64"
    for lib in build.LIBRARIES:
        build.build(lib, root / "include", lib64, verbose=verbose)
    for name in SHIMS:
        _shim(lib64, name)
    _links(root)
    _scripts(root)
    (root / STAMP).write_text(build.source_digest() + "\n")


def _shim(lib64: Path, name: str) -> None:
    """``name``: an empty library that needs ``libascendcl.so`` (its calls live there)."""
    tmp = lib64 / f".{name}.tmp"
    subprocess.run(["cc", "-shared", "-x", "c", "/dev/null", "-o", str(tmp),
                    f"-Wl,-soname,{name}", "-Wl,--no-as-needed", f"-L{lib64}", "-lascendcl"],
                   check=True, capture_output=True)
    os.replace(tmp, lib64 / name)


def _symlink(target: str, link: Path) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to(target)


def _links(root: Path) -> None:
    stub = root / "lib64" / "stub"
    stub.mkdir(exist_ok=True)
    for so in sorted((root / "lib64").glob("*.so")):
        _symlink(f"../{so.name}", stub / so.name)
    for part in ("runtime", "compiler"):
        (root / part).mkdir(exist_ok=True)
        _symlink("../include", root / part / "include")
        _symlink("../lib64", root / part / "lib64")


def _scripts(root: Path) -> None:
    from npuemu.host.core.kernel import LIBRARY

    (root / "kernels").mkdir(exist_ok=True)
    _symlink(LIBRARY, root / "kernels" / "npuemu_library.py")
    (root / "bin").mkdir(exist_ok=True)
    env = SET_ENV.format(root=root)
    (root / "set_env.sh").write_text(env)
    (root / "bin" / "setenv.bash").write_text(env)
    atc = root / "bin" / "atc"
    atc.write_text(ATC.format(python=build.python_executable()))
    atc.chmod(0o755)


def environment(root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with what ``set_env.sh`` exports for ``root``."""
    env = dict(os.environ if base is None else base)
    for key in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        env[key] = str(root)
    env["ASCEND_OPP_PATH"] = f"{root}/opp"
    env.setdefault("DDK_PATH", str(root))
    env.setdefault("NPU_HOST_LIB", f"{root}/runtime/lib64/stub")
    for key, part in (("LD_LIBRARY_PATH", "lib64"), ("PATH", "bin")):
        entries = [e for e in env.get(key, "").split(":") if e]
        if f"{root}/{part}" not in entries:
            env[key] = ":".join([f"{root}/{part}", *entries])
    return env
