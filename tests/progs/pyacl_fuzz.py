"""Child program of ``tests/integration/test_pyacl_fuzz.py``: every public function of
``acl``, ``acl.rt`` and ``acl.util`` called by hypothesis with wrong types and extreme
values mixed with live handles, then a round trip through the card (what is fuzzed and what
is not: the test's docstring).

``python pyacl_fuzz.py fuzz_all`` initializes pyACL, sets device 0 and sweeps the surface:
for each function in turn, ``$FUZZ_EXAMPLES`` hypothesis examples (5 by default), each a
call of that function (its own arity four times in six, one less or one more otherwise)
after 0 to 2 calls of random functions, so every function is called at least that many
times and in varied states. A count rather than a time budget: the same coverage however
loaded the machine is; and derandomized (the same examples every run), so a failure of the
sweep reproduces. It once failed, randomized, with stdout refusing the final print (EINVAL),
not reproduced since: a fuzzed call damaging the process, to be found with the hunt below.
``$FUZZ_BUDGET_S`` (0 by default) adds random batches (sequences of
1 to 4 calls of any functions) until the fuzzing has lasted that long, for a longer hunt. Then
it prints ``R`` (see ``childlib``): the call counts, the exceptions allowed, the internal
ones (the bugs), the card's state after.
"""

import inspect
import os
import threading
import time
import types

import numpy as np
from childlib import R, acl, d2h, h2d, ints, main, malloc, ok, scenario, stream
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from npuemu.host.acl import _wrap

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
TIME_BUDGET_S = float(os.environ.get("FUZZ_BUDGET_S", "0"))
BIG_HOST = 256 << 20
GUARD = 64 << 10
ALLOWED = (TypeError, ValueError, OverflowError)


def surface():
    out = []
    for mod in (acl, acl.rt, acl.util):
        for name in sorted(dir(mod)):
            obj = getattr(mod, name)
            if (name.startswith("_") or not callable(obj) or inspect.isclass(obj)
                    or isinstance(obj, types.ModuleType)):
                continue
            module = getattr(obj, "__module__", "") or ""
            if not module.startswith("npuemu.") or module == _wrap.__name__:
                continue
            out.append((f"{mod.__name__.replace('npuemu.host.', '')}.{name}", obj,
                        arity(obj)))  # "acl.rt.malloc_host", ... (what safe() matches)
    return out


def arity(fn):
    """Positional parameters of ``fn`` (what its pyACL twin parses), for sensible arg counts."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


CALLS = surface()
keep = []  # host buffers whose addresses are in the pool


def fresh_pool():
    """Live handles to mix with junk (re-made when a reset invalidated them)."""
    pool = []
    for make in (lambda: acl.rt.create_stream()[0], lambda: acl.rt.create_event()[0],
                 lambda: acl.rt.malloc(4096, 0)[0], lambda: acl.rt.malloc_host(4096)[0],
                 lambda: acl.rt.get_context()[0],
                 lambda: acl.create_data_buffer(0, 0)):
        try:
            value = make()
        except Exception:
            value = 0
        pool.append(value)
    buf = bytearray(GUARD * 4)
    keep.append(buf)
    pool.append(acl.util.bytes_to_ptr(buf) + GUARD)  # junk offsets and counts stay inside
    return pool


POOL: list = []
LIVE_IDS = set()
EXTREMES = [0, 1, -1, 2, 3, 7, 64, 4096, 2**31 - 1, 2**31, 2**32, 2**47, 2**63 - 1, 2**63,
            2**64 - 1, 2**64, 2**100, -2**63, -2**100, 0xFFFF, 0xFFFFFFFF]


def junk():
    return st.one_of(
        st.sampled_from(EXTREMES), st.integers(min_value=-8, max_value=4096),
        st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=12),
        st.binary(max_size=16), st.lists(st.integers(-2, 5), max_size=3),
        st.tuples(st.integers(0, 8), st.integers(0, 8)),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        st.just(lambda *a: None), st.just(object()), st.just(np.zeros(4, np.float32)),
        st.integers(0, 10).map(lambda i: POOL[i % len(POOL)]),
        st.tuples(st.integers(0, 10), st.integers(-64, 8192)).map(
            lambda t: POOL[t[0] % len(POOL)] + t[1]
            if isinstance(POOL[t[0] % len(POOL)], int) else 0),
    )


def safe(args, name):
    """Drop what the docstring says is not fuzzed."""
    out = []
    for a in args:
        if type(a) is int and a in LIVE_IDS:
            a = 0
        out.append(a)
    if name == "acl.rt.malloc_host" and out and type(out[0]) is int and out[0] > BIG_HOST:
        out[0] = BIG_HOST
    return out


kinds = {}
messages = set()
stats = {"calls": 0, "returned": 0, "allowed_exc": 0, "internal": [], "functions": len(CALLS)}


def calls_of(c):
    """A call of ``c`` (name, function, arity): its arguments, mostly as many as it takes."""
    return st.tuples(st.just(c), st.sampled_from([c[2]] * 4 + [max(c[2] - 1, 0), c[2] + 1])
                     .flatmap(lambda n: st.lists(junk(), min_size=n, max_size=n)))


ANY_CALL = st.sampled_from(CALLS).flatmap(calls_of)
SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None,
            "phases": [Phase.generate]}


def run_plan(plan):
    global POOL
    LIVE_IDS.clear()
    LIVE_IDS.update(i for t in threading.enumerate() for i in (t.ident, t.native_id))
    for (name, fn, _n), raw in plan:
        args = safe(raw, name)
        stats["calls"] += 1
        try:
            out = fn(*args)
            stats["returned"] += 1
        except ALLOWED as exc:
            stats["allowed_exc"] += 1
            kinds[type(exc).__name__] = kinds.get(type(exc).__name__, 0) + 1
            messages.add(f"{name}: {type(exc).__name__}: {str(exc)[:90]}")
            continue
        except BaseException as exc:  # an internal exception: the bug this test looks for
            stats["internal"].append(f"{name}{tuple(map(repr, args))}: {type(exc).__name__}: "
                                     f"{exc}"[:300])
            continue
        if name in ("acl.rt.reset_device", "acl.rt.reset_device_force") and out == 0:
            acl.rt.set_device(0)
            POOL = fresh_pool()
        elif name == "acl.rt.malloc_host" and isinstance(out, tuple) and out[-1] == 0:
            acl.rt.free_host(out[0])


def sweep(c):
    """``EXAMPLES`` plans ending with a call of ``c``, after 0 to 2 random calls."""
    @settings(max_examples=EXAMPLES, derandomize=True, **SETTINGS)
    @given(st.lists(ANY_CALL, max_size=2), calls_of(c))
    def one(before, target):
        run_plan([*before, target])
        called.add(c[0])

    one()


@settings(max_examples=100, **SETTINGS)
@given(st.lists(ANY_CALL, min_size=1, max_size=4))
def fuzz(plan):
    run_plan(plan)


called = set()


@scenario
def fuzz_all():
    global POOL
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    POOL = fresh_pool()
    start = time.monotonic()
    for c in CALLS:  # every function, EXAMPLES times
        sweep(c)
    batches = 0
    while time.monotonic() - start < TIME_BUDGET_S:  # a longer hunt, asked for
        fuzz()
        batches += 1
    R["stats"] = {k: v for k, v in stats.items() if k != "internal"}
    R["stats"]["exceptions"] = kinds
    R["stats"]["examples"] = len(CALLS) * EXAMPLES + batches * 100
    R["stats"]["called"] = len(called)
    R["messages"] = sorted(messages)
    R["internal"] = stats["internal"][:20]
    R["n_internal"] = len(stats["internal"])
    R["seconds"] = round(time.monotonic() - start, 1)

    # the card is still usable
    acl.rt.set_device(0)
    d = malloc(1 << 16)
    payload = os.urandom(1 << 16)
    h2d(d, payload)
    s = stream()
    ok(acl.rt.memset_async(d, 16, 0, 16, s), "memset_async")
    ok(acl.rt.synchronize_stream(s), "synchronize_stream")
    R["roundtrip"] = d2h(d, 1 << 16) == b"\0" * 16 + payload[16:]
    R["status"] = ints(acl.rt.query_device_status(0))


if __name__ == "__main__":
    main()
