"""Figure family: copies between cards (P2P bandwidth, both ways, and the i->j matrix).

Threading model: the bidirectional figure starts one helper thread per run that copies
into its own host buffer while the main thread copies the other way; they share no state
and the main thread joins the helper before reading the clock.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from npuemu.tools.bench.records import Record, Target
from npuemu.tools.bench.registry import Context, figure
from npuemu.tools.bench.sampling import check_ret, sample_rates
from npuemu.tools.sizes import MiB, format_size

P2P_BYTES = 64 * MiB
P2P_MATRIX_BYTES = 16 * MiB
P2P_CARDS = 4


@figure("p2p-bandwidth", devices=P2P_CARDS)
def fig_p2p_bandwidth(ctx: Context) -> list[Record]:
    """Copies between cards (peer access enabled both ways between all 4 cards) vs bare
    ``np.copyto``: 64 MiB one way, 64 MiB both ways at once, and a 16 MiB matrix."""
    import numpy as np

    from npuemu.host import acl

    rt, d2d = acl.rt, 3  # ACL_MEMCPY_DEVICE_TO_DEVICE
    reps, sample_s = (3, 0.01) if ctx.quick else (7, 0.025)
    n, m = P2P_BYTES, P2P_MATRIX_BYTES
    owned: list[int] = []

    def malloc(dev: int, size: int) -> int:
        check_ret(rt.set_device(dev), f"set_device({dev})")
        ptr, ret = rt.malloc(size, 3)  # ACL_MEM_MALLOC_HUGE_FIRST_P2P
        check_ret(ret, f"malloc({size}) on device {dev}")
        owned.append(ptr)
        return ptr

    for dev in range(P2P_CARDS):
        check_ret(rt.set_device(dev), f"set_device({dev})")
        for peer in range(P2P_CARDS):
            if peer != dev:
                check_ret(rt.device_enable_peer_access(peer, 0), f"enable peer {dev} -> {peer}")
    host = [np.empty(n, np.uint8) for _ in range(4)]  # two src/dst pairs for the limits
    for i, h in enumerate(host):
        h.fill(i + 1)  # prefault
    streams: list[int] = []
    try:
        x0, y0, x1, y1 = malloc(0, n), malloc(0, n), malloc(1, n), malloc(1, n)
        src = [malloc(d, m) for d in range(P2P_CARDS)]
        dst = [malloc(d, m) for d in range(P2P_CARDS)]
        for dev in (0, 1):
            check_ret(rt.set_device(dev), f"set_device({dev})")
            s, ret = rt.create_stream()
            check_ret(ret, f"create_stream on device {dev}")
            streams.append(s)
        s0, s1 = streams
        set_device, memcpy, memcpy_async = rt.set_device, rt.memcpy, rt.memcpy_async
        sync = rt.synchronize_stream

        def one_way() -> None:  # card 1 memory -> card 0 memory, by card 0's DMA engine
            set_device(0)
            memcpy(y0, n, x1, n, d2d)

        def both_ways() -> None:  # 0 -> 1 on card 0's stream, 1 -> 0 on card 1's, at once
            set_device(0)
            memcpy_async(y1, n, x0, n, d2d, s0)
            set_device(1)
            memcpy_async(y0, n, x1, n, d2d, s1)
            sync(s0)
            sync(s1)

        def two_copyto() -> None:  # the machine doing two 64 MiB copies at once
            t = threading.Thread(target=np.copyto, args=(host[3], host[2]))
            t.start()
            np.copyto(host[1], host[0])
            t.join()

        set_device(0)  # one untimed copy of each op first, checked
        check_ret(memcpy(y0, n, x1, n, d2d), "P2P memcpy 1 -> 0")
        check_ret(memcpy_async(y1, n, x0, n, d2d, s0) or sync(s0), "P2P memcpy_async 0 -> 1")
        set_device(1)
        check_ret(memcpy_async(y0, n, x1, n, d2d, s1) or sync(s1), "P2P memcpy_async 1 -> 0")
        long_s = 4 * sample_s  # a 64 MiB copy takes ~10 ms: a few per sample
        limit = functools.partial(np.copyto, host[1], host[0])
        rates = sample_rates({"one": one_way, "limit": limit}, n / 1e9, reps, long_s)
        both = sample_rates({"both": both_ways, "limit": two_copyto}, 2 * n / 1e9, reps, long_s)

        cells: dict[str, Callable[[], object]] = {}
        for i in range(P2P_CARDS):
            for j in range(P2P_CARDS):
                def cell(i: int = i, j: int = j) -> None:  # row i: card i's engine pushes
                    set_device(i)
                    memcpy(dst[j], m, src[i], m, d2d)

                set_device(i)
                check_ret(memcpy(dst[j], m, src[i], m, d2d), f"P2P memcpy {i} -> {j}")
                cells[f"{i}->{j}"] = cell
        cells["limit"] = functools.partial(np.copyto, host[1][:m], host[0][:m])
        matrix = sample_rates(cells, m / 1e9, reps, sample_s)
    finally:
        for s in streams:
            rt.destroy_stream(s)
        for ptr in owned:
            rt.free(ptr)
    label, mlabel = format_size(n, digits=0), format_size(m, digits=0)
    records = [
        Record(f"P2P {label}", rates["one"], "GB/s", f"np.copyto {label}", rates["limit"],
               Target("≥ 0.9x", "ratio", ">=", 0.9)),
        Record("P2P bidirectional", both["both"], "GB/s", f"2x np.copyto {label}",
               both["limit"]),
    ]
    records += [Record(f"P2P {mlabel} {key}", matrix[key], "GB/s", f"np.copyto {mlabel}",
                       matrix["limit"]) for key in cells if key != "limit"]
    return records
