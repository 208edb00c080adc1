"""A pyACL program (``tests/integration/test_node.py`` runs it with ``npuemu run``) that sets
a device, then raises ``KeyError``: ``npuemu run`` exits 1 with its traceback."""

import acl

assert acl.rt.set_device(0) == 0
raise KeyError("boom")
