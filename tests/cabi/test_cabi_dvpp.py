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


_BATCH_STEPS = ("batch0", "batch1", "border", "paste", "mborder0", "mborder1", "rpaste0",
                "rpaste1")


def test_batch_border_and_paste_from_c_as_acl_media_gives_them(compile_c, run_c, run_prog,
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
    ref = run_prog("dvpp_batch.py", str(src), str(tmp_path / "py"), env=env, timeout=90)
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
