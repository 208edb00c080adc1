"""Figure family: capi: the C ABI (``libascendcl.so``) beside the Python face, in one run.

A C program (``capi_bench.c``, compiled here against an SDK tree built by
``npuemu.host.capi.sdk`` in ``$TMPDIR/npuemu-bench-sdk-<uid>``, rebuilt only when stale)
runs with its own embedded node of one card; the same loops run here through ``acl.rt``:

* "C malloc+free": ``aclrtMalloc(256)`` + ``aclrtFree`` pairs/s from C [the same pairs
  through ``acl.rt``, this run]; target ≥ 0.8x.
* "C empty kernel launch+sync": median µs of ``aclrtLaunchKernel`` of an empty AI Core
  kernel + ``aclrtSynchronizeStream`` from C [the same through ``acl.rt``]; target ≤ 1.3x.
* "C H2D / D2H 64 MiB": ``aclrtMemcpy`` from a malloc'd C buffer [``np.copyto`` of 64 MiB
  between prefaulted numpy buffers, this run]; target ≥ 0.85x.

The C program runs first, with its own embedded node, which stops with it; then this
process's node starts (on the first ``acl.rt`` call), so the two never compete for the
cores. Building the SDK the first time takes ~10 s (not timed).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret, sample_rates, time_each
from npuemu.tools.sizes import MiB

SOURCE = Path(__file__).with_name("capi_bench.c")
_EMPTY = "from npuemu.shared.kernel import kernel\n\n@kernel('aicore')\ndef empty(ctx):\n    pass\n"


def _c_figures(ctx: Context) -> dict[str, float]:
    from npuemu.host.capi import sdk

    root = sdk.ensure(Path(tempfile.gettempdir()) / f"npuemu-bench-sdk-{os.getuid()}")
    exe = root / "bench" / "capi_bench"
    exe.parent.mkdir(exist_ok=True)
    subprocess.run(["cc", "-O2", "-std=c99", str(SOURCE), f"-I{root}/include",
                    f"-L{root}/lib64", "-lascendcl", "-o", str(exe)], check=True,
                   capture_output=True)
    proc = subprocess.run([str(exe), "quick" if ctx.quick else "full"], capture_output=True,
                          text=True, timeout=300, env=sdk.environment(root))
    if proc.returncode:
        raise RuntimeError(f"capi_bench failed: {proc.stdout}{proc.stderr}")
    return {k: float(v) for k, v in (line.split() for line in proc.stdout.splitlines())}


def _python_figures(ctx: Context) -> dict[str, float]:
    import numpy as np

    from npuemu.host import acl

    check_ret(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")

    def pair() -> None:
        ptr, _ = acl.rt.malloc(256, 0)
        acl.rt.free(ptr)

    out = sample_rates({"pair": pair}, 1.0, 3, 0.1 if ctx.quick else 0.3)
    binary, ret = acl.rt.binary_load_from_data(_EMPTY)
    check_ret(ret, "binary_load_from_data")
    func, ret = acl.rt.binary_get_function(binary, "empty")
    check_ret(ret, "binary_get_function")

    def launch_sync() -> None:
        acl.rt.launch_kernel(func, 1, [], stream)
        acl.rt.synchronize_stream(stream)

    n = 500 if ctx.quick else 2000
    time_each(launch_sync, n // 10)
    out["launch"] = statistics.median(time_each(launch_sync, n)) / 1e3
    src, dst = np.full(64 * MiB, 7, np.uint8), np.zeros(64 * MiB, np.uint8)
    out["copyto"] = sample_rates({"c": lambda: np.copyto(dst, src)}, 64 * MiB / 1e9,
                                 3 if ctx.quick else 7, 0.05)["c"]
    check_ret(acl.rt.destroy_stream(stream), "destroy_stream")
    return out


@figure("capi", devices=1)
def fig_capi(ctx: Context) -> list[Record]:
    """malloc+free, empty-kernel launch+sync and 64 MiB copies from C vs the Python face."""
    c = _c_figures(ctx)  # first: its node is gone before this process's node starts
    py = _python_figures(ctx)
    return [
        Record("C malloc+free", c["malloc_free"], "pairs/s", "acl.rt malloc+free",
               py["pair"], Target("≥ 0.8x", "ratio", ">=", 0.8)),
        Record("C empty kernel launch+sync", c["launch_sync"], "µs",
               "acl.rt launch+sync", py["launch"], Target("≤ 1.3x", "ratio", "<=", 1.3)),
        Record("C H2D 64 MiB", c["h2d"], "GB/s", "np.copyto 64 MiB", py["copyto"],
               Target("≥ 0.85x", "ratio", ">=", 0.85)),
        Record("C D2H 64 MiB", c["d2h"], "GB/s", "np.copyto 64 MiB", py["copyto"],
               Target("≥ 0.85x", "ratio", ">=", 0.85)),
    ]
