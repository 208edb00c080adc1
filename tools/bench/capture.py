"""Figure family: capture: a chain of 1,000 tiny kernels captured once (``aclmdlRICapture*``)
and replayed (``aclmdlRIExecuteAsync``), beside the same chain launched eagerly.

"replay per task" is one replay of the chain plus ``synchronize_stream``, divided by its
1,000 tasks [the eager chain: 1,000 ``launch_kernel`` plus ``synchronize_stream``, per
task]; target ≤ 0.2x. "capture of 1,000 tasks" is ``ri_capture_begin``, the 1,000
``launch_kernel`` calls and ``ri_capture_end`` (which registers the list on the card and
waits for its reply) [the 1,000 eager ``launch_kernel`` calls alone, which return without
waiting]; target ≤ 2x. Medians of 5 rounds (3 quick), each interleaving the four.
"""

from __future__ import annotations

import statistics
import time

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret

CHAIN = 1000
_TINY_KERNEL = """
from npuemu.shared.kernel import kernel

@kernel("aicore")
def tiny(ctx, x):
    pass
"""


@figure("capture", devices=1)
def fig_capture(ctx: Context) -> list[Record]:
    from npuemu.host import acl

    check_ret(acl.rt.set_device(0), "set_device(0)")
    stream, ret = acl.rt.create_stream()
    check_ret(ret, "create_stream")
    binary, ret = acl.rt.binary_load_from_data(_TINY_KERNEL)
    check_ret(ret, "binary_load_from_data")
    func, ret = acl.rt.binary_get_function(binary, "tiny")
    check_ret(ret, "binary_get_function")
    args = [1]

    def submit() -> None:
        for _ in range(CHAIN):
            acl.rt.launch_kernel(func, 1, args, stream)

    def eager() -> float:
        t0 = time.perf_counter()
        submit()
        check_ret(acl.rt.synchronize_stream(stream), "synchronize eager")
        return time.perf_counter() - t0

    def submission() -> float:
        t0 = time.perf_counter()
        submit()
        elapsed = time.perf_counter() - t0
        check_ret(acl.rt.synchronize_stream(stream), "synchronize eager")
        return elapsed

    def capture() -> tuple[float, int]:
        t0 = time.perf_counter()
        check_ret(acl.mdl.ri_capture_begin(stream, 0), "ri_capture_begin")
        submit()
        ri, ret = acl.mdl.ri_capture_end(stream)
        check_ret(ret, "ri_capture_end")
        return time.perf_counter() - t0, ri

    def replay(ri: int) -> float:
        t0 = time.perf_counter()
        check_ret(acl.mdl.ri_execute_async(ri, stream), "ri_execute_async")
        check_ret(acl.rt.synchronize_stream(stream), "synchronize replay")
        return time.perf_counter() - t0

    eager()  # warm up: the kernel's first launches go to its engine and are measured
    _, ri = capture()
    replay(ri)
    check_ret(acl.mdl.ri_destroy(ri), "ri_destroy")
    times: dict[str, list[float]] = {"eager": [], "submit": [], "capture": [], "replay": []}
    for _ in range(3 if ctx.quick else 5):
        times["eager"].append(eager())
        times["submit"].append(submission())
        took, ri = capture()
        times["capture"].append(took)
        times["replay"].append(min(replay(ri) for _ in range(3)))
        check_ret(acl.mdl.ri_destroy(ri), "ri_destroy")
    us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    check_ret(acl.rt.reset_device(0), "reset_device(0)")
    return [Record("replay of 1,000 tiny kernels, per task", us["replay"] / CHAIN, "µs",
                   "eager launch+sync, per task", us["eager"] / CHAIN,
                   Target("≤ 0.2x", "ratio", "<=", 0.2)),
            Record("capture of 1,000 tasks", us["capture"] / 1e3, "ms",
                   "eager submission of 1,000", us["submit"] / 1e3,
                   Target("≤ 2x", "ratio", "<=", 2.0))]
