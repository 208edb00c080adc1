"""The ``npuemu`` command as a new user meets it: ``npuemu run -m MODULE --its --flags``
(the README's form) and output piped into a reader that stops early (``| head``)."""

from __future__ import annotations

import textwrap


def test_run_module_passes_dash_arguments_to_the_module(npuemu_cli, tmp_path):
    pkg = tmp_path / "uxpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "prog.py").write_text(textwrap.dedent("""
        import sys
        import acl
        print(sys.argv[1:], acl.__name__)
        sys.exit(3)
    """))
    res = npuemu_cli("run", "-m", "uxpkg.prog", "--its", "--own", "-m", "x", cwd=str(tmp_path))
    assert res.returncode == 3, res.stderr
    assert res.stdout == "['--its', '--own', '-m', 'x'] npuemu.host.acl\n"
    res = npuemu_cli("run", "-m", "uxpkg.prog", cwd=str(tmp_path))
    assert (res.returncode, res.stdout) == (3, "[] npuemu.host.acl\n"), res.stderr


def test_run_script_keeps_its_dash_arguments(npuemu_cli, tmp_path):
    (tmp_path / "prog.py").write_text("import sys; print(sys.argv[1:])\n")
    res = npuemu_cli("run", "prog.py", "--its", "-m", "y", cwd=str(tmp_path))
    assert (res.returncode, res.stdout) == (0, "['--its', '-m', 'y']\n"), res.stderr


def test_a_reader_that_leaves_early_is_no_traceback(spawn_py):
    """``npuemu status --json | head -1``: stdout's reader is gone before the command
    writes; the command ends quietly with the shell's SIGPIPE status, 141."""
    proc = spawn_py("""
        import sys
        from npuemu.tools.cli import main
        sys.exit(main(["status", "--json"]))
    """)
    proc.stdout.close()  # the reader leaves before the first byte is written
    err = proc.stderr.read()
    assert proc.wait(60) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_tools_on_a_node_that_is_not_running_give_the_code_and_the_fix(npuemu_cli):
    name = "ux-no-such-node"
    for args, prog in ((["smi", "info"], "npu-smi"), (["msnpureport", "report"], "msnpureport"),
                       (["msnpureport", "config", "--get"], "msnpureport")):
        res = npuemu_cli(*args, "--name", name)
        assert (res.returncode, res.stdout) == (1, ""), res.stderr
        assert res.stderr == (f"{prog}: ACL_ERROR_RT_NO_DEVICE (207004): no node named {name!r} "
                              f"is running (start one with `npuemu start --name {name}`)\n")


def test_run_reports_like_python(npuemu_cli, tmp_path):
    """A missing script or module is one line (exit 2 / 1, as python's); a program's own
    error shows the program's traceback without npuemu's frames; sys.exit("text") prints
    the text and exits 1."""
    res = npuemu_cli("run", "nosuch.py", cwd=str(tmp_path))
    assert res.returncode == 2 and res.stderr == (
        f"npuemu run: can't open file {str(tmp_path / 'nosuch.py')!r}: no such file\n")
    res = npuemu_cli("run", "-m", "ux_no_such_module", cwd=str(tmp_path))
    assert (res.returncode, res.stderr) == (1, "npuemu run: no module named ux_no_such_module\n")
    (tmp_path / "boom.py").write_text("def f():\n    raise ValueError('boom')\nf()\n")
    res = npuemu_cli("run", "boom.py", cwd=str(tmp_path))
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and lines[-1] == "ValueError: boom"
    assert "boom.py" in lines[1] and "cli.py" not in res.stderr and "runpy" not in res.stderr
    (tmp_path / "bye.py").write_text("import sys\nsys.exit('bye')\n")
    res = npuemu_cli("run", "bye.py", cwd=str(tmp_path))
    assert (res.returncode, res.stderr) == (1, "bye\n")


def test_demo_with_a_bad_setting_says_so_in_a_line(npuemu_cli):
    res = npuemu_cli("demo", env={"NPUEMU_DEVICES": "abc"})
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert ("npuemu demo: ACL_ERROR_RT_NO_DEVICE (207004): invalid configuration: "
            "NPUEMU_DEVICES='abc'") in res.stderr
