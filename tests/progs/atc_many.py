"""Child program of ``tests/cabi/test_cabi_aipp.py``: ``npuemu atc`` (what the SDK's
``bin/atc`` execs) once per argument vector of the JSON list ``argv[1]``, one after the other
in this one interpreter (its imports paid once); exits non-zero at the first failure."""

import json
import sys

from npuemu.tools.cli import main

for argv in json.loads(sys.argv[1]):
    if main(argv):
        sys.exit(f"atc failed: {argv}")
