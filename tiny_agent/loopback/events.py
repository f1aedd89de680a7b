"""Server-Sent Events written out: a list of events and comments as the exact bytes of a ``text/event-stream`` body.

The reading side is :mod:`tiny_agent.wire.sse`; this is its inverse for
tests, with the line end of choice (``\\r\\n`` streams exercise a client's
handling of a CR and its LF arriving in different pieces).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


class Event(msgspec.Struct, frozen=True):
    data: str
    """Written as one ``data:`` line per line of it."""
    event: str | None = None
    """The ``event:`` line, when given (Anthropic and Responses name every event)."""


class Comment(msgspec.Struct, frozen=True):
    """A ``:`` line, as keep-alives are (``: OPENROUTER PROCESSING``)."""

    text: str


StreamItem = Event | Comment


def encode_events(items: Sequence[StreamItem], line_end: str = "\n") -> bytes:
    """A ``text/event-stream`` body: each event's fields, then a blank line."""
    return b"".join(_encoded(item, line_end) for item in items)


def _encoded(item: StreamItem, line_end: str) -> bytes:
    if isinstance(item, Comment):
        return f":{item.text and ' ' + item.text}{line_end}{line_end}".encode()
    lines = [f"event: {item.event}"] if item.event is not None else []
    lines.extend(f"data: {line}" for line in item.data.split("\n"))
    return (line_end.join(lines) + line_end + line_end).encode()
