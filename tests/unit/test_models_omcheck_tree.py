"""``omcheck.plain_tree``: string map keys and nesting within ``MAX_DEPTH``, on trees at,
just below and just past the limit (maps and lists, leaves and empty containers at the
bottom) and with a key that is not a string."""

from __future__ import annotations

import pytest

from npuemu.host.models import omcheck
from npuemu.host.models.codes import ModelError

D = omcheck.MAX_DEPTH


def _nested(depth: int, bottom: object, kind: str = "list") -> object:
    """``bottom`` inside ``depth`` containers (alternating lists and maps if ``kind`` is
    ``mixed``): ``bottom`` is then at depth ``depth``."""
    value = bottom
    for level in range(depth):
        as_map = kind == "map" or (kind == "mixed" and level % 2)
        value = {"k": value} if as_map else [value]
    return value


@pytest.mark.parametrize("kind", ["list", "map", "mixed"])
@pytest.mark.parametrize("bottom", [7, "s", [], {}], ids=["int", "str", "empty list",
                                                         "empty map"])
def test_items_at_the_limit_pass_and_one_level_deeper_is_refused(kind: str,
                                                                 bottom: object) -> None:
    omcheck.plain_tree(_nested(D, bottom, kind), "X")
    omcheck.plain_tree([1, 2, _nested(D - 2, [3, bottom], kind)], "X")
    with pytest.raises(ModelError, match=f"X is nested more than {D} deep"):
        omcheck.plain_tree(_nested(D + 1, bottom, kind), "X")
    with pytest.raises(ModelError, match="nested more than"):
        omcheck.plain_tree([1, {"a": 2}, _nested(D, [bottom], kind)], "X")


def test_a_map_key_that_is_not_a_string_is_refused_at_any_depth() -> None:
    omcheck.plain_tree(_nested(5, {"a": [1, 2]}, "mixed"), "X")
    for depth in (0, 5, D - 1):
        with pytest.raises(ModelError, match="X has a map key that is not a string"):
            omcheck.plain_tree(_nested(depth, {1: "v"}, "list"), "X")
