"""npuemu's C ABI: ``libascendcl.so`` and ``libhccl.so`` and the ``acl/`` and ``hccl/``
headers, so C and C++ programs built for CANN compile, link and run on npuemu unmodified.

One runtime, two ABIs: every exported C function enters the same host runtime the ``acl``
module uses (``npuemu.host.acl`` and the core below it), through cffi's embedding mode: the
first C call starts an interpreter inside the C program (``boot.py``), and each call then
runs the Python body registered for its name (``exports.py``; ``base.py``, ``rt.py``,
``mem.py``, ...). Checks, codes, handles and messages are those of the Python face.

- ``include/``: the headers, written for npuemu from the published facts (names, types,
  enum values, struct layouts); the error-code headers are generated from
  ``npuemu.shared.errors`` (``build.py``).
- ``build.py``: builds each library from its headers (every declared function is exported;
  what is not emulated answers ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000, with a log line).
- ``sdk.py``: lays out a CANN-shaped toolkit tree (``npuemu sdk``), ``set_env.sh``, and
  runs programs in it (``npuemu run ./a.out``).
"""
