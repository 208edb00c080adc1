"""Kernel file of the containment tests whose module ends the process that imports it."""

import sys

from npuemu.shared.kernel import kernel


@kernel("aicore")
def never(ctx):
    pass


sys.exit("a kernel file that exits at import")
