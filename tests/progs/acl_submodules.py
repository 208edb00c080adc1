"""Child program of ``tests/unit/test_acl_data.py``: the top-level ``acl`` package forwards
each submodule once (``acl.rt``, ``acl.data``, ``acl.util``, then ``acl.toplevel`` are
npuemu's modules, not copies). Prints ``ok``."""

import acl
import acl.data
import acl.rt
import acl.util

import npuemu.host.acl as impl
import npuemu.host.acl.data as data

if __name__ == "__main__":
    assert acl is impl and acl.data is data and acl.rt is impl.rt
    import acl.toplevel  # after the check: the last submodule a program asks for

    assert acl.toplevel is impl.toplevel
    print("ok")
