"""The ``npuemu`` command: start / status / stop of shared nodes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from npuemu.shared import shm

GiB = 1 << 30

STATUS_WITH_EMPTY_SHM = """
import sys, tempfile
from npuemu.shared import shm
shm.SHM_DIR = tempfile.mkdtemp()  # an empty /dev/shm: no node at all
from npuemu.tools.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("isolation", ["private_dev_shm", "patched_shm_dir"])
def test_status_without_any_node(isolation, run_py, tmp_path):
    """Other programs on this machine may run nodes, so /dev/shm is made empty for the
    command: a private tmpfs in a new mount namespace (where permitted), or by pointing
    ``shm.SHM_DIR`` at an empty directory."""
    if isolation == "private_dev_shm":
        unshare = shutil.which("unshare")
        probe = unshare and subprocess.run(
            [unshare, "-m", "sh", "-c", "mount -t tmpfs tmpfs /dev/shm"],
            capture_output=True, timeout=10)
        if not probe or probe.returncode:
            pytest.skip("cannot mount a private /dev/shm here (needs unshare -m as root)")
        cli = f"{sys.executable} -m npuemu.tools.cli"
        shell = (f"mount -t tmpfs tmpfs /dev/shm && {cli} status; echo rc=$?; "
                 f"{cli} status --json; echo rc=$?")
        env = {k: v for k, v in os.environ.items() if k != "NPUEMU_NODE"}
        res = subprocess.run([unshare, "-m", "sh", "-c", shell], capture_output=True,
                             text=True, timeout=60, env=env)
        text, _, rest = res.stdout.partition("rc=")
        rc_text, _, rest = rest.partition("\n")
        json_text, _, rc_json = rest.partition("rc=")
        plain = (text, int(rc_text))
        as_json = (json_text, int(rc_json))
    else:
        one = run_py(STATUS_WITH_EMPTY_SHM.replace("sys.argv[1:]", "['status']"))
        two = run_py(STATUS_WITH_EMPTY_SHM.replace("sys.argv[1:]", "['status', '--json']"))
        plain = (one.stdout, one.returncode)
        as_json = (two.stdout, two.returncode)
    assert plain == ("npuemu: no node is running\n", 0), res_repr(plain)
    assert json.loads(as_json[0]) == [] and as_json[1] == 0, res_repr(as_json)


def res_repr(value: tuple) -> str:
    return f"output {value[0]!r}, exit status {value[1]}"


def test_start_status_stop_round_trip(npuemu_cli, node_name, tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    res = npuemu_cli("start", "--name", node_name, "--devices", "2", "--hbm", "1G",
                     "--ddr", "256M", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    m = re.fullmatch(rf"node {re.escape(node_name)} ready: 2 x Ascend910B1 in [0-9.]+ s "
                     rf"\(supervisor pid (\d+), log (\S+)\)\n", res.stdout)
    assert m, res.stdout
    sup_pid = int(m.group(1))
    assert m.group(2).startswith(str(tmp_path))

    res = npuemu_cli("status", "--name", node_name, "--json")
    assert res.returncode == 0, res.stderr
    nodes = json.loads(res.stdout)
    assert len(nodes) == 1
    node = nodes[0]
    assert node["name"] == node_name
    assert node["state"] == "READY"
    assert node["soc"] == "Ascend910B1"
    assert node["supervisor_pid"] == sup_pid
    assert node["owner_pid"] == 0  # a shared node has no owner
    assert [d["id"] for d in node["devices"]] == [0, 1]
    for dev in node["devices"]:
        for key in ("id", "pid", "state", "health", "hbm_used", "hbm_total", "hosts"):
            assert key in dev, (key, dev)
        assert dev["state"] == "READY" and dev["health"] == "OK"
        assert dev["hbm_used"] == 0 and dev["hbm_total"] == GiB
        assert dev["ddr_total"] == 256 << 20
        assert dev["hosts"] == []
        worker = psutil.Process(dev["pid"])
        cmdline = " ".join(worker.cmdline()).split()  # its title (forked, device/start.py)
        assert "npuemu.device" in cmdline and cmdline[cmdline.index("--dev") + 1] == str(
            dev["id"])
        assert worker.ppid() == sup_pid

    res = npuemu_cli("status", "--name", node_name)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"node {node_name}  (Ascend910B1, 2 devices, READY, "
                               f"supervisor pid {sup_pid}")
    rows = [ln.split() for ln in lines[2:4]]
    assert [r[:4] for r in rows] == [["0", str(node["devices"][0]["pid"]), "READY", "OK"],
                                     ["1", str(node["devices"][1]["pid"]), "READY", "OK"]]
    assert all("1.0 GiB" in ln and "256.0 MiB" in ln for ln in lines[2:4])
    assert lines[4].startswith("topology: HCCS groups {0,1}")

    # NPUEMU_NODE selects the node when --name is not given
    res = npuemu_cli("status", "--json", env={"NPUEMU_NODE": node_name})
    assert [n["name"] for n in json.loads(res.stdout)] == [node_name]

    pids = [sup_pid] + [d["pid"] for d in node["devices"]]
    res = npuemu_cli("stop", "--name", node_name, timeout=30)
    assert (res.returncode, res.stdout) == (0, f"node {node_name} stopped\n"), res.stderr
    # `stop` returns when the supervisor closes our connection, which it does just before it
    # unlinks the node's names (device/supervisor.py Supervisor.stop): allow a moment
    deadline = time.monotonic() + 2
    while shm.leftovers(node_name) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert shm.leftovers(node_name) == []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).wait(5)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    res = npuemu_cli("status", "--name", node_name)
    assert res.returncode == 1
    assert f"no node named {node_name!r} is running" in res.stdout


def test_stop_of_a_missing_node_exits_1(npuemu_cli, node_name):
    res = npuemu_cli("stop", "--name", node_name, timeout=30)
    assert res.returncode == 1
    assert f"no node named {node_name!r} is running" in res.stderr
    assert res.stdout == ""


def test_start_twice_with_the_same_name_fails_cleanly(npuemu_cli, shared_node, run_py,
                                                      status, tmp_path):
    name = shared_node(devices=2, hbm="1G", ddr="256M")
    before = status(name)
    res = npuemu_cli("start", "--name", name, "--devices", "2", "--hbm", "1G",
                     "--ddr", "256M", env={"TMPDIR": str(tmp_path)})

    # whatever the second start said, the first node is untouched and serves hosts
    after = status(name)
    assert after["supervisor_pid"] == before["supervisor_pid"]
    assert [(d["pid"], d["state"], d["starts"]) for d in after["devices"]] == [
        (d["pid"], "READY", 1) for d in before["devices"]]
    host = run_py("""
        from npuemu.host import acl
        assert acl.rt.set_device(1) == 0
        p, ret = acl.rt.malloc(4096, 0)
        data = bytes(range(256)) * 16
        assert acl.rt.memcpy(p, 4096, acl.util.bytes_to_ptr(data), 4096, 1) == 0
        out = bytearray(4096)
        assert acl.rt.memcpy(acl.util.bytes_to_ptr(out), 4096, p, 4096, 2) == 0
        assert bytes(out) == data and ret == 0
        print("host ok")
    """, env={"NPUEMU_NODE": name}, timeout=30)
    assert host.returncode == 0 and host.stdout == "host ok\n", host.stderr
    assert len([e for e in shm.leftovers(name) if e.endswith(".reg")]) == 1

    # ... and the second start reported the failure
    assert res.returncode != 0, f"second start succeeded:\n{res.stdout}"
    assert name in res.stderr and "ready" not in res.stdout


def test_a_killed_supervisor_does_not_block_its_name(npuemu_cli, node_name, status, tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    res = npuemu_cli("start", "--name", node_name, "--devices", "2", "--hbm", "64M",
                     "--ddr", "64M", env=env)
    assert res.returncode == 0, res.stderr
    node = status(node_name)
    workers = [d["pid"] for d in node["devices"]]
    sup = psutil.Process(node["supervisor_pid"])
    sup.kill()
    sup.wait(5)
    try:
        for pid in workers:  # workers notice through their pidfd that the supervisor died
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).wait(5)
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        res = npuemu_cli("start", "--name", node_name, "--devices", "2", "--hbm", "64M",
                         "--ddr", "64M", env=env)
        assert res.returncode == 0, f"name still blocked: {res.stderr}"
        assert status(node_name)["supervisor_pid"] != sup.pid
    finally:
        if not any(p.info["cmdline"] and "--node" in p.info["cmdline"]
                   and node_name in p.info["cmdline"]
                   for p in psutil.process_iter(["cmdline"])):
            shm.unlink_all(node_name)  # the manual remedy today: remove the stale names
