"""Child of ``tests/integration/test_soc_of_node.py``: run two ops on card 0 of the node the
environment names and print, as one ``RESULT`` JSON line, the SoC ``aclrtGetSocName`` reports
(before and after ``aclrtSetDevice``), the tiler's core counts, the ``block_dim`` each op's
kernel was compiled with (the host's op cache), the blocks each kernel really ran on the card
(its profiling task records) and how many kernels came from the on-disk compile cache.

Usage: ``python soc_tiling.py PROF_ROOT`` (profiling output goes under ``PROF_ROOT``), or
``python soc_tiling.py --soc-only``: only what ``aclrtGetSocName`` says before any device is
set (no op runs).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from npuemu.tools.cli import install_acl

install_acl()
import acl  # noqa: E402  (the pyACL face installed just above)

from npuemu.host.api import profile  # noqa: E402
from npuemu.host.ops import cache, tiling  # noqa: E402
from npuemu.host.prof import model  # noqa: E402

F32, ND = 0, 2
SHAPES = {"Add": [(8192, 64), (8192, 64), (8192, 64)],      # AI Vector cores
          "MatMul": [(4096, 64), (64, 64), (4096, 64)]}     # AI Cores


def ok(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


def tensor(shape: tuple[int, ...]) -> tuple[int, int]:
    """A device tensor of ones: (descriptor, data buffer)."""
    data = np.ones(shape, np.float32).tobytes()
    ptr, ret = acl.rt.malloc(len(data), 0)
    ok(ret, "malloc")
    ok(acl.rt.memcpy(ptr, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")
    return acl.create_tensor_desc(F32, list(shape), ND), acl.create_data_buffer(ptr, len(data))


def run_op(op_type: str, stream: int) -> None:
    descs, bufs = zip(*(tensor(s) for s in SHAPES[op_type]), strict=True)
    ok(acl.op.compile_and_execute_v2(op_type, list(descs[:2]), list(bufs[:2]), [descs[2]],
                                     [bufs[2]], 0, 0, 0, None, stream), op_type)
    ok(acl.rt.synchronize_stream(stream), "synchronize")


def main() -> None:
    before = acl.get_soc_name()  # before any device is set: the node is not attached yet
    if sys.argv[1] == "--soc-only":
        print("RESULT " + json.dumps({"soc_before_set_device": before}))
        return
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    stream, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    with profile(sys.argv[1], devices=[0], export=False) as prof:
        for op_type in SHAPES:
            run_op(op_type, stream)
    compiled = {}
    for op_cache in cache.CACHES.values():
        with op_cache.lock:
            for entry in (*op_cache.lru.values(), *op_cache.static.values()):
                compiled[entry.loaded.binary.name] = entry.tiling.block_dim
    ran = {t.name: t.size for t in model.load(prof.dir).all_tasks()
           if t.kind in ("AI_CORE", "AI_VECTOR_CORE")}
    cores = {engine: tiling.core_count(engine) for engine in ("aicore", "aivector")}
    print("RESULT " + json.dumps({
        "soc_before_set_device": before, "soc": acl.get_soc_name(), "cores": cores,
        "compiled": compiled, "ran": ran, "disk_hits": cache.stats()["disk_hits"]}))
    ok(acl.rt.destroy_stream(stream), "destroy_stream")
    ok(acl.rt.reset_device(0), "reset_device")
    ok(acl.finalize(), "finalize")


if __name__ == "__main__":
    main()
