"""A user's own suite, run by tests/cli/test_pytest_plugin.py with the npuemu pytest plugin
(as a separate pytest run). Not collected by npuemu's own suite (see the conftest beside)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from npuemu.host import DeviceArray, acl
from npuemu.shared.errors import AclError
from npuemu.tools.pytest_plugin import inject_fault


def test_npuemu_touched_before_any_fixture():
    from npuemu.host import Device

    assert Device(0).id == 0  # makes the runtime (embedded config) without attaching


def test_a_card(npu_card, npu_node):
    x = DeviceArray.from_numpy(np.arange(4, dtype=np.float32))
    assert x.to_numpy().tolist() == [0, 1, 2, 3]
    assert acl.rt.get_device() == (0, 0)
    assert npu_node.cards == 3 and npu_node.started  # the largest marker below
    assert os.environ["NPUEMU_NODE"] == npu_node.name


@pytest.mark.npu(cards=3)
def test_three_cards(npu_cards):
    assert [d.id for d in npu_cards] == [0, 1, 2]
    assert acl.rt.get_device_count() == (3, 0)


@pytest.mark.npu(cards=2)
def test_marker_alone_gives_the_node():
    assert acl.rt.get_device_count() == (3, 0)


def test_ecc_page_isolated_then_restored(npu_card):
    x = DeviceArray.from_numpy(np.arange(1024, dtype=np.float32))
    with inject_fault(0, "ecc_multi", ptr=x.ptr):
        with pytest.raises(AclError) as info:
            x.to_numpy()
        assert info.value.code == 507054
        assert acl.rt.query_device_status(0) == (1, 0)  # ABNORMAL
    assert acl.rt.query_device_status(0) == (0, 0)  # a fresh card
    y = DeviceArray.from_numpy(np.arange(1024, dtype=np.float32))
    assert y.to_numpy()[3] == 3


def test_lost_card_restored(npu_card, npu_fault):
    with npu_fault(0, "lost"):
        pass
    assert DeviceArray.from_numpy(np.ones(8, np.float32)).to_numpy().sum() == 8


def test_a_fault_that_can_never_fire_is_refused(npu_card):
    with pytest.raises(ValueError, match="never fire"), inject_fault(0, "aicore", kernel="relu"):
        pass
    with pytest.raises(ValueError, match="needs ptr"), inject_fault(0, "ecc_multi"):
        pass


def test_after_the_faults_the_card_is_healthy(npu_card):
    assert acl.rt.query_device_status(0) == (0, 0)


def test_a_subprocess_attaches_to_the_same_node(npu_node):
    code = ("from npuemu.host import acl; import os; acl.rt.set_device(2); "
            "print(os.environ['NPUEMU_NODE'], acl.rt.get_device_count()[0])")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **npu_node.env},
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == [npu_node.name, "3"]


def test_the_docstring_example(npu_card):
    buf = npu_card.malloc(4096)
    with inject_fault(0, "ecc_multi", ptr=buf.ptr):
        with pytest.raises(AclError) as info:
            buf.copy_to_host()
        assert info.value.code == 507054
