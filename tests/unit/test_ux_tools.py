"""Small checks of the CLI tools' argument handling, as the README documents it."""

from __future__ import annotations

import pytest

from npuemu.tools import inject


def test_inject_link_clear_accepts_1_as_the_readme_writes_it():
    params = inject.parse_params(["peer=1", "clear=1"])
    inject.check("link", params)
    assert params == {"peer": 1, "clear": True}
    params = inject.parse_params(["peer=1", "clear=0"])
    inject.check("link", params)
    assert params["clear"] is False
    with pytest.raises(ValueError, match="must be true or false"):
        inject.check("link", inject.parse_params(["peer=1", "clear=2"]))
