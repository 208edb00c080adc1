"""``python -m npuemu.device``: run one device worker (started by the node supervisor)."""

import sys

from npuemu.device.worker import main

sys.exit(main())
