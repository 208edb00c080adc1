"""``libacl_dvpp.so`` from C: a JPEG decoded and resized as the samples write it (sizes from
the header probes), the result equal to the Python face's reference (OpenCV's bilinear of
the planes FFmpeg's MJPEG decoder gives), the channel's parameters set and read back, the
decoded luma halved by the pyramid call (``cv2.pyrDown`` of FFmpeg's luma), refused calls
(100000) and a corrupt file failing its task (507018) while the card goes on; the batch,
border and paste calls on one NV12 picture byte for byte as the same calls of ``acl.media``
give them, and their refusals (NULL arrays, size 0, counts past either batch: 100000)."""

from __future__ import annotations

import io

import av
import cv2
import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.integration


def test_decode_and_resize_from_c(compile_c, run_c, tmp_path):
    yy, xx = np.mgrid[0:360, 0:480]
    rgb = np.stack([xx * 255 // 479, yy * 255 // 359, (xx + yy) % 256], axis=2).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=90)
    (tmp_path / "in.jpg").write_bytes(buf.getvalue())
    exe = compile_c("dvpp.c", libs=("ascendcl", "acl_dvpp"))
    res = run_c(exe, str(tmp_path / "in.jpg"), str(tmp_path / "out.nv12"),
                str(tmp_path / "out.gray"),
                env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"})
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert f"info 480 360 3 2 size {512 * 368 * 3 // 2}" in lines, lines
    assert "decoded 480 360 512 368 ret 0" in lines, lines
    assert "param csc 3 size 4 id 8 1" in lines, lines
    assert "halved 240 180" in lines, lines
    assert lines[-1] == "dvpp ok"
    frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(buf.getvalue()))[0]
    assert frame.format.name == "yuvj420p"                      # the file's chroma as coded
    y, u, v = (np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width]
               for p in frame.planes)
    uv = np.stack([u, v], axis=2)
    got = np.frombuffer((tmp_path / "out.nv12").read_bytes(), np.uint8)
    want_y = cv2.resize(y, (224, 224), interpolation=cv2.INTER_LINEAR)
    want_uv = cv2.resize(uv, (112, 112), interpolation=cv2.INTER_LINEAR)
    assert (got[:224 * 224].reshape(224, 224) == want_y).all()
    assert (got[224 * 224:].reshape(112, 112, 2) == want_uv).all()
    halved = np.frombuffer((tmp_path / "out.gray").read_bytes(), np.uint8).reshape(180, 240)
    assert (halved == cv2.pyrDown(y)).all()


# The steps of progs/dvpp_batch.c through acl.media (after ``IN, OUT = <input file>, <output
# folder>``), each output written to a file of OUT named as the C program names it.
_BATCH_REFERENCE = """
import acl
from acl import media as M

def ok(ret):
    if ret != 0:
        raise SystemExit(f"failed {ret} {acl.get_recent_err_msg()}")

def describe(desc, data, w, h):
    for name, value in (("data", data), ("size", w * h * 3 // 2), ("format", 1), ("width", w),
                        ("height", h), ("width_stride", w), ("height_stride", h)):
        ok(getattr(M, f"dvpp_set_pic_desc_{name}")(desc, value))

def output(name, desc, w, h, fill=0):
    data, ret = M.dvpp_malloc(w * h * 3 // 2)
    ok(ret)
    ok(acl.rt.memset(data, w * h * 3 // 2, fill, w * h * 3 // 2))
    describe(desc, data, w, h)
    outs[name] = (data, w * h * 3 // 2)

def border(kind, top, bottom, left, right, values):
    cfg = M.dvpp_create_border_config()
    ok(M.dvpp_set_border_config_border_type(cfg, kind))
    for side, value in (("top", top), ("bottom", bottom), ("left", left), ("right", right)):
        ok(getattr(M, f"dvpp_set_border_config_{side}")(cfg, value))
    for i, value in enumerate(values):
        ok(M.dvpp_set_border_config_value(cfg, i, value))
    return cfg

pixels, outs = open(IN, "rb").read(), {}
ok(acl.init())
ok(acl.rt.set_device(0))
S, ret = acl.rt.create_stream()
ok(ret)
CH = M.dvpp_create_channel_desc()
ok(M.dvpp_create_channel(CH))
src_ptr, ret = M.dvpp_malloc(len(pixels))
ok(ret)
ok(acl.rt.memcpy(src_ptr, len(pixels), acl.util.bytes_to_ptr(pixels), len(pixels), 1))
src = M.dvpp_create_pic_desc()
describe(src, src_ptr, 128, 96)
crops = [M.dvpp_create_roi_config(0, 63, 0, 47), M.dvpp_create_roi_config(32, 127, 16, 95)]
bilinear, nearest = M.dvpp_create_resize_config(), M.dvpp_create_resize_config()
ok(M.dvpp_set_resize_config_interpolation(bilinear, 1))
ok(M.dvpp_set_resize_config_interpolation(nearest, 2))
srcb, dstb = M.dvpp_create_batch_pic_desc(1), M.dvpp_create_batch_pic_desc(2)
describe(M.dvpp_get_pic_desc(srcb, 0), src_ptr, 128, 96)
output("batch0", M.dvpp_get_pic_desc(dstb, 0), 48, 32)
output("batch1", M.dvpp_get_pic_desc(dstb, 1), 64, 64)
ok(M.dvpp_vpc_batch_crop_resize_async(CH, srcb, [2], dstb, crops, bilinear, S))
bordered = M.dvpp_create_pic_desc()
output("border", bordered, 160, 112)
ok(M.dvpp_vpc_make_border_async(CH, src, bordered, border(0, 8, 8, 16, 16, (200, 60, 90)), S))
canvas = M.dvpp_create_pic_desc()
output("paste", canvas, 96, 64, 0x55)
ok(M.dvpp_vpc_crop_resize_paste_async(CH, src, canvas, crops[1],
                                      M.dvpp_create_roi_config(16, 79, 8, 55), nearest, S))
borders = [border(0, 8, 8, 8, 8, (16, 128, 128)), border(1, 4, 4, 8, 8, (0, 0, 0))]
mb = M.dvpp_create_batch_pic_desc(2)
output("mborder0", M.dvpp_get_pic_desc(mb, 0), 64, 48)
output("mborder1", M.dvpp_get_pic_desc(mb, 1), 64, 64)
ok(M.dvpp_vpc_batch_crop_resize_make_border_async(CH, srcb, [2], mb, crops, borders,
                                                  bilinear, S))
spots = [M.dvpp_create_roi_config(0, 31, 0, 23), M.dvpp_create_roi_config(16, 47, 8, 39)]
rp = M.dvpp_create_batch_pic_desc(2)
output("rpaste0", M.dvpp_get_pic_desc(rp, 0), 48, 32)
output("rpaste1", M.dvpp_get_pic_desc(rp, 1), 64, 64)
ok(M.dvpp_vpc_batch_crop_resize_paste_async(CH, srcb, [2], rp, crops, spots, nearest, S))
ok(acl.rt.synchronize_stream(S))
for name, (ptr, size) in outs.items():
    out = bytearray(size)
    ok(acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, ptr, size, 2))
    open(f"{OUT}/{name}", "wb").write(out)
ok(M.dvpp_destroy_channel(CH))
ok(acl.rt.destroy_stream(S))
ok(acl.rt.reset_device(0))
ok(acl.finalize())
"""
_BATCH_STEPS = ("batch0", "batch1", "border", "paste", "mborder0", "mborder1", "rpaste0",
                "rpaste1")


def test_batch_border_and_paste_from_c_as_acl_media_gives_them(compile_c, run_c, run_py,
                                                                 tmp_path):
    env = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"}
    src = tmp_path / "in.nv12"
    src.write_bytes(np.random.default_rng(7).integers(0, 256, 128 * 96 * 3 // 2,
                                                     np.uint8).tobytes())
    (tmp_path / "c").mkdir()
    (tmp_path / "py").mkdir()
    exe = compile_c("dvpp_batch.c", libs=("ascendcl", "acl_dvpp"))
    res = run_c(exe, str(src), str(tmp_path / "c"), env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert "border 0 8 8 16 16 200 60 90 -1" in lines, lines
    codes = [ln for ln in lines if ln.startswith("code ")]
    assert len(codes) == 10 and all(ln.endswith("= 100000") for ln in codes), codes
    assert lines[-1] == "dvpp batch ok"
    ref = run_py(f"IN, OUT = {str(src)!r}, {str(tmp_path / 'py')!r}\n" + _BATCH_REFERENCE,
                 env=env, timeout=90)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    for name in _BATCH_STEPS:
        got, want = ((tmp_path / side / name).read_bytes() for side in ("c", "py"))
        assert got == want, name
    # the calls wrote their outputs: the areas changed, the rest as it was set
    assert set((tmp_path / "c" / "batch0").read_bytes()) != {0}
    paste = np.frombuffer((tmp_path / "c" / "paste").read_bytes(), np.uint8)[:96 * 64]
    assert (paste.reshape(64, 96)[8:56, 16:80] != 0x55).any()
    assert (paste.reshape(64, 96)[:8] == 0x55).all()
    framed = np.frombuffer((tmp_path / "c" / "border").read_bytes(), np.uint8)
    assert (framed[:160 * 8] == 200).all() and (framed[160 * 112:][:160 * 4:2] == 60).all()


def test_the_library_exports_its_header_and_nothing_of_libascendcl(sdk_root):
    import subprocess

    import cffi

    from npuemu.host.capi import build
    from npuemu.shared import media

    ffi = cffi.FFI()
    ffi.cdef(build.cdef_of(build.DVPP, sdk_root / "include"))
    declared = {n.split(" ", 1)[1] for n in ffi._parser._declarations
                if n.startswith("function ")}
    out = subprocess.run(["nm", "-D", "--defined-only", str(sdk_root / "lib64/libacl_dvpp.so")],
                         capture_output=True, text=True, check=True).stdout
    exported = {ln.split()[-1] for ln in out.splitlines() if " T " in ln}
    assert {"acldvppMalloc", "acldvppJpegDecodeAsync", "acldvppVpcResizeAsync",
            "acldvppVpcPyrDownAsync", "acldvppSetChannelDescParam", "acldvppMallocWithCfg",
            "acldvppVpcMakeBorderAsync", "acldvppVpcCropResizePasteAsync",
            "acldvppVpcBatchCropResizeMakeBorderAsync", "acldvppGetPicDesc",
            "acldvppSetRoiConfig", "acldvppGetBorderConfigValue"} <= declared
    assert declared <= exported
    assert not [n for n in exported if n.startswith(("aclrt", "aclInit", "aclmdl"))]
    consts = ffi._parser._int_constants
    for enum in (media.PixelFormat, media.StreamFormat, media.ChannelMode, media.BorderType,
                 media.JpegFormat, media.ChannelDescParamType, media.JpegdPrecisionMode):
        for name, member in enum.__members__.items():
            assert consts[name] == int(member), name
