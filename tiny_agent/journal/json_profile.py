"""Bytes to JSON values under the journal's strict profile (session-v2 §2-§3).

Pure.  The hot path is msgspec: it already rejects everything the profile
forbids (BOM, NaN, bad escapes, raw control characters, lone surrogate
escapes, invalid UTF-8 inside strings) except one thing: duplicate object
keys, which it resolves last-wins.  Re-encoding the decoded value gives back
the exact line whenever the line is in compact form with msgspec's escaping,
which is what our writer (and most JSON writers) produce; a line that
round-trips cannot hide a duplicate key, because the re-encoded text has each
key once.  Only lines that do not round-trip pay for a second, duplicate-aware
parse.

:class:`ProvenLineDecoder` is the fast path's decoder: it decodes straight
into typed Structs and proves the absence of duplicate keys by length alone,
whatever the member order (see its docstring).
"""

from __future__ import annotations

import enum
import functools
import json
from typing import Any, Final, NoReturn

import msgspec

LF: Final = 0x0A
CR: Final = 0x0D
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

    ``decode`` returns the typed value, or None when the line is not one it
    can vouch for (it does not fit the type, or the proof below fails); the
    caller then takes the reference path (:class:`LineDecoder` and the
    rule-by-rule fold), which finds the line's first fault.

    The proof, whatever the member order: re-encode the decoded value and
    compare *lengths*.  Every step from the line's text T to the encoding E
    of its value can only keep or shrink the length, never grow it:

    - strings: msgspec writes each character in its shortest legal form
      (tests/test_fast_path.py checks every Unicode scalar value), and T's
      form of it is at least as long;
    - integers: T's digits are canonical JSON (no leading zeros), so E's are
      the same, or shorter for ``-0``;
    - objects: E holds each member once, T at least once; member order does
      not change a length; whitespace and non-minimal escapes only add to T;
    - ``msgspec.Raw`` members re-encode as their exact source bytes.

    So ``len(E) == len(T)`` means every step kept the length, and a repeated
    key (at least 5 bytes: ``,"":0``) would have shrunk it.  Three things
    could grow E and so hide a duplicate; the line type must exclude them:

    - floats (``1e9`` re-encodes as ``1000000000.0``): typed members are
      ints or strings, and ``float_hook`` refuses a float in any untyped
      (``Any``) member;
    - members T lacks that E writes: every optional field defaults to UNSET
      (never encoded) and ``omit_defaults`` drops a default-valued field;
    - a tag T lacks: msgspec accepts a tagged Struct without its tag unless
      the Struct is decoded as one member of a tagged union, so the type uses
      tags only inside unions.

    ``Raw`` members are only skipped over (msgspec does not check their
    UTF-8): the caller must decode each one with :func:`decode_text` before
    relying on the line.
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
    """A ``Raw`` JSON string member as str, else NOT_TEXT.

    Decoding the member on its own keeps CPython from caching a UTF-8 copy
    inside the str, which re-encoding a non-ASCII str does; transcript
    contents would carry that copy for the life of the state.
    """
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
    """Settle the few lines msgspec refuses although RFC 8259 allows them.

    msgspec refuses numbers beyond a double's range (``1e400``); the profile
    accepts them as JSON (they are then simply not integers).  Everything else
    msgspec refuses is malformed for us too, and the strict stdlib parse below
    confirms it.
    """
    try:
        text = line.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_unique_object, parse_constant=_no_constant, parse_int=_parse_int)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProfileViolation(f"not valid JSON ({error})") from None
    _reject_lone_surrogates(value)
    return value


def _parse_int(literal: str) -> int | msgspec.Raw:
    """An integer literal as int; one too long for Python to convert, as its verbatim text.

    CPython refuses to convert a decimal literal longer than its digit limit
    (4,300 digits by default) because the conversion is quadratic.  Such a
    literal is valid JSON, so it must not make the line MALFORMED_JSON: as a
    ``Raw`` it fails every integer rule with that rule's own code (it is not
    an ``int``), and where any JSON value is allowed (tool arguments) it is
    kept and re-encoded byte for byte.  The process-wide limit is left alone.
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
            _check_scalar_values(item)
        elif type(item) is list:
            stack.extend(item)
        elif type(item) is dict:
            for key, member in item.items():
                _check_scalar_values(key)
                stack.append(member)


def _check_scalar_values(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ProfileViolation("string holds a lone surrogate") from None


def find_encoded_surrogate(data: bytes, start: int, end: int) -> int:
    """Offset of the first UTF-8-style encoded surrogate (ED A0..BF 80..BF) in ``data[start:end]``, or -1."""
    position = data.find(b"\xed", start, end)
    while position != -1:
        if position + 2 < end and 0xA0 <= data[position + 1] <= 0xBF and 0x80 <= data[position + 2] <= 0xBF:
            return position
        position = data.find(b"\xed", position + 1, end)
    return -1
