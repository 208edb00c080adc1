"""Kernels through virtual memory (``host/core/vmm.py``): a kernel launched with pointers inside a
reserved and mapped range reaches the physical memory behind it, on a real worker, and a
tensor may span several mappings (the card's window of the reservation joins their pages,
as its MMU would); a byte that is not mapped fails the kernel, never the worker."""

from __future__ import annotations

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

MiB = 1 << 20
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
PROG = "mem_vmm_kernels.py"
"""The child program (``tests/progs/mem_vmm_kernels.py``), one scenario a test."""


def test_kernel_and_copies_through_a_mapped_range(run_prog):
    r = run_program(run_prog, PROG, "mapped_range", env=ENV, timeout=120)
    assert r["z_ok"] is True and r["remapped_ok"] is True
    assert r["unmapped"] == 107000
    assert r["spanning_ok"] is True
    assert r["past_end"] == 507053 and r["after"] == 0  # a memory fault of the kernel
    assert r["after_unmap"] == 507053 and r["ping"] == 0


def test_bad_window_requests_are_refused_and_the_card_goes_on(run_prog):
    """Raw VMM_MAP / VMM_UNMAP frames with a foreign or bad block, a misaligned or
    overlapping piece: each gets 107000 (or a frame error), the worker keeps serving."""
    r = run_program(run_prog, PROG, "bad_windows", env=ENV, timeout=60)
    assert r["codes"][:5] == [107000] * 5 and r["codes"][5] != 0, r
    assert r["overlap"] == 107000 and r["unmap_bad"] == 107000 and r["ping"] == 0
