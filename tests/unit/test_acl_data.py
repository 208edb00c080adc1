"""Data buffers and data-type sizes of the top-level ``acl`` module (no device needed)."""

from __future__ import annotations

import pytest

from npuemu.host.acl import data


def test_data_buffer_life_cycle() -> None:
    buf = data.create(0x1000, 1 << 33)
    assert data.get_addr(buf) == 0x1000
    assert data.get_size(buf) == 1 << 33 and data.get_size_u32(buf) == 0  # uint32_t in C
    assert data.update(buf, 0x2000, 16) == 0 and (data.get_addr(buf), data.get_size(buf)) == (
        0x2000, 16)
    assert data.destroy(buf) == 0 and data.destroy(buf) == 100000
    assert (data.get_addr(buf), data.get_size(buf), data.update(buf, 1, 1)) == (0, 0, 100000)


@pytest.mark.parametrize("args,exc", [(("x", 1), TypeError), ((1.5, 1), TypeError),
                                      ((-1, 1), OverflowError), ((0, 2**64), OverflowError)])
def test_bad_buffer_arguments_raise_what_pyacl_raises(args, exc) -> None:
    with pytest.raises(exc):
        data.create(*args)


def test_handles_of_other_kinds_are_null_buffers() -> None:
    for handle in (None, "x", 0, -1, 2**70, 1.0):
        assert data.get_addr(handle) == 0 and data.get_size(handle) == 0
        assert data.destroy(handle) == 100000


def test_type_sizes() -> None:
    assert [data.type_size(t) for t in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 16, 17, 27)] == [
        4, 2, 1, 4, 1, 2, 2, 4, 8, 8, 8, 1, 8, 16, 2]
    # the real runtime's switch: undefined and string 0, sub-byte 1, unlisted values 8
    assert [data.type_size(t) for t in (-1, 13, 29, 30, 999)] == [0, 0, 1, 1, 8]
    with pytest.raises(OverflowError):
        data.type_size(2**70)


def test_top_level_acl_forwards_every_submodule_once() -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import PROGS

    prog = os.path.join(PROGS, "acl_submodules.py")
    out = subprocess.run([sys.executable, prog], capture_output=True, text=True,
                         timeout=60, cwd="/")
    assert out.stdout.strip() == "ok", out.stderr
