"""How rejection reasons show values: one vocabulary for every seam and stream reassembly.

A reason names a path and the rule broken, and shows the offending value by
its kind (``a list``, ``null``) or, when short, as itself.  Values come from
providers: nothing here may raise, whatever they hold.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

MISSING: Final = object()
"""Stands for a member that is absent (``container.get(key, MISSING)``), as opposed to ``null``."""


def kind(value: Any) -> str:
    """``null``, ``a boolean``, ``a number``, ``a string``, ``a list``, ``an object`` (or the type's name)."""
    if value is None:
        return "null"
    value_type = type(value)
    if value_type is bool:
        return "a boolean"
    if value_type is int or value_type is float or value_type is msgspec.Raw:
        return "a number"
    if value_type is str:
        return "a string"
    if value_type is list:
        return "a list"
    if value_type is dict:
        return "an object"
    return value_type.__name__


def short(value: Any) -> str:
    """The value's JSON, cut at 60 characters (its repr when it has no JSON form)."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def error_text(error: Any, kind_key: str = "code") -> str:
    """``overloaded_error: Overloaded`` from an error object; its JSON, shortened, from anything else."""
    if type(error) is dict and type(error.get("message")) is str:
        label = error.get(kind_key)
        prefix = f"{label}: " if type(label) in (str, int) else ""
        text = " ".join((prefix + error["message"]).split())
        return text if len(text) <= 120 else text[:117] + "..."
    return short(error)
