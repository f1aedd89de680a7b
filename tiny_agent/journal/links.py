"""Where a session came from: the optional members of a v3 header that link it to another journal.  Pure."""

from __future__ import annotations

import msgspec


class Origin(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The v2 journal an upgraded session continues."""

    path: str
    """The v2 file's absolute path when it was copied."""
    length: int
    """How many of its bytes were copied: its committed part (a torn tail is not copied)."""
    sha256: str
    """``sha256:<hex>`` of those bytes."""


class Parent(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The session a fork branched from, and where."""

    session: str
    """The parent's session id."""
    line: int
    """The fork holds the parent's facts of lines 2..``line``."""
    chain: str
    """The parent's chain through ``line``: the seal chain value (v3), or ``sha256:<hex>`` of its first ``line`` lines (v2)."""


def lineage_words(origin: Origin | None, parent: Parent | None, parent_name: str | None = None) -> str | None:
    """``fork of <parent> at line N`` or ``upgrade of <v2 file>``, for listings (None for a session made here)."""
    if parent is not None:
        return f"fork of {parent_name or parent.session} at line {parent.line}"
    if origin is not None:
        return f"upgrade of {origin.path}"
    return None
