"""Child program of ``tests/integration/test_dvpp.py``: ``acl.media`` as the pyACL samples
call it (JPEG/PNG decode, JPEG encode, VPC resize/crop/paste/batch crop/convert/border) on a
real card, with the library's own results computed here for comparison.

``python dvpp.py SCENARIO`` initializes pyACL, sets device 0, creates the stream ``S`` and a
DVPP channel ``CH``, runs one scenario and prints ``R`` (see ``childlib``); the assertions
are the test's.
"""

import io

import av
import cv2
import numpy as np
from childlib import R, acl, d2h, main, ok, scenario, stream
from PIL import Image

M = acl.media
YUV400, NV12, NV21, RGB888, BGR888 = 0, 1, 2, 12, 13
S = None
CH = None


def align_up(value, to):
    return -(-value // to) * to


def yuv420sp_size(w, h):
    return w * h * 3 // 2


def picture(width, height, seed=0):
    """A smooth RGB test picture with some texture (a gradient, rings and noise)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 127 + 120 * np.sin(xx / 37.0)
    g = 255 * yy / max(height - 1, 1)
    b = 127 + 120 * np.cos(np.hypot(xx - width / 2, yy - height / 2) / 23.0)
    rgb = np.stack([r, g, b], axis=2) + rng.normal(0, 4, (height, width, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def jpeg_bytes(rgb, quality=92, **kw):
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=quality, **kw)
    return buf.getvalue()


def to_dvpp(data):
    """``data`` copied into a new DVPP block; returns the pointer."""
    ptr, ret = M.dvpp_malloc(len(data))
    ok(ret, "dvpp_malloc")
    ok(acl.rt.memcpy(ptr, len(data), acl.util.bytes_to_ptr(data), len(data), 1), "H2D")
    return ptr


def pic_desc(ptr, size, fmt, w, h, sw, sh):
    desc = M.dvpp_create_pic_desc()
    for name, value in (("data", ptr), ("size", size), ("format", fmt), ("width", w),
                        ("height", h), ("width_stride", sw), ("height_stride", sh)):
        ok(getattr(M, f"dvpp_set_pic_desc_{name}")(desc, value), name)
    return desc


def yuv_out(w, h, fmt=NV12):
    """An output picture the samples' way: strides 16 and 2, YUV420SP size."""
    sw, sh = align_up(w, 16), align_up(h, 2)
    size = yuv420sp_size(sw, sh)
    ptr, ret = M.dvpp_malloc(size)
    ok(ret, "dvpp_malloc")
    return pic_desc(ptr, size, fmt, w, h, sw, sh), ptr


def fields(desc):
    return [M.dvpp_get_pic_desc_width(desc), M.dvpp_get_pic_desc_height(desc),
            M.dvpp_get_pic_desc_width_stride(desc), M.dvpp_get_pic_desc_height_stride(desc),
            M.dvpp_get_pic_desc_ret_code(desc)]


def planes(ptr, w, h, sw, sh, fmt=NV12):
    """Luma (h, w) and chroma (h/2, w/2, 2: U first) read back from a YUV420SP picture."""
    raw = np.frombuffer(d2h(ptr, yuv420sp_size(sw, sh)), np.uint8)
    y = raw[:sw * sh].reshape(sh, sw)[:h, :w]
    uv = raw[sw * sh:].reshape(sh // 2, sw)[:h // 2, :w].reshape(h // 2, w // 2, 2)
    return y, (uv if fmt == NV12 else uv[:, :, ::-1])


def library_yuv420(data):
    """What FFmpeg's MJPEG decoder gives (the file's own planes, no upsampling), chroma
    brought to 4:2:0 by OpenCV's 2x2 area average where the file samples it finer: the
    emulator's stated reference."""
    frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(data))[0]
    y, u, v = (np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width]
               for p in frame.planes)
    h, w = y.shape[0] & ~1, y.shape[1] & ~1

    def half(c):
        c = c[:h if c.shape[0] >= h else h // 2, :w if c.shape[1] >= w else w // 2]
        if c.shape == (h // 2, w // 2):
            return c
        return cv2.resize(c, (w // 2, h // 2), interpolation=cv2.INTER_AREA)

    return y[:h, :w], np.stack([half(u), half(v)], axis=2)


def jfif_rgb(y, uv):
    """RGB of a full-range (JFIF) YUV420 picture, chroma upsampled bilinearly."""
    h, w = y.shape
    full = cv2.resize(uv, (w, h), interpolation=cv2.INTER_LINEAR).astype(float) - 128
    yf = y.astype(float)
    rgb = np.stack([yf + 1.402 * full[:, :, 1],
                    yf - 0.344136 * full[:, :, 0] - 0.714136 * full[:, :, 1],
                    yf + 1.772 * full[:, :, 0]], axis=2)
    return np.clip(rgb, 0, 255)


def decode(data, fmt=NV12, stride=(16, 2)):
    """jpegd as the samples write it; returns (desc, ptr, sync code, predicted size)."""
    hptr = acl.util.bytes_to_ptr(data)
    w, h, _c, ret = M.dvpp_jpeg_get_image_info(hptr, len(data))
    ok(ret, "jpeg_get_image_info")
    size, ret = M.dvpp_jpeg_predict_dec_size(hptr, len(data), fmt)
    ok(ret, "jpeg_predict_dec_size")
    src = to_dvpp(data)
    out, ret = M.dvpp_malloc(size)
    ok(ret, "dvpp_malloc")
    desc = pic_desc(out, size, fmt, w, h, align_up(w, stride[0]), align_up(h, stride[1]))
    ok(M.dvpp_jpeg_decode_async(CH, src, len(data), desc, S), "jpeg_decode_async")
    return desc, out, acl.rt.synchronize_stream(S), size


@scenario
def decode_roundtrip():
    rgb = picture(1920, 1080)
    data = jpeg_bytes(rgb)
    hptr = acl.util.bytes_to_ptr(data)
    R["info"] = list(M.dvpp_jpeg_get_image_info(hptr, len(data)))
    R["info_v2"] = list(M.dvpp_jpeg_get_image_info_v2(hptr, len(data)))
    desc, out, code, size = decode(data)
    R["sync"], R["predicted"], R["fields"] = code, size, fields(desc)
    y, uv = planes(out, 1920, 1080, *fields(desc)[2:4])
    ly, luv = library_yuv420(data)
    R["luma_exact"] = bool((y == ly).all())
    R["chroma_exact"] = bool((uv == luv).all())
    lib_rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(float)
    R["rgb_mean_abs"] = float(np.abs(jfif_rgb(y, uv) - lib_rgb).mean())
    d21, out21, code21, _ = decode(data, NV21)
    y21, uv21 = planes(out21, 1920, 1080, *fields(d21)[2:4], fmt=NV21)
    R["nv21"] = [code21, bool((y21 == ly).all() and (uv21 == luv).all())]
    odd = jpeg_bytes(picture(1001, 701, seed=1), subsampling=0)     # 4:4:4, odd sizes
    R["odd_info_v2"] = list(M.dvpp_jpeg_get_image_info_v2(acl.util.bytes_to_ptr(odd), len(odd)))
    dodd, _p, code_odd, size_odd = decode(odd)
    R["odd"] = [code_odd, size_odd, *fields(dodd)]
    gray = jpeg_bytes(picture(64, 48)[:, :, 0])
    dg, pg, code_g, _ = decode(gray)
    yg, uvg = planes(pg, 64, 48, *fields(dg)[2:4])
    frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(gray))[0]
    R["gray"] = [code_g, bool((uvg == 128).all()),
                 bool((yg == frame.to_ndarray().reshape(48, 64)).all()), frame.format.name,
                 float(np.abs(yg.astype(int) - np.asarray(Image.open(io.BytesIO(gray)))).mean())]
    dg4, pg4, code_g4, size_g4 = decode(gray, YUV400)              # the luma alone
    w4, h4, sw4, sh4, _r = fields(dg4)
    luma4 = np.frombuffer(d2h(pg4, size_g4), np.uint8).reshape(sh4, sw4)[:h4, :w4]
    R["gray400"] = [code_g4, size_g4, M.dvpp_get_pic_desc_format(dg4), w4, h4, sw4, sh4,
                    bool((luma4 == frame.to_ndarray().reshape(48, 64)).all())]
    R["colour_as_400"] = M.dvpp_jpeg_predict_dec_size(hptr, len(data), YUV400)[1]
    own_formats()
    exif_turns()
    R["usage"] = [e["name"] for e in acl.rt.get_mem_usage_info(0)[0]]


def exif_turns():
    """JPEGs carrying an EXIF orientation decode turned: 6 (a quarter clockwise) of a 4:2:0
    96x64 file into NV12 of 64x96, 2 (a mirror) of a 4:4:4 file into its own YUV444SP, 3 (a
    half turn) into NV21; each plane equal to FFmpeg's plane of the file turned by numpy."""
    rgb = picture(96, 64, seed=7)
    got = {}
    for turn, sub, fmt in ((6, 2, NV12), (2, 0, 5), (3, 2, NV21)):
        exif = Image.Exif()
        exif[0x0112] = turn
        data = jpeg_bytes(rgb, subsampling=sub, exif=exif.tobytes())
        (fy, fu, fv), _name = file_planes(data)
        show = {6: lambda p: np.rot90(p, -1), 2: np.fliplr, 3: lambda p: p[::-1, ::-1]}[turn]
        desc, out, code, size = decode(data, fmt)
        w, h, sw, sh, _ret = fields(desc)
        raw = np.frombuffer(d2h(out, size), np.uint8)
        hs, vs = (1, 1) if fmt == 5 else (2, 2)
        uv = raw[sw * sh:].reshape(sh // vs, -1)[:h // vs, :2 * (w // hs)]
        uv = uv.reshape(h // vs, w // hs, 2)
        u, v = (uv[:, :, 1], uv[:, :, 0]) if fmt == NV21 else (uv[:, :, 0], uv[:, :, 1])
        got[str(turn)] = [code, w, h, size, bool((raw[:sw * sh].reshape(sh, sw)[:h, :w]
                                                  == show(fy)).all()),
                          bool((u == show(fu)).all() and (v == show(fv)).all())]
    R["exif"] = got


def file_planes(data):
    """FFmpeg's planes of a JPEG (the file's own sampling) and its pixel format name."""
    frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(data))[0]
    return [np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width]
            for p in frame.planes], frame.format.name


def own_formats():
    """A file decoded in its own sampling (YUV444SP / YUV422SP, either order, and UNKNOWN,
    which the card turns into the V-first one), the planes equal to the file's; a format
    the file does not decode to refused by the probe (100000) and failed by the card."""
    rgb = picture(202, 100, seed=3)
    got = {}
    for sub, fmts in ((0, (5, 6, 10000)), (1, (3, 4, 10000))):
        data = jpeg_bytes(rgb, subsampling=sub)
        (fy, fu, fv), name = file_planes(data)
        for fmt in fmts:
            desc, out, code, size = decode(data, fmt)
            written = M.dvpp_get_pic_desc_format(desc)
            w, h, sw, sh, _ret = fields(desc)
            raw = np.frombuffer(d2h(out, size), np.uint8)
            cw = w if sub == 0 else w // 2
            uv = raw[sw * sh:].reshape(sh, -1)[:h, :2 * cw].reshape(h, cw, 2)
            u, v = (uv[:, :, 1], uv[:, :, 0]) if written in (4, 6) else (uv[:, :, 0], uv[:, :, 1])
            got[f"{sub}:{fmt}"] = [code, written, size, w, h, sw, sh, name,
                                   bool((raw[:sw * sh].reshape(sh, sw)[:h, :w] == fy).all()),
                                   bool((u == fu[:h, :cw]).all() and (v == fv[:h, :cw]).all())]
    R["own"] = got
    data = jpeg_bytes(rgb)                                        # 4:2:0
    hptr = acl.util.bytes_to_ptr(data)
    R["predict_420_as_444"] = M.dvpp_jpeg_predict_dec_size(hptr, len(data), 5)[1]
    R["predict_420_unknown"] = list(M.dvpp_jpeg_predict_dec_size(hptr, len(data), 10000))
    size = 256 * 112 * 3
    ptr, _ret = M.dvpp_malloc(size)
    desc = pic_desc(ptr, size, 5, 202, 100, 256, 112)
    ok(M.dvpp_jpeg_decode_async(CH, to_dvpp(data), len(data), desc, S), "jpeg_decode_async")
    R["decode_420_as_444"] = [acl.rt.synchronize_stream(S), M.dvpp_get_pic_desc_ret_code(desc)
                              != 0, M.dvpp_get_pic_desc_format(desc)]


@scenario
def encode_roundtrip():
    w, h = 640, 480
    rgb = picture(w, h, seed=2)
    i420 = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)
    y, u, v = i420[:h], i420[h:h + h // 4].reshape(h // 2, w // 2), i420[h + h // 4:].reshape(
        h // 2, w // 2)
    sw, sh = align_up(w, 16), align_up(h, 2)
    nv12 = np.concatenate([y, np.stack([u, v], axis=2).reshape(h // 2, w)]).tobytes()
    src = to_dvpp(nv12)
    desc = pic_desc(src, len(nv12), NV12, w, h, sw, sh)
    cfg = M.dvpp_create_jpege_config()
    ok(M.dvpp_set_jpege_config_level(cfg, 90), "set_jpege_config_level")
    R["level"] = M.dvpp_get_jpege_config_level(cfg)
    size, ret = M.dvpp_jpeg_predict_enc_size(desc, cfg)
    R["predicted"] = [size, ret]
    out, ret = M.dvpp_malloc(size)
    ok(ret, "dvpp_malloc")
    size_arr = np.array([size], dtype=np.int32)               # in: capacity, out: size
    R["encode"] = M.dvpp_jpeg_encode_async(CH, desc, out, acl.util.numpy_to_ptr(size_arr),
                                           cfg, S)
    R["sync"] = acl.rt.synchronize_stream(S)
    n = int(size_arr[0])
    encoded = d2h(out, n)
    full = cv2.resize(np.stack([u, v], axis=2), (w, h), interpolation=cv2.INTER_NEAREST)
    ref = io.BytesIO()
    Image.merge("YCbCr", [Image.fromarray(p) for p in (y, full[:, :, 0].copy(),
                                                      full[:, :, 1].copy())]).save(
        ref, "JPEG", quality=90, subsampling=2)
    R["size"], R["same_as_library"] = n, encoded == ref.getvalue()
    back = Image.open(io.BytesIO(encoded))
    R["decoded"] = [back.format, *back.size]
    back.draft("YCbCr", back.size)
    mse = float(((np.asarray(back)[:, :, 0].astype(float) - y) ** 2).mean())
    R["luma_psnr"] = 10 * np.log10(255 ** 2 / mse)
    small = np.array([100], dtype=np.uint32)                  # a buffer far too small
    tiny, ret = M.dvpp_malloc(100)
    ok(M.dvpp_jpeg_encode_async(CH, desc, tiny, acl.util.numpy_to_ptr(small), cfg, S))
    R["too_small"] = [acl.rt.synchronize_stream(S), int(small[0]),
                      M.dvpp_get_pic_desc_ret_code(desc)]


@scenario
def png_decode():
    rgb = picture(200, 120, seed=3)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "PNG")
    data = buf.getvalue()
    hptr = acl.util.bytes_to_ptr(data)
    R["info"] = list(M.dvpp_png_get_image_info(hptr, len(data)))
    size, ret = M.dvpp_png_predict_dec_size(hptr, len(data), RGB888)
    R["predicted"] = [size, ret]
    src = to_dvpp(data)
    out, ret = M.dvpp_malloc(size)
    desc = pic_desc(out, size, RGB888, 200, 120, 0, 0)
    R["decode"] = M.dvpp_png_decode_async(CH, src, len(data), desc, S)
    R["sync"] = acl.rt.synchronize_stream(S)
    R["fields"] = fields(desc)
    sw, sh = fields(desc)[2:4]
    got = np.frombuffer(d2h(out, sw * sh), np.uint8).reshape(sh, sw)[:120, :600]
    R["exact"] = bool((got.reshape(120, 200, 3) == rgb).all())


def nv12_source(w, h, seed=4):
    """An NV12 picture in DVPP memory (sample strides) and its planes on the host."""
    rgb = picture(w, h, seed)
    i420 = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)
    y = i420[:h]
    uv = np.stack([i420[h:h + h // 4].reshape(h // 2, w // 2),
                   i420[h + h // 4:].reshape(h // 2, w // 2)], axis=2)
    sw, sh = align_up(w, 16), align_up(h, 2)
    frame = np.zeros(yuv420sp_size(sw, sh), np.uint8)
    frame[:sw * sh].reshape(sh, sw)[:h, :w] = y
    frame[sw * sh:].reshape(sh // 2, sw)[:h // 2, :w] = uv.reshape(h // 2, w)
    ptr = to_dvpp(frame.tobytes())
    return pic_desc(ptr, frame.size, NV12, w, h, sw, sh), y, uv, rgb


def run(ret, what):
    ok(ret, what)
    return acl.rt.synchronize_stream(S)


@scenario
def vpc():
    desc, y, uv, _rgb = nv12_source(1920, 1080)
    cfg = M.dvpp_create_resize_config()
    out, optr = yuv_out(224, 224)
    R["resize"] = run(M.dvpp_vpc_resize_async(CH, desc, out, cfg, S), "resize")
    gy, guv = planes(optr, 224, 224, 224, 224)
    ry = cv2.resize(y, (224, 224), interpolation=cv2.INTER_LINEAR)
    ruv = cv2.resize(uv, (112, 112), interpolation=cv2.INTER_LINEAR)
    R["resize_exact"] = bool((gy == ry).all() and (guv == ruv).all())
    # against a float bilinear of numpy's own (half-pixel centres): within 2 levels mean
    ys = (np.arange(224) + 0.5) * 1080 / 224 - 0.5
    xs = (np.arange(224) + 0.5) * 1920 / 224 - 0.5
    y0, x0 = np.clip(np.floor(ys).astype(int), 0, 1078), np.clip(np.floor(xs).astype(int), 0,
                                                                   1918)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    yf = y.astype(float)
    ref = ((1 - fy) * (1 - fx) * yf[y0][:, x0] + (1 - fy) * fx * yf[y0][:, x0 + 1]
           + fy * (1 - fx) * yf[y0 + 1][:, x0] + fy * fx * yf[y0 + 1][:, x0 + 1])
    R["resize_vs_numpy"] = float(np.abs(gy - ref).mean())
    ok(M.dvpp_set_resize_config_interpolation(cfg, 2), "interpolation")
    R["bad_interp"] = M.dvpp_set_resize_config_interpolation(cfg, 9)
    nout, nptr = yuv_out(320, 240)
    R["nearest"] = run(M.dvpp_vpc_resize_async(CH, desc, nout, cfg, S), "nearest")
    ny, _nuv = planes(nptr, 320, 240, 320, 240)
    R["nearest_exact"] = bool((ny == cv2.resize(y, (320, 240),
                                                interpolation=cv2.INTER_NEAREST)).all())
    # crop: [100, 579] x [50, 409] (480x360) to a 480x360 output: an exact copy
    crop = M.dvpp_create_roi_config(100, 579, 50, 409)
    cout, cptr = yuv_out(480, 360)
    R["crop"] = run(M.dvpp_vpc_crop_async(CH, desc, cout, crop, S), "crop")
    cy, cuv = planes(cptr, 480, 360, 480, 360)
    R["crop_exact"] = bool((cy == y[50:410, 100:580]).all() and
                           (cuv == uv[25:205, 50:290]).all())
    # crop and paste: the crop scaled into [64, 303] x [20, 199] of a grey 640x480 picture
    pout, pptr = yuv_out(640, 480)
    ok(acl.rt.memset(pptr, yuv420sp_size(640, 480), 0x55, yuv420sp_size(640, 480)))
    paste = M.dvpp_create_roi_config(64, 303, 20, 199)
    R["paste"] = run(M.dvpp_vpc_crop_and_paste_async(CH, desc, pout, crop, paste, S), "paste")
    py, _puv = planes(pptr, 640, 480, 640, 480)
    inside = cv2.resize(y[50:410, 100:580], (240, 180), interpolation=cv2.INTER_LINEAR)
    outside = py.copy()
    outside[20:200, 64:304] = 0x55
    R["paste_exact"] = bool((py[20:200, 64:304] == inside).all() and (outside == 0x55).all())
    bad_paste = M.dvpp_create_roi_config(8, 247, 20, 199)       # left not a multiple of 16
    R["paste_unaligned"] = M.dvpp_vpc_crop_and_paste_async(CH, desc, pout, crop, bad_paste, S)
    # batch crop: two areas of one picture into two outputs, one task
    src_b, dst_b = M.dvpp_create_batch_pic_desc(1), M.dvpp_create_batch_pic_desc(2)
    first = M.dvpp_get_pic_desc(src_b, 0)
    for name in ("data", "size", "format", "width", "height", "width_stride",
                 "height_stride"):
        getattr(M, f"dvpp_set_pic_desc_{name}")(first, getattr(
            M, f"dvpp_get_pic_desc_{name}")(desc))
    ptrs = []
    for i in range(2):
        p, _ret = M.dvpp_malloc(yuv420sp_size(64, 64))
        ptrs.append(p)
        d = M.dvpp_get_pic_desc(dst_b, i)
        for name, value in (("data", p), ("size", yuv420sp_size(64, 64)), ("format", NV12),
                            ("width", 64), ("height", 64), ("width_stride", 64),
                            ("height_stride", 64)):
            getattr(M, f"dvpp_set_pic_desc_{name}")(d, value)
    areas = [M.dvpp_create_roi_config(0, 63, 0, 63), M.dvpp_create_roi_config(64, 191, 0, 127)]
    R["batch"] = run(M.dvpp_vpc_batch_crop_async(CH, src_b, [2], 1, dst_b, areas, S), "batch")
    b0, _ = planes(ptrs[0], 64, 64, 64, 64)
    b1, _ = planes(ptrs[1], 64, 64, 64, 64)
    R["batch_exact"] = [bool((b0 == y[:64, :64]).all()),
                        bool((b1 == cv2.resize(y[:128, 64:192], (64, 64),
                                               interpolation=cv2.INTER_LINEAR)).all())]
    # pyACL's forms: (channel, src, roi_nums_list, dst, areas, stream) -> (dst, ret), and
    # batch crop-resize without the count; outputs zeroed first, the same pictures again
    for p in ptrs:
        ok(acl.rt.memset(p, yuv420sp_size(64, 64), 0, yuv420sp_size(64, 64)))
    got_dst, ret6 = M.dvpp_vpc_batch_crop_async(CH, src_b, [2], dst_b, areas, S)
    R["batch6"] = [got_dst == dst_b, run(ret6, "batch6"),
                   bool((planes(ptrs[0], 64, 64, 64, 64)[0] == b0).all()),
                   bool((planes(ptrs[1], 64, 64, 64, 64)[0] == b1).all())]
    R["batch6_bad"] = list(M.dvpp_vpc_batch_crop_async(CH, src_b, 2, dst_b, areas, S))
    try:
        M.dvpp_vpc_batch_crop_async(CH, src_b, [2], dst_b, S)
        R["batch_arity"] = "accepted"
    except TypeError:
        R["batch_arity"] = "TypeError"
    nearest = M.dvpp_create_resize_config()
    ok(M.dvpp_set_resize_config_interpolation(nearest, 2))
    R["batch_resize7"] = run(M.dvpp_vpc_batch_crop_resize_async(CH, src_b, [2], dst_b, areas,
                                                                nearest, S), "batch_resize7")
    R["batch_resize7_exact"] = bool((planes(ptrs[1], 64, 64, 64, 64)[0] == cv2.resize(
        y[:128, 64:192], (64, 64), interpolation=cv2.INTER_NEAREST)).all())
    # batch crop and paste, pyACL's 7 arguments -> (dst, ret): each area scaled into its
    # paste area of a zeroed output, the rest left 0; a paste area off the 16 grid refuses
    # the whole batch before any task is queued; the resize form with nearest
    for p in ptrs:
        ok(acl.rt.memset(p, yuv420sp_size(64, 64), 0, yuv420sp_size(64, 64)))
    pastes = [M.dvpp_create_roi_config(16, 47, 8, 39), M.dvpp_create_roi_config(0, 63, 32, 63)]
    got_dst, ret7 = M.dvpp_vpc_batch_crop_and_paste_async(CH, src_b, [2], dst_b, areas,
                                                          pastes, S)
    R["batch_paste"] = [got_dst == dst_b, run(ret7, "batch_paste")]
    wants = [np.zeros((64, 64), np.uint8) for _ in range(2)]
    for want, crop_y, (x0, y0, w, h) in zip(wants, (y[:64, :64], y[:128, 64:192]),
                                            ((16, 8, 32, 32), (0, 32, 64, 32)), strict=True):
        want[y0:y0 + h, x0:x0 + w] = cv2.resize(crop_y, (w, h), interpolation=cv2.INTER_LINEAR)
    R["batch_paste_exact"] = [bool((planes(p, 64, 64, 64, 64)[0] == w).all())
                              for p, w in zip(ptrs, wants, strict=True)]
    unaligned = [M.dvpp_create_roi_config(8, 39, 0, 31), pastes[1]]
    for p in ptrs:
        ok(acl.rt.memset(p, yuv420sp_size(64, 64), 0, yuv420sp_size(64, 64)))
    R["batch_paste_unaligned"] = list(M.dvpp_vpc_batch_crop_and_paste_async(
        CH, src_b, [2], dst_b, areas, unaligned, S))
    ok(acl.rt.synchronize_stream(S))
    R["batch_paste_untouched"] = [bool((planes(p, 64, 64, 64, 64)[0] == 0).all())
                                  for p in ptrs]
    R["batch_resize_paste8"] = run(M.dvpp_vpc_batch_crop_resize_paste_async(
        CH, src_b, [2], dst_b, areas, pastes, nearest, S), "batch_resize_paste8")
    R["batch_resize_paste8_exact"] = bool((planes(ptrs[1], 64, 64, 64, 64)[0][32:] == cv2.resize(
        y[:128, 64:192], (64, 32), interpolation=cv2.INTER_NEAREST)).all())
    # convert color NV12 -> RGB888 (OpenCV BT.601) and the picture it came from
    small, sy, suv, srgb = nv12_source(320, 240, seed=5)
    rsz = align_up(320 * 3, 16) * 240
    rptr, _ret = M.dvpp_malloc(rsz)
    rdesc = pic_desc(rptr, rsz, RGB888, 320, 240, align_up(320 * 3, 16), 240)
    R["convert"] = run(M.dvpp_vpc_convert_color_async(CH, small, rdesc, S), "convert")
    got = np.frombuffer(d2h(rptr, rsz), np.uint8).reshape(240, 960).reshape(240, 320, 3)
    lib = cv2.cvtColor(np.concatenate([sy, suv.reshape(120, 320)]), cv2.COLOR_YUV2RGB_NV12)
    R["convert_exact"] = bool((got == lib).all())
    R["convert_vs_source"] = float(np.abs(got.astype(int) - srgb.astype(int)).mean())
    # make border: 16 on the left and right, 8 on top and bottom, constant Y=16 U=V=128
    border = M.dvpp_create_border_config()
    for setter, value in (("top", 8), ("bottom", 8), ("left", 16), ("right", 16)):
        ok(getattr(M, f"dvpp_set_border_config_{setter}")(border, value))
    for i, value in enumerate((16, 128, 128)):
        ok(M.dvpp_set_border_config_value(border, i, value))
    ok(M.dvpp_set_border_config_border_type(border, 0))
    bout, bptr = yuv_out(352, 256)
    R["border"] = run(M.dvpp_vpc_make_border_async(CH, small, bout, border, S), "border")
    by, buv = planes(bptr, 352, 256, 352, 256)
    R["border_exact"] = bool((by[8:248, 16:336] == sy).all() and (by[:8] == 16).all()
                             and (by[:, :16] == 16).all() and (buv[:4] == 128).all())


@scenario
def vpc_repeated():
    """The same resize five times, each from a new picture into the same output (filled
    with 0x55 before each): the first runs on the DVPP engine, the later ones (measured
    short) in the card's loop. Each task's code, whether the output is OpenCV's exactly,
    the output's ret code, and whether the card wrote the stream's estimate of the task's
    end (from its last run of the same geometry; a synchronize wakes shortly before it)."""
    from npuemu.host.core import stream as streams

    handle = streams.resolve(S)
    cfg = M.dvpp_create_resize_config()
    out, optr = yuv_out(224, 224)
    size = yuv420sp_size(224, 224)
    R["codes"], R["exact"], R["ret_codes"], R["estimated"] = [], [], [], []
    for seed in range(5):
        desc, y, uv, _rgb = nv12_source(640, 480, seed=20 + seed)
        ok(acl.rt.memset(optr, size, 0x55, size), "memset")
        before = handle.link.stream_eta[handle.slot]
        R["codes"].append(run(M.dvpp_vpc_resize_async(CH, desc, out, cfg, S), "resize"))
        R["estimated"].append(handle.link.stream_eta[handle.slot] > before)
        gy, guv = planes(optr, 224, 224, 224, 224)
        ry = cv2.resize(y, (224, 224), interpolation=cv2.INTER_LINEAR)
        ruv = cv2.resize(uv, (112, 112), interpolation=cv2.INTER_LINEAR)
        R["exact"].append(bool((gy == ry).all() and (guv == ruv).all()))
        R["ret_codes"].append(fields(out)[4])


@scenario
def vpc_kept():
    """One resize call repeated with the same descriptors, its input rewritten in between
    by work queued before it: (1) a decode of a 640x480 file into the input, then the
    resize, three times (the card keeps the resize's checks after the first); (2) a
    decode of a 320x240 file into the same input record and buffer, queued with the next
    resize and no synchronize between, so the card meets a record of new geometry; (3)
    the input's pixels overwritten by a copy, then the resize. Whether each output is
    OpenCV's resize of the picture the card held when the resize ran."""
    cfg = M.dvpp_create_resize_config()
    out, optr = yuv_out(224, 224)
    big, small = jpeg_bytes(picture(640, 480, seed=31)), jpeg_bytes(picture(320, 240, seed=32))
    size, ret = M.dvpp_jpeg_predict_dec_size(acl.util.bytes_to_ptr(big), len(big), NV12)
    ok(ret, "jpeg_predict_dec_size")
    src_big, src_small = to_dvpp(big), to_dvpp(small)
    yuv, ret = M.dvpp_malloc(size)
    ok(ret, "dvpp_malloc")
    desc = pic_desc(yuv, size, NV12, 640, 480, 640, 480)

    def resize_of(data, w, h):
        y, uv = library_yuv420(data)
        return (cv2.resize(y, (224, 224), interpolation=cv2.INTER_LINEAR),
                cv2.resize(uv, (112, 112), interpolation=cv2.INTER_LINEAR))

    def exact(want):
        gy, guv = planes(optr, 224, 224, 224, 224)
        return bool((gy == want[0]).all() and (guv == want[1]).all())

    R["codes"], R["exact"] = [], []
    for src, data, w, h in ((src_big, big, 640, 480),) * 3 + ((src_small, small, 320, 240),):
        ok(M.dvpp_jpeg_decode_async(CH, src, len(data), desc, S), "jpeg_decode_async")
        ok(M.dvpp_vpc_resize_async(CH, desc, out, cfg, S), "resize")
        R["codes"].append(acl.rt.synchronize_stream(S))
        R["exact"].append(exact(resize_of(data, w, h)))
    R["geometry"] = fields(desc)[:2]
    y, uv = library_yuv420(small)
    sw, sh = M.dvpp_get_pic_desc_width_stride(desc), M.dvpp_get_pic_desc_height_stride(desc)
    frame = np.zeros(sw * sh * 3 // 2, np.uint8)
    flipped = (255 - y, 255 - uv)
    frame[:sw * sh].reshape(sh, sw)[:240, :320] = flipped[0]
    frame[sw * sh:].reshape(sh // 2, sw)[:120, :320] = flipped[1].reshape(120, 320)
    ok(acl.rt.memcpy(yuv, frame.nbytes, frame.ctypes.data, frame.nbytes, 1), "H2D")
    R["codes"].append(run(M.dvpp_vpc_resize_async(CH, desc, out, cfg, S), "resize"))
    R["exact"].append(exact((cv2.resize(flipped[0], (224, 224), interpolation=cv2.INTER_LINEAR),
                             cv2.resize(flipped[1], (112, 112),
                                        interpolation=cv2.INTER_LINEAR))))


@scenario
def bad_inputs():
    rgb = picture(256, 128, seed=6)
    data = jpeg_bytes(rgb)
    src = to_dvpp(data)
    size, _ret = M.dvpp_jpeg_predict_dec_size(acl.util.bytes_to_ptr(data), len(data), NV12)
    out, _ret = M.dvpp_malloc(size)
    desc = pic_desc(out, size, NV12, 256, 128, 256, 128)
    host = np.frombuffer(data, np.uint8)
    R["predict_rgb"] = M.dvpp_jpeg_predict_dec_size(host.ctypes.data, len(data), RGB888)[1]
    R["predict_bogus_format"] = M.dvpp_jpeg_predict_dec_size(host.ctypes.data, len(data),
                                                             999)[1]
    R["info_not_jpeg"] = M.dvpp_jpeg_get_image_info(acl.util.bytes_to_ptr(b"x" * 64), 64)[3]
    R["info_null"] = M.dvpp_jpeg_get_image_info(0, 64)[3]
    unopened = M.dvpp_create_channel_desc()
    R["no_channel"] = M.dvpp_jpeg_decode_async(unopened, src, len(data), desc, S)
    R["bad_mode"] = M.dvpp_set_channel_desc_mode(unopened, 0)
    vpc_only = M.dvpp_create_channel_desc()
    ok(M.dvpp_set_channel_desc_mode(vpc_only, 1))
    ok(M.dvpp_create_channel(vpc_only))
    R["wrong_mode"] = M.dvpp_jpeg_decode_async(vpc_only, src, len(data), desc, S)
    R["host_input"] = M.dvpp_jpeg_decode_async(CH, host.ctypes.data, len(data), desc, S)
    R["unknown_desc"] = M.dvpp_jpeg_decode_async(CH, src, len(data), 12345, S)
    ok(M.dvpp_set_pic_desc_format(desc, RGB888))
    R["jpegd_rgb_out"] = M.dvpp_jpeg_decode_async(CH, src, len(data), desc, S)
    ok(M.dvpp_set_pic_desc_format(desc, 999))
    R["jpegd_bogus_out"] = M.dvpp_jpeg_decode_async(CH, src, len(data), desc, S)
    ok(M.dvpp_set_pic_desc_format(desc, NV12))
    R["set_bad_width"] = M.dvpp_set_pic_desc_width(desc, -1)
    # VPC refusals at the call
    vin, _y, _uv, _rgb = nv12_source(256, 128, seed=7)
    cfg = M.dvpp_create_resize_config()
    vout, _p = yuv_out(64, 64)
    ok(M.dvpp_set_pic_desc_width_stride(vin, 250))
    R["stride_unaligned"] = M.dvpp_vpc_resize_async(CH, vin, vout, cfg, S)
    ok(M.dvpp_set_pic_desc_width_stride(vin, 256))
    ok(M.dvpp_set_pic_desc_height_stride(vin, 127))
    R["height_stride_odd"] = M.dvpp_vpc_resize_async(CH, vin, vout, cfg, S)
    ok(M.dvpp_set_pic_desc_height_stride(vin, 128))
    ok(M.dvpp_set_pic_desc_size(vin, 1000))
    R["buffer_small"] = M.dvpp_vpc_resize_async(CH, vin, vout, cfg, S)
    ok(M.dvpp_set_pic_desc_size(vin, yuv420sp_size(256, 128)))
    ok(M.dvpp_set_pic_desc_width(vout, 8))
    R["out_too_narrow"] = M.dvpp_vpc_resize_async(CH, vin, vout, cfg, S)
    ok(M.dvpp_set_pic_desc_width(vout, 64))
    ok(M.dvpp_set_pic_desc_format(vout, 7))              # YUYV packed: not emulated
    R["format_unsupported"] = M.dvpp_vpc_resize_async(CH, vin, vout, cfg, S)
    ok(M.dvpp_set_pic_desc_format(vout, NV12))
    R["crop_odd_left"] = M.dvpp_vpc_crop_async(CH, vin, vout,
                                               M.dvpp_create_roi_config(1, 64, 0, 63), S)
    R["crop_outside"] = M.dvpp_vpc_crop_async(CH, vin, vout,
                                              M.dvpp_create_roi_config(0, 299, 0, 63), S)
    R["free_not_dvpp"] = M.dvpp_free(12345)
    R["sync_after_refusals"] = acl.rt.synchronize_stream(S)   # nothing was queued
    # failures on the card: each fails its task, the card goes on
    corrupt = bytearray(data)
    corrupt[len(corrupt) // 2:] = b"\x00" * (len(corrupt) - len(corrupt) // 2)
    bad = to_dvpp(bytes(corrupt[:len(corrupt) // 2 + 64]))
    R["corrupt_call"] = M.dvpp_jpeg_decode_async(CH, bad, len(corrupt) // 2 + 64, desc, S)
    R["corrupt_sync"] = acl.rt.synchronize_stream(S)
    R["corrupt_ret_code"] = M.dvpp_get_pic_desc_ret_code(desc)
    garbage = to_dvpp(b"\xff\xd8" + bytes(range(256)) * 4)
    ok(M.dvpp_jpeg_decode_async(CH, garbage, 1026, desc, S))
    R["garbage_sync"] = acl.rt.synchronize_stream(S)
    prog = jpeg_bytes(rgb, progressive=True)
    pp = to_dvpp(prog)
    ok(M.dvpp_jpeg_decode_async(CH, pp, len(prog), desc, S))
    R["progressive_sync"] = acl.rt.synchronize_stream(S)
    ok(M.dvpp_set_pic_desc_size(desc, 1000))
    ok(M.dvpp_jpeg_decode_async(CH, src, len(data), desc, S))
    R["out_buffer_small_sync"] = acl.rt.synchronize_stream(S)
    ok(M.dvpp_set_pic_desc_size(desc, size))
    ok(M.dvpp_jpeg_decode_async(CH, src, len(data), desc, S))
    R["after_sync"] = acl.rt.synchronize_stream(S)
    R["after_fields"] = fields(desc)
    other = stream()
    vout2, _p2 = yuv_out(64, 64)
    ok(M.dvpp_vpc_resize_async(CH, vin, vout2, cfg, other))
    R["other_stream"] = acl.rt.synchronize_stream(other)


@scenario
def channel_params():
    """acldvppSet/GetChannelDescParam and acldvppMallocWithCfg."""
    desc = M.dvpp_create_channel_desc()
    get = M.dvpp_get_channel_desc_param
    R["defaults"] = [list(get(desc, t)) for t in range(6)]
    got, ret = M.dvpp_set_channel_desc_param(desc, M.ACL_DVPP_CSC_MATRIX_UINT32, 3)
    R["set_csc"] = [got == desc, ret]
    for kind, value in ((M.ACL_DVPP_MODE_UINT32, 1), (M.ACL_DVPP_CHANNEL_HEIGHT_UINT32, 4096),
                        (M.ACL_DVPP_CHANNEL_WIDTH_UINT32, 2048),
                        (M.ACL_DVPP_JPEGD_PRECISION_MODE_ENUM, M.ACL_YUVOUT_ALIGN_DOWN)):
        ok(M.dvpp_set_channel_desc_param(desc, kind, value)[1], f"set {kind}")
    R["set"] = [list(get(desc, t)) for t in range(6)]
    R["refused"] = [M.dvpp_set_channel_desc_param(desc, kind, value)[1] for kind, value in (
        (0, 6), (2, 5), (6, 0), (3, 0), (4, 9000), (1, 0), (5, 3), (5, 1))]
    R["unknown"] = [M.dvpp_set_channel_desc_param(12345, 0, 1)[1], list(get(12345, 0)),
                    list(get(desc, 9))]
    ok(M.dvpp_create_channel(desc), "create_channel")
    R["id"] = [list(get(desc, 2)), M.dvpp_get_channel_desc_channel_id(desc)]
    R["mode_after_create"] = M.dvpp_set_channel_desc_param(desc, 1, 7)[1]
    # a VPC resize on the VPC-only channel into a block of dvpp_malloc_with_cfg
    src, y, _uv, _rgb = nv12_source(128, 64, seed=9)
    size = yuv420sp_size(64, 32)
    ptr, ret = M.dvpp_malloc_with_cfg(size, 0, {})
    out = pic_desc(ptr, size, NV12, 64, 32, 64, 32)
    R["with_cfg"] = [ret, run(M.dvpp_vpc_resize_async(desc, src, out,
                                                      M.dvpp_create_resize_config(), S),
                              "resize")]
    R["with_cfg_exact"] = bool((planes(ptr, 64, 32, 64, 32)[0] == cv2.resize(
        y, (64, 32), interpolation=cv2.INTER_LINEAR)).all())
    odd, ret_odd = M.dvpp_malloc_with_cfg(3 << 20, 99, None)     # unknown policy: accepted
    R["odd_policy"] = [ret_odd, M.dvpp_free(odd), M.dvpp_free(ptr)]
    R["cfg_refused"] = [list(M.dvpp_malloc_with_cfg(64, 0, "x")),
                        list(M.dvpp_malloc_with_cfg(0, 0, {})),
                        list(M.dvpp_malloc_with_cfg(64, -1, {}))]
    R["jpegd_wrong_mode"] = M.dvpp_jpeg_decode_async(desc, ptr, 16, out, S)
    ok(M.dvpp_destroy_channel(desc), "destroy_channel")


def gray_source(w, h, sw, sh, seed=10):
    """A YUV400 picture in DVPP memory (strides ``sw`` x ``sh``) and its luma on the host."""
    y = cv2.cvtColor(picture(w, h, seed), cv2.COLOR_RGB2GRAY)
    frame = np.zeros(sw * sh, np.uint8)
    frame.reshape(sh, sw)[:h, :w] = y
    return pic_desc(to_dvpp(frame.tobytes()), frame.size, YUV400, w, h, sw, sh), y


def gray_out(w, h, sw, sh):
    ptr, ret = M.dvpp_malloc(sw * sh)
    ok(ret, "dvpp_malloc")
    return pic_desc(ptr, sw * sh, YUV400, w, h, sw, sh), ptr


def gray_planes(ptr, w, h, sw, sh):
    return np.frombuffer(d2h(ptr, sw * sh), np.uint8).reshape(sh, sw)[:h, :w]


@scenario
def pyramid():
    """acldvppVpcPyrDownAsync: YUV400 to half size, as cv2.pyrDown; its refusals."""
    src, y = gray_source(640, 480, 640, 480)
    out, optr = gray_out(320, 240, 320, 240)
    R["even"] = run(M.dvpp_vpc_pyr_down_async(CH, src, out, 0, S), "pyr down")
    R["even_exact"] = bool((gray_planes(optr, 320, 240, 320, 240) == cv2.pyrDown(y)).all())
    # an odd 101x61 picture in strides 112x64 into 50x30 (strides 64x30)
    osrc, oy = gray_source(101, 61, 112, 64, seed=11)
    oout, ooptr = gray_out(50, 30, 64, 30)
    R["odd"] = run(M.dvpp_vpc_pyr_down_async(CH, osrc, oout, None, S), "pyr down odd")
    R["odd_exact"] = bool((gray_planes(ooptr, 50, 30, 64, 30) ==
                           cv2.pyrDown(oy, dstsize=(50, 30))).all())
    small, _y = gray_source(20, 12, 32, 12, seed=12)           # the smallest input
    sout, _p = gray_out(10, 6, 16, 6)
    R["smallest"] = run(M.dvpp_vpc_pyr_down_async(CH, small, sout, 0, S), "pyr down small")
    nv12, _ny, _nuv, _rgb = nv12_source(64, 64, seed=13)
    wrong, _p = gray_out(300, 240, 304, 240)
    tiny, _y = gray_source(18, 12, 32, 12, seed=14)
    tout, _p = gray_out(9, 6, 16, 6)
    R["refused"] = [M.dvpp_vpc_pyr_down_async(CH, nv12, sout, 0, S),      # not YUV400
                    M.dvpp_vpc_pyr_down_async(CH, src, wrong, 0, S),      # not half
                    M.dvpp_vpc_pyr_down_async(CH, tiny, tout, 0, S),      # under 20 wide
                    M.dvpp_vpc_pyr_down_async(CH, src, out, 7, S),        # reserve not NULL
                    M.dvpp_vpc_pyr_down_async(12345, src, out, 0, S)]     # no channel
    ok(M.dvpp_set_pic_desc_width_stride(out, 328))
    R["refused"].append(M.dvpp_vpc_pyr_down_async(CH, src, out, 0, S))   # stride % 16
    R["sync_after_refusals"] = acl.rt.synchronize_stream(S)


def batch_of(pics):
    """A batch picture descriptor holding copies of the fields of ``pics``."""
    batch = M.dvpp_create_batch_pic_desc(len(pics))
    for i, pic in enumerate(pics):
        one = M.dvpp_get_pic_desc(batch, i)
        for name in ("data", "size", "format", "width", "height", "width_stride",
                     "height_stride"):
            ok(getattr(M, f"dvpp_set_pic_desc_{name}")(one, getattr(
                M, f"dvpp_get_pic_desc_{name}")(pic)), name)
    return batch


def border_config(kind, top, bottom, left, right, values=(0, 0, 0)):
    cfg = M.dvpp_create_border_config()
    for side, value in (("top", top), ("bottom", bottom), ("left", left), ("right", right)):
        ok(getattr(M, f"dvpp_set_border_config_{side}")(cfg, value), side)
    for i, value in enumerate(values):
        ok(M.dvpp_set_border_config_value(cfg, i, value), "value")
    ok(M.dvpp_set_border_config_border_type(cfg, kind), "type")
    return cfg


@scenario
def batch_border():
    """acldvppVpcBatchCropResizeMakeBorderAsync: two areas of one picture, each scaled into
    its output less the borders and bordered (constant into NV12, replicate into RGB888)."""
    src, y, uv, _rgb = nv12_source(640, 480, seed=15)
    out0, p0 = yuv_out(224, 224)
    rsw = align_up(128 * 3, 16)
    p1, _ret = M.dvpp_malloc(rsw * 128)
    out1 = pic_desc(p1, rsw * 128, RGB888, 128, 128, rsw, 128)
    src_b, dst_b = batch_of([src]), batch_of([out0, out1])
    areas = [M.dvpp_create_roi_config(0, 319, 0, 239), M.dvpp_create_roi_config(320, 639, 240,
                                                                                479)]
    borders = [border_config(0, 16, 16, 32, 32, (16, 128, 128)), border_config(1, 8, 8, 8, 8)]
    resize = M.dvpp_create_resize_config()
    ret = M.dvpp_vpc_batch_crop_resize_make_border_async(CH, src_b, [2], dst_b, areas,
                                                         borders, resize, S)
    R["pyacl"] = run(ret, "batch border")
    gy, guv = planes(p0, 224, 224, 224, 224)
    iy = cv2.resize(y[:240, :320], (160, 192), interpolation=cv2.INTER_LINEAR)
    iuv = cv2.resize(uv[:120, :160], (80, 96), interpolation=cv2.INTER_LINEAR)
    want_y = cv2.copyMakeBorder(iy, 16, 16, 32, 32, cv2.BORDER_CONSTANT, value=16)
    want_uv = cv2.copyMakeBorder(iuv, 8, 8, 16, 16, cv2.BORDER_CONSTANT, value=(128, 128))
    R["constant_exact"] = bool((gy == want_y).all() and (guv == want_uv).all())
    # the RGB output: the card's own crop-resize of the area, bordered by replication
    inner_sw = align_up(112 * 3, 16)
    ip, _ret = M.dvpp_malloc(inner_sw * 112)
    inner = pic_desc(ip, inner_sw * 112, RGB888, 112, 112, inner_sw, 112)
    ok(run(M.dvpp_vpc_crop_resize_async(CH, src, inner, areas[1], resize, S), "crop resize"))
    flat = np.frombuffer(d2h(ip, inner_sw * 112), np.uint8).reshape(112, inner_sw)
    want_rgb = cv2.copyMakeBorder(flat[:, :336].reshape(112, 112, 3), 8, 8, 8, 8,
                                  cv2.BORDER_REPLICATE)
    got = np.frombuffer(d2h(p1, rsw * 128), np.uint8).reshape(128, rsw)[:, :384]
    R["replicate_exact"] = bool((got.reshape(128, 128, 3) == want_rgb).all())
    # the C call's order (size after roi_nums), nearest
    ok(M.dvpp_set_resize_config_interpolation(resize, 2))
    R["c_form"] = run(M.dvpp_vpc_batch_crop_resize_make_border_async(
        CH, src_b, [2], 1, dst_b, areas, borders, resize, S), "c form")
    gy, _guv = planes(p0, 224, 224, 224, 224)
    R["nearest_exact"] = bool((gy[16:208, 32:192] == cv2.resize(
        y[:240, :320], (160, 192), interpolation=cv2.INTER_NEAREST)).all())
    call = M.dvpp_vpc_batch_crop_resize_make_border_async
    R["refused"] = [
        call(CH, src_b, [2], dst_b, areas, [border_config(2, 8, 8, 8, 8), borders[1]],
             resize, S),                                             # reflect
        call(CH, src_b, [2], dst_b, areas, [border_config(0, 110, 110, 0, 0), borders[1]],
             resize, S),                                             # 4 rows left
        call(CH, src_b, [2], dst_b, areas, [border_config(0, 3, 3, 0, 0), borders[1]],
             resize, S),                                             # odd on NV12
        call(CH, src_b, [2], dst_b, areas, borders[:1], resize, S),  # one config short
        call(CH, src_b, [2], dst_b, areas, [borders[0], 12345], resize, S)]  # not a config
    R["sync_after_refusals"] = acl.rt.synchronize_stream(S)
    try:
        call(CH, src_b, [2], dst_b, areas, borders, S)
        R["arity"] = "accepted"
    except TypeError:
        R["arity"] = "TypeError"


@scenario
def profiled(prof_dir):
    """A decode and two resizes while profiling (the second, measured short, runs in the
    card's loop): the tasks the trace shows (the test reads it)."""
    data = jpeg_bytes(picture(320, 240, seed=8))
    ok(acl.prof.init(prof_dir), "prof.init")
    cfg = acl.prof.create_config([0], 0xFF, 0, 0x2)          # ACL_PROF_TASK_TIME
    ok(acl.prof.start(cfg), "prof.start")
    desc, _ptr, R["decode"], _size = decode(data)
    out, _optr = yuv_out(224, 224)
    resize = M.dvpp_create_resize_config()
    R["resize"] = [run(M.dvpp_vpc_resize_async(CH, desc, out, resize, S), "resize")
                   for _ in range(2)]
    ok(acl.prof.stop(cfg), "prof.stop")
    ok(acl.prof.finalize(), "prof.finalize")
    R["stream"] = acl.rt.stream_get_id(S)[0]


def h264_clip(frames=30, w=320, h=240):
    """A ``frames``-frame H.264 clip (libx264, B-frames on) as one packet per frame, and
    what FFmpeg's own decoder makes of it (NV12 arrays in output order)."""
    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt, enc.framerate = w, h, "yuv420p", 30
    packets = []
    for i in range(frames):
        rgb = np.roll(picture(w, h, seed=9), 4 * i, axis=1)
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = i
        packets += [bytes(p) for p in enc.encode(frame)]
    packets += [bytes(p) for p in enc.encode(None)]
    dec = av.CodecContext.create("h264", "r")
    want = [f.to_ndarray(format="nv12") for p in packets for f in dec.decode(av.Packet(p))]
    want += [f.to_ndarray(format="nv12") for f in dec.decode(None)]
    return packets, want


@scenario
def vdec():
    import threading
    packets, want = h264_clip()
    w, h = 320, 240
    got, lock, running = [], threading.Lock(), [True]

    def on_frame(input_desc, output_desc, user_data):
        ptr = M.dvpp_get_pic_desc_data(output_desc)
        frame = None
        if output_desc and M.dvpp_get_pic_desc_ret_code(output_desc) == 0:
            frame = np.frombuffer(d2h(ptr, yuv420sp_size(w, h)), np.uint8)
        with lock:
            got.append((user_data, frame, M.dvpp_get_pic_desc_width(output_desc),
                        threading.get_ident()))

    ctx, ret = acl.rt.get_context()
    ok(ret, "get_context")

    def serve(_args):
        ok(acl.rt.set_context(ctx), "set_context")            # as the samples' threads do
        while running[0]:
            acl.rt.process_report(100)

    tid, ret = acl.util.start_thread(serve, [])
    ok(ret, "start_thread")
    ch = M.vdec_create_channel_desc()
    R["create_no_callback"] = M.vdec_create_channel(ch)
    for name, value in (("channel_id", 0), ("thread_id", tid), ("callback", on_frame),
                        ("entype", 2), ("out_pic_format", NV12)):
        ok(getattr(M, f"vdec_set_channel_desc_{name}")(ch, value), name)
    R["bad_entype"] = M.vdec_set_channel_desc_entype(ch, 9)
    # ACL_VDEC_CSC_MATRIX_UINT32 (0): pyACL's (desc, ret) and (size, value, ret)
    R["csc"] = [M.vdec_set_channel_desc_param(ch, 0, 3)[1],
                M.vdec_get_channel_desc_param(ch, 0),
                M.vdec_set_channel_desc_param(ch, 0, 6)[1],
                M.vdec_set_channel_desc_param(ch, 1, 0)[1]]
    ok(M.vdec_create_channel(ch), "vdec_create_channel")
    cfg = M.vdec_create_frame_config()
    for i, packet in enumerate(packets):
        src = to_dvpp(packet)
        sdesc = M.dvpp_create_stream_desc()
        ok(M.dvpp_set_stream_desc_data(sdesc, src))
        ok(M.dvpp_set_stream_desc_size(sdesc, len(packet)))
        ok(M.dvpp_set_stream_desc_eos(sdesc, int(i == len(packets) - 1)))
        out, _ptr = yuv_out(w, h)
        ok(M.vdec_send_frame(ch, sdesc, out, cfg, i), f"send_frame {i}")
    small = M.dvpp_create_stream_desc()
    R["bad_output"] = M.vdec_send_frame(ch, small, pic_desc(0, 0, NV12, 64, 64, 64, 64), cfg, 0)
    ok(M.vdec_destroy_channel(ch), "vdec_destroy_channel")
    with lock:
        R["callbacks"] = len(got)
        R["order"] = [g[0] for g in got]
        R["widths"] = sorted({g[2] for g in got})
        R["thread"] = all(g[3] == tid for g in got)
        R["exact"] = [bool(g[1] is not None and (g[1] == want[k].reshape(-1)).all())
                      for k, g in enumerate(got)]
        R["mismatch"] = [[k, float(np.abs(g[1].astype(int) - want[k].reshape(-1)).mean()),
                          int(np.argmin([np.abs(g[1].astype(int) - x.reshape(-1)).mean()
                                         for x in want]))]
                         for k, g in enumerate(got) if g[1] is not None and
                         not (g[1] == want[k].reshape(-1)).all()]
    R["frames"] = len(want)
    # a second channel on the same thread: a skipped frame, a garbage frame, the clip's
    # first frame, then the end of stream
    with lock:
        got.clear()
    ch2 = M.vdec_create_channel_desc()
    for name, value in (("thread_id", tid), ("callback", on_frame), ("entype", 2)):
        ok(getattr(M, f"vdec_set_channel_desc_{name}")(ch2, value), name)
    ok(M.vdec_create_channel(ch2), "vdec_create_channel 2")
    garbage = bytes(range(256)) * 8
    for i, (data, skip) in enumerate(((packets[0], True), (garbage, False),
                                      (packets[1], False))):
        sdesc = M.dvpp_create_stream_desc()
        ok(M.dvpp_set_stream_desc_data(sdesc, to_dvpp(data)))
        ok(M.dvpp_set_stream_desc_size(sdesc, len(data)))
        ok(M.dvpp_set_stream_desc_eos(sdesc, int(i == 2)))
        if skip:
            ok(M.vdec_send_skipped_frame(ch2, sdesc, cfg, "skipped"), "send_skipped_frame")
        else:
            out, _ptr = yuv_out(w, h)
            ok(M.vdec_send_frame(ch2, sdesc, out, cfg, f"frame{i}"), f"send_frame {i}")
    ok(M.vdec_destroy_channel(ch2), "vdec_destroy_channel 2")
    with lock:
        R["second"] = [[g[0], g[1] is not None] for g in got]
    running[0] = False
    acl.util.stop_thread(tid)


@scenario
def venc():
    import threading

    w, h, n = 320, 240, 10
    got, lock, running = [], threading.Lock(), [True]

    def on_packet(input_desc, output_desc, user_data):
        size = M.dvpp_get_stream_desc_size(output_desc)
        data = d2h(M.dvpp_get_stream_desc_data(output_desc), size) if size else b""
        with lock:
            got.append((user_data, data, M.dvpp_get_stream_desc_eos(output_desc),
                        threading.get_ident()))

    ctx, ret = acl.rt.get_context()
    ok(ret, "get_context")

    def serve(_args):
        ok(acl.rt.set_context(ctx), "set_context")
        while running[0]:
            acl.rt.process_report(100)

    tid, ret = acl.util.start_thread(serve, [])
    ok(ret, "start_thread")
    ch = M.venc_create_channel_desc()
    for name, value in (("thread_id", tid), ("callback", on_packet), ("entype", 2),
                        ("pic_format", NV12), ("pic_width", w), ("pic_height", h),
                        ("key_frame_interval", 5)):
        ok(getattr(M, f"venc_set_channel_desc_{name}")(ch, value), name)
    # aclvencChannelDescParamType: 6 key frame interval, 12 I/P bit ratio, 1 the callback
    ok(M.venc_set_channel_desc_param(ch, 12, 70), "param ip_prop")
    R["params"] = [M.venc_get_channel_desc_param(ch, 6), M.venc_get_channel_desc_param(ch, 12),
                   M.venc_get_channel_desc_param(ch, 1)[0] is on_packet,
                   M.venc_set_channel_desc_param(ch, 12, 101),
                   M.venc_set_channel_desc_param(ch, 13, 0),
                   M.venc_get_channel_desc_param(ch, 13),
                   M.venc_get_channel_desc_channel_id(ch)]
    ok(M.venc_create_channel(ch), "venc_create_channel")
    R["channel_id"] = M.venc_get_channel_desc_channel_id(ch)
    cfg = M.venc_create_frame_config()
    sources = []
    for i in range(n):
        desc, y, _uv, _rgb = nv12_source(w, h, seed=10 + i)
        sources.append(y)
        ok(M.venc_set_frame_config_eos(cfg, int(i == n - 1)))
        ok(M.venc_send_frame(ch, desc, 0, cfg, i), f"venc_send_frame {i}")
    wrong, _y, _uv, _rgb = nv12_source(256, 128)
    R["wrong_size"] = M.venc_send_frame(ch, wrong, 0, cfg, 99)
    R["eos_no_picture"] = [M.venc_send_frame(ch, 0, 0, cfg, 98)]  # cfg's eos is 1: the end
    ok(M.venc_set_frame_config_eos(cfg, 0))
    R["eos_no_picture"].append(M.venc_send_frame(ch, 0, 0, cfg, 97))
    ok(M.venc_destroy_channel(ch), "venc_destroy_channel")
    running[0] = False
    acl.util.stop_thread(tid)
    with lock:
        R["order"] = [g[0] for g in got]
        R["thread"] = all(g[3] == tid for g in got)
        R["eos"] = [g[2] for g in got]
        packets = [g[1] for g in got]
    dec = av.CodecContext.create("h264", "r")                # one access unit per callback
    frames = [f for p in packets for f in dec.decode(av.Packet(p))] + list(dec.decode(None))
    R["decoded"] = len(frames)
    psnr = []
    for f, y in zip(frames, sources, strict=False):
        luma = f.to_ndarray(format="nv12")[:h].astype(float)
        psnr.append(10 * np.log10(255 ** 2 / max(((luma - y) ** 2).mean(), 1e-9)))
    R["min_psnr"] = min(psnr) if psnr else 0


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    S = stream()
    CH = M.dvpp_create_channel_desc()
    ok(M.dvpp_create_channel(CH), "create_channel")
    main()
