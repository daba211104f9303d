"""Spark's get_json_object(json, path): a value of a JSON text at a JSONPath of ``$``, ``.name`` and ``[index]``
steps, read as Jackson reads it (the first of duplicate keys, what follows the first value ignored, numbers
printed as Java prints them).

Registered in the one function table with :mod:`ddflow.plan.strings`'s helpers.  Cost: O(total characters) per
call, one parse per row in Python.

>>> import numpy as np
>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("get_json_object", (Col(0, "string"), Lit("$.a[1]", "string")))
>>> evaluate(e, [(np.array(['{"a": [1, {"b": 2.50}]}', "x"], dtype=object), np.array([False, False]))])[0].tolist()
['{"b":2.5}', None]
"""
from __future__ import annotations

import json
import re

import numpy as np

from ddflow.plan.expr import null_values
from ddflow.plan.functions import TypeMismatch, _double_text, function
from ddflow.plan.strings import _kinds, _rowwise


class _Pairs(list):
    """A JSON object as its ``(key, value)`` pairs in order, duplicates kept: Jackson's streaming reads them so."""


#: A JSONPath Spark reads: ``$`` then ``.name`` and ``[index]`` steps.  What Spark reads as well and ddflow does
#: not (wildcards, quoted names) is refused at planning; anything else is NULL in Spark, and here.
_PATH_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def _json_path(path: str) -> list | None:
    """The steps of a JSONPath (``("key", name)`` or ``("index", i)``), or None where Spark finds no value."""
    if not path.startswith("$"):
        return None
    steps, i = [], 1
    while i < len(path):
        m = _PATH_STEP.match(path, i)
        if m is None:
            return None
        steps.append(("key", m.group(1)) if m.group(1) is not None else ("index", int(m.group(2))))
        i = m.end()
    return steps


def _json_text(v) -> str:
    """Jackson's compact text of a parsed value: numbers as Java prints them (a double as Double.toString)."""
    if isinstance(v, _Pairs):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_json_text(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _double_text(v)
    if isinstance(v, int):
        return str(v)
    return json.dumps(v, ensure_ascii=False)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Jackson refuses them by default


_DECODER = json.JSONDecoder(object_pairs_hook=_Pairs, parse_constant=_reject_constant)


def _get_json_object_typer(args):
    _kinds("ss", "string", "get_json_object", constant=(1,))(args)
    path = args[1].value
    if path is not None and ("[*]" in path or "['" in path or '["' in path):
        raise TypeMismatch(f"get_json_object's path {path!r}: wildcards and quoted names are not supported "
                           "(ddflow reads $, .name and [index])")
    return "string"


@function("get_json_object", _get_json_object_typer)
def _get_json_object(args, e, n):
    """Spark's get_json_object(json, path): the value at ``path`` of the JSON text's first value (what follows it
    is ignored, as Jackson does), a string as itself, anything else as compact JSON; NULL for a JSON null, a
    missing step, text that does not parse, or a path Spark does not read.  The first of duplicate keys."""
    path = e.args[1].value
    steps = _json_path(path) if path is not None else None
    if steps is None:
        return null_values("string", n), np.ones(n, dtype=bool)

    def extract(text: str) -> str | None:
        try:
            v, _ = _DECODER.raw_decode(text.lstrip(" \t\n\r"))
        except ValueError:
            return None
        for kind, step in steps:
            if kind == "key":
                if not isinstance(v, _Pairs):
                    return None
                v = next((x for k, x in v if k == step), _MISSING)
            else:
                v = v[step] if isinstance(v, list) and not isinstance(v, _Pairs) and step < len(v) else _MISSING
            if v is _MISSING:
                return None
        if v is None:
            return None
        return v if isinstance(v, str) else _json_text(v)

    return _rowwise(extract, "string")(args[:1], e, n)


_MISSING = object()


__all__: list[str] = []
