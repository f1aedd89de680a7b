"""Bytes to JSON values under the journal's strict profile (session-v2 §2-§3).

Pure.  msgspec rejects everything the profile forbids except duplicate object keys (last wins);
a line that re-encodes to itself cannot hide one, so only lines that do not round-trip pay for a
second, duplicate-aware parse.  :class:`ProvenLineDecoder` is the fast path's decoder.
"""

from __future__ import annotations

import enum
import functools
import json
from typing import Any, Final, NoReturn

import msgspec

MAX_SAFE_INTEGER: Final = 9007199254740991
"""2^53 - 1: the largest integer every JSON reader holds exactly (session-v2 §3)."""
SCRATCH_KEPT: Final = 1 << 20
"""A re-encoding buffer that grew beyond this (for one huge line) is let go rather than kept for the fold's life."""


class ProfileViolation(Exception):
    """A line that is not exactly one JSON value under the profile (→ MALFORMED_JSON)."""


class LineDecoder:
    """Decodes journal lines; owns the scratch buffer the round-trip check re-encodes into."""

    def __init__(self) -> None:
        self._decode = msgspec.json.Decoder().decode
        self._encode_into = msgspec.json.Encoder().encode_into
        self._scratch = bytearray()

    def decode(self, line: bytes) -> Any:
        """Decode one journal line, rejecting anything outside the JSON profile."""
        try:
            value = self._decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            return _decode_outside_msgspec(line, error)
        except RecursionError:
            raise ProfileViolation("JSON nested too deeply") from None
        scratch = self._scratch
        self._encode_into(value, scratch)
        if scratch != line:
            _reject_duplicate_keys(line)
        if len(scratch) > SCRATCH_KEPT:
            self._scratch = bytearray()
        return value


class ProvenLineDecoder:
    """Typed decoding of the lines whose every object provably has unique keys.

    ``decode`` returns the typed value, or None when the line does not fit the type or the proof
    fails (the caller then takes the reference path, which finds the line's first fault).  The
    proof: re-encoding can only keep or shrink a line, so an equal *length* means no key was
    repeated, whatever the member order; the line type must exclude what could grow it (floats,
    encoded defaults, tags outside unions).  The argument in full: docs/performance.md, "Design".
    ``Raw`` members are only skipped over: decode each with :func:`decode_text` before relying on it.
    """

    def __init__(self, line_type: Any) -> None:
        self._decode = _typed_decoder(line_type)
        self._encode_into = msgspec.json.Encoder().encode_into
        self._scratch = bytearray()

    def decode(self, line: bytes) -> Any | None:
        try:
            value = self._decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        scratch = self._scratch
        self._encode_into(value, scratch)
        if len(scratch) > SCRATCH_KEPT:
            self._scratch = bytearray()
        if len(scratch) != len(line):
            return None
        return value


@functools.cache
def _typed_decoder(line_type: Any) -> Any:
    """One decoder per line type (building one costs a tenth of a millisecond; decoding keeps no state)."""
    return msgspec.json.Decoder(line_type, float_hook=_refuse_float).decode


def _refuse_float(text: str) -> NoReturn:
    raise ValueError("the fast path does not take floats")


class NotText(enum.Enum):
    """What the text decoders return for a member that is not a valid JSON string (or null, where allowed)."""

    NOT_TEXT = "NOT_TEXT"


NOT_TEXT: Final = NotText.NOT_TEXT

_decode_text = msgspec.json.Decoder(str).decode
_decode_text_or_null = msgspec.json.Decoder(str | None).decode


def decode_text(raw: msgspec.Raw) -> str | NotText:
    """A ``Raw`` JSON string member as str, else NOT_TEXT (decoded on its own: no cached UTF-8 copy in the str)."""
    try:
        return _decode_text(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return NOT_TEXT


def decode_text_or_null(raw: msgspec.Raw) -> str | None | NotText:
    """Like :func:`decode_text`, and ``null`` as None."""
    try:
        return _decode_text_or_null(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return NOT_TEXT


def _decode_outside_msgspec(line: bytes, error: Exception) -> Any:
    """Settle the few lines msgspec refuses although RFC 8259 allows them (numbers beyond a double's
    range, ``1e400``, which are then simply not integers); the strict stdlib parse confirms the rest."""
    try:
        text = line.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_unique_object, parse_constant=_no_constant, parse_int=_parse_int)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProfileViolation(f"not valid JSON ({error})") from None
    _reject_lone_surrogates(value)
    return value


def _parse_int(literal: str) -> int | msgspec.Raw:
    """An integer literal as int; one beyond CPython's digit limit (valid JSON) as its verbatim text.

    As a ``Raw`` it fails every integer rule with that rule's own code, and where any value is
    allowed (tool arguments) it is re-encoded byte for byte.  The process-wide limit is left alone.
    """
    try:
        return int(literal)
    except ValueError:
        return msgspec.Raw(literal.encode("ascii"))


def _reject_duplicate_keys(line: bytes) -> None:
    try:
        json.loads(line, object_pairs_hook=_unique_object, parse_constant=_no_constant)
    except ValueError as error:
        raise ProfileViolation(str(error)) from None
    except RecursionError:
        raise ProfileViolation("JSON nested too deeply") from None


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f'duplicate object key "{key}"')
            seen.add(key)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _reject_lone_surrogates(value: Any) -> None:
    """The stdlib decodes ``"\\ud800"`` to a lone surrogate; the profile forbids it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ProfileViolation("string holds a lone surrogate") from None
        elif type(item) is list:
            stack.extend(item)
        elif type(item) is dict:
            stack.extend(item)  # the member names, checked as the strings they are
            stack.extend(item.values())


def find_encoded_surrogate(data: bytes, start: int, end: int) -> int:
    """Offset of the first UTF-8-style encoded surrogate (ED A0..BF 80..BF) in ``data[start:end]``, or -1."""
    position = data.find(b"\xed", start, end)
    while position != -1:
        if position + 2 < end and 0xA0 <= data[position + 1] <= 0xBF and 0x80 <= data[position + 2] <= 0xBF:
            return position
        position = data.find(b"\xed", position + 1, end)
    return -1
