"""Model task lists registered on the card (``device/exec/model.py``) through real workers:
bad ``MODEL_LOAD`` / ``MODEL_UNLOAD`` / ``MODEL_EXECUTE`` frames are refused with 107000 and
the worker keeps serving; a failing op fails the one model task (its code at synchronize,
the exception callback with the model task's id, later ops not run); abort stops a model
that is running; unload with executes still queued (they fail, memory is freed after);
a client that exits without unloading leaves nothing on the card.

Raw frames use the host's link and streams directly, with kernels of a test binary
(``acl.rt.binary_load_from_data``), so what each model step does is under the test's
control. Each scenario runs in a fresh interpreter (``run_py``); assertions are here.
"""

from __future__ import annotations

import pytest
from childprog import CHILD_HELPERS, run_scenario

from tests.integration.test_models_mdl import convert
from tests.unit.test_models_omfile import small_cnn

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "512M", "NPUEMU_DDR": "64M"}
PARAM_INVALID = 107000
AICORE_EXCEPTION = 507015

KERNELS = '''
import time
from npuemu.shared.kernel import kernel

@kernel("aicore")
def bump(ctx, ptr):
    a = ctx.tensor(ptr, "int64", 2)
    if a[1]:
        raise RuntimeError("flag set: fail on purpose")
    a[0] += 1

@kernel("aivector")
def raise_flag(ctx, ptr):
    ctx.tensor(ptr, "int64", 2)[1] = 1

@kernel("aicore")
def spin(ctx, ptr):
    """Block 0 marks the start; every block naps until the flag is set."""
    a = ctx.tensor(ptr, "int64", 2)
    a[0] = 1
    if not a[1]:
        time.sleep(0.01)
'''

PRELUDE = CHILD_HELPERS + f"""
from npuemu.host.core import kernel as _kernel, runtime as _runtime, stream as _streams
from npuemu.shared import errors
from npuemu.shared.layout import DEVICE_CTL
from npuemu.shared.protocol import Op
ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
BIN = _kernel.binary_load_from_data({KERNELS!r})
LINK = _runtime.get().current_link()

def code_of(fn, *args):
    try:
        fn(*args)
    except errors.AclError as err:
        return err.code
    return 0

def load(steps, n_in=1, n_out=0, mid=0):
    return LINK.call(Op.MODEL_LOAD, mid, n_in, n_out, steps)[0]

def step(kernel, blocks=1, args=(0,), slots=((0, 0, 0),), waits=(), records=(), stream=0):
    return [stream, BIN.bin_id, kernel, blocks, list(args), [list(s) for s in slots],
            list(waits), list(records)]

def put(p, values):
    h2d(p, np.asarray(values, np.int64).tobytes())

def get(p):
    return np.frombuffer(d2h(p, 16), np.int64).tolist()

CODES = []
def on_exception(info):
    CODES.append([acl.rt.get_error_code_from_exception_info(info),
                  acl.rt.get_task_id_from_exception_info(info)])
ok(acl.rt.set_exception_info_callback(on_exception))

def callbacks(n):
    deadline = time.monotonic() + 10
    while len(CODES) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return CODES[:n]
"""


def scenario(run_py, body: str, timeout: float = 90, prelude: str = PRELUDE) -> dict:
    return run_scenario(run_py, prelude, body, ENV, timeout)


def test_bad_model_frames_are_refused_and_the_worker_keeps_serving(run_py) -> None:
    r = scenario(run_py, '''
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
    ''')
    assert r["load"] == [PARAM_INVALID] * 12
    assert r["bad_frames"] >= 9  # the malformed ones (a missing kernel or model is not)
    assert r["counts"] == PARAM_INVALID and r["unknown"] == PARAM_INVALID
    assert r["good"] == 0 and r["value"] == [2, 0]  # both steps ran, the empty one skipped
    assert r["unload"] == 0 and r["again"] == PARAM_INVALID and r["ping"] == 1


def test_failing_op_fails_the_model_task_and_abort_stops_a_running_model(run_py) -> None:
    r = scenario(run_py, '''
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
    ''')
    assert r["fail"] == AICORE_EXCEPTION
    assert r["callback"] == [[AICORE_EXCEPTION, r["seq"]]]
    assert r["after_fail"] == [0, 0]
    assert r["started"] == 1 and r["abort"] == 0 and r["sync"] == 0
    assert r["after_abort"] == [0, 0]
    assert r["rerun"] == 0 and r["after_rerun"] == [1, 0] and r["codes"] == 1


SAMPLE = '''
from npuemu.host.models import runtime as _models
from npuemu.host.core import freebatch as _freebatch

def live_blocks():
    """Start addresses of the card's live blocks (this process's batched frees sent first)."""
    with _runtime.get().lock:
        _freebatch.flush(LINK)
    return {row[0] for row in LINK.call(Op.SNAPSHOT)[0]}

def dataset(bufs):
    ds = acl.mdl.create_dataset()
    for ptr, size in bufs:
        acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
    return ds
'''


def test_unload_with_executes_queued_fails_them_and_frees_after(run_py, tmp_path) -> None:
    om = convert(small_cnn(), tmp_path, "cnn")
    r = scenario(run_py, prelude=PRELUDE + SAMPLE, body=f'''
        xin, yout = malloc(3 * 8 * 8 * 4), malloc(32)
        mid, ret = acl.mdl.load_from_file({om!r}); ok(ret)
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
    ''')
    assert r["loaded_blocks"] == [2, True] and r["waiting"] and r["still_allocated"]
    assert r["unload"] == [0] and r["sync"] == PARAM_INVALID
    assert r["codes"] == [PARAM_INVALID, PARAM_INVALID]
    assert r["output"] == [7, 7, 7]
    assert r["freed"] and r["after"] == 145003


def test_a_client_that_exits_without_unloading_leaves_nothing(shared_node, run_py,
                                                               tmp_path) -> None:
    om = convert(small_cnn(), tmp_path, "cnn")
    name = shared_node(devices=1, hbm="256M", ddr="64M")
    env = {"NPUEMU_NODE": name}
    first = run_scenario(run_py, PRELUDE + SAMPLE, f'''
        R["blocks0"] = len(live_blocks())
        mid, ret = acl.mdl.load_from_file({om!r}); ok(ret)
        R["card_id"] = _models.get(mid).programs[-1].card_id
        R["loaded"] = len(live_blocks())
        print("RESULT " + json.dumps(R), flush=True)
        os._exit(0)                                     # no unload, no detach: a crash
    ''', env, 60)
    second = run_scenario(run_py, PRELUDE + SAMPLE, f'''
        deadline = time.monotonic() + 20                # the card reclaims the dead client
        while len(live_blocks()) > {first["blocks0"]} and time.monotonic() < deadline:
            time.sleep(0.05)
        R["blocks"] = len(live_blocks())
        R["unknown"] = code_of(LINK.call, Op.MODEL_UNLOAD, {first["card_id"]})
        mid, ret = acl.mdl.load_from_file({om!r}); ok(ret)
        xin, yout = zeroed(3 * 8 * 8 * 4), zeroed(5 * 4)
        ok(acl.mdl.execute(mid, dataset([(xin, 192 * 4)]), dataset([(yout, 20)])))
        ok(acl.mdl.unload(mid))
    ''', env, 60)
    assert first["loaded"] >= first["blocks0"] + 2  # weights, workspace, op binaries
    # only the second client's own kernel binary is left on the card
    assert second["blocks"] == first["blocks0"] and second["unknown"] == PARAM_INVALID


def test_execution_timeout_and_reset_cancel_a_running_model(run_py) -> None:
    r = scenario(run_py, '''
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
        b = _kernel.binary_load_from_data(KERNELS_AGAIN)
        LINK2 = _runtime.get().current_link()
        mid = LINK2.call(Op.MODEL_LOAD, 0, 1, 0, [[0, b.bin_id, "bump", 1, [0], [[0, 0, 0]],
                                                   [], []]])[0]
        s2 = stream()
        _streams.submit(_streams.resolve(s2), Op.MODEL_EXECUTE, mid, [q], [])
        R["fresh"] = acl.rt.synchronize_stream_with_timeout(s2, 30000)
        R["value"] = get(q)
    '''.replace("KERNELS_AGAIN", repr(KERNELS)), timeout=120)
    assert r["timeout"] == 507014 and r["callback"] and r["after_timeout"] == [0, 0]
    assert r["reset"] == 0 and r["fresh"] == 0 and r["value"] == [1, 0]


def test_the_streams_of_a_model_run_at_once_in_event_order(run_py) -> None:
    """Stream 0 naps until stream 1 sets its flag (a model run one stream after the other
    would never finish); then an event orders a third step after both."""
    r = scenario(run_py, '''
        p, marker = zeroed(16), zeroed(16)
        mid = load([step("spin", blocks=3000, records=(1,)),
                    step("raise_flag", stream=1, records=(2,)),
                    step("bump", slots=((0, 0, 1),), waits=(1, 2), stream=1)], n_in=2)
        s = stream()
        _streams.submit(_streams.resolve(s), Op.MODEL_EXECUTE, mid, [p, marker], [])
        R["sync"] = acl.rt.synchronize_stream_with_timeout(s, 20000)
        R["p"], R["marker"] = get(p), get(marker)
    ''')
    assert r["sync"] == 0 and r["p"] == [1, 1] and r["marker"] == [1, 0]
