"""The diagnosis commands against live shared nodes: ``npuemu inject``, ``npuemu smi``
(npu-smi) and ``npuemu msnpureport``, each run as a subprocess (``npuemu_cli``), with pyACL
workloads in other processes.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import psutil

from npuemu.shared import address
from npuemu.tools import smi

HBM_ECC, LOST = 507054, 507010
SIZES = {"hbm": "64M", "ddr": "64M"}

WORKLOAD = """
import json, os, sys, time
from npuemu.tools.cli import install_acl
install_acl()
import acl
GO = {go!r}
R = {{}}
codes = []
assert acl.rt.set_device(0) == 0
acl.rt.set_exception_info_callback(
    lambda info: codes.append(acl.rt.get_error_code_from_exception_info(info)))
p, ret = acl.rt.malloc(3 << 20, 0)
assert ret == 0
page = bytes(4096)
ptr = acl.util.bytes_to_ptr(page)
assert acl.rt.memcpy(p, 4096, ptr, 4096, 1) == 0
print(json.dumps({{"ptr": p}}), flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(GO) and time.monotonic() < deadline:
    time.sleep(0.01)
R["h2d_page1"] = acl.rt.memcpy(p + 4096, 4096, ptr, 4096, 1)
R["h2d_page0"] = acl.rt.memcpy(p, 4096, ptr, 4096, 1)
R["d2h_page1"] = acl.rt.memcpy(ptr, 4096, p + 4096, 4096, 2)
s, ret = acl.rt.create_stream()
R["memset_async"] = [acl.rt.memset_async(p + 4096, 4096, 0, 4096, s),
                     acl.rt.synchronize_stream(s)]
R["status"] = int(acl.rt.query_device_status(0)[0])
deadline = time.monotonic() + 3
while not codes and time.monotonic() < deadline:
    time.sleep(0.01)
R["callbacks"] = codes
print(json.dumps(R), flush=True)
"""


def cli_ok(npuemu_cli, *args: str, cwd: str | None = None) -> str:
    res = npuemu_cli(*args, cwd=cwd, timeout=30)
    assert res.returncode == 0, f"npuemu {' '.join(args)}: rc {res.returncode}\n" \
                                f"{res.stdout}\n{res.stderr}"
    return res.stdout


def fields(text: str) -> dict[str, str]:
    """npu-smi's ``key : value`` lines as a dict (the last value of a key wins)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" : ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def npu_rows(table: str) -> dict[int, tuple[list[str], list[str]]]:
    """The two box-table lines of each NPU, split into cells, by NPU ID."""
    lines = table.splitlines()
    head = lines.index(next(ln for ln in lines if ln.startswith("| NPU   Name")))
    rows: dict[int, tuple[list[str], list[str]]] = {}
    i = head + 3  # two header lines and a ==== line
    while lines[i].startswith("| ") and re.match(r"\| \d+ ", lines[i]):
        rows[int(cells(lines[i])[0].split()[0])] = (cells(lines[i]), cells(lines[i + 1]))
        i += 3
    return rows


def process_rows(table: str) -> list[list[str]]:
    lines = table.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("| NPU ID  ")
                             and "Process id" in ln))
    return [cells(ln) for ln in lines[start + 2:] if ln.startswith("| ")]


def wait_for_line(proc, timeout: float = 30) -> dict:
    line = proc.stdout.readline()
    assert line, f"workload ended early: {proc.stderr.read()}"
    return json.loads(line)


# ----------------------------------------------------------------------------------- smi
def test_smi_info_table_rows_per_npu_and_processes(npuemu_cli, module_node, spawn_py,
                                                   tmp_path):
    name = module_node(devices=2, **SIZES)
    go = str(tmp_path / "go")
    work = spawn_py(WORKLOAD.format(go=go), env={"NPUEMU_NODE": name})
    wait_for_line(work)

    table = cli_ok(npuemu_cli, "smi", "info", "--name", name)
    lines = table.splitlines()
    assert re.fullmatch(rf"\| npu-smi {re.escape(smi.DRIVER_VERSION)} +Version: "
                        rf"{re.escape(smi.DRIVER_VERSION)} +\|", lines[1]), lines
    assert len({len(ln) for ln in lines}) == 1, "ragged box table"
    assert cells(lines[3]) == ["NPU   Name", "Health",
                               "Power(W)    Temp(C)           Hugepages-Usage(page)"]
    assert cells(lines[4]) == ["Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"]
    rows = npu_rows(table)
    assert sorted(rows) == [0, 1]
    usage = re.compile(r"(\d+) +/ (\d+)")
    for npu, bus in ((0, "0000:C1:00.0"), (1, "0000:C2:00.0")):
        first, second = rows[npu]
        assert first[0].split() == [str(npu), "910B1"] and first[1] == "OK", first
        power, temp, huge = first[2].split(None, 2)
        assert usage.fullmatch(huge).groups() == tuple(map(str, smi.host_hugepages()))
        assert second[0] == "0" and second[1] == bus  # the Chip row: chip 0 of the card
        util, rest = second[2].split(None, 1)
        assert 0 <= int(util) <= 100  # power and temperature: the stated model of NPU Util
        assert (float(power), int(temp)) == (round(smi.power_w(int(util)), 1),
                                             smi.temp_c(int(util))), (first, second)
        ddr, hbm = usage.findall(rest)
        assert ddr[1] == hbm[1] == "64"
        assert int(hbm[0]) >= (3 if npu == 0 else 0) and (npu == 0 or hbm[0] == "0"), rows
    procs = process_rows(table)
    me = psutil.Process(work.pid)
    assert procs[0] == ["0", str(work.pid), me.name(), procs[0][3]] and int(procs[0][3]) >= 3
    assert procs[1] == ["No running processes found in NPU 1"]
    Path(go).touch()
    work.communicate(timeout=30)

    listing = cli_ok(npuemu_cli, "smi", "info", "-l", "--name", name)
    blocks = [fields(b) for b in listing.split("\n\n")]
    assert blocks[0] == {"Total Count": "2"}
    assert [(b["NPU ID"], b["Product Name"]) for b in blocks[1:]] == [
        ("0", "Ascend910B1"), ("1", "Ascend910B1")]
    assert len({b["Serial Number"] for b in blocks[1:]}) == 2

    memory = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "memory", "-i", "1", "--name", name))
    assert (memory["NPU ID"], memory["HBM Capacity(MB)"], memory["DDR Capacity(MB)"]) == (
        "1", "64", "64")
    assert {"DDR Clock Speed(MHz)", "HBM Clock Speed(MHz)", "HBM Temperature(C)",
            "HBM Manufacturer ID"} <= set(memory)
    health = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "health", "-i", "1",
                           "--name", name))
    assert health == {"NPU ID": "1", "Health": "OK", "Error Code": "NA",
                      "Error Information": "NA"}

    # NPUEMU_NODE selects the node; bad uses exit non-zero with a message
    res = npuemu_cli("smi", "info", "-t", "ecc", "-i", "1", env={"NPUEMU_NODE": name})
    assert res.returncode == 0 and fields(res.stdout)["HBM Double Bit Error Count"] == "0"
    for args, rc, text in ((["-t", "ecc"], 2, "needs -i"),
                           (["-t", "ecc", "-i", "5"], 1, "no NPU 5"),
                           (["-t", "bogus", "-i", "0"], 2, "invalid choice")):
        res = npuemu_cli("smi", "info", "--name", name, *args)
        assert (res.returncode, text in res.stderr) == (rc, True), (args, res.stderr)
    res = npuemu_cli("smi", "info", "--name", name + "-none")
    assert res.returncode == 1 and "no node named" in res.stderr


def test_npuemu_help_lists_the_diagnosis_commands(npuemu_cli):
    out = cli_ok(npuemu_cli, "-h")
    for command in ("inject", "smi", "msnpureport"):
        assert re.search(rf"^\s+{command}\s+\S", out, re.M), out
    res = npuemu_cli("inject", "-h")
    assert res.returncode == 0 and "ecc_multi" in res.stdout


# ------------------------------------------------------------------------- inject & ECC
def test_ecc_multi_injected_by_cli_under_a_running_workload(npuemu_cli, shared_node,
                                                            spawn_py, status, tmp_path):
    name = shared_node(devices=2, **SIZES)
    go = str(tmp_path / "go")
    work = spawn_py(WORKLOAD.format(go=go), env={"NPUEMU_NODE": name})
    ptr = wait_for_line(work)["ptr"]
    assert fields(cli_ok(npuemu_cli, "smi", "info", "-t", "health", "-i", "0", "--name",
                         name))["Health"] == "OK"

    out = cli_ok(npuemu_cli, "inject", "--name", name, "-d", "0", "ecc_multi",
                 f"ptr={ptr + 4096 + 17:#x}")
    assert out == f"injected ecc_multi into device 0 of node {name}: ptr={ptr + 4113:#x}\n"
    rows = npu_rows(cli_ok(npuemu_cli, "smi", "info", "--name", name))
    assert (rows[0][0][1], rows[1][0][1]) == ("Alarm", "OK")
    health = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "health", "-i", "0", "--name", name))
    assert (health["Health"], health["Error Code"]) == ("Alarm", str(HBM_ECC))
    assert health["Error Information"].startswith("ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR")
    ecc = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "ecc", "-i", "0", "--name", name))
    assert ecc == {"NPU ID": "0",
                   "HBM Single Bit Error Count": "0", "HBM Double Bit Error Count": "1",
                   "HBM Single Bit Aggregate Total Err Cnt": "0",
                   "HBM Double Bit Aggregate Total Err Cnt": "1",
                   "HBM Single Bit Isolated Pages Count": "0",
                   "HBM Double Bit Isolated Pages Count": "1",
                   "HBM Single Bit Next-Isolated Pages Count": "0",
                   "HBM Double Bit Next-Isolated Pages Count": "0"}

    # the workload, still attached, now trips over the isolated page
    Path(go).touch()
    out, err = work.communicate(timeout=30)
    r = json.loads(out.splitlines()[-1])
    assert r == {"h2d_page1": HBM_ECC, "h2d_page0": 0, "d2h_page1": HBM_ECC,
                 "memset_async": [0, HBM_ECC], "status": 1, "callbacks": [HBM_ECC]}, err

    # five corrected errors on card 1 from a fault file: health Warning (threshold 5)
    dev1 = address.encode(1, address.HBM, 0x2000)
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps([{"device": 1, "kind": "ecc_single", "params": {"ptr": dev1}}]
                                 * 5))
    out = cli_ok(npuemu_cli, "inject", "--name", name, "--file", str(faults))
    assert out.count("injected ecc_single into device 1") == 5
    ecc1 = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "ecc", "-i", "1", "--name", name))
    assert (ecc1["HBM Single Bit Error Count"], ecc1["HBM Double Bit Isolated Pages Count"]) \
        == ("5", "0")
    assert [d["health"] for d in status(name)["devices"]] == ["ALARM", "WARNING"]

    # npu-smi clear: counters to 0, health recomputed, the isolated page stays
    out = cli_ok(npuemu_cli, "smi", "set", "-t", "clear-ecc-info", "-i", "0", "--name", name)
    assert fields(out) == {"Status": "OK", "Message": "Set chip clear-ecc-info successfully"}
    ecc = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "ecc", "-i", "0", "--name", name))
    assert (ecc["HBM Double Bit Error Count"], ecc["HBM Double Bit Aggregate Total Err Cnt"],
            ecc["HBM Double Bit Isolated Pages Count"]) == ("0", "1", "1")
    rows = npu_rows(cli_ok(npuemu_cli, "smi", "info", "--name", name))
    assert (rows[0][0][1], rows[1][0][1]) == ("OK", "Warning")


def test_inject_usage_and_acl_errors(npuemu_cli, module_node, tmp_path):
    name = module_node(devices=2, **SIZES)
    for args, code, label in (
            (["-d", "0", "ecc_multi", "ptr=0x10"], 107000, "ACL_ERROR_RT_PARAM_INVALID"),
            (["-d", "7", "hang"], 107001, "ACL_ERROR_RT_INVALID_DEVICEID")):
        res = npuemu_cli("inject", "--name", name, *args)
        assert res.returncode == 1 and res.stdout == "", (args, res)
        assert f"{label} ({code})" in res.stderr, (args, res.stderr)
    res = npuemu_cli("inject", "-d", "0", "hang", env={"NPUEMU_NODE": name + "-none"})
    assert res.returncode == 1 and "no node named" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"device": 0}')
    for args in (["-d", "0"], ["hang"], ["-d", "0", "hang", "count"], ["--file", str(bad)],
                 ["--file", str(tmp_path / "missing.json")], ["-d", "0", "meltdown"],
                 ["-d", "0", "hang", "count=1", "speed=3"], ["-d", "0", "dma", "code=12"],
                 ["-d", "0", "ecc_multi"], ["-d", "0", "aicore", "kernel=relu"],
                 ["-d", "0", "link", "peer=0"], ["-d", "0", "hang", "count=0"]):
        res = npuemu_cli("inject", "--name", name, *args)
        assert res.returncode == 2 and res.stdout == "", (args, res)
        assert len(res.stderr.splitlines()) <= 2 and "Traceback" not in res.stderr, (args, res)
    # nothing of that reached a card
    ecc = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "health", "-i", "0", "--name", name))
    assert ecc["Health"] == "OK"


def test_a_lost_card_in_smi_status_and_msnpureport(npuemu_cli, shared_node, status, tmp_path):
    name = shared_node(devices=2, **SIZES)
    pid = status(name)["devices"][1]["pid"]
    t0 = time.monotonic()
    out = cli_ok(npuemu_cli, "inject", "--name", name, "-d", "1", "lost")
    assert out == f"injected lost into device 1 of node {name}: device 1 is LOST " \
                  f"(worker {pid} killed)\n"
    assert time.monotonic() - t0 < 5
    assert [d["state"] for d in status(name)["devices"]] == ["READY", "LOST"]
    rows = npu_rows(cli_ok(npuemu_cli, "smi", "info", "--name", name))
    assert rows[1][0][1:] == ["UNKNOWN", "-           -                 -"]
    assert rows[0][0][1] == "OK"
    health = fields(cli_ok(npuemu_cli, "smi", "info", "-t", "health", "-i", "1", "--name", name))
    assert (health["Health"], health["Error Code"]) == ("UNKNOWN", str(LOST))
    assert "killed by signal 9" in health["Error Information"]
    res = npuemu_cli("inject", "--name", name, "-d", "1", "hang")
    assert res.returncode == 1 and "ACL_ERROR_RT_LOST_HEARTBEAT (507010)" in res.stderr
    assert status(name)["devices"][1]["starts"] == 1  # refused: no fresh worker started
    res = npuemu_cli("msnpureport", "--name", name, "config", "--get", "-d", "1")
    assert res.returncode == 1 and "not running (LOST)" in res.stderr
    out = cli_ok(npuemu_cli, "msnpureport", "-s", "--name", name)
    assert out.splitlines() == ["Device ID: 0  Health: OK  (READY)",
                                "Device ID: 1  Health: UNKNOWN  (LOST)"]
    # the lost card's log survives for export
    out = cli_ok(npuemu_cli, "msnpureport", "--name", name, "report", "-d", "1", "-o",
                 str(tmp_path))
    root = Path(out.splitlines()[-1].removeprefix("Export finished: "))
    (info,) = root.glob("hisi_logs/device-1/*/device_info.txt")
    facts = fields(info.read_text())
    assert (facts["state"], facts["health"], facts["starts"], facts["last worker exit"]) == (
        "LOST", "UNKNOWN", "1", "-9")
    (history,) = root.glob("hisi_logs/device-1/*/history.log")
    assert "device 1 lost (injected)" in history.read_text()
    assert not list(root.glob("**/device-0*"))  # -d 1: only that card


# --------------------------------------------------------------------------- msnpureport
def exported(out: str) -> Path:
    last = out.splitlines()[-1]
    assert last.startswith("Export finished: "), out
    return Path(last.removeprefix("Export finished: "))


def tree(root: Path) -> list[str]:
    """Relative file paths with the timestamps replaced by <ts14> / <ts17>."""
    return sorted(re.sub(r"\d{17}", "<ts17>", re.sub(r"(?<!\d)\d{14}(?!\d)", "<ts14>",
                                                     str(p.relative_to(root))))
                  for p in root.rglob("*") if p.is_file())


CONFIG_TOP = ["+--------------------------------+--------------------------------+",
              "| Device ID: 0                   | Current Configuration          |",
              "+================================+================================+",
              "| Icache check Range             | 1000                           |",
              "| Accelerator Recover            | Enable                         |",
              "| Aic Coremask                   | 0xffffff                       |",
              "| Aiv Coremask                   | 0xffffffffffff                 |",
              "| Aic Singlecommit               | Enable                         |",
              "+---------- Log Level -----------+--------------------------------+"]


def config_rows(text: str) -> dict[str, str]:
    return {c[0]: c[1] for c in (cells(ln) for ln in text.splitlines()[9:-1])}


def test_msnpureport_levels_and_exported_tree(npuemu_cli, shared_node, run_py, status,
                                              tmp_path):
    name = shared_node(devices=1, **SIZES)
    mr = ("msnpureport", "--name", name)
    out = cli_ok(npuemu_cli, *mr, "config", "--get")
    assert out.splitlines()[:9] == CONFIG_TOP  # 910B1: 24 AI Cores, 48 AI Vector cores
    assert config_rows(out) == {"Global Level": "ERROR", "Event Level": "ENABLE"}
    assert out.splitlines()[-1] == CONFIG_TOP[0]

    assert cli_ok(npuemu_cli, *mr, "config", "--set", "--log", "-g", "debug") == \
        "device 0: Global Level DEBUG set\n"
    cli_ok(npuemu_cli, *mr, "config", "--set", "--log", "-m", "runtime:info", "-d", "0")
    assert config_rows(cli_ok(npuemu_cli, *mr, "config", "--get", "-d", "0")) == {
        "Global Level": "DEBUG", "Event Level": "ENABLE", "Module [RUNTIME]": "INFO"}

    cli_ok(npuemu_cli, "inject", "--name", name, "-d", "0", "dma", "code=507053")
    res = run_py("""
        from npuemu.tools.cli import install_acl
        install_acl()
        import acl
        assert acl.rt.set_device(0) == 0
        p, ret = acl.rt.malloc(12288, 0)
        s, ret = acl.rt.create_stream()
        print(acl.rt.memset_async(p, 64, 0, 64, s), acl.rt.synchronize_stream(s))
    """, env={"NPUEMU_NODE": name}, timeout=30)
    assert res.stdout == "0 507053\n", res.stderr

    out = cli_ok(npuemu_cli, *mr, "report", "-o", str(tmp_path / "out"))
    root = exported(out)
    assert root.parent == tmp_path / "out" and re.fullmatch(r"\d{14}", root.name)
    assert out.splitlines()[0].startswith("device 0: ")
    host = [p for p in tree(root) if p.startswith("slog/host/")]
    assert [p for p in tree(root) if p not in host] == [
        "hisi_logs/device-0/<ts14>/device_info.txt", "hisi_logs/device-0/<ts14>/history.log",
        "slog/device-os-0/debug/device-0/device-0_<ts17>.log",
        "slog/device-os-0/run/event/event_<ts17>.log"]
    assert len(host) == 1 and re.fullmatch(r"slog/host/debug/plog/plog-\d+_<ts17>\.log",
                                           host[0]), host  # the program's host log
    assert "507053" in next(root.glob("slog/host/debug/plog/*.log")).read_text()
    (debug,) = root.glob("slog/device-os-0/debug/device-0/device-0_*.log")
    text = debug.read_text()
    assert re.search(r"^\[DEBUG\] DEVMM\(\d+,npuemu-dev0\):\S+ malloc size=12288 ", text, re.M), \
        text
    (event,) = root.glob("slog/device-os-0/run/event/event_*.log")
    events = event.read_text().splitlines()
    assert events and all(ln.startswith("[EVENT] ") for ln in events), events
    assert any(ln.endswith("fault injected: dma code=507053") for ln in events), events
    (history,) = root.glob("hisi_logs/device-0/*/history.log")
    hist = history.read_text().splitlines()
    assert all(ln.startswith(("[ERROR] ", "[EVENT] ")) for ln in hist), hist
    assert any(ln.startswith("[ERROR] TS(") and ln.endswith(
        "failed, ret=507053 (ACL_ERROR_RT_DEVICE_MEM_ERROR)") for ln in hist), hist
    assert len(hist) == len([ln for ln in text.splitlines()
                             if ln.startswith(("[ERROR]", "[EVENT]"))])
    (info,) = root.glob("hisi_logs/device-0/*/device_info.txt")
    facts = fields(info.read_text())
    dev = status(name)["devices"][0]
    assert facts["worker pid"] == str(dev["pid"]) and facts["starts"] == "1"
    assert (facts["state"], facts["health"], facts["isolated pages"]) == ("READY", "OK", "0")
    assert facts["HBM double bit ECC errors"] == "0 (aggregate 0)"
    assert facts["HBM used / total (MB)"] == "0 / 64" and facts["log level"] == "DEBUG"
    assert facts["last error"] == "507053 (ACL_ERROR_RT_DEVICE_MEM_ERROR)"

    # events off: an injected fault leaves no EVENT line
    cli_ok(npuemu_cli, *mr, "config", "--set", "--log", "-e", "disable")
    assert config_rows(cli_ok(npuemu_cli, *mr, "config", "--get"))["Event Level"] == "DISABLE"
    cli_ok(npuemu_cli, "inject", "--name", name, "-d", "0", "clear_ecc")
    root2 = exported(cli_ok(npuemu_cli, *mr, "report", "-o", str(tmp_path / "out")))
    assert root2 != root  # a second export in the same second gets its own directory
    (event2,) = root2.glob("slog/device-os-0/run/event/event_*.log")
    assert event2.read_text().splitlines() == events


def test_msnpureport_old_flags(npuemu_cli, module_node, tmp_path):
    name = module_node(devices=2, **SIZES)
    mr = ("msnpureport", "--name", name)
    assert cli_ok(npuemu_cli, *mr, "-g", "1", "-d", "1") == "device 1: Global Level INFO set\n"
    assert config_rows(cli_ok(npuemu_cli, *mr, "-r", "-d", "1"))["Global Level"] == "INFO"
    cli_ok(npuemu_cli, *mr, "-m", "FMK:0", "-d", "1")  # levels by number too, as the real tool
    assert config_rows(cli_ok(npuemu_cli, *mr, "config", "--get", "-d", "1")) == {
        "Global Level": "INFO", "Event Level": "ENABLE", "Module [FMK]": "DEBUG"}
    cli_ok(npuemu_cli, *mr, "-g", "error", "-d", "1")  # the module node is shared: restore
    assert cli_ok(npuemu_cli, *mr, "-s").splitlines() == [
        "Device ID: 0  Health: OK  (READY)", "Device ID: 1  Health: OK  (READY)"]
    out = cli_ok(npuemu_cli, *mr, "-t", "1")
    assert "ACL_HOST" in out and "nothing changed" in out
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    root = exported(cli_ok(npuemu_cli, *mr, "-d", cwd=str(cwd)))
    assert root.parent == cwd
    assert [p.name for p in sorted((root / "slog").iterdir())
            if p.name != "host"] == ["device-os-0", "device-os-1"]
    res = npuemu_cli("msnpureport", "-h")
    assert res.returncode == 0 and "report" in res.stdout and "-s" in res.stdout
    res = npuemu_cli("msnpureport", "help")
    assert res.returncode == 0 and "config" in res.stdout
    for args in (["-g", "loud"], ["-g", "5"], ["-g", "-1"], ["-m", "NOPE:debug"], ["-m", "FMK"],
                 ["config", "--set", "--log", "-e", "maybe"], ["config", "--set", "--log"]):
        res = npuemu_cli(*mr, *args)
        assert res.returncode == 2 and res.stderr, (args, res)
    res = npuemu_cli(*mr, "report", "-d", "4")
    assert res.returncode == 1 and "no NPU 4" in res.stderr
    assert os.listdir(cwd) == [root.name]
