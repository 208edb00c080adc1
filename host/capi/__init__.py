"""npuemu's C ABI: ``libascendcl.so`` and ``libhccl.so`` and the ``acl/`` and ``hccl/``
headers, so C and C++ programs built for CANN compile, link and run on npuemu unmodified.

One runtime, two ABIs: every exported C function enters the same host runtime the ``acl``
module uses (``npuemu.host.acl`` and the core below it), through cffi's embedding mode: the
first C call starts an interpreter inside the C program (``boot.py``), and each call then
runs the Python body registered for its name (``exports.py``). The hottest calls
(aclrtMalloc, aclrtFree, aclrtLaunchKernel, aclrtSynchronizeStream) are C functions of
``native.c`` that take the GIL and call the Python face's function themselves, without cffi's
per-call conversions. Checks, codes, handles and messages are those of the Python face.

- ``include/``: the headers, written for npuemu from the published facts (names, types,
  enum values, struct layouts); the error-code headers are generated from
  ``npuemu.shared.errors`` (``build.py``).
- ``build.py``: builds each library from its headers (every declared function is exported;
  what is not emulated answers ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000, with a log line).
  ``native.c`` is the part written in C (fork handling, the interpreter's name, aclAppLog).
- ``sdk.py``: lays out a CANN-shaped toolkit tree (``npuemu sdk``), ``set_env.sh``, and
  the environment ``npuemu run ./a.out`` runs a program with.
- The bodies, one module per header part: ``base.py`` (init, versions, messages, data
  buffers, half floats), ``rt.py`` (devices, contexts, streams, events, last error),
  ``mem.py`` (memory), ``vmm.py`` (pools, virtual memory, shareable handles, peers,
  timeouts), ``callbacks.py``, ``kernels.py``, ``tensor.py`` (tensor descriptors),
  ``ops.py`` (single operators), ``mdl.py`` (models), ``prof.py`` (profiling), ``hccl.py``
  (``libhccl.so``), ``dvpp.py`` (``libacl_dvpp.so``); ``ascendcl.py`` lists libascendcl's.

Threads: C programs call from any thread (cffi gives each its own Python thread state, so
the runtime's per-thread state is per C thread); which module holds what is said in each.
Partial: what the headers do not declare, or declare without emulating, is listed in the
README ("C and C++ programs").
"""
