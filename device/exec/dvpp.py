"""The DVPP engine's tasks: JPEG/PNG decode, JPEG encode and VPC (resize, crop, crop and
paste, batch crop, batch crop with borders, colour conversion, borders, pyramid) on device
memory.

A ``DVPP`` task frame carries a kind, the pinned-host addresses of its picture records
(``shared/media.py``: ``PIC_DESC``) and integer parameters:

| kind  | records              | parameters                                                  |
|-------|----------------------|-------------------------------------------------------------|
| jpegd | output               | data, size                                                  |
| pngd  | output               | data, size                                                  |
| jpege | input                | data, capacity, level, size word (pinned host address, u32) |
| vpc   | inputs..., outputs... | op, interpolation, inputs, then per op: see ``_vpc``        |
| vdec  | status, output       | see ``vdec.py``                                             |
| venc  | input (or none)      | see ``venc.py``                                             |

``prepare`` (loop thread, when the task reaches its stream's head) reads the records, checks
them and resolves every address (107000 for memory that is not the client's; 507018 for a
picture that breaks a rule: the geometry is read in stream order, so a picture an earlier
task wrote is seen as written). A VPC task that repeats an earlier one (the same records and
parameters, the records' words unchanged, no block of the card allocated, freed, mapped or
unpinned since: ``_kept``) reuses its checks, addresses and job; one it ran before (the same
geometry) tells the scheduler how long it took (``expect``), so a host synchronize wakes
shortly before its end and polls instead of sleeping until the completion's wake-up.
``run`` (the DVPP engine thread) decodes, encodes or transforms and writes the results and
the output records (width, height, strides, size of a decode; ret code 0). A task that
fails, for a corrupt file or a picture that breaks a rule, fails with
``ACL_ERROR_RT_AICPU_EXCEPTION`` (507018: on this SoC the acldvpp image calls run as AI CPU
tasks; the hardware's exact value is our choice), writes a nonzero ret code into its output
records and one line to the device log (module DVPP); the card goes on.

Codecs: FFmpeg's MJPEG decoder (PyAV, one thread, damage an error) decodes JPEG into the
planes the file codes (no upsampling); Pillow (libjpeg-turbo, libpng) reads headers,
decodes PNG and encodes JPEG; OpenCV resizes (bilinear or nearest, ``cv2.INTER_LINEAR`` /
``cv2.INTER_NEAREST``: CANN documents them as the industry's algorithms), converts colour
(BT.601 as ``cv2.cvtColor`` defines its YUV codes) and makes borders. JPEGD's 4:2:0
chroma is the file's; a file sampled finer (4:4:4, 4:2:2, 4:4:0) is brought to 4:2:0 by a
2:1 average in each finer direction (``cv2.INTER_AREA``), so a decoded picture is within
a level of libjpeg's decode (not bit-exact to the hardware).

VPC's pyramid step (``acldvppVpcPyrDownAsync``, YUV400 only) is ``cv2.pyrDown`` (a 5x5
Gaussian, then every other row and column; CANN names no filter: our choice).

VPC works on views of the card's memory: each plane (luma, the interleaved UV plane, or
the packed RGB rows) is scaled by OpenCV straight from the input's view into the output's
(no copy of either picture, no full-frame colour conversion). Across RGB and YUV the
colour conversion runs at the smaller size: a downscale converts at the output size (YUV
to RGB with luma and chroma both scaled to it), an upscale at the input size.

Partial: progressive JPEGs are refused as the hardware refuses them; arithmetic-coded
ones are not looked for; JPEGD writes YUV420SP from every file it reads, the file's
own YUV422SP/YUV440SP/YUV444SP (UNKNOWN: that, V first) and YUV400 from a grey file (our
choice), refusing other pairs; VPC takes YUV400, YUV420SP and RGB888/BGR888 only.
JPEGD applies the file's EXIF orientation as CANN's JPEGD documentation says the hardware does (a
quarter or half turn, a mirror or flip, the output geometry the turned picture's); after
a turn of an odd-sized file the chroma is that of the turned planes, cut to the even
size, not the hardware's (whose odd side CANN's documentation says shows a green edge).

Threading model: ``prepare`` runs in the worker's loop thread; the job (``run``) on the DVPP
engine thread touches only its task's resolved addresses (device memory and pinned records
of the task's client, held live by the allocator's checks at prepare time, as copies are).
A VPC task measured short runs in the loop thread instead (``INLINE_VPC_NS``), and only
while the DVPP engine has no task. ``_costs`` (the last run's time of each VPC geometry) is
written by whichever thread ran the job, one dict store at a time (atomic under the GIL), and
read by the loop; a lost update only delays the switch to or from the loop by one task.
"""

from __future__ import annotations

import ctypes
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import av
import cv2
import numpy as np
from PIL import Image

from npuemu.device import contracts, engines
from npuemu.device.contracts import Card, Job
from npuemu.device.exec import pictures, vdec, venc
from npuemu.device.exec.dvpp_frame import MAX_RECORDS
from npuemu.device.exec.pictures import DvppFailure, Picture
from npuemu.shared import errors
from npuemu.shared import media as m

FAILED = errors.ACL_ERROR_RT_AICPU_EXCEPTION
_P = m.PIC_DESC
_RECORD = ctypes.c_uint64 * _P.words
cv2.setNumThreads(1)  # one engine thread per card: no pool of its own behind it


class TimedClient(contracts.Client, Protocol):
    """A client as ``_runs_here`` reads it (``worker.Client``): its execution timeout."""

    op_timeout_s: float  # 0.0: the defaults


class TimedJob(Job, Protocol):
    """A task as a run in the loop thread writes it (``scheduler.Task``): what an engine
    writes on the task it ran (its key and when it ran, for the trace)."""

    engine: str
    start_ns: int
    end_ns: int


def prepare(worker: Card, client: TimedClient,
            task: Job) -> tuple[str | None, Callable[[TimedJob], int]]:
    """Loop thread: read and check the task's records, resolve its addresses; the engine
    (None: a VPC task measured short, run now in the loop thread, ``INLINE_VPC_NS``) and
    the run function. Raises AclError (the task fails with its code)."""
    kind, records, params = task.args
    kept = _kept(worker, client, records, params) if kind == "vpc" else None
    pics, job, key = kept or _checked(worker, client, kind, records, params)
    here = key is not None and _runs_here(worker, client, key)
    if key is not None and (here or not worker.scheduler.engines[engines.DVPP].running):
        last_ns = _costs.get(key)
        if last_ns is not None:  # it starts now: the host may wake shortly before its end
            worker.scheduler.expect(task, last_ns)

    def run(task: TimedJob) -> int:
        start = time.monotonic_ns()
        try:
            job()
        except Exception as err:  # DvppFailure, or a codec library refusing the pixels
            for pic in pics:
                pic.fail()
            what = "" if isinstance(err, DvppFailure) else f"{type(err).__name__}: "
            worker.log("ERROR", f"{kind}: {what}{err}", module="DVPP")
            return FAILED
        if key is not None:
            end = time.monotonic_ns()
            _learn(worker, key, end - start, here)
            if here:  # as the engine writes them (the trace's engine and times)
                task.engine, task.start_ns, task.end_ns = engines.DVPP, start, end
        if kind not in ("vdec", "venc"):  # their outputs are the channel's to report
            for pic in pics:
                pic.record[_P.RET_CODE] = 0
        return 0

    return (None if here else engines.DVPP), run


def _checked(worker: Card, client: TimedClient, kind: str, records: Sequence[int],
             params: Sequence[int]) -> tuple[list[Picture], Callable[[], None],
                                             tuple[Any, ...] | None]:
    """The task's pictures (read and resolved), its job and, for VPC, its cost key (a VPC
    task's three are kept for its repeats: ``_kept``). Raises AclError."""
    pics = [pictures.read(worker, client, p) for p in records]
    try:
        low, high = _RECORDS[kind]
        if not low <= len(pics) <= high:
            raise DvppFailure(f"a {kind} task takes {low} to {high} picture records")
        job = _PREPARE[kind](worker, client, pics, list(params))
    except DvppFailure as err:
        for pic in pics:
            pic.fail()
        worker.log("ERROR", f"{kind}: {err}", module="DVPP")
        raise errors.error_for(FAILED, str(err)) from None
    if kind != "vpc":
        return pics, job, None
    key = _cost_key(pics, params)
    if len(_prepared) >= _PREPARED_MAX:
        _prepared.clear()
    _prepared[(tuple(records), tuple(params))] = _Prepared(
        worker, client, worker.alloc_changes, pics,
        [ctypes.string_at(ctypes.addressof(p.record), _CHECKED_BYTES) for p in pics], job, key)
    return pics, job, key


# VPC tasks repeated ---------------------------------------------------------------------------
@dataclass(eq=False)
class _Prepared:
    """A VPC task as ``_checked`` left it: valid for a task of the same records and
    parameters while its client's records hold the same words and the card's allocations
    (``alloc_changes``: mallocs, frees, mappings, unpins) are as they were."""

    worker: Card
    client: TimedClient
    gen: int
    pics: list[Picture]
    words: list[bytes]  # each record's words but its ret code, as read
    job: Callable[[], None]
    key: tuple[Any, ...]


_CHECKED_BYTES = _P.RET_CODE * 8
"""Bytes of a picture record the card reads (every word before the ret code, its last)."""
assert _P.words == _P.RET_CODE + 1, "a word after RET_CODE would escape the kept checks"
_PREPARED_MAX = 256
_prepared: dict[tuple[tuple[int, ...], tuple[int, ...]], _Prepared] = {}
"""The last ``_checked`` VPC task of each records and parameters (loop thread only)."""


def _kept(worker: Card, client: TimedClient, records: Sequence[int],
          params: Sequence[int]) -> tuple[list[Picture], Callable[[], None],
                                          tuple[Any, ...]] | None:
    """The pictures, job and cost key of an earlier VPC task that this one repeats: the same
    client, records and parameters, the records' words unchanged and no block of the card
    allocated, freed, mapped or unpinned since (``alloc_changes``), so every check and
    address it made holds. A
    pipeline resizing frame after frame into the same buffers pays the checks once."""
    kept = _prepared.get((tuple(records), tuple(params)))
    if kept is None or kept.client is not client or kept.worker is not worker \
            or kept.gen != worker.alloc_changes:
        return None
    for pic, words in zip(kept.pics, kept.words, strict=True):
        if ctypes.string_at(ctypes.addressof(pic.record), _CHECKED_BYTES) != words:
            return None
    return kept.pics, kept.job, kept.key


# VPC tasks run in the loop thread ------------------------------------------------------------
INLINE_VPC_NS = 500_000
"""A VPC task whose last run with the same geometry and parameters took at most this long
runs in the worker's loop thread when it starts, not on the DVPP engine thread: the two
thread hand-offs (the engine's wake-up, then the loop's to publish the completion) cost a
resize of a few hundred microseconds a third to a half again, more on a loaded machine.
Meanwhile the loop serves nothing else, as for tiny kernels (``scheduler.py``); a task that
ran longer goes back to the engine from its next start on."""
_TIMEOUT_FLOOR_S = 0.01
"""Below this execution timeout (``aclrtSetOpExecuteTimeOut``) no VPC task runs in the loop
(a task there cannot time out), as for the scheduler's tiny kernels."""
_COSTS_MAX = 1024
_costs: dict[tuple[Any, ...], int] = {}
"""Nanoseconds of the last successful run of a VPC task, by ``_cost_key``."""


def _cost_key(pics: list[Picture], params: Sequence[int]) -> tuple[Any, ...]:
    """What a VPC job's time depends on: its parameters and its pictures' geometry."""
    return (*params, *[(p.fmt, p.width, p.height, p.stride_w, p.stride_h) for p in pics])


def _runs_here(worker: Card, client: TimedClient, key: tuple[Any, ...]) -> bool:
    """The VPC task of ``key`` runs in the loop thread: its last run took at most
    ``INLINE_VPC_NS``, the DVPP engine has no task (its tasks stay one at a time) and the
    client's execution timeout is not below ``_TIMEOUT_FLOOR_S``."""
    if _costs.get(key, INLINE_VPC_NS + 1) > INLINE_VPC_NS:
        return False
    if worker.scheduler.engines[engines.DVPP].running:
        return False
    timeout_s = client.op_timeout_s
    return not timeout_s or timeout_s >= _TIMEOUT_FLOOR_S


def _learn(worker: Card, key: tuple[Any, ...], ns: int, here: bool) -> None:
    """Keep the time of a successful VPC run; one run in the loop thread counts as the
    DVPP engine's busy time, as an inline kernel's does."""
    if len(_costs) >= _COSTS_MAX and key not in _costs:
        _costs.clear()
    _costs[key] = ns
    if here:
        worker.scheduler.engines[engines.DVPP].inline_ns += ns


# decoders and the encoder ----------------------------------------------------------------
def _open(data: bytes, what: str) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
    except Exception as err:  # Pillow raises several unrelated types for bad files
        raise DvppFailure(f"not a {what} file: {err}") from None
    if image.format != what:
        raise DvppFailure(f"the data is a {image.format} file, not {what}")
    return image


_PLANAR = {"yuvj420p": (2, 2), "yuvj422p": (2, 1), "yuvj440p": (1, 2), "yuvj444p": (1, 1),
           "yuv420p": (2, 2), "yuv422p": (2, 1), "yuv440p": (1, 2), "yuv444p": (1, 1),
           "gray": (0, 0)}
"""FFmpeg's pixel formats of a decoded JPEG JPEGD reads: chroma subsampling (horizontal,
vertical); grey has no chroma."""


def _decode_jpeg(blob: bytes) -> Any:
    """FFmpeg's MJPEG decoder on one file (one thread: the engine's; any damage an error,
    not concealed): the frame, its planes as the file codes them (no upsampling)."""
    decoder = av.CodecContext.create("mjpeg", "r")
    decoder.thread_count = 1
    decoder.options = {"err_detect": "explode"}
    try:
        frames = decoder.decode(av.Packet(blob)) + decoder.decode(None)
    except av.error.FFmpegError as err:
        raise DvppFailure(f"decode failed: {err}") from None
    if len(frames) != 1:
        raise DvppFailure("decode failed: the data holds no picture")
    return frames[0]


def _plane(frame: Any, index: int) -> np.ndarray:
    plane = frame.planes[index]
    rows = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
    return rows[:, :plane.width]


_UNSUPPORTED = "just support jpeg with YUV 444 440 422 420 400"


def _jpegd(worker: Card, client: contracts.Client, pics: list[Picture],
           params: list[int]) -> Callable[[], None]:
    (out,), (data, size) = pics, params
    src = worker.resolve(client, data, size)
    if out.fmt not in m.JPEGD_FORMATS:
        raise DvppFailure(f"JPEGD writes semi-planar YUV, YUV400 or UNKNOWN, not format {out.fmt}")
    blob = ctypes.string_at(src, size)  # read once: the task runs next, in stream order
    probe = _open(blob, "JPEG")
    width, height = probe.size
    if not (m.JPEGD_MIN <= width <= m.JPEGD_MAX and m.JPEGD_MIN <= height <= m.JPEGD_MAX):
        raise DvppFailure(f"JPEG of {width}x{height}, outside {m.JPEGD_MIN}x{m.JPEGD_MIN} "
                          f"to {m.JPEGD_MAX}x{m.JPEGD_MAX}")
    if probe.info.get("progressive") or probe.info.get("progression"):
        raise DvppFailure("do not support progressive mode")
    if probe.mode not in ("L", "RGB"):
        raise DvppFailure(f"{_UNSUPPORTED}, not {probe.mode}")
    css = m.jpeg_css([(layer[1], layer[2]) for layer in getattr(probe, "layer", [])])
    turn = m.exif_orientation(probe)
    width, height = m.oriented(width, height, turn)
    fmt = m.jpegd_output(css, out.fmt)
    if fmt is None:
        name = m.JpegFormat(css).name
        if css not in _SOURCES:
            raise DvppFailure(f"{_UNSUPPORTED}, not {name}")
        raise DvppFailure(f"a {name} file does not decode to format {out.fmt}")
    w, h, sw, sh, need = m.jpegd_geometry(width, height, fmt)
    if out.size < need:
        raise DvppFailure(f"output buffer of {out.size} bytes; the picture needs {need}")
    pictures.resolve(worker, client, out, need)

    def job() -> None:
        frame = _decode_jpeg(blob)
        sampling = _PLANAR.get(frame.format.name)
        if sampling is None:
            raise DvppFailure(f"{_UNSUPPORTED}, not {frame.format.name}")
        if turn in m.TRANSPOSED:
            sampling = sampling[::-1]
        rec = out.record
        rec[_P.FORMAT] = fmt  # UNKNOWN becomes the format written
        rec[_P.WIDTH], rec[_P.HEIGHT], rec[_P.WIDTH_STRIDE], rec[_P.HEIGHT_STRIDE] = w, h, sw, sh
        if fmt == m.YUV400:
            luma = pictures.as_bytes(out.addr, sw * sh).reshape(sh, sw)[:h, :w]
            luma[...] = _turned(_plane(frame, 0), turn)[:h, :w]
            return
        luma, chroma = pictures.semiplanar_views(out.addr, fmt, sw, sh, w, h)
        luma[...] = _turned(_plane(frame, 0), turn)[:h, :w]
        if sampling == (0, 0):
            chroma[...] = 128
        else:
            order = (2, 1) if fmt in m.V_FIRST else (1, 2)
            planes = [_turned(_plane(frame, i), turn) for i in order]
            _chroma_into(planes, sampling, m.SUBSAMPLING[fmt], chroma)

    return job


_TURNS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    1: lambda p: p, 2: np.fliplr, 3: lambda p: p[::-1, ::-1], 4: np.flipud,
    5: lambda p: p.T, 6: lambda p: np.rot90(p, -1), 7: lambda p: p[::-1, ::-1].T,
    8: lambda p: np.rot90(p, 1)}
"""EXIF orientation -> what JPEGD does to each plane to show the picture upright: 2 mirror,
3 half turn, 4 flip, 5 transpose, 6 quarter turn clockwise, 7 transverse, 8 quarter turn
anticlockwise (views: the copy into the output is the only one)."""


def _turned(plane: np.ndarray, turn: int) -> np.ndarray:
    return _TURNS[turn](plane)


_SOURCES = frozenset((m.JpegFormat.ACL_JPEG_CSS_444, m.JpegFormat.ACL_JPEG_CSS_422,
                      m.JpegFormat.ACL_JPEG_CSS_420, m.JpegFormat.ACL_JPEG_CSS_440,
                      m.JpegFormat.ACL_JPEG_CSS_GRAY))
"""The samplings JPEGD reads."""


def _chroma_into(sources: list[np.ndarray], sampling: tuple[int, int],
                 target: tuple[int, int], chroma: np.ndarray) -> None:
    """Two chroma planes (subsampled by ``sampling``, horizontal and vertical, in the
    output's order) brought to ``chroma``'s (subsampled by ``target``) by OpenCV's
    ``INTER_AREA`` (a 2:1 average in each direction the file samples finer; a quarter turn
    of a 4:2:2 or 4:4:0 file into its own format also stretches the other direction), and
    interleaved into it."""
    ch, cw = chroma.shape[:2]
    rows, cols = ch * target[1] // sampling[1], cw * target[0] // sampling[0]
    planes = []
    for source in sources:
        plane = np.ascontiguousarray(source[:rows, :cols])  # the samples that count
        if plane.shape != (ch, cw):
            plane = cv2.resize(plane, (cw, ch), interpolation=cv2.INTER_AREA)
        planes.append(plane)
    cv2.merge(planes, dst=chroma)  # a view with the picture's row stride: written in place


def _pngd(worker: Card, client: contracts.Client, pics: list[Picture],
          params: list[int]) -> Callable[[], None]:
    (out,), (data, size) = pics, params
    src = worker.resolve(client, data, size)
    if out.fmt not in (m.RGB888, m.RGBA8888):
        raise DvppFailure(f"PNGD writes RGB888 (12) or RGBA8888 (16), not format {out.fmt}")
    blob = ctypes.string_at(src, size)  # read once: the task runs next, in stream order
    width, height = _open(blob, "PNG").size
    if not (m.PNGD_MIN <= width <= m.PNGD_MAX and m.PNGD_MIN <= height <= m.PNGD_MAX):
        raise DvppFailure(f"PNG of {width}x{height}, outside {m.PNGD_MIN}x{m.PNGD_MIN} to "
                          f"{m.PNGD_MAX}x{m.PNGD_MAX}")
    w, h, sw, sh, need = m.pngd_geometry(width, height, out.fmt)
    if out.size < need:
        raise DvppFailure(f"output buffer of {out.size} bytes; the picture needs {need}")
    pictures.resolve(worker, client, out, need)

    def job() -> None:
        image = _open(blob, "PNG")
        try:
            pixels = np.asarray(image.convert("RGB" if out.fmt == m.RGB888 else "RGBA"))
        except Exception as err:
            raise DvppFailure(f"decode failed: {err}") from None
        rec = out.record
        rec[_P.WIDTH], rec[_P.HEIGHT], rec[_P.WIDTH_STRIDE], rec[_P.HEIGHT_STRIDE] = w, h, sw, sh
        channels = m.bytes_per_pixel(out.fmt)
        rows = pictures.as_bytes(out.addr, sw * sh).reshape(sh, sw)
        rows[:h, :w * channels] = pixels.reshape(h, w * channels)

    return job


def _jpege(worker: Card, client: contracts.Client, pics: list[Picture],
           params: list[int]) -> Callable[[], None]:
    (pic,), (data, capacity, level, size_word) = pics, params
    if pic.fmt not in m.YUV420SP:
        raise DvppFailure(f"JPEGE takes YUV420SP (1, 2), not format {pic.fmt}")
    w, h, sw, sh = pic.width, pic.height, pic.stride_w, pic.stride_h
    if not (m.JPEGE_MIN <= w <= m.JPEGE_MAX and m.JPEGE_MIN <= h <= m.JPEGE_MAX) \
            or w % 2 or h % 2:
        raise DvppFailure(f"JPEGE input {w}x{h}: even, {m.JPEGE_MIN} to {m.JPEGE_MAX}")
    if sw % 16 or sw < w or not (sh == h or (sh % 16 == 0 and sh >= max(h, 32))):
        raise DvppFailure(f"JPEGE strides {sw}x{sh} for {w}x{h}: width stride a multiple of "
                          "16, height stride the height or a multiple of 16")
    need = m.picture_bytes(pic.fmt, sw, sh)
    if pic.size < need:
        raise DvppFailure(f"input buffer of {pic.size} bytes; its strides need {need}")
    pictures.resolve(worker, client, pic, need)
    dst = worker.resolve(client, data, capacity)
    word = ctypes.c_uint32.from_address(worker.resolve(client, size_word, 4))
    quality = 100 if level == 0 else level

    def job() -> None:
        luma, chroma = pictures.yuv420_views(pic.addr, sw, sh, w, h)
        uv = chroma if pic.fmt == m.NV12 else chroma[:, :, ::-1]
        full = cv2.resize(uv, (w, h), interpolation=cv2.INTER_NEAREST)
        planes = [Image.fromarray(np.ascontiguousarray(p)) for p in (luma, full[:, :, 0],
                                                                     full[:, :, 1])]
        out = io.BytesIO()
        Image.merge("YCbCr", planes).save(out, "JPEG", quality=quality, subsampling=2)
        encoded = out.getbuffer()
        if len(encoded) > capacity:
            raise DvppFailure(f"encoded picture of {len(encoded)} bytes; the output buffer "
                              f"holds {capacity}")
        ctypes.memmove(dst, bytes(encoded), len(encoded))
        word.value = len(encoded)

    return job


# VPC ---------------------------------------------------------------------------------------
@dataclass
class Planes:
    """A picture's pixels: YUV (luma, chroma with U first or None for YUV400) or RGB."""

    luma: np.ndarray | None = None
    chroma: np.ndarray | None = None
    rgb: np.ndarray | None = None


def _load(pic: Picture) -> Planes:
    if pic.fmt in (m.RGB888, m.BGR888):
        rgb = pictures.packed(pic.addr, pic.stride_w, pic.stride_h, pic.width, pic.height, 3)
        return Planes(rgb=rgb if pic.fmt == m.RGB888 else rgb[:, :, ::-1])
    if pic.fmt == m.YUV400:
        sw, sh = pic.stride_w, pic.stride_h
        rows = pictures.as_bytes(pic.addr, sw * sh).reshape(sh, sw)
        return Planes(luma=rows[:pic.height, :pic.width])
    luma, chroma = pictures.yuv420_views(pic.addr, pic.stride_w, pic.stride_h, pic.width,
                                         pic.height)
    return Planes(luma, chroma if pic.fmt == m.NV12 else chroma[:, :, ::-1])


def _as(planes: Planes, fmt: int) -> Planes:
    """The same pixels in ``fmt``'s family (RGB, YUV420, YUV400); OpenCV's BT.601."""
    want_rgb = fmt in (m.RGB888, m.BGR888)
    if want_rgb and planes.rgb is not None:
        return planes
    if want_rgb:
        assert planes.luma is not None
        h, w = planes.luma.shape
        chroma = planes.chroma if planes.chroma is not None else np.full(
            (h // 2, w // 2, 2), 128, np.uint8)
        nv12 = np.concatenate([planes.luma.reshape(h, w), chroma.reshape(h // 2, w)])
        return Planes(rgb=cv2.cvtColor(nv12, cv2.COLOR_YUV2RGB_NV12))
    if planes.rgb is not None:
        h, w = planes.rgb.shape[:2]
        i420 = cv2.cvtColor(np.ascontiguousarray(planes.rgb), cv2.COLOR_RGB2YUV_I420)
        u = i420[h:h + h // 4].reshape(h // 2, w // 2)
        v = i420[h + h // 4:].reshape(h // 2, w // 2)
        planes = Planes(i420[:h], np.stack([u, v], axis=2))
    if fmt == m.YUV400:
        return Planes(planes.luma)
    if planes.chroma is None:
        assert planes.luma is not None
        h, w = planes.luma.shape
        return Planes(planes.luma, np.full((h // 2, w // 2, 2), 128, np.uint8))
    return planes


def _crop(planes: Planes, roi: tuple[int, int, int, int]) -> Planes:
    left, right, top, bottom = roi
    if planes.rgb is not None:
        return Planes(rgb=planes.rgb[top:bottom + 1, left:right + 1])
    assert planes.luma is not None
    chroma = None if planes.chroma is None else \
        planes.chroma[top // 2:(bottom + 1) // 2, left // 2:(right + 1) // 2]
    return Planes(planes.luma[top:bottom + 1, left:right + 1], chroma)


def _flag(interpolation: int) -> int:
    return cv2.INTER_NEAREST if interpolation == m.Interpolation.NEAREST else cv2.INTER_LINEAR


def _resize(planes: Planes, w: int, h: int, flag: int) -> Planes:
    """New arrays of ``planes`` scaled to ``w`` x ``h`` (the chroma to half that)."""
    def one(a: np.ndarray | None, ww: int, hh: int) -> np.ndarray | None:
        if a is None or a.shape[:2] == (hh, ww):
            return a
        return cv2.resize(a, (ww, hh), interpolation=flag)

    if planes.rgb is not None:
        return Planes(rgb=one(planes.rgb, w, h))
    return Planes(one(planes.luma, w, h), one(planes.chroma, w // 2, h // 2))


def _into(a: np.ndarray, out: np.ndarray, flag: int) -> None:
    """``a`` scaled into the view ``out`` (OpenCV writes the view itself where it can)."""
    if a.strides[-1] < 0 and out.strides[-1] < 0:  # both V first (BGR): resize the bytes
        a, out = a[..., ::-1], out[..., ::-1]
    if a.shape == out.shape:
        out[...] = a
        return
    size = (out.shape[1], out.shape[0])
    if out.strides[-1] == 1 and (out.ndim == 2 or out.strides[1] == out.shape[2]):
        cv2.resize(a, size, dst=out, interpolation=flag)
    else:  # a view OpenCV cannot write (channels reversed on one side only)
        out[...] = cv2.resize(a, size, interpolation=flag)


def _fill(src: Planes, target: Planes, flag: int) -> None:
    """Scale ``src`` (already in ``target``'s family) into the views of ``target``."""
    if target.rgb is not None:
        assert src.rgb is not None
        _into(src.rgb, target.rgb, flag)
        return
    assert src.luma is not None and target.luma is not None
    _into(src.luma, target.luma, flag)
    if target.chroma is None:
        return
    if src.chroma is None:  # YUV400 into YUV420SP: neutral chroma
        target.chroma[...] = 128
    else:
        _into(src.chroma, target.chroma, flag)


def _transform(src: Planes, target: Planes, fmt: int, flag: int) -> None:
    """``src`` into ``target`` (views of an output picture of format ``fmt``): each plane
    scaled straight into the output when the families agree. Across RGB and YUV the colour
    conversion runs at the smaller of the two sizes: after a downscale (YUV to RGB: luma
    and chroma both scaled to the output size, so no chroma detail is lost), before an
    upscale."""
    if (src.rgb is None) == (target.rgb is None):
        _fill(src, target, flag)
        return
    h, w = _size(target)
    sh, sw = _size(src)
    if w * h >= sw * sh:
        _fill(_as(src, fmt), target, flag)
    elif src.rgb is not None:
        _fill(_as(_resize(src, w, h, flag), fmt), target, flag)
    else:
        _fill(Planes(rgb=_yuv444_rgb(src, w, h, flag)), target, flag)


def _size(planes: Planes) -> tuple[int, int]:
    """Height and width of the picture ``planes`` hold."""
    first = planes.rgb if planes.rgb is not None else planes.luma
    assert first is not None
    return first.shape[0], first.shape[1]


def _yuv444_rgb(src: Planes, w: int, h: int, flag: int) -> np.ndarray:
    """RGB of ``src`` (YUV) scaled to ``w`` x ``h``: luma and chroma scaled to that size,
    converted by OpenCV's NV12 rule on a picture twice the size (each pixel a 2x2 block,
    so every output pixel has its own chroma), one pixel of each block kept."""
    assert src.luma is not None
    luma = cv2.resize(src.luma, (w, h), interpolation=flag)
    frame = np.empty((3 * h, 2 * w), np.uint8)
    cv2.resize(luma, (2 * w, 2 * h), dst=frame[:2 * h], interpolation=cv2.INTER_NEAREST)
    chroma = frame[2 * h:].reshape(h, w, 2)
    if src.chroma is None:
        chroma[...] = 128
    else:
        _into(src.chroma, chroma, flag)
    return cv2.cvtColor(frame, cv2.COLOR_YUV2RGB_NV12)[::2, ::2]


def _area(planes: Planes, x: int, y: int, w: int, h: int) -> Planes:
    """Views of the ``w`` x ``h`` area at ``(x, y)`` (even for YUV420SP)."""
    return _crop(planes, (x, x + w - 1, y, y + h - 1))


def _store(pic: Picture, planes: Planes) -> None:
    """Write ``planes`` (already in ``pic``'s family, of its size) into ``pic``."""
    _fill(planes, _load(pic), cv2.INTER_NEAREST)


def _check(pic: Picture, output: bool) -> None:
    if pic.fmt not in m.VPC_FORMATS:
        raise DvppFailure(f"VPC does not take format {pic.fmt} here")
    problem = m.vpc_picture_problem(pic.fmt, pic.width, pic.height, pic.stride_w,
                                    pic.stride_h, pic.size, output)
    if problem:
        raise DvppFailure(problem)


def _check_pyr(pic: Picture, output: bool) -> None:
    problem = m.pyr_down_problem(pic.fmt, pic.width, pic.height, pic.stride_w, pic.stride_h,
                                 pic.size, output)
    if problem:
        raise DvppFailure(problem)


def _pyr_down(src: Picture, dst: Picture) -> None:
    """One Gaussian pyramid step of a YUV400 picture into its half-size output
    (``cv2.pyrDown``: a 5x5 Gaussian, reflected borders, every other row and column)."""
    rows = _load(src).luma
    target = _load(dst).luma
    assert rows is not None and target is not None
    cv2.pyrDown(rows, dst=target, dstsize=(dst.width, dst.height))


def _roi(params: list[int], at: int, pic: Picture, what: str,
         paste: bool = False) -> tuple[int, int, int, int]:
    if len(params) < at + 4:
        raise DvppFailure(f"{what}: missing")
    roi = (params[at], params[at + 1], params[at + 2], params[at + 3])
    problem = m.roi_problem(list(roi), pic.width, pic.height, what, paste)
    if problem:
        raise DvppFailure(problem)
    return roi


def _scale_ok(src_w: int, src_h: int, dst_w: int, dst_h: int) -> None:
    for a, b in ((src_w, dst_w), (src_h, dst_h)):
        if not m.VPC_SCALE_MIN <= b / a <= m.VPC_SCALE_MAX:
            raise DvppFailure(f"resize {src_w}x{src_h} to {dst_w}x{dst_h}: each side scales "
                              "by 1/32 to 16")


def _vpc(worker: Card, client: contracts.Client, pics: list[Picture],
         params: list[int]) -> Callable[[], None]:
    """Parameters: op, interpolation, number of inputs, then by op: CROP: an ROI;
    CROP_PASTE: crop ROI, paste ROI; BORDER: type, top, bottom, left, right, 3 values;
    BATCH_CROP: the ROI count of each input, then every ROI in order; BATCH_CROP_BORDER: the
    ROI counts, each output's border (type, top, bottom, left, right, 3 values), then the
    ROIs; PYR_DOWN: nothing
    (a YUV400 input and its half-size output, checked by ``pyr_down_problem``)."""
    if len(params) < 3:
        raise DvppFailure("VPC task without its operation")
    op, interpolation, n_in = params[:3]
    rest = params[3:]
    inputs, outputs = pics[:n_in], pics[n_in:]
    if not inputs or not outputs:
        raise DvppFailure("VPC task without input or output pictures")
    check = _check_pyr if op == m.VpcOp.PYR_DOWN else _check
    for pic in inputs:
        check(pic, output=False)
        pictures.resolve(worker, client, pic, m.picture_bytes(pic.fmt, pic.stride_w, pic.stride_h))
    for pic in outputs:
        check(pic, output=True)
        pictures.resolve(worker, client, pic, m.picture_bytes(pic.fmt, pic.stride_w, pic.stride_h))
    plan = _plan(op, rest, inputs, outputs)

    flag = _flag(interpolation)

    def job() -> None:
        for src, roi, dst, at in plan:
            if op == m.VpcOp.PYR_DOWN:
                _pyr_down(src, dst)
                continue
            planes = _load(src)
            if roi is not None:
                planes = _crop(planes, roi)
            if op == m.VpcOp.BORDER:
                _store(dst, _border(_as(planes, dst.fmt), rest, dst))
                continue
            if op == m.VpcOp.BATCH_CROP_BORDER:  # ``at``: the output's border
                assert at is not None
                _store(dst, _border(_inside(planes, dst, at, flag), list(at), dst))
                continue
            target = _load(dst)
            if at is not None:  # paste into its area; the rest of the output stays
                x, right, y, bottom = at
                target = _area(target, x, y, right - x + 1, bottom - y + 1)
            _transform(planes, target, dst.fmt, flag)

    return job


_Step = tuple[Picture, "tuple[int, int, int, int] | None", Picture, "tuple[int, ...] | None"]
"""Input, crop ROI, output, paste ROI (or, for BATCH_CROP_BORDER, the output's border)."""


def _plan(op: int, rest: list[int], inputs: list[Picture],
          outputs: list[Picture]) -> list[_Step]:
    """The (input, crop ROI, output, paste ROI) steps of a VPC task, checked."""
    src, dst = inputs[0], outputs[0]
    if op in (m.VpcOp.RESIZE, m.VpcOp.CONVERT):
        if op == m.VpcOp.CONVERT and (src.width, src.height) != (dst.width, dst.height):
            raise DvppFailure("convert color keeps the size: output "
                              f"{dst.width}x{dst.height}, input {src.width}x{src.height}")
        _scale_ok(src.width, src.height, dst.width, dst.height)
        return [(src, None, dst, None)]
    if op == m.VpcOp.CROP:
        roi = _roi(rest, 0, src, "crop area")
        _scale_ok(roi[1] - roi[0] + 1, roi[3] - roi[2] + 1, dst.width, dst.height)
        return [(src, roi, dst, None)]
    if op == m.VpcOp.CROP_PASTE:
        roi = _roi(rest, 0, src, "crop area")
        paste = _roi(rest, 4, dst, "paste area", paste=True)
        _scale_ok(roi[1] - roi[0] + 1, roi[3] - roi[2] + 1, paste[1] - paste[0] + 1,
                  paste[3] - paste[2] + 1)
        return [(src, roi, dst, paste)]
    if op == m.VpcOp.BORDER:
        if len(rest) != 8 or rest[0] not in tuple(m.BorderType):
            raise DvppFailure("make border: a border type of acldvppBorderType and 7 values")
        top, bottom, left, right = rest[1:5]
        if (dst.width, dst.height) != (src.width + left + right, src.height + top + bottom):
            raise DvppFailure(f"make border: output {dst.width}x{dst.height} is not the input "
                              f"{src.width}x{src.height} with its borders")
        if src.fmt in m.YUV420SP and any(v % 2 for v in (top, bottom, left, right)):
            raise DvppFailure("make border on YUV420SP: every border even")
        return [(src, None, dst, (0, 0, 0, 0))]
    if op in (m.VpcOp.BATCH_CROP, m.VpcOp.BATCH_CROP_BORDER):
        return _batch_plan(rest, inputs, outputs, op == m.VpcOp.BATCH_CROP_BORDER)
    if op == m.VpcOp.PYR_DOWN:
        if (dst.width, dst.height) != (src.width // 2, src.height // 2):
            raise DvppFailure(f"pyr down: output {dst.width}x{dst.height} is not half the "
                              f"input {src.width}x{src.height}")
        return [(src, None, dst, None)]
    raise DvppFailure(f"unknown VPC operation {op}")


def _batch_plan(rest: list[int], inputs: list[Picture], outputs: list[Picture],
                border: bool = False) -> list[_Step]:
    """Steps of a batch crop; with ``border`` each output's border (type, top, bottom,
    left, right, 3 values) comes between the ROI counts and the ROIs, and is the step's
    fourth item."""
    n_out = len(outputs)
    counts = rest[:len(inputs)]
    cfgs = rest[len(inputs):len(inputs) + (8 * n_out if border else 0)]
    rois = rest[len(inputs) + len(cfgs):]
    if len(counts) != len(inputs) or sum(counts) != n_out or len(rois) != 4 * n_out \
            or len(cfgs) != (8 * n_out if border else 0):
        raise DvppFailure(f"batch crop: {len(inputs)} inputs, ROI counts {counts}, "
                          f"{n_out} outputs and {len(rois) // 4} areas do not agree")
    plan: list[_Step] = []
    k = 0
    for src, count in zip(inputs, counts, strict=True):
        for _ in range(count):
            roi = _roi(rois, 4 * k, src, f"crop area {k}")
            dst = outputs[k]
            width, height, at = dst.width, dst.height, None
            if border:
                at = tuple(cfgs[8 * k:8 * k + 8])
                kind, top, bottom, left, right = at[:5]
                problem = m.batch_border_problem(dst.fmt, width, height, kind, top, bottom,
                                                 left, right)
                if problem:
                    raise DvppFailure(f"output {k}: {problem}")
                width, height = width - left - right, height - top - bottom
            _scale_ok(roi[1] - roi[0] + 1, roi[3] - roi[2] + 1, width, height)
            plan.append((src, roi, dst, at))
            k += 1
    return plan


def _inside(planes: Planes, dst: Picture, border: tuple[int, ...], flag: int) -> Planes:
    """``planes`` scaled (and colour converted) to the part of ``dst`` inside ``border``, in
    new arrays of ``dst``'s family."""
    _kind, top, bottom, left, right = border[:5]
    w, h = dst.width - left - right, dst.height - top - bottom
    if dst.fmt in (m.RGB888, m.BGR888):
        inner = Planes(rgb=np.empty((h, w, 3), np.uint8))
    elif dst.fmt == m.YUV400:
        inner = Planes(np.empty((h, w), np.uint8))
    else:
        inner = Planes(np.empty((h, w), np.uint8), np.empty((h // 2, w // 2, 2), np.uint8))
    _transform(planes, inner, dst.fmt, flag)
    return inner


_BORDERS = {m.BorderType.BORDER_CONSTANT: cv2.BORDER_CONSTANT,
            m.BorderType.BORDER_REPLICATE: cv2.BORDER_REPLICATE,
            m.BorderType.BORDER_REFLECT: cv2.BORDER_REFLECT,
            m.BorderType.BORDER_REFLECT_101: cv2.BORDER_REFLECT_101}


def _border(planes: Planes, rest: list[int], dst: Picture) -> Planes:
    """``cv2.copyMakeBorder`` on each plane; the constant's values are the output format's
    components in byte order (R, G, B for RGB888, B, G, R for BGR888; Y, U, V for YUV)."""
    kind, top, bottom, left, right, *values = rest
    flag = _BORDERS[m.BorderType(kind)]

    def one(a: np.ndarray, t: int, b: int, lft: int, r: int, value: Any) -> np.ndarray:
        return cv2.copyMakeBorder(np.ascontiguousarray(a), t, b, lft, r, flag, value=value)

    if planes.rgb is not None:
        rgb = values if dst.fmt == m.RGB888 else values[::-1]
        return Planes(rgb=one(planes.rgb, top, bottom, left, right, tuple(rgb)))
    assert planes.luma is not None
    luma = one(planes.luma, top, bottom, left, right, values[0])
    chroma = None if planes.chroma is None else one(
        planes.chroma, top // 2, bottom // 2, left // 2, right // 2, (values[1], values[2]))
    return Planes(luma, chroma)


_PREPARE: dict[str, Callable[..., Callable[[], None]]] = {
    "jpegd": _jpegd, "pngd": _pngd, "jpege": _jpege, "vpc": _vpc, "vdec": vdec.prepare,
    "venc": venc.prepare}
_RECORDS = {"jpegd": (1, 1), "pngd": (1, 1), "jpege": (1, 1), "vpc": (2, MAX_RECORDS),
            "vdec": (1, 2), "venc": (0, 1)}
"""Fewest and most picture records of each kind."""
