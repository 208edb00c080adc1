"""DVPP geometry rules (``shared/media.py``) as the samples compute their buffers, and the
enumerations' values as ``acl_dvpp.h`` defines them."""

from __future__ import annotations

from npuemu.shared import media as m


def align_up(value: int, to: int) -> int:
    return -(-value // to) * to


def test_enum_values_are_the_headers():
    assert m.PixelFormat.PIXEL_FORMAT_YUV_SEMIPLANAR_420 == 1
    assert m.PixelFormat.PIXEL_FORMAT_YVU_SEMIPLANAR_420 == 2
    assert m.PixelFormat.PIXEL_FORMAT_RGB_888 == 12 and m.PixelFormat.PIXEL_FORMAT_BGR_888 == 13
    assert m.PixelFormat.PIXEL_FORMAT_BGR_888_PLANAR == 70
    assert m.PixelFormat.PIXEL_FORMAT_UNKNOWN == 10000
    assert [int(c) for c in m.ChannelMode] == [1, 2, 4]
    assert int(m.StreamFormat.H264_HIGH_LEVEL) == 3
    assert int(m.JpegFormat.ACL_JPEG_CSS_UNKNOWN) == 1000
    assert 40 in m.PIXEL_FORMAT_VALUES and 41 not in m.PIXEL_FORMAT_VALUES
    assert 1003 not in m.PIXEL_FORMAT_VALUES  # PIXEL_FORMAT_BUTT


def test_jpegd_output_geometry():
    assert m.jpegd_geometry(1920, 1080) == (1920, 1080, 1920, 1088, 1920 * 1088 * 3 // 2)
    assert m.jpegd_geometry(1001, 701) == (1000, 700, 1024, 704, 1024 * 704 * 3 // 2)
    assert m.jpegd_geometry(1001, 701, m.YUV400) == (1001, 701, 1024, 704, 1024 * 704)


def test_jpegd_yuv400_only_from_a_grey_file_and_exif_turns_swap_the_sides():
    gray, c420 = m.JpegFormat.ACL_JPEG_CSS_GRAY, m.JpegFormat.ACL_JPEG_CSS_420
    assert m.jpegd_output(gray, m.YUV400) == m.YUV400
    assert m.jpegd_output(c420, m.YUV400) is None
    assert m.jpegd_output(gray, m.UNKNOWN) == m.NV21
    assert [m.oriented(96, 64, t) for t in (1, 2, 3, 4)] == [(96, 64)] * 4
    assert [m.oriented(96, 64, t) for t in (5, 6, 7, 8)] == [(64, 96)] * 4


def test_the_samples_vpc_output_buffer_fits_their_strides():
    # the samples: stride_w = align_up(w, 16), stride_h = align_up(h, 2), w * h * 3 / 2
    for w, h in ((224, 224), (300, 300), (416, 416), (640, 360)):
        sw, sh = align_up(w, 16), align_up(h, 2)
        size = sw * sh * 3 // 2
        assert m.picture_bytes(m.NV12, sw, sh) == size
        assert m.vpc_picture_problem(m.NV12, w, h, sw, sh, size, output=True) == ""


def test_vpc_rules_refuse_what_the_reference_refuses():
    ok = (m.NV12, 256, 128, 256, 128, 256 * 128 * 3 // 2)
    assert m.vpc_picture_problem(*ok, output=False) == ""
    assert "width stride" in m.vpc_picture_problem(m.NV12, 256, 128, 250, 128, 10**6, False)
    assert "height stride" in m.vpc_picture_problem(m.NV12, 256, 128, 256, 127, 10**6, False)
    assert "buffer" in m.vpc_picture_problem(m.NV12, 256, 128, 256, 128, 100, False)
    assert "outside" in m.vpc_picture_problem(m.NV12, 16, 128, 32, 128, 10**6, False)
    assert "even" in m.vpc_picture_problem(m.NV12, 255, 128, 256, 128, 10**6, False)
    assert m.vpc_picture_problem(m.RGB888, 100, 50, 304, 50, 304 * 50, True) == ""
    assert "width stride" in m.vpc_picture_problem(m.RGB888, 100, 50, 112, 50, 10**6, True)


def test_roi_rules():
    assert m.roi_problem([0, 63, 0, 63], 64, 64, "crop") == ""
    assert "even" in m.roi_problem([1, 63, 0, 63], 64, 64, "crop")
    assert "past" in m.roi_problem([0, 65, 0, 63], 64, 64, "crop")
    assert "10x6" in m.roi_problem([0, 7, 0, 63], 64, 64, "crop")
    assert "16" in m.roi_problem([8, 63, 0, 63], 64, 64, "paste", paste=True)


def test_dvpp_block_size():
    assert m.dvpp_block_size(1) == 64 and m.dvpp_block_size(32) == 64
    assert m.dvpp_block_size(33) == 96
