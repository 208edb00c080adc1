"""``aclvenc*`` and ``aclvdec*`` of ``libacl_dvpp.so`` from C (one program): NV12 pictures
encoded to H.264, the packets decoded back by a VDEC channel; every C callback on the C
thread the channel names, in order, with its ``userData``; the encoded stream decodes in
FFmpeg to the pictures sent (luma above 35 dB) and the card's decode equals FFmpeg's
exactly; the Get/SetChannelDescParam forms read and write the fields; the refusals get
100000."""

from __future__ import annotations

import av
import numpy as np
import pytest

pytestmark = pytest.mark.integration
W, H, FRAMES = 320, 240, 8


def test_encode_and_decode_from_c_with_callbacks_on_the_c_thread(compile_c, run_c, tmp_path):
    exe = compile_c("video.c", libs=("ascendcl", "acl_dvpp"))
    out_stream, out_luma = tmp_path / "out.h264", tmp_path / "out.y"
    res = run_c(exe, str(out_stream), str(out_luma),
                env={"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "256M", "NPUEMU_DDR": "64M"},
                timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    order = " ".join(str(i) for i in range(FRAMES))
    assert f"venc packets {FRAMES} {order}" in lines and "venc eos 1" in lines, lines
    assert f"vdec frames {FRAMES} {order}" in lines, lines
    assert "callbacks off their thread 0, bad 0" in lines, lines
    (ident,) = [int(ln.split()[-1]) for ln in lines if ln.startswith("venc channel id ")]
    assert ident > 0                                            # 0 before the channel exists
    codes = [ln for ln in lines if ln.startswith("code ")]
    assert len(codes) == 8 and all(ln.endswith("= 100000") for ln in codes), codes
    assert lines[-1] == "video ok"

    decoder = av.CodecContext.create("h264", "r")
    packets = decoder.parse(out_stream.read_bytes()) + decoder.parse(None)
    frames = [f for p in packets for f in decoder.decode(p)] + list(decoder.decode(None))
    assert len(frames) == FRAMES
    lumas = np.frombuffer(out_luma.read_bytes(), np.uint8).reshape(FRAMES, H, W)
    xx, yy = np.meshgrid(np.arange(W), np.arange(H))
    for i, frame in enumerate(frames):
        mine = frame.to_ndarray(format="nv12")[:H]
        assert (lumas[i] == mine).all(), i                      # the card's decode is FFmpeg's
        sent = ((xx + yy + 4 * i) & 0xFF).astype(float)
        mse = max(((mine.astype(float) - sent) ** 2).mean(), 1e-9)
        assert 10 * np.log10(255 ** 2 / mse) > 35, i
