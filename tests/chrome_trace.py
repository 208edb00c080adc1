"""A JSON Schema of the Chrome trace-event format (the array form msprof writes), after the
"Trace Event Format" document: the phases the timeline uses, with their required fields.
``check(events)`` validates with ``jsonschema`` and then checks what a schema cannot: every
flow id has one start (``s``) and one end (``f``), the end binding to its enclosing slice."""

from __future__ import annotations

import jsonschema

_NUM = {"type": "number"}
_ID = {"type": "integer"}
_BASE = {"name": {"type": "string"}, "pid": _ID, "tid": _ID, "ts": _NUM, "cat": {"type": "string"},
         "args": {"type": "object"}}
SCHEMA = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["ph", "name", "pid", "tid"],
        "properties": {**_BASE, "ph": {"enum": ["X", "B", "E", "i", "I", "C", "M", "s", "t",
                                                "f", "b", "e", "n"]}},
        "allOf": [
            {"if": {"properties": {"ph": {"const": "X"}}},
             "then": {"required": ["ts", "dur"], "properties": {"dur": {"type": "number",
                                                                        "minimum": 0}}}},
            {"if": {"properties": {"ph": {"const": "C"}}},
             "then": {"required": ["ts", "args"],
                      "properties": {"args": {"additionalProperties": _NUM}}}},
            {"if": {"properties": {"ph": {"const": "M"}}},
             "then": {"required": ["args"],
                      "properties": {"name": {"enum": ["process_name", "process_labels",
                                                       "process_sort_index", "thread_name",
                                                       "thread_sort_index"]}}}},
            {"if": {"properties": {"ph": {"enum": ["s", "f", "t"]}}},
             "then": {"required": ["ts", "id"]}},
            {"if": {"properties": {"ph": {"const": "f"}}},
             "then": {"properties": {"bp": {"const": "e"}}, "required": ["bp"]}},
            {"if": {"properties": {"ph": {"const": "i"}}},
             "then": {"required": ["ts"], "properties": {"s": {"enum": ["g", "p", "t"]}}}},
        ],
    },
}


def check(events: list) -> None:
    jsonschema.validate(events, SCHEMA)
    flows: dict[object, list[str]] = {}
    for e in events:
        if e["ph"] in ("s", "f"):
            flows.setdefault(e["id"], []).append(e["ph"])
    assert all(sorted(v) == ["f", "s"] for v in flows.values()), flows
