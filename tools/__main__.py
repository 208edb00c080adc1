"""``python -m npuemu.tools``: the ``npuemu`` command."""

import sys

from npuemu.tools.cli import main

sys.exit(main())
