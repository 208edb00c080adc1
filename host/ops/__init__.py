"""The op library and single-operator runtime (describe → compile → cache → schedule).
Host work only: what reaches a card is a self-contained kernel binary (Python source).

Stable API for other features (e.g. ``host/models``)::

    from npuemu.host.ops import registry, signature, compiler, executor, desc

    op = registry.lookup("Add")                 # OpDef; 100020 for an unknown type
    ins = [registry.Spec("float32", (8, 16)), registry.Spec("float32", (16,))]
    attrs = registry.attrs_of(op, {})           # defaults overlaid with given values
    outs = signature.outputs(op, ins, [], attrs)    # checks + shape inference
    tiling = compiler.retile(op, ins, outs, attrs)  # Tiling(block_dim, rows, tile, loops)
    binary = compiler.build(op, ins, outs, attrs)   # KernelBinary: Python source + tiling

    # on a card, through the op map (compile into HBM, cached, LRU):
    d = desc.create_tensor_desc(0, [8, 16], 2)      # ACL_FLOAT, ND
    req = executor.request("Add", [d, d], [d], None)
    entry = executor.compile_request(req, link)     # link: runtime.get().current_link()
    executor.launch(entry, stream, in_buf_handles, out_buf_handles)   # async LAUNCH
    executor.execute(op_type, in_descs, in_bufs, out_descs, out_bufs, attr, stream,
                     compile=False)             # aclopExecuteV2 (compile=True: CAE)

Modules: ``types`` (aclDataType/aclFormat, codes), ``desc`` (tensor descriptors, attrs,
data buffers), ``registry`` (OpDef, Spec, lookup), one module per op family (``elementwise``,
``cube``, ``pooling``, ``norm``, ``reduce``, ``shape``, ...; all imported by ``families``,
which this package imports: how to add one is in ``registry``), ``signature`` (specs, keys,
checks and inference of a call), ``tiling``, ``compiler``, ``binaries`` (a signature's
binary: disk cache or build), ``cache`` (the in-memory op map per card, LRU, stats),
``diskcache`` (the on-disk compile cache), ``executor`` (compile/execute/handles),
``opfile`` (the single-op model file, checked field by field), ``models`` (single-op
models' static load).
"""

from npuemu.host.core import memory as _memory
from npuemu.host.ops import cache as _cache
from npuemu.host.ops import families as _families  # noqa: F401  (registers every op family)

if _cache.usage_component not in _memory.USAGE_COMPONENTS:
    _memory.USAGE_COMPONENTS.append(_cache.usage_component)
