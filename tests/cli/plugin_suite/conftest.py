# npuemu's own suite must not collect this user's suite: test_pytest_plugin.py runs it
collect_ignore = ["test_example.py"]
