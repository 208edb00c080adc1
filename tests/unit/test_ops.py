"""The op layer without a device: descriptors and attributes (pyACL calls and codes), the
registry's checks, tiling, the compiler's kernels run block by block on numpy memory, the
op-map capacity settings, the on-disk cache (corruption, cap and aging) and the single-op
model container."""

from __future__ import annotations

import json
import os
import time
import types

import numpy as np
import pytest

from npuemu.host import acl
from npuemu.host.ops import (
    cache,
    compiler,
    diskcache,
    models,
    opfile,
    registry,
    signature,
    tiling,
)
from npuemu.host.ops import desc as D
from npuemu.host.ops import types as T
from npuemu.host.ops.registry import Spec
from npuemu.shared import errors


# descriptors ------------------------------------------------------------------------------------
def test_tensor_desc_getters_and_edge_cases():
    d = acl.create_tensor_desc(0, [2, 3, 4], 2)
    assert d and acl.get_tensor_desc_type(d) == 0 and acl.get_tensor_desc_format(d) == 2
    assert acl.get_tensor_desc_num_dims(d) == 3 and acl.get_tensor_desc_element_count(d) == 24
    assert acl.get_tensor_desc_size(d) == 96
    assert acl.get_tensor_desc_dim_v2(d, 1) == (3, 0)
    assert acl.get_tensor_desc_dim_v2(d, 3)[1] == 100000
    scalar = acl.create_tensor_desc(1, [], 2)
    assert acl.get_tensor_desc_element_count(scalar) == 1 and acl.get_tensor_desc_size(scalar) == 2
    dyn = acl.create_tensor_desc(0, [-1, 4], 2)
    assert acl.get_tensor_desc_element_count(dyn) == 0
    assert acl.set_tensor_shape_range(dyn, [[1, 8], [4, 4]]) == 0
    assert acl.get_tensor_desc_dim_range(dyn, 0, 2) == ([1, 8], 0)
    assert acl.get_tensor_desc_dim_range(dyn, 5, 2)[1] == 100000
    assert acl.get_tensor_desc_dim_range(dyn, 0, 5000) == (None, 100000)
    unknown = acl.create_tensor_desc(0, [-2], 2)
    assert acl.get_tensor_desc_num_dims(unknown) == T.ACL_UNKNOWN_RANK
    assert acl.create_tensor_desc(0, [-3], 2) == 0
    with pytest.raises(TypeError):
        acl.create_tensor_desc(0, 5, 2)
    acl.set_tensor_desc_name(d, "x0")
    assert acl.get_tensor_desc_name(d) == "x0"
    assert acl.set_tensor_format(12345, 2) == 100000
    assert acl.data_type_size(27) == 2 and acl.data_type_size(40) == 8
    assert acl.trans_tensor_desc_format(d, 1) == (0, 200001)
    for h in (d, scalar, dyn, unknown):
        acl.destroy_tensor_desc(h)
    assert acl.get_tensor_desc_type(d) == T.DT_UNDEFINED


def test_descriptor_changes_move_the_key_and_the_generation():
    d = D.create_tensor_desc(0, [4], 2)
    key, gen = d.key, D.GENERATION[0]
    assert acl.set_tensor_format(d.handle, 1) == 0
    assert d.key != key and D.GENERATION[0] > gen
    data = np.arange(4, dtype=np.float32).tobytes()
    assert acl.set_tensor_const(d.handle, acl.util.bytes_to_ptr(data), len(data)) == 0
    assert d.const == data and d.key[6] == data


def test_attributes_every_type_and_misuse():
    a = acl.op.create_attr()
    assert acl.op.set_attr_bool(a, "b", 1) == 0
    assert acl.op.set_attr_int(a, "i", 3) == 0
    assert acl.op.set_attr_float(a, "f", 0.5) == 0
    assert acl.op.set_attr_string(a, "s", "x") == 0
    assert acl.op.set_attr_list_bool(a, "lb", [1, 0]) == 0
    assert acl.op.set_attr_list_int(a, "li", [1, 2]) == 0
    assert acl.op.set_attr_list_float(a, "lf", [1.0]) == 0
    assert acl.op.set_attr_list_string(a, "ls", ["a"]) == 0
    assert acl.op.set_attr_list_list_int(a, "lli", [[1], [2, 3]]) == 0
    assert acl.op.set_attr_data_type(a, "dt", 1) == (a, 0)
    assert acl.op.set_attr_list_data_type(a, "ldt", [0, 1]) == (a, 0)
    attr = D.attr_of(a)
    assert attr.get("lli", None) == ((1,), (2, 3)) and attr.get("b", None) is True
    digest = attr.digest
    assert acl.op.set_attr_int(a, "i", 4) == 0 and attr.digest != digest
    assert acl.op.set_attr_int(0, "i", 1) == 100000          # null attr
    assert acl.op.set_attr_string(a, "s", None) == 100000    # null string
    assert acl.op.set_attr_int(a, "i", "seven") == 100000
    assert acl.op.set_attr_list_string(a, "ls", ["a", 1]) == 100000
    acl.op.destroy_attr(a)
    assert acl.op.set_attr_int(a, "i", 1) == 100000


def test_data_buffers():
    b = acl.create_data_buffer(0, 0)  # legal: an absent optional tensor
    assert b and acl.get_data_buffer_addr(b) == 0 and acl.get_data_buffer_size_v2(b) == 0
    assert acl.update_data_buffer(b, 0x1000, 64) == 0
    assert acl.get_data_buffer_size(b) == 64 and acl.get_data_buffer_addr(b) == 0x1000
    assert acl.destroy_data_buffer(b) == 0
    assert acl.destroy_data_buffer(b) == 100000
    assert acl.update_data_buffer(b, 0, 0) == 100000
    assert acl.get_data_buffer_addr(b) == 0


def test_compile_options():
    assert acl.set_compile_opt(2, "x") == 200006
    assert acl.set_compile_opt(99, "x") == 500000
    assert acl.set_compile_opt(5, "0") == 0


# registry, tiling, compiler --------------------------------------------------------------------
def _code(fn, *args):
    with pytest.raises(errors.AclError) as info:
        fn(*args)
    return info.value.code


def test_registry_checks_give_the_reference_codes():
    assert _code(registry.lookup, "NoSuchOp") == 100020
    add = registry.lookup("Add")
    f = Spec("float32", (2,))
    assert _code(registry.check_inputs, add, [f]) == 100021
    assert _code(registry.check_inputs, registry.lookup("Sqrt"), [Spec("int32", (2,))]) == 100026
    assert _code(registry.check_inputs, add, [Spec("float32", (2,), 29), f]) == 100027
    assert _code(signature.outputs, add, [Spec("float32", (3,)), Spec("float32", (4,))], [],
                 {}) == 100000
    assert len(registry.REGISTRY) >= 39


def test_tiling_uses_more_blocks_for_more_data_and_fits_the_unified_buffer():
    small = tiling.rows_tiling(8, 64, "aivector")
    assert small.block_dim == 1 and small.loops == 1
    big = tiling.rows_tiling(100_000, 4096, "aivector")
    assert big.block_dim == tiling.core_count("aivector") == 48
    assert big.tile * 4096 <= tiling.UB_BYTES
    per_block = -(-100_000 // 48)
    assert big.loops == -(-per_block // big.tile)
    assert tiling.rows_tiling(100_000, 4096, "aicore").block_dim == 24


class FakeCtx:
    """One block of a launch over plain numpy memory (pointer = offset in ``mem``)."""

    def __init__(self, mem, block_idx, block_num):
        self.mem, self.block_idx, self.block_num = mem, block_idx, block_num

    def split(self, n):
        return n * self.block_idx // self.block_num, n * (self.block_idx + 1) // self.block_num

    def tensor(self, ptr, dtype, count):
        dt = np.dtype(dtype)
        return np.frombuffer(self.mem, dt, count, ptr)

    def view(self, ptr, dtype, shape):
        return self.tensor(ptr, dtype, int(np.prod(shape))).reshape(shape)


def _run_blocks(binary, arrays, out_shapes, dtype, extra=(), blocks=None):
    module = types.ModuleType("k")
    exec(compile(binary.source, binary.name, "exec"), module.__dict__)
    fn = getattr(module, binary.name)
    size = sum(a.nbytes for a in arrays) + sum(int(np.prod(s)) * 8 for s in out_shapes) + 64
    mem = bytearray(size)
    ptrs, off = [], 0
    for a in arrays:
        mem[off:off + a.nbytes] = a.tobytes()
        ptrs.append(off)
        off += a.nbytes
    outs = []
    for s in out_shapes:
        ptrs.append(off)
        outs.append((off, s))
        off += int(np.prod(s)) * np.dtype(dtype).itemsize
    n = blocks or binary.tiling.block_dim
    for b in range(n):
        fn(FakeCtx(mem, b, n), *ptrs, *extra)
    return [np.frombuffer(mem, dtype, int(np.prod(s)), o).reshape(s) for o, s in outs]


def test_compiled_kernel_bakes_shapes_and_tiles_over_blocks():
    op = registry.lookup("Add")
    ins = [Spec("float32", (4000, 64)), Spec("float32", (64,))]
    outs = signature.outputs(op, ins, [], {})
    b = compiler.build(op, ins, outs, {})
    assert "shapes=((4000, 64), (64,), (4000, 64))" in b.source and b.tiling.block_dim > 1
    x, y = np.random.rand(4000, 64).astype(np.float32), np.random.rand(64).astype(np.float32)
    (z,) = _run_blocks(b, [x, y], [(4000, 64)], np.float32)
    assert np.array_equal(z, x + y)
    # re-tile: the same binary, other shapes and tiling passed at launch
    x2 = np.random.rand(37, 64).astype(np.float32)
    t2 = compiler.retile(op, [Spec("float32", (37, 64)), ins[1]], [Spec("float32", (37, 64))],
                         {})
    (z2,) = _run_blocks(b, [x2, y], [(37, 64)], np.float32,
                        extra=(((37, 64), (64,), (37, 64)), *t2.args()), blocks=3)
    assert np.array_equal(z2, x2 + y)


class _CountingCtx(FakeCtx):
    """A block that counts the views it was asked for by ``view`` and by ``tensor``."""

    def __init__(self, mem, block_idx, block_num):
        super().__init__(mem, block_idx, block_num)
        self.views = self.tensors = 0

    def tensor(self, ptr, dtype, count):
        self.tensors += 1
        return super().tensor(ptr, dtype, count)

    def view(self, ptr, dtype, shape):
        self.views += 1
        return FakeCtx.tensor(self, ptr, dtype, int(np.prod(shape))).reshape(shape)


@pytest.mark.parametrize("dtype, attrs", [("float32", {}), ("float32", {"fused_relu": True}),
                                          ("int32", {}), ("bfloat16", {})])
def test_a_one_tile_kernel_runs_its_baked_signature_without_slices_and_the_same(
        dtype, attrs) -> None:
    """A tiny elementwise signature is one block and one tile: its kernel takes the branch
    with whole arrays and ``ctx.view`` when launched as baked, and the general loop when a
    launch passes shapes (a re-tile) or runs on more blocks; the bits are the same."""
    op = registry.lookup("Add")
    ins = [Spec(dtype, (16, 16)), Spec(dtype, (16,))]
    outs = signature.outputs(op, ins, [], attrs)
    b = compiler.build(op, ins, outs, attrs)
    assert "if shapes is _SHAPES and ctx.block_num == 1:" in b.source
    storage = T.storage(dtype)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((16, 16)) * 100).astype(np.float32).view(np.uint32)
    x = (x >> 16).astype(np.uint16) if dtype == "bfloat16" else \
        (rng.standard_normal((16, 16)) * 100).astype(storage)
    y = x[3].copy()
    module = types.ModuleType("k")
    exec(compile(b.source, b.name, "exec"), module.__dict__)
    fn = getattr(module, b.name)
    results = []
    for extra, blocks in (((), 1), ((tuple(b.shapes), *b.tiling.args()), 1), ((), 2)):
        mem = bytearray(x.nbytes + y.nbytes + x.nbytes)
        mem[:x.nbytes], mem[x.nbytes:x.nbytes + y.nbytes] = x.tobytes(), y.tobytes()
        ctxs = [_CountingCtx(mem, i, blocks) for i in range(blocks)]
        for ctx in ctxs:
            fn(ctx, 0, x.nbytes, x.nbytes + y.nbytes, *extra)
        assert (ctxs[0].views, ctxs[0].tensors) == ((3, 0) if not extra and blocks == 1
                                                    else (0, 3))
        results.append(bytes(mem))
    assert results[0] == results[1] == results[2]


def test_only_signatures_whose_one_tile_is_every_row_get_the_whole_array_branch() -> None:
    add = registry.lookup("Add")
    big = [Spec("float32", (4000, 64)), Spec("float32", (64,))]
    many = compiler.build(add, big, signature.outputs(add, big, [], {}), {})
    assert many.tiling.block_dim > 1 and "_SHAPES" not in many.source
    mm = registry.lookup("MatMul")
    mats = [Spec("float32", (4, 8)), Spec("float32", (8, 2))]
    attrs = registry.attrs_of(mm, {})
    matmul = compiler.build(mm, mats, signature.outputs(mm, mats, [], attrs), attrs)
    assert "_SHAPES" not in matmul.source  # its tile slices x0/a: not of output 0's shape
    prep = ("o0 = y0 if y0.ndim else y0.reshape(1)\n"
            "b0 = x0 if x0.shape == o0.shape else np.broadcast_to(x0, o0.shape)\n")
    one, outs = tiling.Tiling(1, 4, 8, 1), [Spec("float32", (4, 3))]
    whole = compiler.whole_tile
    assert whole(registry.Body("o0[s] = b0[s] * 2\no0[s] += 1", prep), outs, one) == \
        "o0[...] = b0 * 2\no0[...] += 1"
    assert whole(registry.Body("o0[s] = b0[s] * 2", "o0 = y0\n" + prep), outs, one) is None
    assert whole(registry.Body("o0[s] = b0[s] * 2", prep.replace("np.broadcast_to(x0, "
                                                                 "o0.shape)", "x0")),
                 outs, one) is None  # b0 is not made of output 0's shape
    assert whole(registry.Body("o0[s] = b0[s] * s.start", prep), outs, one) is None  # the slice
    assert whole(registry.Body("o0 = b0[s]", prep), outs, one) is None  # rebinds o0
    assert whole(registry.Body("o0[s] = b0[s]", prep), outs, tiling.Tiling(1, 4, 2, 2)) is None
    assert whole(registry.Body("o0[s] = b0[s]", prep), outs, tiling.Tiling(2, 4, 8, 1)) is None


def test_linear_key_masks_only_linear_dims():
    op = registry.lookup("MatMul")
    a = [Spec("float32", (10, 4)), Spec("float32", (4, 3))]
    b = [Spec("float32", (99, 4)), Spec("float32", (4, 3))]
    c = [Spec("float32", (10, 5)), Spec("float32", (5, 3))]
    keys = [signature.linear_key(op, i, signature.outputs(op, i, [], registry.attrs_of(op, {})),
                                 registry.attrs_of(op, {}), ()) for i in (a, b, c)]
    assert keys[0] == keys[1] != keys[2]


# capacity -------------------------------------------------------------------------------------
def test_capacity_from_api_env_and_init_json(tmp_path, monkeypatch):
    saved = list(cache._capacity)
    try:
        cache._capacity.clear()
        assert cache.capacity() == 20000
        monkeypatch.setenv("ASCEND_OP_CACHE_MAX_SIZE", "7")
        assert cache.capacity() == 7
        monkeypatch.setenv("ASCEND_OP_CACHE_MAX_SIZE", "-4")
        assert cache.capacity() == 20000
        assert acl.op.set_max_op_queue_num(0) == 100000
        assert acl.op.set_max_op_queue_num("9") == 100000
        assert acl.op.set_max_op_queue_num(5) == 0 and cache.capacity() == 5
        cfg = tmp_path / "acl.json"
        cfg.write_text(json.dumps({"max_opqueue_num": "\"300\""}))
        assert cache.configure(str(cfg)) == 0 and cache.capacity() == 300
        cfg.write_text(json.dumps({"max_opqueue_num": "0"}))
        assert cache.configure(str(cfg)) == 100000
        assert cache.configure(None) == 0
    finally:
        cache._capacity[:] = saved


# disk cache -----------------------------------------------------------------------------------
@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_CACHE_PATH", str(tmp_path))
    monkeypatch.delenv("ASCEND_MAX_OP_CACHE_SIZE", raising=False)
    monkeypatch.setattr(diskcache, "OPTIONS", {})
    return tmp_path / diskcache.SUBDIR


def test_disk_cache_round_trip_and_corruption(disk):
    key = ("Add", (1, 2), ())
    diskcache.write(key, {"x": 1}, "source text")
    assert diskcache.read(key) == ({"x": 1, "key": diskcache.key_digest(key)}, "source text")
    (f,) = disk.iterdir()
    f.write_bytes(f.read_bytes()[:-3] + b"xyz")
    assert diskcache.read(key) is None and not f.exists()
    assert diskcache.read(("other",)) is None


def test_disk_cache_disabled_by_mode_and_debug_level(disk, monkeypatch):
    monkeypatch.setitem(diskcache.OPTIONS, "ACL_OP_COMPILER_CACHE_MODE", "disable")
    assert diskcache.directory() is None
    monkeypatch.setitem(diskcache.OPTIONS, "ACL_OP_COMPILER_CACHE_MODE", "enable")
    monkeypatch.setitem(diskcache.OPTIONS, "ACL_OP_DEBUG_LEVEL", "1")
    assert diskcache.directory() is None


def test_disk_cache_cap_ages_only_files_unused_for_half_an_hour(disk, monkeypatch):
    monkeypatch.setenv("ASCEND_MAX_OP_CACHE_SIZE", "1")   # 1 MB
    monkeypatch.setenv("ASCEND_REMAIN_CACHE_SIZE_RATIO", "50")
    blob = "x" * (300 << 10)
    for i in range(3):
        diskcache.write(("k", i), {}, blob)
    old = time.time() - 3600
    files = sorted(disk.iterdir())
    for f in files[:3]:
        os.utime(f, (old, old))
    diskcache.write(("k", 3), {}, blob)                    # 1.2 MB > 1 MB: ages
    assert len(list(disk.iterdir())) == 1                  # down to <= 50 % of the cap
    assert diskcache.read(("k", 3)) is not None            # new files are never aged
    for i in range(4, 8):                                  # all recent: the cap is passed
        diskcache.write(("k", i), {}, blob)
    assert len(list(disk.iterdir())) == 5 and diskcache.STATS["aged"] >= 3
    monkeypatch.setenv("ASCEND_MAX_OP_CACHE_SIZE", "-1")
    assert diskcache.limits(str(disk))[0] == -1


def test_op_cache_ini_wins_over_env(disk, monkeypatch):
    monkeypatch.setenv("ASCEND_MAX_OP_CACHE_SIZE", "9")
    diskcache.directory()
    (disk.parent / "op_cache.ini").write_text(
        "[op_compiler_cache]\nmax_op_cache_size=3\nremain_cache_size_ratio=20\n")
    assert diskcache.limits(str(disk)) == (3, 20)
    (disk.parent / "op_cache.ini").write_text("[op_compiler_cache]\nmax_op_cache_size=3\n")
    assert diskcache.limits(str(disk)) == (9, 50)


# single-op models -----------------------------------------------------------------------------
def test_single_op_model_container_round_trip():
    op = registry.lookup("Relu")
    ins = [D.TensorDesc(0, (3, 4), 2)]
    specs = [signature.spec(d) for d in ins]
    b = compiler.build(op, specs, signature.outputs(op, specs, [], {}), {})
    data = models.encode("Relu", ins, ins, None, b)
    assert data[:4] == b"IMOD" and len(data) > opfile.HEADER
    parsed = opfile.decode(data)
    assert parsed.op_type == "Relu" and parsed.tiling == b.tiling
    assert b.source.encode() not in data  # no code in the file
    with pytest.raises(ValueError):
        opfile.decode(b"IMOD" + bytes(300))
    with pytest.raises(ValueError):
        opfile.decode(b"junk" * 100)
