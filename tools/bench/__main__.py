"""``python -m npuemu.tools.bench``: the bench, its figure children and its helper peers."""

import sys

from npuemu.tools.bench.runner import entry

sys.exit(entry(sys.argv[1:]))
