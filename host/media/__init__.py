"""DVPP image processing on the host side (``acl_dvpp.h``): DVPP memory (``memory.py``),
descriptors and channels (``desc.py``), file header probes and size predictions
(``probe.py``), the asynchronous operations that queue DVPP tasks on a stream (``ops.py``)
and video decode and encode channels (``vdec.py``, ``venc.py``); the card runs them on its
DVPP engine (``device/exec/dvpp.py``). The pyACL face is ``acl.media``
(``host/acl/media.py``)."""
