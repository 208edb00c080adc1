"""``python -m npuemu.device``: run one device worker (started by the node supervisor).

Before numpy is imported, the BLAS library is limited to one thread (unless the environment
already says otherwise): each engine is one thread of the card, and a multi-threaded BLAS
under every engine thread (and beside the other cards' workers) oversubscribes the host's
cores, making a small matmul a hundred times slower on a loaded machine.

numpy's floating-point warnings (overflow, invalid value, divide by zero, underflow) are
silenced: a card computes inf and NaN without a word, and a worker's stderr is the user's
terminal.
"""

import os
import sys
import warnings

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero|underflow) "
                        r"encountered", RuntimeWarning)

from npuemu.device.worker import main  # noqa: E402  (after the BLAS thread limit)

sys.exit(main())
