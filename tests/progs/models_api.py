"""Child program of ``tests/integration/test_models_mdl.py``: the Pythonic model face
(``npuemu.host.api.Model``: load, gears, call with a batch, unload), which needs no
``acl.init``: this program makes none.

``python models_api.py SCENARIO [ARG...]`` runs one scenario and prints ``R`` (see
``childlib``); the assertions are the test's.
"""

import numpy as np
from childlib import R, main, scenario

from npuemu.host.api import Model
from npuemu.shared.errors import AclError


@scenario
def model_face(om, x_npy, y_npy, missing_om):
    """The dynamic-batch ``.om`` at ``om`` run at batch 4 on ``x_npy`` (output to
    ``y_npy``), at a batch it has no gear for, after unload; a missing file."""
    with Model(om) as m:
        R["gears"] = m.gears
        (y,) = m(np.load(x_npy), batch=4)
        np.save(y_npy, y.to_numpy())
        try:
            m(np.zeros((1, 3, 8, 8), np.float32), batch=3)
        except AclError as err:
            R["bad_gear"] = err.code
    try:
        m.unload()
    except AclError as err:
        R["unloaded"] = err.code
    try:
        Model(missing_om)
    except AclError as err:
        R["missing"] = err.code


if __name__ == "__main__":
    main()
