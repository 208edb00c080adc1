"""The steps of tests/cabi/progs/dvpp_batch.c through ``acl.media``, for its test to compare:
``python dvpp_batch.py IN OUT`` reads the NV12 picture IN (128x96) and writes each output
into the folder OUT, in a file named as the C program names it."""

import sys
from pathlib import Path

import acl
from acl import media as M

IN, OUT = sys.argv[1], sys.argv[2]

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

pixels, outs = Path(IN).read_bytes(), {}
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
    Path(OUT, name).write_bytes(out)
ok(M.dvpp_destroy_channel(CH))
ok(acl.rt.destroy_stream(S))
ok(acl.rt.reset_device(0))
ok(acl.finalize())
