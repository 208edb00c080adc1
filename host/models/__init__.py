"""Offline models: ONNX front end, graph IR, stream assignment, MemoryPlanner, OM files, ATC.

The model path mirrors the real ATC (an offline model: graph, kernels, tiling and memory layout
fixed in one file, so loading needs no compilation): an ONNX graph is loaded and checked, its
constant sub-graphs are folded into plain weights (onnx's reference evaluator does the
arithmetic), shapes are inferred, every node is lowered onto the op library's op types, the
tasks are ordered and spread over streams, and the MemoryPlanner (:mod:`.planner`) gives every
intermediate tensor an offset in one workspace region. The result is written as an OM file
(:mod:`npuemu.host.models.omfile`), whose format is documented there as one table.

Modules: :mod:`.graph` (IR), :mod:`.onnx_front` (load, check, fold, infer), :mod:`.lowering`
(ONNX node -> library ops), :mod:`.streams` (task order, streams, events), :mod:`.planner`
(MemoryPlanner), :mod:`.omfile` (writer and reader), :mod:`.atc` (``convert`` / ``dump`` and
the CLI argument handling for ``npuemu atc`` model mode), :mod:`.codes` (GE error codes).

Loading and executing (``acl.mdl`` in ``host/acl/mdl.py``, ``npuemu.host.api.Model``,
:mod:`.runtime`, :mod:`.modeldesc`) runs each task as an op-library kernel on the card's
worker, on the streams and events the OM's schedule records. Missing: the task list is not
registered on the card (an execute posts one LAUNCH per task, not one submission).
"""
