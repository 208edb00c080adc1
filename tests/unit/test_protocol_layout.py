"""Wire frames and region layouts."""

from __future__ import annotations

import pytest

from npuemu.shared import address, layout, protocol
from npuemu.shared.protocol import Op


def test_frame_round_trip_is_a_tuple() -> None:
    frame = (Op.MALLOC, 7, 1 << 40, 0x1000)
    assert protocol.unpack(protocol.pack(frame)) == (2, 7, 1 << 40, 0x1000)


@pytest.mark.parametrize("payload", [b"", b"\xc1", protocol.pack(5), protocol.pack([])])
def test_malformed_frames_raise_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError):
        protocol.unpack(payload)


def test_layout_offsets_are_derived_and_lines_do_not_overlap() -> None:
    ctl = layout.DEVICE_CTL
    assert ctl.MAGIC == 0 and ctl.SLEEPING == 8 and ctl.HBM_TOTAL == 16
    assert ctl.SLEEPING * 8 // 64 != ctl.HEARTBEAT * 8 // 64  # own cache line
    ring = layout.RING_HEADER
    assert {ring.HEAD * 8 // 64, ring.TAIL * 8 // 64, ring.CAPACITY * 8 // 64} == {0, 1, 2}
    words = layout.CTL_CLIENTS + layout.MAX_CLIENTS * layout.CLIENT_ENTRY.words
    assert words * 8 <= layout.DEVICE_CTL_SIZE
    reg_words = layout.REG_DEVICES + address.MAX_DEVICES * layout.DEVICE_ENTRY.words
    assert reg_words * 8 <= layout.REGISTRY_SIZE


def test_layout_refuses_a_stride_smaller_than_its_fields() -> None:
    with pytest.raises(ValueError, match="fields need 4 words, stride is 2"):
        class X(layout.Layout, stride=2):
            A = layout.Field(4, "")


def test_layout_field_offsets_are_plain_ints_in_field_order() -> None:
    ring = layout.RING_HEADER
    assert [f.name for f in ring.fields] == ["head", "_pad0", "tail", "_pad1", "capacity"]
    assert type(ring.TAIL) is int and ring.TAIL == ring.fields[2].offset == 8
    with pytest.raises(ValueError, match="named in capitals"):
        class Y(layout.Layout):
            a = layout.Field(1, "")


def test_tables_name_every_field() -> None:
    for region in layout.ALL:
        table = region.table()
        for f in region.fields:
            assert f"| {f.name} |" in table


def test_strings_and_exit_codes_round_trip() -> None:
    assert layout.unpack_str(layout.pack_str("Ascend910B1", 4)) == "Ascend910B1"
    assert layout.decode_exit(layout.encode_exit(-9)) == -9
    assert layout.decode_exit(0) is None


def test_device_addresses_round_trip_and_stay_in_the_window() -> None:
    ptr = address.encode(63, address.DDR, (1 << 37) - 64)
    assert address.is_device_ptr(ptr) and address.decode(ptr) == (63, 1, (1 << 37) - 64)
    assert not address.is_device_ptr(0x7F00_0000_0000) and not address.is_device_ptr(4096)
    with pytest.raises(ValueError):
        address.decode(4096)
