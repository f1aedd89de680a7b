"""What the Anthropic and Responses seams share: rejections, wording, counters, canonical rules.

Each seam rejects first and rebuilds second, like the Chat Completions seam
(:mod:`tiny_agent.wire.chat.seam`), and returns the same outcome types.  This
module holds the parts that do not depend on the API: the internal rejection
signal, how values are described in one-line reasons, how a usage counter is
read, the canonical rules every assistant message obeys whatever the wire
said (call ids non-empty and distinct, names non-empty, the content rule),
strict JSON for text the seams parse, the inventory of members a result was
not built from, and the shape of a reassembled stream.

Pure: no I/O.  Nothing here raises out of a seam: :class:`Reject` is caught
by the seam that raised it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER, LineDecoder, ProfileViolation
from tiny_agent.journal.transcript import AssistantMessage, ToolCall
from tiny_agent.wire.chat.seam import Outcome
from tiny_agent.wire.wording import MISSING, kind, short

"""A member that is absent (as opposed to present and null)."""

"""In a kept shape: this member was not carried at all (listed as one path)."""


class Reject(Exception):
    """Raised inside a seam to stop at the first broken rule; the seam turns it into a Rejected."""

    def __init__(self, reason: str) -> None:
        # A reason quotes wire text (an error message, a parser's complaint): it stays one line.
        one_line = reason.replace("\r", " ").replace("\n", " ")
        super().__init__(one_line)
        self.reason = one_line


def text_member(body: Any, key: str) -> str | None:
    """A string member of the body, for the outcome's metadata (None when absent or not a string)."""
    value = body.get(key) if type(body) is dict else None
    return value if type(value) is str else None


# -- canonical rules ----------------------------------------------------------


def assistant_message(texts: list[str], calls: list[ToolCall], where: str) -> AssistantMessage:
    """The canonical message from the text pieces (joined without separator) and the calls, in order.

    With no text, ``content`` is null when there are calls and ``""`` when
    there are none (the transcript's only two shapes of "nothing said").
    """
    require_distinct_call_ids(calls, where)
    text = "".join(texts)
    if not calls:
        return AssistantMessage(content=text)
    return AssistantMessage(content=text or None, tool_calls=calls)


def require_distinct_call_ids(calls: list[ToolCall], where: str) -> None:
    seen: set[str] = set()
    for call in calls:
        if call.id in seen:
            raise Reject(f"{where}: tool call id {short(call.id)} repeats an earlier call id")
        seen.add(call.id)


def require_text(container: dict[str, Any], key: str, where: str) -> str:
    """A member that must be a non-empty string (an id, a tool name)."""
    value = container.get(key, MISSING)
    if type(value) is not str or not value:
        raise Reject(f"{where}.{key} is {describe(value)} (expected a non-empty string)")
    return value


def require_object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise Reject(f"{where} is {describe(value)} (expected an object)")
    return value


def require_array(value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise Reject(f"{where} is {describe(value)} (expected an array)")
    return value


def compact_json(value: Any, where: str) -> str:
    """The compact JSON text of a decoded value: member order kept, non-ASCII written as itself."""
    try:
        return msgspec.json.encode(value).decode("utf-8")
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        # Only a Python value that never came from JSON text gets here (a lone
        # surrogate, a non-string key): a decoded body always encodes.
        raise Reject(f"{where} cannot be written as JSON text") from None


def parse_json(text: str, where: str) -> Any:
    """Strict JSON (no duplicate keys, no lone surrogates), as the journal reads it."""
    try:
        return LineDecoder().decode(text.encode("utf-8", "surrogatepass"))
    except ProfileViolation as error:
        raise Reject(f"{where} is not JSON: {error}") from None


def decode_body(body: bytes | str) -> Any:
    """A whole response body as a JSON value, or a Reject naming why it is not one."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if not data.strip():
        raise Reject("response body is empty")
    try:
        return LineDecoder().decode(data)
    except ProfileViolation as error:
        raise Reject(f"response body is not JSON: {error}") from None


# -- usage counters -----------------------------------------------------------


def counter(container: dict[str, Any], key: str, where: str, problems: list[str]) -> int:
    """A token counter: absent or null is 0; anything but a safe non-negative integer is a problem (and 0)."""
    value = container.get(key)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        problems.append(f"{where} is {describe(value)} (expected a non-negative integer)")
        return 0
    if value > MAX_SAFE_INTEGER:
        problems.append(f"{where} is {value}, beyond the largest count the journal can hold")
        return 0
    return value


def usage_object(body: Any, where: str, problems: list[str]) -> dict[str, Any]:
    """The body's usage object; absent or null reads as empty, anything else is a problem."""
    usage = body.get(where) if type(body) is dict else None
    if usage is None:
        return {}
    if type(usage) is not dict:
        problems.append(f"{where} is {kind(usage)} (expected an object)")
        return {}
    return usage


def details_object(container: dict[str, Any], key: str, where: str, problems: list[str]) -> dict[str, Any]:
    details = container.get(key)
    if details is None:
        return {}
    if type(details) is not dict:
        problems.append(f"{where} is {kind(details)} (expected an object)")
        return {}
    return details


# -- streams ------------------------------------------------------------------


class Reassembly(msgspec.Struct, frozen=True):
    """A stream put back together as the one body the API would have sent whole."""

    body: dict[str, Any] | None
    """The reassembled body; after a problem, what had arrived (its usage still counts); None if nothing had."""
    problem: str | None
    """Why the stream cannot stand for a response (one line), or None."""
    event_count: int
    """Complete events in the stream (an unfinished last event is not one)."""
    byte_size: int
    """The stream's size in UTF-8 bytes."""
    not_carried: list[str]
    """Paths (``events[3].delta``, ``events[0:41]``) of what the body was not built from."""


class NormalizedStream(msgspec.Struct, frozen=True):
    """A stream's seam outcome, and how it was reassembled (for audit)."""

    outcome: Outcome
    reassembly: Reassembly


def stream_text(stream: bytes | str) -> tuple[str, int] | str:
    """The stream as text and its size in bytes, or the reason it is not text."""
    if isinstance(stream, str):
        return stream, len(stream.encode("utf-8", "surrogatepass"))
    try:
        return stream.decode("utf-8"), len(stream)
    except UnicodeDecodeError as error:
        return f"stream is not UTF-8 text (byte {error.start})"


def event_object(data: str, name: str | None, where: str) -> dict[str, Any]:
    """An event's data as a JSON object with a string ``type`` that agrees with the ``event:`` name."""
    value = require_object(parse_json(data, f"{where} data"), f"{where} data")
    event_type = value.get("type", MISSING)
    if type(event_type) is not str:
        raise Reject(f"{where}.type is {describe(event_type)} (expected a string)")
    if name is not None and name != event_type:
        raise Reject(f"{where} is named {short(name)} but its data says type {short(event_type)}")
    return value


# -- wording ------------------------------------------------------------------


def describe(value: Any) -> str:
    """How a reason shows a value: strings and integers as themselves, anything else by its kind."""
    if value is MISSING:
        return "missing"
    if type(value) is str:
        return "an empty string" if not value else short(value)
    if type(value) is int:
        return short(value)
    return kind(value)
