"""Child program of ``tests/integration/test_pyacl_compat.py``: scenarios that start before
``aclInit`` (``aclFinalize`` before and after ``aclInit``, runtime calls after it; a bad
configuration refused by ``aclInit`` with one line on stderr).

``python pyacl_lifecycle.py SCENARIO`` runs one scenario and prints ``R`` (see
``childlib``); the assertions are the test's.
"""

from childlib import R, acl, d2h, h2d, ints, main, malloc, ok, scenario, stream


@scenario
def finalize():
    R["finalize_before_init"] = acl.finalize()
    R["finalize_twice"] = acl.finalize()
    R["init"] = acl.init()
    R["init_twice"] = acl.init()
    ok(acl.rt.set_device(0), "set_device")
    d = malloc(1024)
    s = stream()
    R["finalize"] = acl.finalize("extra")
    # devices are not reset by aclFinalize: runtime calls keep working
    h2d(d, b"x" * 1024)
    R["after_finalize"] = d2h(d, 1024) == b"x" * 1024
    R["sync"] = acl.rt.synchronize_stream(s)
    R["finalize_again"] = acl.finalize()
    R["reinit"] = acl.init()
    ok(acl.rt.destroy_stream(s), "destroy_stream")
    ok(acl.rt.free(d), "free")
    ok(acl.rt.reset_device(0), "reset")
    R["final"] = acl.finalize()


@scenario
def bad_configuration():
    R["init"] = acl.init()
    R["msg"] = acl.get_recent_err_msg()
    R["set_device"] = acl.rt.set_device(0)
    R["count"] = ints(acl.rt.get_device_count())


if __name__ == "__main__":
    main()
