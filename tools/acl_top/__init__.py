"""The top-level ``acl`` module npuemu installs: it forwards to ``npuemu.host.acl`` (see
``host/acl/toplevel.py``). A real pyACL earlier on ``sys.path`` is found first and wins."""

from npuemu.host.acl.toplevel import install

install()
