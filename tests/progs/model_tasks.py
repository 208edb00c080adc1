"""Child program of ``tests/integration/test_models_tasklist.py``: model task lists sent as
raw ``MODEL_LOAD`` / ``MODEL_UNLOAD`` / ``MODEL_EXECUTE`` frames over the host's link and
streams, with the kernels of ``bump_kernels.py``; and ``.om`` models loaded, executed
and unloaded through ``acl.mdl`` (``aclmdlLoadFromFile``, ``aclmdlExecuteAsync``,
``aclmdlUnload``).

``python model_tasks.py SCENARIO [ARG...]`` initializes pyACL, sets device 0, loads the
kernels, installs an exception-info callback (``aclrtSetExceptionInfoCallback``) that
records each failed task's code and id in ``CODES``, runs one scenario and prints ``R`` (see
``childlib``); the assertions are the test's.
"""

import os
import threading
import time

import numpy as np
from childlib import (
    R,
    acl,
    code_of,
    d2h,
    emit,
    h2d,
    hold,
    main,
    malloc,
    ok,
    scenario,
    source,
    stream,
    zeroed,
)

from npuemu.host.core import freebatch as _freebatch
from npuemu.host.core import kernel as _kernel
from npuemu.host.core import runtime as _runtime
from npuemu.host.core import stream as _streams
from npuemu.host.models import runtime as _models
from npuemu.shared.layout import DEVICE_CTL
from npuemu.shared.protocol import Op

KERNELS = "bump_kernels.py"
CODES: list = []
"""``[code, task id]`` of each exception callback, in order."""


def load(steps, n_in=1, n_out=0, mid=0):
    """A raw ``MODEL_LOAD`` of ``steps``; the card's model id."""
    return LINK.call(Op.MODEL_LOAD, mid, n_in, n_out, steps)[0]


def step(kernel, blocks=1, args=(0,), slots=((0, 0, 0),), waits=(), records=(), stream=0):
    """One model step (a kernel of the test binary) as the ``MODEL_LOAD`` frame carries it."""
    return [stream, BIN.bin_id, kernel, blocks, list(args), [list(s) for s in slots],
            list(waits), list(records)]


def put(p, values):
    """Write ``values`` as int64 at ``p``."""
    h2d(p, np.asarray(values, np.int64).tobytes())


def get(p):
    """The two int64 at ``p``."""
    return np.frombuffer(d2h(p, 16), np.int64).tolist()


def on_exception(info):
    CODES.append([acl.rt.get_error_code_from_exception_info(info),
                  acl.rt.get_task_id_from_exception_info(info)])


def callbacks(n):
    """The first ``n`` exception callbacks (waits up to 10 s for them)."""
    deadline = time.monotonic() + 10
    while len(CODES) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return CODES[:n]


def live_blocks():
    """Start addresses of the card's live blocks (this process's batched frees sent first)."""
    with _runtime.get().lock:
        _freebatch.flush(LINK)
    return {row[0] for row in LINK.call(Op.SNAPSHOT)[0]}


def dataset(bufs):
    """An ``aclmdlDataset`` of ``(ptr, size)`` buffers."""
    ds = acl.mdl.create_dataset()
    for ptr, size in bufs:
        acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    return ds


@scenario
def bad_frames():
    bad0 = int(LINK.ctl[DEVICE_CTL.BAD_FRAMES])
    good = step("bump")
    R["load"] = [
        code_of(load, "not steps"),
        code_of(load, [good[:5]]),                                 # short step
        code_of(load, [step("no_such_kernel")]),                   # not in the binary
        code_of(load, [step("bump", args=(0,), slots=((3, 0, 0),))]),  # beyond the args
        code_of(load, [step("bump", slots=((0, 0, 1),))]),         # beyond the inputs
        code_of(load, [step("bump", slots=((0, 2, 0),))]),         # neither in nor out
        code_of(load, [step("bump", waits=(5,))]),                 # never recorded
        code_of(load, [step("bump", blocks=0)]),
        code_of(load, [[0, BIN.bin_id, "bump", 1, {"a": 1}, [], [], []]]),  # args
        code_of(load, [good], 1, 0, 12345),                        # append to no model
        code_of(LINK.call, Op.MODEL_UNLOAD, 12345),
        code_of(LINK.call, Op.MODEL_LOAD, 0, 1),                   # too few fields
    ]
    R["bad_frames"] = int(LINK.ctl[DEVICE_CTL.BAD_FRAMES]) - bad0
    p = zeroed(16)
    mid = load([step("bump", records=(1,)), [1, 0, "", 0, [], [], [1], []],
                step("bump", waits=(1,), stream=1)])
    s = stream()
    st = _streams.resolve(s)
    _streams.submit(st, Op.MODEL_EXECUTE, mid, [p, p], [])          # two inputs
    R["counts"] = acl.rt.synchronize_stream(s)
    _streams.submit(st, Op.MODEL_EXECUTE, 999, [p], [])              # unknown model
    R["unknown"] = acl.rt.synchronize_stream(s)
    _streams.submit(st, Op.MODEL_EXECUTE, mid, [p], [])
    R["good"] = acl.rt.synchronize_stream(s)
    R["value"] = get(p)
    R["unload"] = code_of(LINK.call, Op.MODEL_UNLOAD, mid)
    R["again"] = code_of(LINK.call, Op.MODEL_UNLOAD, mid)
    R["ping"] = len(LINK.call(Op.PING))


@scenario
def fail_and_abort():
    p, marker = zeroed(16), zeroed(16)
    s = stream()
    st = _streams.resolve(s)
    # a failing op: the task fails with its code, the callback names the model task
    mid = load([step("bump"), step("bump", slots=((0, 0, 1),))], n_in=2)
    put(p, [0, 1])
    seq = _streams.submit(st, Op.MODEL_EXECUTE, mid, [p, marker], [])
    R["fail"] = acl.rt.synchronize_stream(s)
    R["callback"] = callbacks(1)
    R["seq"] = seq
    R["after_fail"] = get(marker)                   # the second op never ran
    # abort while the model runs (its first op naps block after block)
    spin = load([step("spin", blocks=2000), step("bump", slots=((0, 0, 1),))], n_in=2)
    put(p, [0, 0])
    _streams.submit(st, Op.MODEL_EXECUTE, spin, [p, marker], [])
    deadline = time.monotonic() + 30
    while get(p)[0] != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    R["started"] = get(p)[0]
    R["abort"] = acl.rt.stream_abort(s)
    R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 10000)
    time.sleep(0.3)
    R["after_abort"] = get(marker)                  # stopped before its second op
    put(p, [0, 1])                                  # now spin returns at once
    _streams.submit(st, Op.MODEL_EXECUTE, spin, [p, marker], [])
    R["rerun"] = acl.rt.synchronize_stream_with_timeout(s, 30000)
    R["after_rerun"] = get(marker)
    R["codes"] = len(CODES)


@scenario
def unload_with_queued(om):
    """Unload the ``.om`` at ``om`` while two executes of it wait behind a held stream."""
    xin, yout = malloc(3 * 8 * 8 * 4), malloc(32)
    mid, ret = acl.mdl.load_from_file(om)
    ok(ret)
    model = _models.get(mid)
    put(yout, [7, 7, 7])
    in_ds, out_ds = dataset([(xin, 3 * 8 * 8 * 4)]), dataset([(yout, 20)])
    s = stream()
    gate = hold(s)                                  # the stream waits on a host function
    ok(acl.mdl.execute_async(mid, in_ds, out_ds, s))
    ok(acl.mdl.execute_async(mid, in_ds, out_ds, s))
    own = set(model.own)                            # its weights and workspace
    R["loaded_blocks"] = [len(own), own <= live_blocks()]
    done = []
    t = threading.Thread(target=lambda: done.append(acl.mdl.unload(mid)))
    t.start()
    deadline = time.monotonic() + 20                # the card forgot the model
    while model.programs[-1].card_id and time.monotonic() < deadline:
        time.sleep(0.01)
    R["waiting"] = not done                         # unload waits for the queued tasks
    R["still_allocated"] = bool(model.own)
    gate.set()
    t.join(30)
    R["unload"] = done
    R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 10000)
    R["codes"] = [c for c, _ in callbacks(2)]
    R["output"] = np.frombuffer(d2h(yout, 24), np.int64).tolist()  # untouched
    R["freed"] = not own & live_blocks()
    R["after"] = acl.mdl.unload(mid)


@scenario
def exit_loaded(om):
    """Load the ``.om`` at ``om``, print ``R`` and leave at once (no unload, no detach)."""
    R["blocks0"] = len(live_blocks())
    mid, ret = acl.mdl.load_from_file(om)
    ok(ret)
    R["card_id"] = _models.get(mid).programs[-1].card_id
    R["loaded"] = len(live_blocks())
    emit()
    os._exit(0)                                     # no unload, no detach: a crash


@scenario
def after_exit(om, blocks0, card_id):
    """Wait for the card to be back at ``blocks0`` live blocks; the dead client's model
    ``card_id`` is gone; the ``.om`` at ``om`` loads and runs."""
    deadline = time.monotonic() + 20                # the card reclaims the dead client
    while len(live_blocks()) > int(blocks0) and time.monotonic() < deadline:
        time.sleep(0.05)
    R["blocks"] = len(live_blocks())
    R["unknown"] = code_of(LINK.call, Op.MODEL_UNLOAD, int(card_id))
    mid, ret = acl.mdl.load_from_file(om)
    ok(ret)
    xin, yout = zeroed(3 * 8 * 8 * 4), zeroed(5 * 4)
    ok(acl.mdl.execute(mid, dataset([(xin, 192 * 4)]), dataset([(yout, 20)])))
    ok(acl.mdl.unload(mid))


@scenario
def timeout_and_reset():
    p, marker = zeroed(16), zeroed(16)
    s = stream()
    st = _streams.resolve(s)
    spin = load([step("spin", blocks=60000), step("bump", slots=((0, 0, 1),))], n_in=2)
    ok(acl.rt.set_op_execute_time_out(1))          # one interval: about 4.3 s
    seq = _streams.submit(st, Op.MODEL_EXECUTE, spin, [p, marker], [])
    R["timeout"] = acl.rt.synchronize_stream_with_timeout(s, 60000)
    R["callback"] = callbacks(1) == [[507014, seq]]
    R["after_timeout"] = get(marker)               # the task ended at its deadline
    ok(acl.rt.set_op_execute_time_out(0))
    _streams.submit(st, Op.MODEL_EXECUTE, spin, [p, marker], [])
    deadline = time.monotonic() + 30
    while get(p)[0] != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    put(p, [0, 0])
    while get(p)[0] != 1 and time.monotonic() < deadline:  # running again
        time.sleep(0.01)
    R["reset"] = acl.rt.reset_device(0)            # the client detaches mid-model
    ok(acl.rt.set_device(0))
    q = zeroed(16)
    b = _kernel.binary_load_from_data(source(KERNELS))
    link2 = _runtime.get().current_link()
    mid = link2.call(Op.MODEL_LOAD, 0, 1, 0, [[0, b.bin_id, "bump", 1, [0], [[0, 0, 0]],
                                               [], []]])[0]
    s2 = stream()
    _streams.submit(_streams.resolve(s2), Op.MODEL_EXECUTE, mid, [q], [])
    R["fresh"] = acl.rt.synchronize_stream_with_timeout(s2, 30000)
    R["value"] = get(q)


@scenario
def streams_in_event_order():
    p, marker = zeroed(16), zeroed(16)
    mid = load([step("spin", blocks=3000, records=(1,)),
                step("raise_flag", stream=1, records=(2,)),
                step("bump", slots=((0, 0, 1),), waits=(1, 2), stream=1)], n_in=2)
    s = stream()
    _streams.submit(_streams.resolve(s), Op.MODEL_EXECUTE, mid, [p, marker], [])
    R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 20000)
    R["p"], R["marker"] = get(p), get(marker)


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    BIN = _kernel.binary_load_from_data(source(KERNELS))
    LINK = _runtime.get().current_link()
    ok(acl.rt.set_exception_info_callback(on_exception))
    main()
