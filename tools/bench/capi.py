"""Figure family: capi: the C ABI (``libascendcl.so``) beside the Python face, in one run.

A C program (``capi_bench.c``, compiled here against an SDK tree built by
``npuemu.host.capi.sdk`` in ``$TMPDIR/npuemu-bench-sdk-<uid>``, rebuilt only when stale)
runs with its own embedded node of one card; the same loops run here through ``acl.rt``:

* "C malloc+free": ``aclrtMalloc(256)`` + ``aclrtFree`` pairs/s from C [the same pairs
  through ``acl.rt``, this run]; both sides the median of 3 samples of ~0.3 s (0.1 s quick),
  each calibrated first (``sampling.sample_rates``; ``capi_bench.c`` does the same in C);
  target ≥ 0.8x.
* "C empty kernel launch+sync": median µs of ``aclrtLaunchKernel`` of an empty AI Core
  kernel + ``aclrtSynchronizeStream`` from C [the same through ``acl.rt``]; ``ROUNDS``
  rounds alternated between the sides, each side's figure the median of its rounds'
  medians; target ≤ 1.3x.
* "C H2D / D2H 64 MiB": ``aclrtMemcpy`` from a malloc'd C buffer [``np.copyto`` of 64 MiB
  between prefaulted numpy buffers, this run]; target ≥ 0.85x.

The C program runs beside this process with its own embedded node, one side measuring while
the other waits (the C program on its stdin, this process on its stdout), so the two never
compete for the cores: its malloc+free runs before this process's node starts; then this
process's malloc+free, the alternated launch rounds, the C copies, and the ``np.copyto``
limit after the C program has exited. Building the SDK the first time takes ~10 s (not
timed).
"""

from __future__ import annotations

import os
import select
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
ROUNDS = 5
"""Launch+sync rounds per side, alternated C, Python, C, ...: each side's figure is the median
of its rounds' medians, so a burst of the machine's load falls on both sides alike."""
WAIT_S = 120.0


class _CProgram:
    """``capi_bench`` running beside this process, driven by "go" lines on its stdin."""

    def __init__(self, ctx: Context) -> None:
        from npuemu.host.capi import sdk

        root = sdk.ensure(Path(tempfile.gettempdir()) / f"npuemu-bench-sdk-{os.getuid()}")
        exe = root / "bench" / "capi_bench"
        exe.parent.mkdir(exist_ok=True)
        subprocess.run(["cc", "-O2", "-std=c99", str(SOURCE), f"-I{root}/include",
                        f"-L{root}/lib64", "-lascendcl", "-o", str(exe)], check=True,
                       capture_output=True)
        # a file, so a chatty stderr never blocks it; closed by close() or finish()
        self.err = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(exe), "quick" if ctx.quick else "full", str(ROUNDS)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.err, text=True, env=sdk.environment(root))
        ctx.track.proc(self.proc.pid)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def value(self, key: str) -> float:
        """The next line's value, which must be ``key``'s (bounded wait)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], WAIT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith(key + " "):
            self.close()
            raise RuntimeError(f"capi_bench: expected {key}, got {line!r}; "
                               f"stderr: {self.stderr()}")
        return float(line.split()[1])

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read()[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=WAIT_S)
        self.err.close()

    def finish(self) -> None:
        """Waits for the program's exit (bounded); RuntimeError if it failed."""
        try:
            self.proc.communicate(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.close()
            raise RuntimeError("capi_bench did not exit") from None
        if self.proc.returncode:
            raise RuntimeError(f"capi_bench failed ({self.proc.returncode}): {self.stderr()}")
        self.err.close()


@figure("capi", devices=1)
def fig_capi(ctx: Context) -> list[Record]:
    """malloc+free, empty-kernel launch+sync and 64 MiB copies from C vs the Python face."""
    import numpy as np

    from npuemu.host import acl

    c = _CProgram(ctx)  # its malloc+free runs before this process's node starts
    try:
        c_pairs = c.value("malloc_free")
        check_ret(acl.rt.set_device(0), "set_device(0)")
        stream, ret = acl.rt.create_stream()
        check_ret(ret, "create_stream")

        def pair() -> None:
            ptr, _ = acl.rt.malloc(256, 0)
            acl.rt.free(ptr)

        py_pairs = sample_rates({"pair": pair}, 1.0, 3, 0.1 if ctx.quick else 0.3)["pair"]
        binary, ret = acl.rt.binary_load_from_data(_EMPTY)
        check_ret(ret, "binary_load_from_data")
        func, ret = acl.rt.binary_get_function(binary, "empty")
        check_ret(ret, "binary_get_function")

        def launch_sync() -> None:
            acl.rt.launch_kernel(func, 1, [], stream)
            acl.rt.synchronize_stream(stream)

        n = 500 if ctx.quick else 2000
        time_each(launch_sync, n // 10)
        c_us, py_us = [], []
        for _ in range(ROUNDS):
            c.go()
            c_us.append(c.value("launch_sync"))
            py_us.append(statistics.median(time_each(launch_sync, n // ROUNDS)) / 1e3)
        c.go()  # the copies: this process waits
        h2d, d2h = c.value("h2d"), c.value("d2h")
        c.finish()
    except BaseException:
        c.close()
        raise
    src, dst = np.full(64 * MiB, 7, np.uint8), np.zeros(64 * MiB, np.uint8)
    copyto = sample_rates({"c": lambda: np.copyto(dst, src)}, 64 * MiB / 1e9,
                          3 if ctx.quick else 7, 0.05)["c"]
    check_ret(acl.rt.destroy_stream(stream), "destroy_stream")
    return [
        Record("C malloc+free", c_pairs, "pairs/s", "acl.rt malloc+free", py_pairs,
               Target("≥ 0.8x", "ratio", ">=", 0.8)),
        Record("C empty kernel launch+sync", statistics.median(c_us), "µs",
               "acl.rt launch+sync", statistics.median(py_us),
               Target("≤ 1.3x", "ratio", "<=", 1.3)),
        Record("C H2D 64 MiB", h2d, "GB/s", "np.copyto 64 MiB", copyto,
               Target("≥ 0.85x", "ratio", ">=", 0.85)),
        Record("C D2H 64 MiB", d2h, "GB/s", "np.copyto 64 MiB", copyto,
               Target("≥ 0.85x", "ratio", ">=", 0.85)),
    ]
