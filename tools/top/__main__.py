"""``python -m npuemu``: the ``npuemu`` command (same as ``python -m npuemu.tools``)."""

import sys

from npuemu.tools.cli import main

sys.exit(main())
