"""pyACL behaviour that real programs written for hardware rely on.

Each scenario is one pyACL program in a fresh interpreter (``run_py``) with an embedded node;
the child records what it saw in ``R`` and the assertions are made here.
"""

from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from childprog import CHILD_HELPERS, run_scenario

pytestmark = pytest.mark.integration

ENV = {"NPUEMU_DEVICES": "2", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
INVALID_PARAM = 100000
REPEAT_INITIALIZE = 100002
REPEAT_FINALIZE = 100037
BAD_ALLOC = 200000
RT_PARAM_INVALID = 107000
THREAD_SUBSCRIBE = 107012
NO_DEVICE = 207004

PRELUDE = CHILD_HELPERS + """
ok(acl.init(), "init")
ok(acl.rt.set_device(0), "set_device")
"""


def scenario(run_py, body: str, env: dict[str, str] | None = None, timeout: float = 90) -> dict:
    return run_scenario(run_py, PRELUDE, body, {**ENV, **(env or {})}, timeout)


def test_thread_ids_are_pthread_ids_and_subscriptions_end_with_their_stream(run_py):
    r = scenario(run_py, """
        s = stream()
        got = []
        done = threading.Event()
        def serve():  # start_thread(fn, None) calls fn(), as pyACL's does
            acl.rt.set_context(ctx)
            while not done.is_set():
                if acl.rt.process_report(200) == 107012:  # not subscribed (yet, or any more)
                    time.sleep(0.01)
        ctx, ret = acl.rt.get_context()
        tid, ret = acl.util.start_thread(serve, None)
        R["start"] = ret
        R["tid_is_ident"] = any(t.ident == tid for t in threading.enumerate())
        R["subscribe"] = acl.rt.subscribe_report(tid, s)
        R["subscribe_again"] = acl.rt.subscribe_report(tid, s)
        R["bogus_tid"] = acl.rt.subscribe_report(12345, stream())
        R["none_tid"] = acl.rt.subscribe_report(None, s)
        ok(acl.rt.launch_callback(lambda a: got.append((a, threading.get_ident())), 7, 1, s))
        ok(acl.rt.synchronize_stream(s), "sync")
        R["got"] = [got[0][0], got[0][1] == tid] if got else []
        # a thread blocked in process_report(-1) wakes when its only stream is destroyed
        s2 = stream()
        out = {}
        subscribed = threading.Event()
        def wait_forever():
            subscribed.wait(10)
            out["ret"] = acl.rt.process_report(-1)
        waiter = threading.Thread(target=wait_forever, daemon=True)
        waiter.start()
        ok(acl.rt.subscribe_report(waiter.ident, s2), "subscribe waiter")
        subscribed.set()
        time.sleep(0.2)  # let it block in process_report (the test holds either way)
        ok(acl.rt.destroy_stream(s2), "destroy s2")
        waiter.join(10)
        R["waiter_alive"] = waiter.is_alive()
        R["waiter_ret"] = out.get("ret")
        done.set()
        ok(acl.rt.unsubscribe_report(tid, s), "unsubscribe")
        R["stop"] = acl.util.stop_thread(tid)
    """)
    assert r["start"] == 0 and r["tid_is_ident"]
    assert r["subscribe"] == 0 and r["subscribe_again"] == 100033
    assert r["bogus_tid"] == RT_PARAM_INVALID and r["none_tid"] == RT_PARAM_INVALID
    assert r["got"] == [7, True]
    assert not r["waiter_alive"] and r["waiter_ret"] == THREAD_SUBSCRIBE
    assert r["stop"] == 0


def test_memcpy_direction_from_addresses_and_memset_async_on_pinned_memory(run_py):
    r = scenario(run_py, """
        n = 4096
        d = malloc(n)
        src = bytes(range(256)) * 16
        # kind says D2H, the addresses say H2D: the copy follows the addresses
        R["wrong_kind"] = acl.rt.memcpy(d, n, acl.util.bytes_to_ptr(src), n, 2)
        R["back"] = d2h(d, n) == src
        R["kind_list"] = acl.rt.memcpy(d, n, acl.util.bytes_to_ptr(src), n, [1])
        R["kind_99"] = acl.rt.memcpy(d, n, acl.util.bytes_to_ptr(src), n, 99)
        hp, ret = acl.rt.malloc_host(n)
        ok(ret, "malloc_host")
        s = stream()
        R["memset_pinned"] = acl.rt.memset_async(hp, n, 0x5A, n, s)
        ok(acl.rt.synchronize_stream(s), "sync")
        R["pinned_bytes"] = acl.util.ptr_to_bytes(hp, n) == b"\\x5a" * n
        heap = bytearray(n)
        R["memset_pageable"] = acl.rt.memset_async(acl.util.bytes_to_ptr(heap), n, 1, n, s)
        ok(acl.rt.free_host(hp), "free_host")
    """)
    assert r == {"wrong_kind": 0, "back": True, "kind_list": RT_PARAM_INVALID,
                 "kind_99": RT_PARAM_INVALID, "memset_pinned": 0, "pinned_bytes": True,
                 "memset_pageable": RT_PARAM_INVALID}


def test_calls_without_parameters_data_buffers_app_log_and_type_sizes(run_py, tmp_path):
    r = scenario(run_py, """
        R["soc"] = acl.get_soc_name("x", 1) == acl.get_soc_name()
        R["version"] = list(acl.get_version(None))
        R["run_mode"] = [type(v).__name__ for v in acl.rt.get_run_mode(0)]
        R["run_mode_value"] = acl.rt.get_run_mode()[0]
        R["rt_soc"] = acl.rt.get_soc_name(1) == acl.get_soc_name()
        R["device"] = list(acl.rt.get_device("ignored"))
        R["status_type"] = type(acl.rt.query_device_status(0)[0]).__name__
        d = malloc(64)
        buf = acl.create_data_buffer(d, 64)
        R["addr"] = acl.get_data_buffer_addr(buf) == d
        R["size"] = [acl.get_data_buffer_size(buf), acl.get_data_buffer_size_v2(buf)]
        R["update"] = acl.update_data_buffer(buf, d + 32, 32)
        R["after"] = [acl.get_data_buffer_addr(buf) - d, acl.get_data_buffer_size_v2(buf)]
        R["empty"] = acl.get_data_buffer_size_v2(acl.create_data_buffer(0, 0))
        R["destroy"] = acl.destroy_data_buffer(buf)
        R["destroy_again"] = acl.destroy_data_buffer(buf)
        R["gone"] = [acl.get_data_buffer_addr(buf), acl.get_data_buffer_size(buf)]
        R["sizes"] = [acl.data_type_size(t) for t in (0, 1, 2, 3, 9, 11, 12, 13, 27, -1, 999)]
        acl.app_log(3, "app says hello")
        acl.app_log(0, "debug is filtered at the default level")
        R["bad_level"] = acl.app_log(42, "ignored")
    """, env={"ASCEND_PROCESS_LOG_PATH": str(tmp_path)})
    assert r["soc"] and r["rt_soc"] and r["version"] == [1, 17, 0, 0]
    assert r["run_mode"] == ["int", "int"] and r["run_mode_value"] == 1
    assert r["device"] == [0, 0] and r["status_type"] == "int"
    assert r["addr"] and r["size"] == [64, 64] and r["update"] == 0 and r["after"] == [32, 32]
    assert r["empty"] == 0 and r["destroy"] == 0 and r["destroy_again"] == INVALID_PARAM
    assert r["gone"] == [0, 0]
    assert r["sizes"] == [4, 2, 1, 4, 8, 8, 1, 0, 2, 0, 8]
    assert r["bad_level"] is None
    logs = "".join(pathlib.Path(p).read_text()
                   for p in glob.glob(f"{tmp_path}/debug/plog/plog-*.log"))
    assert "[ERROR] APP(" in logs and "app says hello" in logs
    assert "debug is filtered" not in logs


def test_persistent_stream_resources_are_reused(run_py):
    r = scenario(run_py, """
        PERSISTENT = 0x4
        s, ret = acl.rt.create_stream_with_config(0, PERSISTENT)
        ok(ret, "create persistent")
        sid = acl.rt.stream_get_id(s)[0]
        d = malloc(4096)
        ok(acl.rt.memset_async(d, 4096, 1, 4096, s), "memset_async")
        ok(acl.rt.synchronize_stream(s), "sync persistent")
        ok(acl.rt.destroy_stream(s), "destroy persistent")
        s2 = stream()
        R["reused_id"] = acl.rt.stream_get_id(s2)[0] == sid
        ok(acl.rt.memset_async(d, 4096, 7, 4096, s2), "memset_async on reused")
        R["sync"] = acl.rt.synchronize_stream(s2)
        R["bytes"] = d2h(d, 4096) == b"\\x07" * 4096
        R["query"] = ints(acl.rt.stream_query(s2))
        ok(acl.rt.destroy_stream(s2), "destroy reused")
        s3 = stream()  # a plain stream is destroyed for real: the next gets a new id
        ok(acl.rt.destroy_stream(s3), "destroy plain")
        s4 = stream()
        R["fresh_id"] = acl.rt.stream_get_id(s4)[0] not in (sid, acl.rt.stream_get_id(s3)[0])
    """)
    assert r == {"reused_id": True, "sync": 0, "bytes": True, "query": [0, 0],
                 "fresh_id": True}


def test_bad_arguments_return_codes_not_internal_exceptions(run_py):
    r = scenario(run_py, """
        R["free_host_str"] = acl.rt.free_host("abc")
        R["malloc_host_huge"] = ints(acl.rt.malloc_host(2**63))
        R["attrs_none"] = acl.rt.pointer_get_attributes(None)[-1]
        bad = []
        for ptr, size in ((1, 16), (0x10, 1), (2**47 - 4096, 16), (0xdead0000, 8)):
            try:
                acl.util.ptr_to_bytes(ptr, size)
            except ValueError:
                bad.append("ValueError")
        R["ptr_to_bytes"] = bad
        R["empty_ok"] = acl.util.ptr_to_bytes(acl.util.bytes_to_ptr(b"ab"), 0) == b""
        R["still_alive"] = ints(acl.rt.get_mem_info(1))[-1]
    """)
    assert r["free_host_str"] == RT_PARAM_INVALID
    assert r["malloc_host_huge"] == [0, BAD_ALLOC]
    assert r["attrs_none"] == INVALID_PARAM
    assert r["ptr_to_bytes"] == ["ValueError"] * 4
    assert r["empty_ok"] and r["still_alive"] == 0


def test_finalize_behaves_as_acl_finalize(run_py):
    r = run_py(CHILD_HELPERS + textwrap.dedent("""
        R["finalize_before_init"] = acl.finalize()
        R["finalize_twice"] = acl.finalize()
        R["init"] = acl.init()
        R["init_twice"] = acl.init()
        ok(acl.rt.set_device(0), "set_device")
        d = malloc(1024)
        s = stream()
        R["finalize"] = acl.finalize("extra")
        # devices are not reset by aclFinalize: runtime calls keep working
        h2d(d, b"x" * 1024)
        R["after_finalize"] = d2h(d, 1024) == b"x" * 1024
        R["sync"] = acl.rt.synchronize_stream(s)
        R["finalize_again"] = acl.finalize()
        R["reinit"] = acl.init()
        ok(acl.rt.destroy_stream(s), "destroy_stream")
        ok(acl.rt.free(d), "free")
        ok(acl.rt.reset_device(0), "reset")
        R["final"] = acl.finalize()
        print("RESULT " + json.dumps(R))
    """), env=ENV, timeout=90)
    assert r.returncode == 0, r.stderr
    import json
    got = json.loads(r.stdout.split("RESULT ", 1)[1])
    assert got == {"finalize_before_init": 0, "finalize_twice": REPEAT_FINALIZE, "init": 0,
                   "init_twice": REPEAT_INITIALIZE, "finalize": 0, "after_finalize": True,
                   "sync": 0, "finalize_again": REPEAT_FINALIZE, "reinit": 0, "final": 0}


def test_peer_access_does_not_survive_reset_device(run_py):
    r = scenario(run_py, """
        ok(acl.rt.device_enable_peer_access(1, 0), "enable")
        R["before"] = ints(acl.rt.device_peer_access_status(0, 1))
        ok(acl.rt.reset_device(0), "reset")
        ok(acl.rt.set_device(0), "set again")
        R["after"] = ints(acl.rt.device_peer_access_status(0, 1))
        R["enable_again"] = acl.rt.device_enable_peer_access(1, 0)
    """)
    assert r == {"before": [1, 0], "after": [0, 0], "enable_again": 0}


@pytest.mark.parametrize("var,value", [("NPUEMU_MAX_STREAMS", "abc"),
                                       ("NPUEMU_SOC", "Ascend910B9"),
                                       ("NPUEMU_TOPOLOGY", "0-9"),
                                       ("NPUEMU_DEVICES", "0")])
def test_bad_configuration_is_one_line_and_a_code(run_py, var, value):
    res = run_py(CHILD_HELPERS + textwrap.dedent("""
        R["init"] = acl.init()
        R["msg"] = acl.get_recent_err_msg()
        R["set_device"] = acl.rt.set_device(0)
        R["count"] = ints(acl.rt.get_device_count())
        print("RESULT " + json.dumps(R))
    """), env={**ENV, var: value}, timeout=60)
    assert res.returncode == 0, res.stderr
    import json
    r = json.loads(res.stdout.split("RESULT ", 1)[1])
    assert r["init"] == INVALID_PARAM and r["set_device"] == NO_DEVICE
    assert r["count"] == [0, NO_DEVICE]
    assert var in r["msg"]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and var in lines[0] and "Traceback" not in res.stderr


def test_import_acl_everywhere_and_a_real_pyacl_wins(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import acl, acl.rt, acl.util, multiprocessing as mp, subprocess, sys\n"
            "def child(q):\n    import acl\n    q.put(acl.__name__)\n"
            "if __name__ == '__main__':\n"
            "    q = mp.get_context('spawn').Queue()\n"
            "    p = mp.get_context('spawn').Process(target=child, args=(q,))\n"
            "    p.start(); name = q.get(timeout=60); p.join(60)\n"
            "    sub = subprocess.run([sys.executable, '-c', 'import acl; print(acl.__name__)'],"
            " capture_output=True, text=True, timeout=60).stdout.strip()\n"
            "    print(acl.__name__, name, sub)\n")
    script = tmp_path / "prog.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert out.stdout.split() == ["npuemu.host.acl"] * 3, out.stderr
    real = tmp_path / "real"
    real.mkdir()
    (real / "acl.py").write_text("REAL = True\n")
    out = subprocess.run([sys.executable, "-c", "import acl; print(acl.REAL)"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**env, "PYTHONPATH": str(real)})
    assert out.stdout.strip() == "True", out.stderr


def test_npuemu_run_module(tmp_path):
    pkg = tmp_path / "prog"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import sys, acl\nprint(acl.__name__, sys.argv[1:])\n")
    out = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "run", "-m", "prog", "a",
                          "--flag"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "npuemu.host.acl ['a', '--flag']"


def test_callback_tables_under_concurrent_subscribe_launch_and_destroy(run_py):
    """Stress for the threading model of host/core/callbacks.py: several threads subscribe,
    launch blocking callbacks, serve them, unsubscribe and destroy their streams while the
    report thread walks the subscriber map and exception callbacks come and go."""
    r = scenario(run_py, """
        ctx, ret = acl.rt.get_context()
        codes, served = [], []
        lock = threading.Lock()
        def note(ret):
            if ret:
                with lock:
                    codes.append(ret)
        def worker(k):
            acl.rt.set_context(ctx)
            me = threading.get_ident()
            for i in range(25):
                s = stream()
                note(acl.rt.subscribe_report(me, s))
                note(acl.rt.launch_callback(lambda a: served.append(a), (k, i), 1, s))
                note(acl.rt.process_report(10000))
                note(acl.rt.synchronize_stream_with_timeout(s, 10000))
                if i % 2:
                    note(acl.rt.unsubscribe_report(me, s))
                note(acl.rt.destroy_stream(s))
        def churn():
            fn = lambda info: None
            for _ in range(200):
                note(acl.rt.exception_info_callback_register(fn))
                note(acl.rt.exception_info_callback_unregister(fn))
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        threads.append(threading.Thread(target=churn))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        R["hung"] = sum(t.is_alive() for t in threads)
        R["codes"] = sorted(set(codes))
        R["served"] = len(served)
        reporters = [t for t in threading.enumerate() if t.name.startswith("npuemu-reports")]
        R["reporter_alive"] = bool(reporters) and all(t.is_alive() for t in reporters)
    """, timeout=240)
    assert r == {"hung": 0, "codes": [], "served": 100, "reporter_alive": True}


def test_readme_pyacl_example_runs_as_written(run_py):
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## The pyACL face"):]
    example = section[section.index("```python") + len("```python"):]
    example = example[:example.index("```")]
    res = run_py(example + "\nprint('example ok', ret)\n",
                 env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"},
                 timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("example ok 0")
