"""``acl.media`` (DVPP images) on a real card: JPEG decode and encode, PNG decode and VPC
against the libraries they stand for, the samples' strides and buffer sizes, and every
refusal with its code (the card goes on after each failed task).

Each scenario is one function of a pyACL program (``tests/progs/dvpp.py``) run in a fresh
interpreter; the child prints what it saw as ``R`` and the assertions are here.

Tolerances: JPEGD's planes equal the stated reference exactly (FFmpeg's MJPEG decode, the
file's own planes, chroma brought to 4:2:0 by OpenCV's 2x2 area average where the file
samples it finer); against Pillow's own RGB decode (libjpeg's IDCT, fancy upsampling and
integer colour conversion) the mean difference is below 1 level, and a grey file's luma is
within 0.1 level of libjpeg's on average. VPC
resize equals OpenCV's ``INTER_LINEAR``/``INTER_NEAREST`` exactly and a float bilinear of
numpy within 0.5 level on average. JPEGE equals Pillow's encoding of the same planes byte
for byte; its luma comes back above 38 dB at level 90."""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest
from childprog import run_program

from npuemu.host.prof import export, model

pytestmark = pytest.mark.integration
ENV = {"NPUEMU_DEVICES": "1", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}
ALIGNED_1080P = 1920 * 1088 * 3 // 2  # width 64-aligned, height 16-aligned, YUV420SP


def scenario(run_prog, name: str, *args: str) -> dict:
    return run_program(run_prog, "dvpp.py", name, *args, env=ENV, timeout=120)


def test_jpeg_decode_matches_the_library_with_the_hardware_strides(run_prog):
    r = scenario(run_prog, "decode_roundtrip")
    assert r["info"] == [1920, 1080, 3, 0]
    assert r["info_v2"] == [1920, 1080, 3, 2, 0]                 # ACL_JPEG_CSS_420
    assert r["predicted"] == ALIGNED_1080P and r["sync"] == 0
    assert r["fields"] == [1920, 1080, 1920, 1088, 0]           # written back by the card
    assert r["luma_exact"] and r["chroma_exact"] and r["nv21"] == [0, True]
    assert r["rgb_mean_abs"] < 1.0
    # 4:4:4 of 1001x701: width and height rounded down to even, strides 1024 x 704
    assert r["odd_info_v2"] == [1001, 701, 3, 0, 0]
    assert r["odd"] == [0, 1024 * 704 * 3 // 2, 1000, 700, 1024, 704, 0]
    assert r["gray"][:4] == [0, True, True, "gray"]              # YUV400 JPEG: UV = 0x80
    assert r["gray"][4] < 0.1                                    # libjpeg's IDCT: +-1 at most
    # a grey file as YUV400: its luma alone, 64x48 in strides 64x48, 1 byte a pixel; a colour
    # file does not decode to YUV400 (100000 from the probe)
    assert r["gray400"] == [0, 64 * 48, 0, 64, 48, 64, 48, True]
    assert r["colour_as_400"] == 100000
    # EXIF orientation applied: 6 turns 96x64 into 64x96 (strides 64x96), 2 mirrors, 3 half
    assert r["exif"]["6"] == [0, 64, 96, 64 * 96 * 3 // 2, True, True]
    assert r["exif"]["2"] == [0, 96, 64, 128 * 64 * 3, True, True]
    assert r["exif"]["3"] == [0, 96, 64, 128 * 64 * 3 // 2, True, True]
    assert "dvpp" in r["usage"]
    # the file's own sampling: 202x100 in strides 256x112, YUV444SP x3, YUV422SP x2;
    # UNKNOWN is written back as the V-first format; planes equal FFmpeg's of the file
    own = r["own"]
    for fmt, written in ((5, 5), (6, 6), (10000, 6)):
        assert own[f"0:{fmt}"] == [0, written, 256 * 112 * 3, 202, 100, 256, 112, "yuvj444p",
                                   True, True], fmt
    for fmt, written in ((3, 3), (4, 4), (10000, 4)):
        assert own[f"1:{fmt}"] == [0, written, 256 * 112 * 2, 202, 100, 256, 112, "yuvj422p",
                                   True, True], fmt
    assert r["predict_420_as_444"] == 100000
    assert r["predict_420_unknown"] == [256 * 112 * 3 // 2, 0]
    assert r["decode_420_as_444"] == [507018, True, 5]           # refused by the card


def test_jpeg_encode_is_the_library_encoding_and_size_comes_back(run_prog):
    r = scenario(run_prog, "encode_roundtrip")
    assert r["level"] == 90 and r["predicted"] == [640 * 480 * 3 + 8192, 0]
    assert r["encode"] == 0 and r["sync"] == 0
    assert r["same_as_library"] and 0 < r["size"] < r["predicted"][0]
    assert r["decoded"] == ["JPEG", 640, 480] and r["luma_psnr"] > 38
    assert r["too_small"] == [507018, 100, 1]                   # *size left as it was


def test_png_decode_rgb888_strides(run_prog):
    r = scenario(run_prog, "png_decode")
    assert r["info"] == [200, 120, 3, 0]
    assert r["predicted"] == [256 * 3 * 128, 0]
    assert r["decode"] == 0 and r["sync"] == 0
    assert r["fields"] == [200, 120, 768, 128, 0] and r["exact"]


def test_vpc_against_opencv_and_numpy(run_prog):
    r = scenario(run_prog, "vpc")
    assert r["resize"] == 0 and r["resize_exact"] and r["resize_vs_numpy"] < 0.5
    assert r["bad_interp"] == 100000
    assert r["nearest"] == 0 and r["nearest_exact"]
    assert r["crop"] == 0 and r["crop_exact"]
    assert r["paste"] == 0 and r["paste_exact"] and r["paste_unaligned"] == 100000
    assert r["batch"] == 0 and r["batch_exact"] == [True, True]
    assert r["batch6"] == [True, 0, True, True]                 # pyACL's 6-argument form
    assert r["batch6_bad"] == [0, 100000] and r["batch_arity"] == "TypeError"
    assert r["batch_resize7"] == 0 and r["batch_resize7_exact"]
    assert r["batch_paste"] == [True, 0] and r["batch_paste_exact"] == [True, True]
    assert r["batch_paste_unaligned"] == [0, 100000]
    assert r["batch_paste_untouched"] == [True, True]     # nothing of the batch was queued
    assert r["batch_resize_paste8"] == 0 and r["batch_resize_paste8_exact"]
    assert r["convert"] == 0 and r["convert_exact"] and r["convert_vs_source"] < 4
    assert r["border"] == 0 and r["border_exact"]


def test_a_repeated_resize_run_in_the_loop_is_still_opencv_exactly(run_prog):
    r = scenario(run_prog, "vpc_repeated")
    assert r["codes"] == [0] * 5 and r["exact"] == [True] * 5 and r["ret_codes"] == [0] * 5
    assert r["estimated"] == [False] + [True] * 4  # a first run has no estimate to give


def test_a_kept_resize_sees_its_input_as_earlier_tasks_left_it(run_prog):
    r = scenario(run_prog, "vpc_kept")
    assert r["codes"] == [0] * 5 and r["exact"] == [True] * 5
    assert r["geometry"] == [320, 240]  # the second file's decode rewrote the record


def test_bad_inputs_get_their_codes_and_the_card_goes_on(run_prog):
    r = scenario(run_prog, "bad_inputs")
    for name in ("predict_bogus_format", "info_not_jpeg", "info_null", "no_channel",
                 "bad_mode", "wrong_mode", "host_input", "unknown_desc", "jpegd_bogus_out",
                 "set_bad_width", "stride_unaligned", "height_stride_odd", "buffer_small",
                 "out_too_narrow", "crop_odd_left", "crop_outside", "free_not_dvpp"):
        assert r[name] == 100000, name
    for name in ("predict_rgb", "jpegd_rgb_out", "format_unsupported"):
        assert r[name] == 200006, name
    assert r["sync_after_refusals"] == 0                        # refused calls queue nothing
    assert r["corrupt_call"] == 0                               # found by the card
    for name in ("corrupt_sync", "garbage_sync", "progressive_sync", "out_buffer_small_sync"):
        assert r[name] == 507018, name
    assert r["corrupt_ret_code"] != 0
    assert r["after_sync"] == 0 and r["after_fields"] == [256, 128, 256, 128, 0]
    assert r["other_stream"] == 0


def test_channel_desc_params_and_malloc_with_cfg(run_prog):
    r = scenario(run_prog, "channel_params")
    # (bytes, value, ret): CSC 0, mode 7 (every mode), id 0 before create, 8192 x 8192,
    # precision ALIGN_DOWN_COMPAT
    assert r["defaults"] == [[4, 0, 0], [4, 7, 0], [8, 0, 0], [4, 8192, 0], [4, 8192, 0],
                             [4, 2, 0]]
    assert r["set_csc"] == [True, 0]
    assert r["set"] == [[4, 3, 0], [4, 1, 0], [8, 0, 0], [4, 4096, 0], [4, 2048, 0],
                        [4, 0, 0]]
    # CSC 6, setting the id, type 6, height 0, width 9000, mode 0, precision 3; ALIGN_UP
    assert r["refused"] == [100000] * 7 + [200006]
    assert r["unknown"] == [100000, [0, 0, 100000], [0, 0, 100000]]
    assert r["id"][0] == [8, r["id"][1], 0]
    assert r["mode_after_create"] == 100000
    assert r["with_cfg"] == [0, 0] and r["with_cfg_exact"]
    assert r["odd_policy"] == [0, 0, 0]
    assert r["cfg_refused"] == [[0, 100000], [0, 100000], [0, 100000]]
    assert r["jpegd_wrong_mode"] == 100000                    # the channel serves VPC only


def test_pyr_down_is_opencv_pyramid_step_and_refuses_the_rest(run_prog):
    r = scenario(run_prog, "pyramid")
    assert r["even"] == 0 and r["even_exact"]
    assert r["odd"] == 0 and r["odd_exact"]
    assert r["smallest"] == 0
    assert r["refused"] == [100000] * 6 and r["sync_after_refusals"] == 0


def test_batch_crop_resize_make_border(run_prog):
    r = scenario(run_prog, "batch_border")
    assert r["pyacl"] == 0 and r["constant_exact"] and r["replicate_exact"]
    assert r["c_form"] == 0 and r["nearest_exact"]
    assert r["refused"] == [100000] * 5 and r["sync_after_refusals"] == 0
    assert r["arity"] == "TypeError"


def test_dvpp_tasks_run_on_the_dvpp_engine_of_the_timeline(run_prog, tmp_path):
    r = scenario(run_prog, "profiled", str(tmp_path))
    assert r["decode"] == 0 and r["resize"] == [0, 0]
    dirs = export.find_prof_dirs(str(tmp_path))
    assert len(dirs) == 1, dirs
    tasks = [t for t in model.load(dirs[0]).devices[0].tasks if t.stream == r["stream"]]
    dvpp = [t for t in tasks if t.kind == "DVPP"]
    assert len(dvpp) == 3 and all(t.engine == "dvpp" and t.code == 0 for t in dvpp), tasks
    assert all(t.end_ns >= t.start_ns > 0 for t in dvpp)


def test_bench_dvpp_figure(tmp_path):
    """The bench figure runs on its own and writes consistent records (no threshold)."""
    path = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPUEMU_") or
           k == "NPUEMU_TEST_SESSION"}
    res = subprocess.run([sys.executable, "-m", "npuemu.tools.cli", "bench", "--quick",
                          "--only", "dvpp", "--json", str(path)], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, f"--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
    records = {r["name"]: r for r in json.loads(path.read_text())}
    assert set(records) == {"JPEG decode 1920x1080", "VPC resize 1080p->224"}
    for r in records.values():
        assert r["unit"] == "ms" and r["value"] > 0 and r["limit_value"] > 0, r
        assert math.isclose(r["ratio"], r["value"] / r["limit_value"], rel_tol=1e-9), r


def test_the_readme_snippet_runs_as_written(run_py):
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Images (`acl.media`, DVPP)"):]
    start = section.index("```python\n") + len("```python\n")
    code = section[start:section.index("```", start)]
    res = run_py(code, env=ENV, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["decoded", "strides", "640", "480"], res.stdout


def test_vdec_h264_clip_calls_back_on_its_thread_frame_by_frame(run_prog):
    """30 frames of libx264 (B-frames on) sent one per ``vdec_send_frame``: 30 callbacks on
    the subscribed thread, in order, each picture equal to FFmpeg's own decode."""
    r = scenario(run_prog, "vdec")
    assert r["create_no_callback"] == 100000 and r["bad_entype"] == 100000
    assert r["bad_output"] == 100000
    assert r["csc"] == [0, [4, 3, 0], 100000, 100000]
    assert r["frames"] == 30 and r["callbacks"] == 30
    assert r["order"] == list(range(30)) and r["widths"] == [320] and r["thread"]
    assert r["exact"] == [True] * 30, r["mismatch"]
    # a second channel: a skipped frame calls back with output 0; a frame of garbage and a
    # frame after it still call back, in order, once each
    assert [s[0] for s in r["second"]] == ["skipped", "frame1", "frame2"]
    assert r["second"][0][1] is False


def test_venc_encodes_frame_by_frame_and_the_stream_decodes(run_prog):
    """10 NV12 pictures through ``venc_send_frame``: 10 callbacks on the subscribed thread, in
    order, the last with eos; FFmpeg decodes the packets back to 10 frames, luma above 35 dB
    (x264's default quality)."""
    r = scenario(run_prog, "venc")
    assert r["wrong_size"] == 100000
    assert r["eos_no_picture"] == [0, 100000]                   # no callback for the end
    assert r["params"] == [[5, 0], [70, 0], True, 100000, 100000, [0, 100000], 0]
    assert r["channel_id"] > 0
    assert r["order"] == list(range(10)) and r["thread"]
    assert r["eos"] == [0] * 9 + [1]
    assert r["decoded"] == 10 and r["min_psnr"] > 35
