"""``python -m npuemu.device --node N --dev D --hbm B --ddr B --supervisor PID``: run one
device worker by hand (the node supervisor forks its workers instead, ``device/start.py``).
``start.prepare`` runs before numpy is imported (one BLAS thread, numpy's floating-point
warnings silenced)."""

import sys

from npuemu.device import start

start.prepare()

from npuemu.device.worker import main  # noqa: E402  (after the BLAS thread limit)

sys.exit(main())
