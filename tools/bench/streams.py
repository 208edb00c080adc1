"""Figure family: streams: the cost of creating and destroying a stream, plain and with
``ACL_STREAM_PERSISTENT`` (in CANN a persistent stream's resources stay in a global cache
after destroy for the next stream to reuse;
descriptions of CANN's runtime quote about 80 % less for the pair).

This figure only measures both: whether the cache exists is up to the runtime
(``host/core/stream.py``); without it the ratio is about 1x and the target says NO.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret, time_each


@figure("stream-create-destroy", devices=1)
def fig_stream_create_destroy(ctx: Context) -> list[Record]:
    """Median of one create+destroy pair, plain and PERSISTENT, beside two sync round trips
    (the requests a pair needs at least); the three are interleaved in rounds."""
    from npuemu.host import acl
    from npuemu.host.core import runtime
    from npuemu.shared.enums import ACL_STREAM_PERSISTENT
    from npuemu.shared.protocol import Op

    check_ret(acl.rt.set_device(0), "set_device(0)")
    link = runtime.get().current_link()

    def pair(create: Callable[[], tuple[int, int]]) -> Callable[[], None]:
        def run() -> None:
            stream, ret = create()
            check_ret(ret, "create_stream")
            check_ret(acl.rt.destroy_stream(stream), "destroy_stream")
        return run

    def two_pings() -> None:
        link.call(Op.PING)
        link.call(Op.PING)

    ops = {"plain": pair(acl.rt.create_stream),
           "persistent": pair(lambda: acl.rt.create_stream_with_config(
               0, int(ACL_STREAM_PERSISTENT))),
           "pings": two_pings}
    rounds, per_round = (3, 100) if ctx.quick else (7, 300)
    samples: dict[str, list[int]] = {name: [] for name in ops}
    for fn in ops.values():  # warm up: first streams, caches, slots
        time_each(fn, 20)
    for _ in range(rounds):
        for name, fn in ops.items():
            samples[name] += time_each(fn, per_round)
    us = {name: statistics.median(v) / 1e3 for name, v in samples.items()}
    check_ret(acl.rt.reset_device(0), "reset_device(0)")
    return [Record("stream create+destroy", us["plain"], "µs", "2 sync round trips (PING)",
                   us["pings"]),
            Record("stream create+destroy, PERSISTENT", us["persistent"], "µs",
                   "create+destroy (default)", us["plain"],
                   Target("≤ 0.2x", "ratio", "<=", 0.2))]
