"""Child program of ``tests/integration/test_models_aipp.py``: models with AIPP and dynamic
image sizes through ``acl.mdl``, as the samples run them (load, describe, malloc per input
size, datasets, the AIPP or gear calls, execute, read back).

``python aipp.py SCENARIO [ARG...]`` initializes pyACL, sets device 0, runs one scenario and
prints ``R`` (see ``childlib``); the assertions are the test's.
"""

import json

import numpy as np
from childlib import R, acl, d2h, h2d, main, malloc, ok, scenario

ACL_YUV420SP_U8, ACL_RGB888_U8 = 1, 3


class Bound:
    """A loaded model with one device buffer per input and output, in two datasets."""

    def __init__(self, om):
        self.model_id, ret = acl.mdl.load_from_file(om)
        ok(ret, "load")
        self.desc = acl.mdl.create_desc()
        ok(acl.mdl.get_desc(self.desc, self.model_id), "get_desc")
        self.ins, self.outs = [], []
        self.in_ds, self.out_ds = acl.mdl.create_dataset(), acl.mdl.create_dataset()
        for i in range(acl.mdl.get_num_inputs(self.desc)):
            self.ins.append(self._add(self.in_ds, acl.mdl.get_input_size_by_index(self.desc, i)))
        for i in range(acl.mdl.get_num_outputs(self.desc)):
            self.outs.append(self._add(self.out_ds,
                                       acl.mdl.get_output_size_by_index(self.desc, i)))

    @staticmethod
    def _add(ds, size):
        ptr = malloc(size)
        _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
        ok(ret, "add_dataset_buffer")
        return ptr, size

    def feed(self, i, data):
        h2d(self.ins[i][0], data)

    def execute(self):
        return acl.mdl.execute(self.model_id, self.in_ds, self.out_ds)

    def output(self, i=0, dtype=np.float32):
        dims, ret = acl.mdl.get_cur_output_dims(self.desc, i)
        ok(ret, "cur_output_dims")
        n = int(np.prod(dims["dims"]))
        raw = d2h(self.outs[i][0], n * np.dtype(dtype).itemsize)
        return np.frombuffer(raw, dtype).reshape(dims["dims"])

    def describe_input(self, i):
        d = self.desc
        return {"format": acl.mdl.get_input_format(d, i),
                "dtype": acl.mdl.get_input_data_type(d, i),
                "size": acl.mdl.get_input_size_by_index(d, i),
                "dims": acl.mdl.get_input_dims(d, i)[0]["dims"],
                "dims_v2": acl.mdl.get_input_dims_v2(d, i)[0]["dims"],
                "name": acl.mdl.get_input_name_by_index(d, i),
                "aipp_type": list(acl.mdl.get_aipp_type(self.model_id, i))}

    def close(self):
        for ds in (self.in_ds, self.out_ds):
            for i in range(acl.mdl.get_dataset_num_buffers(ds)):
                ok(acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i)))
            ok(acl.mdl.destroy_dataset(ds))
        ok(acl.mdl.unload(self.model_id), "unload")
        ok(acl.mdl.destroy_desc(self.desc))
        for p, _ in self.ins + self.outs:
            ok(acl.rt.free(p))


@scenario
def static(om, raw_path, out_path):
    """A static AIPP model: its input as CANN describes it, one execute on the raw image."""
    m = Bound(om)
    R["n_inputs"] = acl.mdl.get_num_inputs(m.desc)
    R["input"] = m.describe_input(0)
    info, R["info_ret"] = acl.mdl.get_first_aipp_info(m.model_id, 0)
    R["info"] = {k: info[k] for k in ("inputFormat", "srcImageSizeW", "srcImageSizeH",
                                      "cropSwitch", "meanChn0", "srcDatatype",
                                      "outDims")} if info else {}
    raw = np.load(raw_path)
    m.feed(0, raw.tobytes())
    ok(m.execute(), "execute")
    np.save(out_path, m.output())
    R["bad_index"] = acl.mdl.get_aipp_type(m.model_id, 5)[2]
    R["info_bad_index"] = acl.mdl.get_first_aipp_info(m.model_id, 7)[1]
    m.close()


def aipp_set(spec, batch):
    """An AIPP set from the test's JSON spec (every setter's code recorded)."""
    s = acl.mdl.create_aipp(batch)
    codes = [acl.mdl.set_aipp_src_image_size(s, *spec["src"]),
             acl.mdl.set_aipp_input_format(s, spec["format"]),
             acl.mdl.set_aipp_csc_params(s, *spec["csc"]),
             acl.mdl.set_aipp_rbuv_swap_switch(s, spec.get("rbuv", 0)),
             acl.mdl.set_aipp_ax_swap_switch(s, 0)]
    for k, b in enumerate(spec["batches"]):
        codes += [acl.mdl.set_aipp_crop_params(s, *b["crop"], k),
                  acl.mdl.set_aipp_scf_params(s, *b["scf"], k),
                  acl.mdl.set_aipp_padding_params(s, *b["pad"], k),
                  acl.mdl.set_aipp_dtc_pixel_mean(s, *b["mean"], k),
                  acl.mdl.set_aipp_dtc_pixel_min(s, *b["min"], k),
                  acl.mdl.set_aipp_pixel_var_reci(s, *b["var"], k)]
    return s, codes


@scenario
def dynamic(om, raw_path, out_path, spec_json, batch="0"):
    """A dynamic AIPP model: the parameter input found by name, a set applied, executed
    (at the batch gear ``batch`` when not 0)."""
    spec = json.loads(spec_json)
    m = Bound(om)
    if int(batch):
        gear, ret = acl.mdl.get_input_index_by_name(m.desc, "ascend_mbatch_shape_data")
        ok(ret, "gear index")
        ok(acl.mdl.set_dynamic_batch_size(m.model_id, m.in_ds, gear, int(batch)), "gear")
    index, ret = acl.mdl.get_input_index_by_name(m.desc, "ascend_dynamic_aipp_data")
    ok(ret, "aipp index")
    R["index"] = index
    R["types"] = [list(acl.mdl.get_aipp_type(m.model_id, i))
                  for i in range(acl.mdl.get_num_inputs(m.desc))]
    R["data_size"] = [acl.mdl.get_input_size_by_index(m.desc, index),
                      list(acl.mdl.get_aipp_data_size(len(spec["batches"])))]
    R["info_dynamic"] = acl.mdl.get_first_aipp_info(m.model_id, 0)[1]
    s, R["set_codes"] = aipp_set(spec, len(spec["batches"]))
    R["by_index"] = acl.mdl.set_aipp_by_input_index(m.model_id, m.in_ds, 0, s)
    ok(acl.mdl.set_input_aipp(m.model_id, m.in_ds, index, s), "set_input_aipp")
    m.feed(0, np.load(raw_path).tobytes())
    ok(m.execute(), "execute")
    np.save(out_path, m.output())
    R["errors"] = dynamic_errors(m, index, spec)
    m.feed(index, bytes(m.ins[index][1]))      # a record the program overwrote with zeros
    R["zeroed_record"] = m.execute()
    ok(acl.mdl.set_input_aipp(m.model_id, m.in_ds, index, s), "set_input_aipp again")
    ok(acl.mdl.destroy_aipp(s))
    R["destroy_twice"] = acl.mdl.destroy_aipp(s)
    R["after"] = m.execute()  # the card still serves, the record last set still applies
    m.close()


def dynamic_errors(m, index, spec):
    """Codes of bad sets and bad setter values."""
    s = acl.mdl.create_aipp(1)
    out = {"create_0": acl.mdl.create_aipp(0),
           "src_odd_range": acl.mdl.set_aipp_src_image_size(s, 1, 8),
           "format_raw10": acl.mdl.set_aipp_input_format(s, 11),
           "crop_batch_index": acl.mdl.set_aipp_crop_params(s, 1, 0, 0, 8, 8, 1),
           "mean_range": acl.mdl.set_aipp_dtc_pixel_mean(s, 300, 0, 0, 0, 0),
           "csc_count": acl.mdl.set_aipp_csc_params(s, 1, 2, 3),
           "no_src": acl.mdl.set_input_aipp(m.model_id, m.in_ds, index, s)}
    ok(acl.mdl.set_aipp_input_format(s, spec["format"]))
    ok(acl.mdl.set_aipp_src_image_size(s, *spec["src"]))
    out["wrong_size"] = acl.mdl.set_input_aipp(m.model_id, m.in_ds, index, s)  # no crop
    out["not_aipp_input"] = acl.mdl.set_input_aipp(m.model_id, m.in_ds, 0, s)
    out["bad_set"] = acl.mdl.set_input_aipp(m.model_id, m.in_ds, index, 12345)
    ok(acl.mdl.destroy_aipp(s))
    return out


@scenario
def dynamic_hw(om, x_path, out_path, h, w):
    """A --dynamic_image_size model: the gears, one execute at gear (h, w)."""
    m = Bound(om)
    R["hw"] = list(acl.mdl.get_dynamic_hw(m.desc, 0))
    R["dims"] = acl.mdl.get_input_dims(m.desc, 0)[0]["dims"]
    index, ret = acl.mdl.get_input_index_by_name(m.desc, "ascend_mbatch_shape_data")
    ok(ret)
    R["bad_gear"] = acl.mdl.set_dynamic_hw_size(m.model_id, m.in_ds, index, 5, 5)
    ok(acl.mdl.set_dynamic_hw_size(m.model_id, m.in_ds, index, int(h), int(w)), "set hw")
    m.feed(0, np.load(x_path).astype(np.float32).tobytes())
    ok(m.execute(), "execute")
    np.save(out_path, m.output())
    m.close()


@scenario
def plain(om, x_path, out_path, in_dtype, out_dtype):
    """A model of the interface flags: input 0 fed as ``in_dtype``, output 0 read as
    ``out_dtype``; the descriptor's view of both."""
    m = Bound(om)
    R["in_dtype"] = acl.mdl.get_input_data_type(m.desc, 0)
    R["out_dtype"] = acl.mdl.get_output_data_type(m.desc, 0)
    R["n_outputs"] = acl.mdl.get_num_outputs(m.desc)
    R["out_names"] = [acl.mdl.get_output_name_by_index(m.desc, i)
                      for i in range(acl.mdl.get_num_outputs(m.desc))]
    m.feed(0, np.load(x_path).astype(in_dtype).tobytes())
    ok(m.execute(), "execute")
    np.save(out_path, m.output(0, np.dtype(out_dtype)))
    m.close()


def picture(ptr, size, width, height, stride_w, stride_h):
    """A YUV420SP (NV12) picture description of device memory at ``ptr``."""
    m = acl.media
    desc = m.dvpp_create_pic_desc()
    for name, value in (("data", ptr), ("size", size),
                        ("format", m.PIXEL_FORMAT_YUV_SEMIPLANAR_420), ("width", width),
                        ("height", height), ("width_stride", stride_w),
                        ("height_stride", stride_h)):
        ok(getattr(m, f"dvpp_set_pic_desc_{name}")(desc, value), name)
    return desc


@scenario
def pipeline(om, jpeg_path, out_path, nv12_path):
    """The samples' classification flow: JPEG decode on DVPP, VPC resize to the model's
    224x224, the resized NV12 picture (DVPP memory) as the static AIPP model's input."""
    m = acl.media
    with open(jpeg_path, "rb") as f:
        jpeg = f.read()
    host = acl.util.bytes_to_ptr(jpeg)
    s, ret = acl.rt.create_stream()
    ok(ret, "create_stream")
    channel = m.dvpp_create_channel_desc()
    ok(m.dvpp_create_channel(channel), "create_channel")
    width, height, _c, ret = m.dvpp_jpeg_get_image_info(host, len(jpeg))
    ok(ret, "image_info")
    size, ret = m.dvpp_jpeg_predict_dec_size(host, len(jpeg),
                                             m.PIXEL_FORMAT_YUV_SEMIPLANAR_420)
    ok(ret, "predict_dec_size")
    src, ret = m.dvpp_malloc(len(jpeg))
    ok(ret, "dvpp_malloc")
    ok(acl.rt.memcpy(src, len(jpeg), host, len(jpeg), 1), "memcpy")
    yuv, ret = m.dvpp_malloc(size)
    ok(ret, "dvpp_malloc")
    decoded = picture(yuv, size, width, height, -(-width // 64) * 64, -(-height // 16) * 16)
    ok(m.dvpp_jpeg_decode_async(channel, src, len(jpeg), decoded, s), "jpeg_decode")
    small_size = 224 * 224 * 3 // 2
    small, ret = m.dvpp_malloc(small_size)
    ok(ret, "dvpp_malloc")
    resized = picture(small, small_size, 224, 224, 224, 224)
    ok(m.dvpp_vpc_resize_async(channel, decoded, resized, m.dvpp_create_resize_config(), s),
       "vpc_resize")
    ok(acl.rt.synchronize_stream(s), "synchronize")
    np.save(nv12_path, np.frombuffer(d2h(small, small_size), np.uint8))
    b = Bound(om)
    R["input_size"] = acl.mdl.get_input_size_by_index(b.desc, 0)
    in_ds = acl.mdl.create_dataset()  # the DVPP picture itself is the model's input
    _, ret = acl.mdl.add_dataset_buffer(in_ds, acl.create_data_buffer(small, small_size))
    ok(ret, "add_dataset_buffer")
    ok(acl.mdl.execute(b.model_id, in_ds, b.out_ds), "execute")
    np.save(out_path, b.output())
    b.close()
    ok(acl.mdl.destroy_dataset(in_ds))
    for p in (src, yuv, small):
        ok(m.dvpp_free(p), "dvpp_free")


if __name__ == "__main__":
    ok(acl.init(), "init")
    ok(acl.rt.set_device(0), "set_device")
    main()
